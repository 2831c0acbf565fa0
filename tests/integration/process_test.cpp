// Pipes and child processes end to end, on every backend, against programs we did not write
// (coreutils, sh): output collection and its limit, waits with timeouts, kill, a child that
// closes its stdin early, a missing program, what dropping a Child does, and that no descriptor
// of ours leaks into a child. Every test counts open descriptors and checks that no child is
// left (no zombie) at the end.
#include "support/backends.hpp"
#include "support/fds.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;
using process::Command;
using process::Stdio;

namespace {

/// A command from its argv (built outside `co_await` expressions: g++ 12 miscompiles string
/// literals in temporaries that live across a suspension).
Command cmd(std::vector<std::string> argv) {
    Command c(argv.front());
    for (std::size_t i = 1; i < argv.size(); ++i)
        c.arg(argv[i]);
    return c;
}

/// True when this process has no child left, zombie or running.
bool no_children() {
    return ::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD;
}

} // namespace

class ProcessTest : public test::FdCheckedTest {
protected:
    void TearDown() override {
        test::FdCheckedTest::TearDown();
        if (!IsSkipped()) {
            EXPECT_TRUE(no_children()) << "a child was left behind";
        }
    }
};

TEST_P(ProcessTest, PipeCarriesBytesThenEofAndAClosedReaderIsEpipe) {
    run([]() -> Task<void> {
        auto p = pipe();
        CO_ASSERT(p.has_value());
        std::string big(1 << 20, 'p'); // more than the pipe holds: the writer waits for us
        for (std::size_t i = 0; i < big.size(); ++i)
            big[i] = static_cast<char>('a' + i % 23);
        auto writer = [&]() -> Task<void> {
            auto w = co_await p->writer.write_all(big).timeout(10s);
            CO_ASSERT(w.has_value());
            EXPECT_EQ(*w, big.size());
            co_await p->writer.close();
        };
        auto reader = [&]() -> Task<std::string> {
            std::string got;
            std::array<char, 4096> buf;
            for (;;) {
                auto n = co_await p->reader.read(buf).timeout(10s);
                CO_ASSERT(n.has_value());
                if (*n == 0) co_return got;
                got.append(buf.data(), *n);
            }
        };
        auto [_, got] = co_await when_all(writer(), reader());
        EXPECT_EQ(got, big);

        auto q = pipe();
        CO_ASSERT(q.has_value());
        std::array<char, 8> buf;
        auto idle = co_await q->reader.read(buf).timeout(20ms);
        CO_ASSERT(!idle);
        EXPECT_EQ(idle.error(), std::errc::timed_out);
        q->reader = PipeReader();
        auto broken = co_await q->writer.write(std::string_view("nobody")).timeout(5s);
        CO_ASSERT(!broken);
        EXPECT_EQ(broken.error(), std::errc::broken_pipe);
    }());
}

TEST_P(ProcessTest, OutputCollectsStdoutStderrAndTheExitCode) {
    run([]() -> Task<void> {
        Command echo = cmd({"echo", "hello"});
        auto out = co_await echo.output(1 << 16);
        CO_ASSERT(out.has_value());
        EXPECT_EQ(out->out, "hello\n");
        EXPECT_TRUE(out->status.success());
        Command script = cmd({"sh", "-c", "echo to-err >&2; echo to-out; exit 3"});
        auto sh = co_await script.output(1 << 16);
        CO_ASSERT(sh.has_value());
        EXPECT_EQ(sh->out, "to-out\n");
        EXPECT_EQ(sh->err, "to-err\n");
        EXPECT_TRUE(sh->status.exited);
        EXPECT_EQ(sh->status.code, 3);
        EXPECT_EQ(sh->status.to_string(), "exit 3");
    }());
}

TEST_P(ProcessTest, EnvironmentAndWorkingDirectory) {
    const std::string dir = std::filesystem::canonical(std::filesystem::temp_directory_path());
    run([&]() -> Task<void> {
        Command c = cmd({"sh", "-c", "echo \"$GALAY_TEST_VAR\"; pwd; echo \"${HOME-unset}\""});
        c.env("GALAY_TEST_VAR", "value with spaces").env_remove("HOME").current_dir(dir);
        auto out = co_await c.output(1 << 16);
        CO_ASSERT(out.has_value());
        EXPECT_EQ(out->out, "value with spaces\n" + dir + "\nunset\n");
        Command env = cmd({"/usr/bin/env"});
        env.env_clear().env("ONLY", "1");
        auto clean = co_await env.output(4096);
        CO_ASSERT(clean.has_value());
        EXPECT_EQ(clean->out, "ONLY=1\n");
        auto nodir = Command("true").current_dir("/nonexistent/galay").spawn();
        CO_ASSERT(!nodir);
        EXPECT_EQ(nodir.error(), std::errc::no_such_file_or_directory);
    }());
}

TEST_P(ProcessTest, AMissingProgramIsAClearErrorFromSpawn) {
    auto c = Command("galay-no-such-program-here").spawn();
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error(), std::errc::no_such_file_or_directory) << c.error().message();
    run([]() -> Task<void> {
        Command missing = cmd({"/nonexistent/bin/tool"});
        auto out = co_await missing.output(10);
        CO_ASSERT(!out);
        EXPECT_EQ(out.error(), std::errc::no_such_file_or_directory);
    }());
}

TEST_P(ProcessTest, AChildThatNeverExitsTimesOutThenIsKilled) {
    run([]() -> Task<void> {
        auto child = Command("sleep").arg("1000").spawn();
        CO_ASSERT(child.has_value());
        auto st = co_await child->wait().timeout(20ms);
        CO_ASSERT(!st);
        EXPECT_EQ(st.error(), std::errc::timed_out);
        auto early = child->try_wait();
        CO_ASSERT(early.has_value());
        EXPECT_FALSE(early->has_value());
        CO_ASSERT(child->kill(SIGTERM));
        st = co_await child->wait().timeout(10s);
        CO_ASSERT(st.has_value());
        EXPECT_FALSE(st->exited);
        EXPECT_EQ(st->signal, SIGTERM);
        auto again = co_await child->wait(); // reaped: the same status at once
        CO_ASSERT(again.has_value());
        EXPECT_EQ(again->signal, SIGTERM);
        EXPECT_EQ(child->kill(SIGKILL).error(), std::errc::no_such_process);
    }());
}

TEST_P(ProcessTest, OutputPastTheLimitIsAnErrorAndTheChildIsReaped) {
    run([]() -> Task<void> {
        Command yes = cmd({"yes", "flood"});
        auto flood = co_await yes.output(64 * 1024);
        CO_ASSERT(!flood);
        EXPECT_EQ(flood.error(), errc::output_too_large) << flood.error().message();
        // A timeout around output() ends the child as well.
        Command sleeper = cmd({"sleep", "1000"});
        auto slow = co_await timeout(50ms, sleeper.output(100));
        CO_ASSERT(!slow);
        EXPECT_EQ(slow.error(), std::errc::timed_out);
    }());
}

TEST_P(ProcessTest, OutputPastTheLimitEndsWhileAGrandchildStillHoldsTheOtherStream) {
    const std::string pid_file = (std::filesystem::temp_directory_path() /
                                  ("galay-grandchild-" + std::to_string(::getpid())))
                                     .string();
    run([&]() -> Task<void> {
        // The shell floods stdout; its background grandchild holds stderr open after the shell
        // is killed. output() must not wait for it (a timeout would say it did).
        Command flood =
            cmd({"sh", "-c", "sleep 1000 >&2 & echo $! > " + pid_file + "; exec yes flood"});
        auto r = co_await timeout(60s, flood.output(64 * 1024));
        CO_ASSERT(!r);
        EXPECT_EQ(r.error(), errc::output_too_large) << r.error().message();
    }());
    std::ifstream f(pid_file);
    pid_t grandchild = 0;
    ASSERT_TRUE(f >> grandchild);
    EXPECT_EQ(::kill(grandchild, SIGKILL), 0); // (not ours to reap: init adopted it)
    std::filesystem::remove(pid_file);
}

TEST_P(ProcessTest, AChildThatClosesStdinEarly) {
    run([]() -> Task<void> {
        auto child = Command("head")
                         .args(std::vector<std::string>{"-c", "1"})
                         .set_stdin(Stdio::piped)
                         .set_stdout(Stdio::piped)
                         .spawn();
        CO_ASSERT(child.has_value());
        std::string lots(4 << 20, 'z');
        auto w = co_await child->stdin_pipe().write_all(lots).timeout(10s);
        CO_ASSERT(!w); // head read one byte and exited: the rest has nowhere to go
        EXPECT_EQ(w.error(), std::errc::broken_pipe);
        std::array<char, 8> buf;
        auto n = co_await child->stdout_pipe().read_exact(std::span(buf.data(), 1)).timeout(10s);
        CO_ASSERT(n.has_value());
        EXPECT_EQ(buf[0], 'z');
        auto st = co_await child->wait().timeout(10s);
        CO_ASSERT(st.has_value());
        EXPECT_TRUE(st->success());
    }());
}

TEST_P(ProcessTest, PipedStdinAndStdoutThroughCatWithABufferedReader) {
    run([]() -> Task<void> {
        auto child = Command("cat").set_stdin(Stdio::piped).set_stdout(Stdio::piped).spawn();
        CO_ASSERT(child.has_value());
        auto feed = [&]() -> Task<void> {
            for (int i = 0; i < 1000; ++i)
                CO_ASSERT(
                    co_await child->stdin_pipe().write_all("line " + std::to_string(i) + "\n"));
            co_await child->stdin_pipe().close();
        };
        auto drain = [&]() -> Task<int> {
            io::BufReader reader(child->stdout_pipe(), 4096);
            int lines = 0;
            for (;;) {
                auto line = co_await reader.read_line().timeout(10s);
                if (!line) {
                    EXPECT_EQ(line.error(), errc::end_of_stream);
                    co_return lines;
                }
                EXPECT_EQ(std::string(*line), "line " + std::to_string(lines));
                ++lines;
            }
        };
        auto [_, lines] = co_await when_all(feed(), drain());
        EXPECT_EQ(lines, 1000);
        auto st = co_await child->wait().timeout(10s);
        CO_ASSERT(st.has_value() && st->success());
    }());
}

TEST_P(ProcessTest, DroppingAChildKillsAndReapsIt) {
    pid_t pid = -1;
    {
        auto child = Command("sleep").arg("1000").spawn();
        ASSERT_TRUE(child);
        pid = child->id();
        ASSERT_EQ(::kill(pid, 0), 0);
    }
    // A zombie would still accept signal 0; a reaped child is gone.
    EXPECT_EQ(::kill(pid, 0), -1);
    EXPECT_EQ(errno, ESRCH);
}

TEST_P(ProcessTest, ADetachedChildOutlivesItsChildAndIsReapedByTheCaller) {
    pid_t pid = -1;
    int stdin_fd = -1; // our own copy of its stdin pipe
    {
        Command sh = cmd({"sh", "-c", "read line; exit 7"});
        auto child = sh.set_stdin(Stdio::piped).spawn();
        ASSERT_TRUE(child);
        stdin_fd = ::fcntl(child->stdin_pipe().fd(), F_DUPFD_CLOEXEC, 0);
        ASSERT_GE(stdin_fd, 0);
        const pid_t id = child->id();
        pid = child->detach();
        EXPECT_EQ(pid, id);
        EXPECT_EQ(child->id(), -1);
        EXPECT_EQ(child->detach(), -1);
        EXPECT_FALSE(child->kill(SIGKILL)); // it holds no process any more
    }
    // Dropped: neither killed nor reaped. It still waits for its line, then exits by itself.
    ASSERT_GT(pid, 0);
    ASSERT_EQ(::kill(pid, 0), 0);
    ASSERT_EQ(::write(stdin_fd, "go\n", 3), 3);
    ::close(stdin_fd);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 7);
}

TEST_P(ProcessTest, NoDescriptorOfOursLeaksIntoAChild) {
    // What the test process inherited without close-on-exec from whoever started it goes
    // through to a child as well: that is not galay's to close. ls's own directory stream takes
    // the lowest number left free.
    std::set<std::string> expected = {"0", "1", "2"};
    std::set<int> inherited;
    for (int fd = 3; fd < 1024; ++fd) {
        const int flags = ::fcntl(fd, F_GETFD);
        if (flags >= 0 && !(flags & FD_CLOEXEC)) inherited.insert(fd);
    }
    for (int fd : inherited)
        expected.insert(std::to_string(fd));
    int ls_dir = 3;
    while (inherited.count(ls_dir) != 0)
        ++ls_dir;
    expected.insert(std::to_string(ls_dir));
    run([&]() -> Task<void> {
        auto listener = TcpListener::bind(SocketAddr::loopback_v4(0)); // a few of ours, open
        auto pair = UnixStream::pair();
        auto p = pipe();
        CO_ASSERT(listener && pair && p);
        Command ls = cmd({"ls", "/proc/self/fd"});
        auto out = co_await ls.output(4096);
        CO_ASSERT(out.has_value());
        std::set<std::string> fds;
        std::istringstream in(out->out);
        for (std::string fd; in >> fd;)
            fds.insert(fd);
        EXPECT_EQ(fds, expected) << out->out;
        for (int ours : {listener->fd(), pair->first.fd(), p->reader.fd(), p->writer.fd()})
            EXPECT_EQ(fds.count(std::to_string(ours)), 0u) << "fd " << ours << " leaked";
    }());
}

TEST_P(ProcessTest, ManyChildrenWaitedAtOnce) {
    run([]() -> Task<void> {
        std::vector<process::Child> children;
        for (int i = 0; i < 32; ++i) {
            auto c = Command("sh")
                         .args(std::vector<std::string>{"-c", "exit " + std::to_string(i)})
                         .spawn();
            CO_ASSERT(c.has_value());
            children.push_back(std::move(*c));
        }
        std::vector<Task<Result<process::ExitStatus>>> waits;
        for (auto& c : children)
            waits.push_back(as_task(c.wait().timeout(10s)));
        auto all = co_await when_all(std::move(waits));
        for (int i = 0; i < 32; ++i) {
            CO_ASSERT(all[static_cast<std::size_t>(i)].has_value());
            EXPECT_EQ(all[static_cast<std::size_t>(i)]->code, i);
        }
    }());
}

GALAY_INSTANTIATE_BACKENDS(ProcessTest);
