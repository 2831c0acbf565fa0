// Every program in the build's bin/ keeps the command-line promise of the README: `--help` prints
// its usage on stdout (nothing on stderr) and exits 0; a flag it does not know is one line on
// stderr, `<tool>: error: <flag>: <problem> (see --help)`, and exit 2. The programs are listed
// from the directory, so a new one is covered without a word here; only the test binaries are
// left out (below, with the reason).
#include "support/backends.hpp"
#include "support/process.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

using namespace galay;
using namespace galay::test;

namespace {

/// Not programs a user runs: the GoogleTest binaries (`*_tests`, `*_test`), and the docs'
/// examples compiled and run as tests, with no options (header_example_runtime: the README's;
/// guide_*: a guide page's).
bool is_test_binary(const std::string& name) {
    return name.ends_with("_tests") || name.ends_with("_test") ||
           name == "header_example_runtime" || name.starts_with("guide_");
}

/// The executables of bin/, sorted.
std::vector<std::string> programs() {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(GALAY_BIN_DIR)) {
        const std::string name = e.path().filename().string();
        if (!e.is_regular_file() || ::access(e.path().c_str(), X_OK) != 0 || is_test_binary(name))
            continue;
        out.push_back(name);
    }
    std::sort(out.begin(), out.end());
    return out;
}

class EveryProgramTest : public BackendTest {
protected:
    ProcessResult run(const std::string& name, const std::string& arg) const {
        return run_process({"env", std::string("GALAY_BACKEND=") + backend_name(GetParam()),
                            std::string(GALAY_BIN_DIR) + "/" + name, arg},
                           std::chrono::seconds(30));
    }
};

} // namespace

TEST_P(EveryProgramTest, HelpIsUsageOnStdoutAndExitZero) {
    const std::vector<std::string> all = programs();
    ASSERT_GT(all.size(), 10u) << "bin/ (" << GALAY_BIN_DIR << ") looks empty";
    for (const std::string& name : all) {
        const ProcessResult r = run(name, "--help");
        EXPECT_FALSE(r.timed_out) << name << " --help did not exit (it ignored --help?)";
        EXPECT_EQ(r.exit_code, 0) << name << " --help: " << r.err;
        EXPECT_NE(r.out.find("--help"), std::string::npos)
            << name << " --help: no usage on stdout: " << r.out;
        EXPECT_EQ(r.err, "") << name << " --help wrote on stderr";
    }
}

TEST_P(EveryProgramTest, AnUnknownFlagIsOneLineAndExitTwo) {
    const std::string flag = "--galay-no-such-flag";
    for (const std::string& name : programs()) {
        const ProcessResult r = run(name, flag);
        EXPECT_FALSE(r.timed_out) << name << " " << flag << " did not exit";
        EXPECT_EQ(r.exit_code, 2) << name << " " << flag << ": " << r.err;
        EXPECT_EQ(r.err, name + ": error: " + flag + ": unknown option (see --help)\n")
            << name << " " << flag;
        EXPECT_EQ(r.out, "") << name << " " << flag;
    }
}

// Numbers are checked whole and in range: `--idle 9223372037` (seconds that overflow nanoseconds)
// would close every connection at once, and a number read up to its first non-digit would take
// `--idle 5x` and `--timeout 5x` as 5 and a URL port of `18443abc` as 18443. An empty path is
// refused, never a fall-back to a default.
TEST_P(EveryProgramTest, NumbersAndNamesAreCheckedWhole) {
    struct Case {
        std::vector<std::string> args; // program and arguments
        std::string says;              // the start of the one error line
    };
    const std::vector<Case> cases = {
        {{"tcp_proxy", "0", "127.0.0.1:9", "--idle", "9223372037"}, "tcp_proxy: error: --idle: "},
        {{"tcp_proxy", "0", "127.0.0.1:9", "--idle", "5x"}, "tcp_proxy: error: --idle: "},
        {{"tcp_proxy", "0", "127.0.0.1:9x"}, "tcp_proxy: error: upstream: "},
        {{"tls_proxy", "0", "127.0.0.1:9", "--tls-cert", "c", "--tls-key", "k", "--idle",
          "99999999999999999999"},
         "tls_proxy: error: --idle: "},
        {{"https_get", "https://localhost:18443abc/"}, "https_get: error: url: "},
        {{"https_get", "https://localhost:0/"}, "https_get: error: url: "},
        {{"https_get", "https://localhost/", "--timeout", "5x"}, "https_get: error: --timeout: "},
        {{"https_get", "https://localhost/", "--max-bytes", "-1"},
         "https_get: error: --max-bytes: "},
        {{"https_get", "https://localhost/", "--ca", ""}, "https_get: error: --ca: "},
        {{"http_server", "8080x"}, "http_server: error: port: "},
        {{"http_server", "--idle-timeout", "5x"}, "http_server: error: --idle-timeout: "},
        {{"http_server", "--root", ""}, "http_server: error: --root: "},
        {{"bench_server", "--unix", ""}, "bench_server: error: --unix: "},
        {{"bench_server", "--metrics", "65536"}, "bench_server: error: --metrics: "},
        {{"run_jobs", "--timeout", "1e999", "true"}, "run_jobs: error: --timeout: "},
        {{"run_jobs", "-j", "0x10", "true"}, "run_jobs: error: -j: "},
        {{"echo_server", "9000x"}, "echo_server: error: port: "},
        {{"runtime_echo", "70000"}, "runtime_echo: error: port: "},
        {{"hot_restart", "0", "--drain", "86401"}, "hot_restart: error: --drain: "},
        {{"raw_udp", "9000x"}, "raw_udp: error: port: "},
        {{"raw_spawn", "/bin/true", "5x"}, "raw_spawn: error: SECS: "},
        {{"raw_uring", "--bufs", "3"}, "raw_uring: error: --bufs: "},
        {{"latency_blocking", "-p", "9000x"}, "latency_blocking: error: --port: "},
        {{"tls_load", "localhost", "443", "-c", "1e3"}, "tls_load: error: -c: "},
        {{"go_https_server", "--port", "0x10", "--cert", "c", "--key", "k"},
         "go_https_server: error: --port: "},
        {{"go_tls_client", "-addr", "127.0.0.1:9", "-ca", "c", "-bytes=010"},
         "go_tls_client: error: --bytes: "},
    };
    for (const Case& c : cases) {
        if (::access((std::string(GALAY_BIN_DIR) + "/" + c.args[0]).c_str(), X_OK) != 0)
            continue; // (not in this build: raw_uring without io_uring, say)
        std::vector<std::string> argv{"env",
                                      std::string("GALAY_BACKEND=") + backend_name(GetParam()),
                                      std::string(GALAY_BIN_DIR) + "/" + c.args[0]};
        argv.insert(argv.end(), c.args.begin() + 1, c.args.end());
        const ProcessResult r = run_process(argv, std::chrono::seconds(30));
        std::string what;
        for (const std::string& a : c.args)
            what += "'" + a + "' ";
        EXPECT_EQ(r.exit_code, 2) << what << r.err;
        EXPECT_TRUE(r.err.starts_with(c.says)) << what << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << r.err;
        EXPECT_TRUE(r.err.ends_with(" (see --help)\n")) << what << r.err;
    }
}

GALAY_INSTANTIATE_BACKENDS(EveryProgramTest);
