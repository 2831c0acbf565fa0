// raw_uring_udp [port] [sockets] [mode]: UDP echo on raw liburing, no galay code. It exists to
// measure which io_uring shape moves datagrams cheapest (io_uring has no recvmmsg opcode); the
// winner is what galay's io_uring driver does for UdpSocket::recv_batch/send_batch.
//
//   mmsg       multishot POLL_ADD per socket; on readiness, recvmmsg/sendmmsg system calls
//   ms-sqe     multishot RECVMSG with a provided-buffer ring; one SENDMSG SQE per datagram,
//              straight from the ring buffer, which is recycled at the send's CQE
//   ms-linked  as ms-sqe, the sends of one loop turn linked (IOSQE_IO_LINK) so they go in order
//   ms-mmsg    multishot RECVMSG with the buffer ring; the datagrams of one turn echoed with one
//              sendmmsg system call per socket, buffers recycled at once
//
// Rings are SINGLE_ISSUER|DEFER_TASKRUN like galay's; every socket asks for a 4 MiB SO_RCVBUF.
#include "galay_cli.hpp"
#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

enum class Mode { mmsg, ms_sqe, ms_linked, ms_mmsg };

constexpr unsigned kEntries = 4096; // buffers in the ring (power of two)
constexpr unsigned kBufSize = 2048; // each: recvmsg_out header + name + payload
constexpr int kBatch = 64;          // mmsg mode
constexpr std::uint64_t kRecv = 0, kSend = 1, kPoll = 2;

[[noreturn]] void die(const char* what, int err) {
    std::fprintf(stderr, "raw_uring_udp: %s: %s\n", what, std::strerror(err));
    std::exit(1);
}

int bind_socket(unsigned port, bool reuse_port) {
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket", errno);
    int one = 1, rcvbuf = 4 << 20;
    if (reuse_port && ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0)
        die("SO_REUSEPORT", errno);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) die("bind", errno);
    return fd;
}

struct Server {
    Mode mode;
    io_uring ring{};
    std::vector<int> fds;
    // Provided buffers (ms-* modes).
    io_uring_buf_ring* br = nullptr;
    std::unique_ptr<char[]> bufs;
    msghdr recv_msg{}; // the template multishot RECVMSG reads: name length, no control
    struct Send {      // ms-sqe: one in-flight SENDMSG per buffer id
        msghdr msg;
        iovec iov;
    };
    std::vector<Send> sends;
    unsigned to_recycle = 0;
    // mmsg mode, and ms-mmsg's echo batch.
    struct Batch {
        mmsghdr msgs[kBatch];
        iovec iov[kBatch];
        sockaddr_in from[kBatch];
        unsigned short bid[kBatch];
        int n = 0;
    };
    std::vector<Batch> batches;
    std::unique_ptr<char[]> mmsg_storage;

    io_uring_sqe* sqe() {
        io_uring_sqe* e = io_uring_get_sqe(&ring);
        while (e == nullptr) {
            io_uring_submit(&ring);
            e = io_uring_get_sqe(&ring);
        }
        return e;
    }

    void setup_buffers() {
        const std::size_t ring_bytes = kEntries * sizeof(io_uring_buf);
        void* mem =
            ::mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
        if (mem == MAP_FAILED) die("mmap", errno);
        br = static_cast<io_uring_buf_ring*>(mem);
        io_uring_buf_ring_init(br);
        io_uring_buf_reg reg{};
        reg.ring_addr = reinterpret_cast<unsigned long>(br);
        reg.ring_entries = kEntries;
        reg.bgid = 0;
        if (int r = io_uring_register_buf_ring(&ring, &reg, 0); r < 0)
            die("io_uring_register_buf_ring", -r);
        bufs.reset(new char[std::size_t{kEntries} * kBufSize]);
        for (unsigned i = 0; i < kEntries; ++i)
            io_uring_buf_ring_add(br, bufs.get() + i * kBufSize, kBufSize, i,
                                  io_uring_buf_ring_mask(kEntries), i);
        io_uring_buf_ring_advance(br, kEntries);
        recv_msg.msg_namelen = sizeof(sockaddr_in);
        sends.resize(kEntries);
    }

    void recycle(unsigned short bid) {
        io_uring_buf_ring_add(br, bufs.get() + bid * std::size_t{kBufSize}, kBufSize, bid,
                              io_uring_buf_ring_mask(kEntries), static_cast<int>(to_recycle));
        ++to_recycle;
    }

    void arm(std::size_t s) {
        io_uring_sqe* e = sqe();
        if (mode == Mode::mmsg) {
            io_uring_prep_poll_multishot(e, fds[s], POLLIN);
            io_uring_sqe_set_data64(e, (s << 2) | kPoll);
        } else {
            io_uring_prep_recvmsg_multishot(e, fds[s], &recv_msg, 0);
            e->flags |= IOSQE_BUFFER_SELECT;
            e->buf_group = 0;
            io_uring_sqe_set_data64(e, (s << 2) | kRecv);
        }
    }

    void drain_mmsg(std::size_t s) {
        Batch& b = batches[s];
        char* store = mmsg_storage.get() + s * kBatch * std::size_t{kBufSize};
        for (;;) {
            for (int i = 0; i < kBatch; ++i) {
                b.iov[i] = {store + i * kBufSize, kBufSize};
                b.msgs[i].msg_hdr = {};
                b.msgs[i].msg_hdr.msg_name = &b.from[i];
                b.msgs[i].msg_hdr.msg_namelen = sizeof b.from[i];
                b.msgs[i].msg_hdr.msg_iov = &b.iov[i];
                b.msgs[i].msg_hdr.msg_iovlen = 1;
            }
            int n = ::recvmmsg(fds[s], b.msgs, kBatch, MSG_DONTWAIT, nullptr);
            if (n <= 0) return;
            for (int i = 0; i < n; ++i)
                b.iov[i].iov_len = b.msgs[i].msg_len;
            send_all(fds[s], b.msgs, n);
            if (n < kBatch) return;
        }
    }

    static void send_all(int fd, mmsghdr* msgs, int n) {
        for (int done = 0; done < n;) {
            int m = ::sendmmsg(fd, msgs + done, static_cast<unsigned>(n - done), 0);
            if (m < 0) {
                if (errno == EINTR || errno == EAGAIN) continue;
                ++done;
                continue;
            }
            done += m;
        }
    }

    /// One datagram arrived in buffer `bid` on socket `s`.
    void on_datagram(std::size_t s, unsigned short bid, int len, bool* linked_prev) {
        char* buf = bufs.get() + bid * std::size_t{kBufSize};
        auto* out = io_uring_recvmsg_validate(buf, len, &recv_msg);
        if (out == nullptr || (out->flags & MSG_TRUNC)) {
            recycle(bid);
            return;
        }
        void* name = io_uring_recvmsg_name(out);
        void* payload = io_uring_recvmsg_payload(out, &recv_msg);
        const unsigned plen = io_uring_recvmsg_payload_length(out, len, &recv_msg);
        if (mode == Mode::ms_mmsg) {
            Batch& b = batches[s];
            if (b.n == kBatch) flush_batch(s);
            const int i = b.n++;
            b.iov[i] = {payload, plen};
            b.msgs[i].msg_hdr = {};
            b.msgs[i].msg_hdr.msg_name = name;
            b.msgs[i].msg_hdr.msg_namelen = out->namelen;
            b.msgs[i].msg_hdr.msg_iov = &b.iov[i];
            b.msgs[i].msg_hdr.msg_iovlen = 1;
            b.bid[i] = bid;
            return;
        }
        Send& sd = sends[bid];
        sd.iov = {payload, plen};
        sd.msg = {};
        sd.msg.msg_name = name;
        sd.msg.msg_namelen = out->namelen;
        sd.msg.msg_iov = &sd.iov;
        sd.msg.msg_iovlen = 1;
        io_uring_sqe* e = sqe();
        io_uring_prep_sendmsg(e, fds[s], &sd.msg, 0);
        io_uring_sqe_set_data64(e, (std::uint64_t{bid} << 2) | kSend);
        if (mode == Mode::ms_linked) {
            // Link to the next send of this turn; the turn's last one is unlinked in run().
            e->flags |= IOSQE_IO_LINK;
            *linked_prev = true;
            last_linked = e;
        }
    }

    void flush_batch(std::size_t s) {
        Batch& b = batches[s];
        if (b.n == 0) return;
        send_all(fds[s], b.msgs, b.n);
        for (int i = 0; i < b.n; ++i)
            recycle(b.bid[i]);
        b.n = 0;
    }

    io_uring_sqe* last_linked = nullptr;

    [[noreturn]] void run() {
        for (std::size_t s = 0; s < fds.size(); ++s)
            arm(s);
        for (;;) {
            int r = io_uring_submit_and_wait(&ring, 1);
            if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY)
                die("io_uring_submit_and_wait", -r);
            io_uring_cqe* cqe;
            unsigned head, seen = 0;
            bool linked = false; // a send of this turn carries IOSQE_IO_LINK (ms-linked)
            last_linked = nullptr;
            io_uring_for_each_cqe(&ring, head, cqe) {
                ++seen;
                const std::uint64_t ud = cqe->user_data;
                const std::size_t idx = ud >> 2;
                switch (ud & 3) {
                case kPoll:
                    drain_mmsg(idx);
                    if (!(cqe->flags & IORING_CQE_F_MORE)) arm(idx);
                    break;
                case kRecv:
                    if (cqe->res >= 0 && (cqe->flags & IORING_CQE_F_BUFFER))
                        on_datagram(
                            idx, static_cast<unsigned short>(cqe->flags >> IORING_CQE_BUFFER_SHIFT),
                            cqe->res, &linked);
                    if (!(cqe->flags & IORING_CQE_F_MORE)) arm(idx); // e.g. ENOBUFS
                    break;
                case kSend:
                    recycle(static_cast<unsigned short>(idx));
                    break;
                }
            }
            io_uring_cq_advance(&ring, seen);
            if (last_linked != nullptr) last_linked->flags &= ~IOSQE_IO_LINK;
            if (mode == Mode::ms_mmsg)
                for (std::size_t s = 0; s < fds.size(); ++s)
                    flush_batch(s);
            if (to_recycle > 0) {
                io_uring_buf_ring_advance(br, static_cast<int>(to_recycle));
                to_recycle = 0;
            }
        }
    }
};

} // namespace

int main(int argc, char** argv) {
    namespace tools = galay::tools;
    unsigned port = 9000;
    int nsock = 1;
    std::string m = "mmsg";
    cli::App app{"A hand-written io_uring UDP echo server (the baseline for bench_udp).",
                 "raw_uring_udp"};
    app.add_option("port", port, "UDP port")->check(tools::whole(1, 65535))->capture_default_str();
    app.add_option("sockets", nsock, "sockets bound to the port (SO_REUSEPORT)")
        ->check(tools::whole(1, 64))
        ->capture_default_str();
    app.add_option("mode", m, "how datagrams are received and sent")
        ->check(cli::IsMember({"mmsg", "ms-sqe", "ms-linked", "ms-mmsg"}))
        ->capture_default_str();
    if (auto code = tools::parse_command_line(app, argc, argv, "raw_uring_udp")) return *code;
    Server srv;
    if (m == "mmsg")
        srv.mode = Mode::mmsg;
    else if (m == "ms-sqe")
        srv.mode = Mode::ms_sqe;
    else if (m == "ms-linked")
        srv.mode = Mode::ms_linked;
    else if (m == "ms-mmsg")
        srv.mode = Mode::ms_mmsg;
    else
        srv.mode = Mode::ms_mmsg;
    io_uring_params p{};
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE;
    p.cq_entries = 4 * kEntries;
    if (int r = io_uring_queue_init_params(1024, &srv.ring, &p); r < 0)
        die("io_uring_queue_init_params", -r);
    for (int i = 0; i < nsock; ++i)
        srv.fds.push_back(bind_socket(port, nsock > 1));
    srv.batches.resize(srv.fds.size());
    if (srv.mode == Mode::mmsg)
        srv.mmsg_storage.reset(new char[srv.fds.size() * kBatch * std::size_t{kBufSize}]);
    else
        srv.setup_buffers();
    std::printf("listening on 0.0.0.0:%u (raw_uring_udp %s)\n", port, m.c_str());
    std::fflush(stdout);
    srv.run();
}
