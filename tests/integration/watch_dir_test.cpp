// examples/watch_dir as a process, on every backend: each change the test makes in a temporary
// directory (create, write, rename, move out, move in, delete, the directory itself removed)
// comes out as its line, in order, read from the child's stdout as it happens; and a bad
// argument is one line and exit 2.
#include "support/backends.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

namespace fsys = std::filesystem;

class WatchDirTest : public test::BackendTest {};

/// The next line of the child's stdout, without its newline ("" at its end or on an error).
Task<std::string> next_line(io::BufReader<PipeReader>& out) {
    auto line = co_await out.read_line().timeout(30s);
    if (!line) co_return std::string("<") + line.error().message() + ">";
    std::string s(*line);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    co_return s;
}

void write_file(const fsys::path& p, const std::string& text) {
    std::ofstream(p) << text; // created, written, closed: IN_CREATE then IN_CLOSE_WRITE
}

} // namespace

TEST_P(WatchDirTest, EachChangeIsOneLineInOrder) {
    const fsys::path base =
        fsys::temp_directory_path() /
        ("galay-watch-" + std::to_string(::getpid()) + "-" + backend_name(GetParam()));
    const fsys::path dir = base / "watched", outside = base / "outside";
    fsys::create_directories(dir);
    fsys::create_directories(outside);
    run([](const fsys::path& dir, const fsys::path& outside, Backend b) -> Task<void> {
        process::Command cmd(WATCH_DIR_BIN);
        cmd.args({"--backend", backend_name(b), "--idle-timeout", "30", dir.string()});
        cmd.set_stdout(process::Stdio::piped);
        auto child = cmd.spawn();
        CO_ASSERT(child.has_value());
        io::BufReader<PipeReader> out(child->stdout_pipe());
        CO_ASSERT(co_await next_line(out) == "watching " + dir.string());
        // Each change, then the line it must give (read before the next change, so the order
        // of the lines is the order of the changes).
        write_file(dir / "app.conf", "port = 1\n");
        CO_ASSERT(co_await next_line(out) == "created app.conf");
        CO_ASSERT(co_await next_line(out) == "modified app.conf");
        write_file(dir / "app.conf", "port = 2\n"); // an existing file: no creation
        CO_ASSERT(co_await next_line(out) == "modified app.conf");
        fsys::rename(dir / "app.conf", dir / "app.conf.old");
        CO_ASSERT(co_await next_line(out) == "renamed app.conf -> app.conf.old");
        fsys::rename(dir / "app.conf.old", outside / "away");
        CO_ASSERT(co_await next_line(out) == "moved out app.conf.old");
        write_file(outside / "new.conf", "port = 3\n");
        fsys::rename(outside / "new.conf", dir / "new.conf"); // atomic replace, as deployers do
        CO_ASSERT(co_await next_line(out) == "moved in new.conf");
        fsys::remove(dir / "new.conf");
        CO_ASSERT(co_await next_line(out) == "deleted new.conf");
        fsys::remove(dir);
        CO_ASSERT(co_await next_line(out) == "gone");
        auto st = co_await child->wait().timeout(30s);
        CO_ASSERT(st && st->success());
    }(dir, outside, GetParam()));
    fsys::remove_all(base);
}

TEST_P(WatchDirTest, BadArgumentsAndAMissingDirectory) {
    auto run_it = [this](std::vector<std::string> args) {
        return run([](std::vector<std::string> args) -> Task<Result<process::Output>> {
            process::Command cmd(WATCH_DIR_BIN);
            cmd.args(std::move(args));
            co_return co_await cmd.output(1 << 16); // (each run ends at once)
        }(std::move(args)));
    };
    auto bad = run_it({"--count", "x", "/tmp"});
    ASSERT_TRUE(bad);
    EXPECT_TRUE(bad->status.exited && bad->status.code == 2);
    EXPECT_EQ(bad->err,
              "watch_dir: error: --count: 'x' is not a non-negative number (see --help)\n");
    auto help = run_it({"--help"});
    ASSERT_TRUE(help);
    EXPECT_TRUE(help->status.success() && help->out.starts_with("usage: watch_dir"));
    auto missing = run_it({"--backend", backend_name(GetParam()), "/nonexistent/galay-watch-dir"});
    ASSERT_TRUE(missing);
    EXPECT_TRUE(missing->status.exited && missing->status.code == 1);
    EXPECT_NE(missing->err.find("No such file or directory"), std::string::npos) << missing->err;
}

GALAY_INSTANTIATE_BACKENDS(WatchDirTest);
