// tests/support/process.hpp: a tool a test starts dies with the test process, even when that
// process ends without running a destructor (a crash, ctest's timeout killing it).
#include "support/process.hpp"

#include <poll.h>
#include <sys/syscall.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace {

/// Waits until /proc/<pid>/comm says `name` (the tool has been exec'd); false at the deadline.
bool runs(pid_t pid, const std::string& name) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < until) {
        std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
        std::string comm;
        if (std::getline(f, comm) && comm == name) return true;
        std::this_thread::yield();
    }
    return false;
}

} // namespace

TEST(ProcessSupport, AToolDiesWithTheTestProcessThatStartedIt) {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    const pid_t test = ::fork();
    ASSERT_GE(test, 0);
    if (test == 0) { // a test process that starts a tool and ends without its destructors
        auto* tool = new galay::test::Process({"sleep", "1000"});
        const pid_t pid = tool->pid();
        const bool started = runs(pid, "sleep");
        if (::write(p[1], &pid, sizeof pid) != sizeof pid || !started) ::_exit(1);
        ::_exit(0);
    }
    ::close(p[1]);
    pid_t tool = -1;
    const ssize_t got = ::read(p[0], &tool, sizeof tool);
    ::close(p[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(test, &status, 0), test);
    ASSERT_EQ(got, static_cast<ssize_t>(sizeof tool));
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the tool did not start";
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, tool, 0));
    if (fd < 0) {
        EXPECT_EQ(errno, ESRCH) << std::strerror(errno);
        return; // gone already
    }
    pollfd pfd{fd, POLLIN, 0};
    const int ended = ::poll(&pfd, 1, 30000);
    ::close(fd);
    EXPECT_EQ(ended, 1) << "the tool (pid " << tool << ") outlived the test process";
    if (ended != 1) ::kill(tool, SIGKILL);
}
