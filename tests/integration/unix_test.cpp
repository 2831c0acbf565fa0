// Unix domain sockets end to end, on every backend: path and abstract listeners, socketpair,
// datagrams, descriptor passing (SCM_RIGHTS) and its bad cases, peer credentials, the buffered
// I/O layer, and 10,000 connections from a Python client. Every test counts open descriptors
// before and after.
#include "support/backends.hpp"
#include "support/fds.hpp"
#include "support/process.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

/// A fresh directory for socket files, removed with its contents at the end.
class TempDir {
public:
    TempDir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "galay-unix-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp");
        path_ = tmpl;
    }
    ~TempDir() { std::filesystem::remove_all(path_); }
    std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
    std::filesystem::path path_;
};

UnixAddr addr(const std::string& text) {
    auto a = UnixAddr::parse(text);
    if (!a) throw Error(a.error(), "UnixAddr::parse");
    return *a;
}

UnixListener listen_at(const UnixAddr& a) {
    auto l = UnixListener::bind(a);
    if (!l) throw Error(l.error(), "bind " + a.to_string());
    return std::move(*l);
}

std::string unique_abstract() {
    static std::atomic<int> n{0};
    return "@galay-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

bool is_cloexec(int fd) {
    return (::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
}

/// Accept one connection and echo until EOF.
Task<std::size_t> echo_once(UnixListener& l) {
    auto conn = co_await l.accept().timeout(10s);
    CO_ASSERT(conn.has_value());
    std::array<char, 4096> buf;
    std::size_t total = 0;
    for (;;) {
        auto n = co_await conn->recv(buf).timeout(10s);
        CO_ASSERT(n.has_value());
        if (*n == 0) co_return total;
        total += *n;
        CO_ASSERT(co_await conn->send_all(std::span(buf.data(), *n)));
    }
}

} // namespace

class UnixTest : public test::FdCheckedTest {};

TEST_P(UnixTest, EchoOverAPathListenerThatRemovesItsFileWhenClosed) {
    TempDir dir;
    const UnixAddr a = addr(dir.file("echo.sock"));
    run([&]() -> Task<void> {
        UnixListener l = listen_at(a);
        struct stat st {};
        EXPECT_EQ(::stat(a.name().c_str(), &st), 0);
        EXPECT_TRUE(S_ISSOCK(st.st_mode));
        auto client = [&]() -> Task<void> {
            auto c = co_await UnixStream::connect(a).timeout(5s);
            CO_ASSERT(c.has_value());
            auto cred = c->peer_cred();
            if (GALAY_HAVE_LINUX_SOCKETS) {
                CO_ASSERT(cred.has_value());
                EXPECT_EQ(cred->pid, ::getpid());
                EXPECT_EQ(cred->uid, ::getuid());
                EXPECT_EQ(cred->gid, ::getgid());
            } else { // SO_PEERCRED: Linux-only
                CO_ASSERT(!cred.has_value());
                EXPECT_EQ(cred.error(), make_error_code(errc::not_supported));
            }
            auto peer = c->peer_addr();
            CO_ASSERT(peer.has_value());
            EXPECT_EQ(*peer, a);
            std::string msg(100000, 'x');
            for (std::size_t i = 0; i < msg.size(); ++i)
                msg[i] = static_cast<char>('a' + i % 26);
            auto sent = [&]() -> Task<void> {
                CO_ASSERT(co_await c->send_all(msg));
                CO_ASSERT(c->shutdown(Shutdown::write));
            };
            auto got = [&]() -> Task<std::string> {
                std::string back(msg.size(), '\0');
                auto n = co_await c->recv_exact(back).timeout(10s);
                CO_ASSERT(n.has_value());
                co_return back;
            };
            auto [_, back] = co_await when_all(sent(), got());
            EXPECT_EQ(back, msg);
        };
        auto [total, _] = co_await when_all(echo_once(l), client());
        EXPECT_EQ(total, 100000u);
        co_await l.close();
        EXPECT_NE(::access(a.name().c_str(), F_OK), 0) << "the socket file outlived the listener";
    }());
}

// What the Unix types take from their handle base (FdHandle): a released listener leaves its
// socket file to the caller, who goes on listening on it, and a datagram socket closes through an
// `FdHandle&` like any other.
TEST_P(UnixTest, ReleasedListenerKeepsItsFileAndADatagramSocketClosesAsAHandle) {
    TempDir dir;
    const UnixAddr a = addr(dir.file("kept.sock"));
    run([&]() -> Task<void> {
        int fd = -1;
        {
            UnixListener l = listen_at(a);
            fd = l.release();
            EXPECT_FALSE(l.is_open());
            EXPECT_EQ(l.fd(), -1);
        } // destroyed: neither the socket nor its file is the listener's any more
        CO_ASSERT(fd >= 0);
        EXPECT_EQ(::access(a.name().c_str(), F_OK), 0) << "the released listener removed its file";
        auto c = co_await UnixStream::connect(a).timeout(5s); // the caller's socket still listens
        EXPECT_TRUE(c.has_value());
        ::close(fd);

        auto pair = UnixDatagram::pair();
        CO_ASSERT(pair.has_value());
        FdHandle& h = pair->first;
        CO_ASSERT(h.is_open());
        auto closed = co_await h.close();
        EXPECT_TRUE(closed.has_value());
        EXPECT_FALSE(pair->first.is_open());
        EXPECT_EQ(pair->first.fd(), -1);
    }());
}

TEST_P(UnixTest, AbstractAddressNeedsNoFile) {
    const UnixAddr a = addr(unique_abstract());
    EXPECT_TRUE(a.is_abstract());
    EXPECT_EQ(a.to_string().front(), '@');
    run([&]() -> Task<void> {
        UnixListener l = listen_at(a);
        auto client = [&]() -> Task<void> {
            auto c = co_await UnixStream::connect(a).timeout(5s);
            CO_ASSERT(c.has_value());
            CO_ASSERT(co_await c->send_all(std::string_view("ping")));
            CO_ASSERT(c->shutdown(Shutdown::write));
            std::array<char, 4> buf;
            CO_ASSERT(co_await c->recv_exact(buf).timeout(5s));
            EXPECT_EQ(std::string_view(buf.data(), 4), "ping");
        };
        co_await when_all(echo_once(l), client());
        auto local = l.local_addr();
        CO_ASSERT(local.has_value());
        EXPECT_EQ(*local, a);
    }());
}

TEST_P(UnixTest, AddressErrorsAreClearNotTruncations) {
    auto too_long = UnixAddr::path(std::string(108, 'p'));
    ASSERT_FALSE(too_long);
    EXPECT_EQ(too_long.error(), std::errc::filename_too_long) << too_long.error().message();
    EXPECT_TRUE(UnixAddr::path(std::string(107, 'p'))); // the longest that fits
    EXPECT_FALSE(UnixAddr::abstract(std::string(108, 'a')));
    EXPECT_EQ(UnixAddr::path("").error(), std::errc::invalid_argument);
    EXPECT_EQ(UnixAddr::path(std::string_view("a\0b", 3)).error(), std::errc::invalid_argument);
    TempDir dir;
    run([&]() -> Task<void> {
        auto none = co_await UnixStream::connect(addr(dir.file("nobody.sock"))).timeout(5s);
        CO_ASSERT(!none);
        EXPECT_EQ(none.error(), std::errc::no_such_file_or_directory);
    }());
}

TEST_P(UnixTest, StaleSocketFileIsReplacedLiveOneAndPlainFileAreNot) {
    TempDir dir;
    const UnixAddr a = addr(dir.file("svc.sock"));
    // A stale socket file: bound, never listened on, closed (what a crashed server leaves).
    {
        int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT_EQ(::bind(fd, a.data(), a.size()), 0);
        ::close(fd);
    }
    run([&]() -> Task<void> {
        auto l = UnixListener::bind(a);
        CO_ASSERT(l.has_value());
        auto second = UnixListener::bind(a); // a live listener holds the path
        CO_ASSERT(!second);
        EXPECT_EQ(second.error(), std::errc::address_in_use);
        auto client = [&]() -> Task<void> {
            auto c = co_await UnixStream::connect(a).timeout(5s);
            CO_ASSERT(c.has_value());
            CO_ASSERT(c->shutdown(Shutdown::write));
        };
        co_await when_all(echo_once(*l), client());
        co_return;
    }());
    EXPECT_NE(::access(a.name().c_str(), F_OK), 0);
    const std::string plain = dir.file("plain");
    std::ofstream(plain) << "data";
    auto refused = UnixListener::bind(addr(plain));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error(), std::errc::address_in_use);
    std::ifstream in(plain);
    std::string content;
    in >> content;
    EXPECT_EQ(content, "data") << "bind removed a file that is not a socket";
}

TEST_P(UnixTest, TimeoutAndCancellationOnAnIdleStream) {
    run([]() -> Task<void> {
        auto p = UnixStream::pair();
        CO_ASSERT(p.has_value());
        std::array<char, 16> buf;
        auto r = co_await p->first.recv(buf).timeout(20ms);
        CO_ASSERT(!r);
        EXPECT_EQ(r.error(), std::errc::timed_out);
        auto f = co_await p->first.recv_with_fds(buf, 4).timeout(20ms);
        CO_ASSERT(!f);
        EXPECT_EQ(f.error(), std::errc::timed_out);
        // The stream still works after a cancelled receive.
        CO_ASSERT(co_await p->second.send_all(std::string_view("after")));
        auto n = co_await p->first.recv(buf).timeout(5s);
        CO_ASSERT(n.has_value());
        EXPECT_EQ(std::string_view(buf.data(), *n), "after");
    }());
}

TEST_P(UnixTest, RecvPooledEchoesAndDropsDescriptorsItCannotHold) {
    run([]() -> Task<void> {
        auto p = UnixStream::pair();
        CO_ASSERT(p.has_value());
        // Several round trips through pooled buffers, then a timed-out wait that consumes nothing.
        for (int i = 0; i < 50; ++i) {
            const std::string msg = "message " + std::to_string(i);
            CO_ASSERT(co_await p->first.send_all(msg).timeout(5s));
            std::string got;
            while (got.size() < msg.size()) {
                auto b = co_await p->second.recv_pooled().timeout(5s);
                CO_ASSERT(b.has_value() && !b->empty());
                got.append(b->data(), b->size());
            }
            EXPECT_EQ(got, msg);
        }
        auto idle = co_await p->second.recv_pooled().timeout(20ms);
        CO_ASSERT(!idle);
        EXPECT_EQ(idle.error(), std::errc::timed_out);
        // A descriptor sent to a stream that receives with recv_pooled is closed by the kernel
        // (there is no room for it): the pipe's reader sees EOF once our own copy is gone.
        int pipe_fds[2];
        CO_ASSERT(::pipe2(pipe_fds, O_CLOEXEC) == 0);
        UniqueFd pipe_read(pipe_fds[0]);
        {
            UniqueFd pipe_write(pipe_fds[1]);
            const int fds[] = {pipe_write.get()};
            CO_ASSERT(co_await p->first.send_with_fds(std::string_view("fd"), fds).timeout(5s));
        }
        auto b = co_await p->second.recv_pooled().timeout(5s);
        CO_ASSERT(b.has_value());
        EXPECT_EQ(std::string_view(b->data(), b->size()), "fd");
        char c;
        EXPECT_EQ(::read(pipe_read.get(), &c, 1), 0);
        // The peer's close is an empty buffer.
        p->first = UnixStream();
        auto eof = co_await p->second.recv_pooled().timeout(5s);
        CO_ASSERT(eof.has_value());
        EXPECT_TRUE(eof->empty());
    }());
}

TEST_P(UnixTest, BufferedReaderWriterAndCopyBidirectionalWorkOnUnixStreams) {
    static_assert(io::DuplexStream<UnixStream>);
    run([]() -> Task<void> {
        auto left = UnixStream::pair();  // client <-> proxy front
        auto right = UnixStream::pair(); // proxy back <-> server
        CO_ASSERT(left && right);
        auto proxy = [&]() -> Task<void> {
            auto r =
                co_await io::copy_bidirectional(left->second, right->first, {.idle_timeout = 10s});
            CO_ASSERT(r.has_value());
            EXPECT_EQ(r->b_to_a, r->a_to_b + 100 * 5); // each line comes back with "echo "
        };
        auto server = [&]() -> Task<void> {
            io::BufReader reader(right->second, 4096);
            io::BufWriter writer(right->second, 4096);
            for (;;) {
                auto line = co_await reader.read_line().timeout(10s);
                if (!line) {
                    EXPECT_EQ(line.error(), errc::end_of_stream);
                    break;
                }
                std::string reply = "echo " + std::string(*line) + "\n";
                CO_ASSERT(co_await writer.write(reply));
            }
            CO_ASSERT(co_await writer.flush().timeout(10s));
            CO_ASSERT(right->second.shutdown(Shutdown::write));
        };
        auto client = [&]() -> Task<void> {
            io::BufWriter writer(left->first, 4096);
            for (int i = 0; i < 100; ++i)
                CO_ASSERT(co_await writer.write("line " + std::to_string(i) + "\n"));
            CO_ASSERT(co_await writer.flush().timeout(10s));
            CO_ASSERT(left->first.shutdown(Shutdown::write));
            io::BufReader reader(left->first, 4096);
            for (int i = 0; i < 100; ++i) {
                auto line = co_await reader.read_line().timeout(10s);
                CO_ASSERT(line.has_value());
                EXPECT_EQ(std::string(*line), "echo line " + std::to_string(i));
            }
            auto end = co_await reader.read_line().timeout(10s);
            CO_ASSERT(!end);
        };
        co_await when_all(proxy(), server(), client());
    }());
}

TEST_P(UnixTest, DescriptorsPassedAreOwnedCloexecAndWork) {
    run([]() -> Task<void> {
        auto p = UnixStream::pair();
        CO_ASSERT(p.has_value());
        int pipe_fds[2];
        CO_ASSERT(::pipe2(pipe_fds, O_CLOEXEC) == 0);
        UniqueFd pipe_read(pipe_fds[0]);
        {
            UniqueFd pipe_write(pipe_fds[1]);
            const int fds[] = {pipe_write.get(), pipe_write.get()};
            auto s = co_await p->first.send_with_fds(std::string_view("two fds"), fds).timeout(5s);
            CO_ASSERT(s.has_value());
            EXPECT_EQ(*s, 7u);
        } // our own write end is closed: only the passed copies remain
        std::array<char, 64> buf;
        auto m = co_await p->second.recv_with_fds(buf, 4).timeout(5s);
        CO_ASSERT(m.has_value());
        EXPECT_EQ(std::string_view(buf.data(), m->size), "two fds");
        CO_ASSERT(m->fds.size() == 2);
        for (const UniqueFd& fd : m->fds) {
            EXPECT_TRUE(is_cloexec(fd.get()));
        }
        CO_ASSERT(::write(m->fds[0].get(), "via passed fd", 13) == 13);
        char got[32] = {};
        CO_ASSERT(::read(pipe_read.get(), got, sizeof got) == 13);
        EXPECT_EQ(std::string_view(got, 13), "via passed fd");
        m->fds.clear(); // dropping them closes them: the pipe's reader sees EOF
        EXPECT_EQ(::read(pipe_read.get(), got, sizeof got), 0);
    }());
}

TEST_P(UnixTest, MoreDescriptorsThanAllowedIsControlTruncatedAndNoneLeaks) {
    run([]() -> Task<void> {
        auto p = UnixStream::pair();
        CO_ASSERT(p.has_value());
        int pipe_fds[2];
        CO_ASSERT(::pipe2(pipe_fds, O_CLOEXEC) == 0);
        UniqueFd r(pipe_fds[0]), w(pipe_fds[1]);
        const int before = test::open_fds();
        std::vector<int> many(16, w.get());
        CO_ASSERT(co_await p->first.send_with_fds(std::string_view("x"), many).timeout(5s));
        std::array<char, 8> buf;
        auto m = co_await p->second.recv_with_fds(buf, 2).timeout(5s);
        CO_ASSERT(!m);
        EXPECT_EQ(m.error(), errc::control_truncated) << m.error().message();
        EXPECT_NE(m.error().message().find("MSG_CTRUNC"), std::string::npos);
        EXPECT_EQ(test::open_fds(), before);
        // None of the passed copies is alive: closing ours gives the reader EOF.
        w = UniqueFd();
        char c;
        EXPECT_EQ(::read(r.get(), &c, 1), 0);
        // Too many to send at all: refused before anything is sent.
        std::vector<int> too_many(300, r.get());
        auto refused = co_await p->first.send_with_fds(std::string_view("x"), too_many);
        CO_ASSERT(!refused);
        EXPECT_EQ(refused.error(), std::errc::invalid_argument);
    }());
}

TEST_P(UnixTest, PeerSendsDescriptorsAndDisconnectsBeforeTheyAreRead) {
    run([]() -> Task<void> {
        int pipe_fds[2];
        CO_ASSERT(::pipe2(pipe_fds, O_CLOEXEC) == 0);
        UniqueFd r(pipe_fds[0]);
        {
            auto p = UnixStream::pair();
            CO_ASSERT(p.has_value());
            {
                UniqueFd w(pipe_fds[1]);
                const int fds[] = {w.get()};
                CO_ASSERT(co_await p->first.send_with_fds(std::string_view("fd"), fds));
                UnixStream gone = std::move(p->first); // the sender disconnects at once
            }
            // Still readable after the sender is gone.
            std::array<char, 8> buf;
            auto m = co_await p->second.recv_with_fds(buf, 1).timeout(5s);
            CO_ASSERT(m.has_value());
            CO_ASSERT(m->fds.size() == 1);
            auto eof = co_await p->second.recv_with_fds(buf, 1).timeout(5s);
            CO_ASSERT(eof.has_value());
            EXPECT_EQ(eof->size, 0u);
        }
        char c;
        EXPECT_EQ(::read(r.get(), &c, 1), 0);
        // Never read at all: the receiver's close releases the descriptors in flight.
        CO_ASSERT(::pipe2(pipe_fds, O_CLOEXEC) == 0);
        UniqueFd r2(pipe_fds[0]);
        {
            auto p = UnixStream::pair();
            CO_ASSERT(p.has_value());
            UniqueFd w(pipe_fds[1]);
            const int fds[] = {w.get(), w.get(), w.get()};
            CO_ASSERT(co_await p->first.send_with_fds(std::string_view("unread"), fds));
        }
        EXPECT_EQ(::read(r2.get(), &c, 1), 0) << "a descriptor in flight outlived both ends";
    }());
}

TEST_P(UnixTest, DatagramsBoundUnboundConnectedAndTruncated) {
    TempDir dir;
    const UnixAddr server_addr = addr(dir.file("dgram.sock"));
    run([&]() -> Task<void> {
        auto server = UnixDatagram::bind(server_addr);
        CO_ASSERT(server.has_value());
        auto bound_client = UnixDatagram::bind(addr(unique_abstract()));
        CO_ASSERT(bound_client.has_value());
        auto anon = UnixDatagram::unbound();
        CO_ASSERT(anon.has_value());
        // Bound client: the server sees its address and replies to it.
        CO_ASSERT(co_await bound_client->send_to(std::string_view("hello"), server_addr));
        std::array<char, 64> buf;
        UnixAddr from;
        auto r = co_await server->recv_from(buf, &from).timeout(5s);
        CO_ASSERT(r.has_value());
        EXPECT_EQ(std::string_view(buf.data(), r->size), "hello");
        EXPECT_FALSE(r->truncated);
        auto client_local = bound_client->local_addr();
        CO_ASSERT(client_local.has_value());
        EXPECT_EQ(from, *client_local);
        CO_ASSERT(co_await server->send_to(std::string_view("reply"), from));
        auto back = co_await bound_client->recv(buf).timeout(5s);
        CO_ASSERT(back.has_value());
        EXPECT_EQ(std::string_view(buf.data(), back->size), "reply");
        // Unbound sender: its address is unnamed.
        CO_ASSERT(co_await anon->send_to(std::string_view("anon"), server_addr));
        r = co_await server->recv_from(buf, &from).timeout(5s);
        CO_ASSERT(r.has_value());
        EXPECT_TRUE(from.is_unnamed());
        // A datagram larger than the buffer: truncation reported, the real size known.
        CO_ASSERT(anon->connect(server_addr));
        std::string big(1000, 'B');
        auto sent = co_await anon->send(big);
        CO_ASSERT(sent.has_value());
        EXPECT_EQ(*sent, 1000u);
        std::array<char, 100> small;
        auto t = co_await server->recv(small).timeout(5s);
        CO_ASSERT(t.has_value());
        EXPECT_TRUE(t->truncated);
        EXPECT_EQ(t->size, 100u);
        EXPECT_EQ(t->datagram_size, 1000u);
        // Nothing waiting: a timeout.
        auto idle = co_await server->recv(small).timeout(20ms);
        CO_ASSERT(!idle);
        EXPECT_EQ(idle.error(), std::errc::timed_out);
        // A connected pair carries descriptors too, and knows its peer.
        auto pr = UnixDatagram::pair();
        CO_ASSERT(pr.has_value());
        if (GALAY_HAVE_LINUX_SOCKETS) {
            EXPECT_EQ(pr->first.peer_cred()->pid, ::getpid());
        }
        const int fds[] = {server->fd()};
        CO_ASSERT(co_await pr->first.send_with_fds(std::string_view("d"), fds));
        auto m = co_await pr->second.recv_with_fds(buf, 1).timeout(5s);
        CO_ASSERT(m.has_value());
        EXPECT_EQ(m->fds.size(), 1u);
    }());
    EXPECT_NE(::access(server_addr.name().c_str(), F_OK), 0) << "the datagram file outlived it";
}

TEST_P(UnixTest, DatagramWithDescriptorsTruncatedDataOrTooManyFdsIsReportedAndNoneLeaks) {
    run([]() -> Task<void> {
        auto pr = UnixDatagram::pair();
        CO_ASSERT(pr.has_value());
        int pipe_fds[2];
        CO_ASSERT(::pipe2(pipe_fds, O_CLOEXEC) == 0);
        UniqueFd r(pipe_fds[0]), w(pipe_fds[1]);
        // A datagram larger than the buffer: the descriptor arrives, the truncation is reported.
        const std::string big(1000, 'D');
        const int one[] = {w.get()};
        CO_ASSERT(co_await pr->first.send_with_fds(big, one).timeout(5s));
        std::array<char, 100> small;
        auto m = co_await pr->second.recv_with_fds(small, 1).timeout(5s);
        CO_ASSERT(m.has_value());
        EXPECT_TRUE(m->truncated);
        EXPECT_EQ(m->size, small.size());
        EXPECT_EQ(m->fds.size(), 1u);
        m->fds.clear();
        // One that fits is not truncated.
        CO_ASSERT(co_await pr->first.send(std::string_view("fits")).timeout(5s));
        auto fits = co_await pr->second.recv_with_fds(small, 1).timeout(5s);
        CO_ASSERT(fits.has_value());
        EXPECT_FALSE(fits->truncated);
        EXPECT_EQ(std::string_view(small.data(), fits->size), "fits");
        // More descriptors than the receiver allows: control_truncated, and none stays open.
        const int before = test::open_fds();
        std::vector<int> many(8, w.get());
        CO_ASSERT(co_await pr->first.send_with_fds(std::string_view("many"), many).timeout(5s));
        auto t = co_await pr->second.recv_with_fds(small, 3).timeout(5s);
        CO_ASSERT(!t);
        EXPECT_EQ(t.error(), errc::control_truncated) << t.error().message();
        EXPECT_EQ(test::open_fds(), before);
        w = UniqueFd();
        char c;
        EXPECT_EQ(::read(r.get(), &c, 1), 0) << "a passed descriptor is still open somewhere";
        // The socket still works after it.
        CO_ASSERT(co_await pr->first.send(std::string_view("after")).timeout(5s));
        auto after = co_await pr->second.recv_with_fds(small, 1).timeout(5s);
        CO_ASSERT(after.has_value());
        EXPECT_EQ(std::string_view(small.data(), after->size), "after");
    }());
}

TEST_P(UnixTest, TenThousandConnectionsFromAPythonClient) {
    static constexpr int kConns = 10000;
    rlimit rl{};
    ::getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < kConns + 200 && rl.rlim_max > rl.rlim_cur) {
        rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, kConns + 200);
        ::setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < kConns + 200) GTEST_SKIP() << "SKIP: RLIMIT_NOFILE below " << kConns + 200;
    TempDir dir;
    const std::string path = dir.file("many.sock");
    const std::string script = R"PY(
import socket, sys
path, n = sys.argv[1], int(sys.argv[2])
conns = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(i.to_bytes(4, "little"))
    conns.append(s)
for i, s in enumerate(conns):
    got = b""
    while len(got) < 4:
        chunk = s.recv(4 - len(got))
        if not chunk:
            sys.exit("connection %d closed early" % i)
        got += chunk
    if int.from_bytes(got, "little") != i:
        sys.exit("connection %d: wrong echo" % i)
for s in conns:
    s.close()
print("ok", n)
)PY";
    run([&]() -> Task<void> {
        UnixListener l = listen_at(addr(path));
        test::Process client({"python3", "-c", script, path, std::to_string(kConns)});
        TaskGroup conns;
        std::atomic<int> echoed{0};
        for (int i = 0; i < kConns; ++i) {
            auto c = co_await l.accept().timeout(60s);
            CO_ASSERT(c.has_value());
            conns.spawn([](UnixStream s, std::atomic<int>& done) -> Task<void> {
                std::array<char, 4> id;
                if (!co_await s.recv_exact(id).timeout(60s)) co_return;
                if (!co_await s.send_all(id)) co_return;
                std::array<char, 1> eof;
                auto n = co_await s.recv(eof).timeout(60s);
                if (n && *n == 0) ++done;
            }(std::move(*c), echoed));
        }
        co_await conns.wait();
        EXPECT_EQ(echoed.load(), kConns);
        auto result = client.finish(std::chrono::seconds(120));
        EXPECT_EQ(result.exit_code, 0) << result.err;
        EXPECT_EQ(result.out, "ok " + std::to_string(kConns) + "\n");
    }());
}

GALAY_INSTANTIATE_BACKENDS(UnixTest);
