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

/// Not programs a user runs: the GoogleTest binaries (`*_tests`, `*_test`), and
/// header_example_runtime (the README's example compiled and run as a test, with no options).
bool is_test_binary(const std::string& name) {
    return name.ends_with("_tests") || name.ends_with("_test") || name == "header_example_runtime";
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

GALAY_INSTANTIATE_BACKENDS(EveryProgramTest);
