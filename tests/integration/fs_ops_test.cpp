// The filesystem namespace end to end, on every backend, in a fresh temp directory: open, stat,
// rename (replace, no-replace, exchange), remove, directories, links, read_dir, sync_dir,
// read_file's limit, write_file_atomic (also with a fault injected at each of its steps), a file
// as a stream under io::BufReader/BufWriter, truncate off the worker, and file operations before
// any runtime exists. Every test counts open descriptors before and after.
//
// Compiled twice: fs_ops_tests, where io_uring runs each namespace op with its own opcode, and
// fs_ops_pool_tests, whose main() makes the io_uring probe say no for every one of them
// (GALAY_FAKE_URING_NO_OPS=all), so the same tests run each op on the blocking pool instead.
#include "support/backends.hpp"
#include "support/fds.hpp"

#include "driver/common/fault_plan.hpp"

#include "driver/fs_ops.hpp" // uring_fs_op_supported: which route each op must take

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;
namespace faults = galay::detail::faults;

namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void put(const std::string& path, const std::string& content) {
    std::ofstream(path, std::ios::binary) << content;
}

std::vector<std::string> names_in(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

} // namespace

class FsOpsTest : public test::FdCheckedTest {
protected:
    void SetUp() override {
        test::FdCheckedTest::SetUp(); // (mkdtemp below leaves no descriptor open)
        std::string tmpl =
            (std::filesystem::temp_directory_path() / "galay-fs-ops-XXXXXX").string();
        ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override {
        test::FdCheckedTest::TearDown();
        if (!dir_.empty()) std::filesystem::remove_all(dir_);
    }
    std::string at(const std::string& name) const { return dir_ + "/" + name; }
    std::string dir_;
};

TEST_P(FsOpsTest, OpenStatAndErrors) {
    run([&]() -> Task<void> {
        auto f =
            co_await fs::open(at("a"), {.read = true, .write = true, .create = true}).timeout(5s);
        CO_ASSERT(f.has_value());
        CO_ASSERT(co_await f->write_all_at(std::string_view("0123456789"), 0));
        std::array<char, 10> back;
        CO_ASSERT(co_await f->read_exact_at(back, 0));
        EXPECT_EQ(std::string_view(back.data(), 10), "0123456789");
        EXPECT_NE(::fcntl(f->fd(), F_GETFD) & FD_CLOEXEC, 0);
        auto m = co_await fs::stat(at("a"));
        CO_ASSERT(m.has_value());
        EXPECT_EQ(m->size, 10u);
        EXPECT_TRUE(m->is_file());
        EXPECT_EQ(m->nlink, 1u);
        auto d = co_await fs::stat(dir_);
        CO_ASSERT(d.has_value());
        EXPECT_TRUE(d->is_dir());
        auto none = co_await fs::open(at("missing"));
        CO_ASSERT(!none);
        EXPECT_EQ(none.error(), std::errc::no_such_file_or_directory);
        auto none_stat = co_await fs::stat(at("missing"));
        CO_ASSERT(!none_stat);
        EXPECT_EQ(none_stat.error(), std::errc::no_such_file_or_directory);
        auto bad = co_await fs::open(at("a"), {.read = false, .write = false});
        CO_ASSERT(!bad);
        EXPECT_EQ(bad.error(), std::errc::invalid_argument);
    }());
}

TEST_P(FsOpsTest, EachNamespaceOpRunsNativelyOrOnThePoolAsTheProbeSays) {
    using detail::OpCode;
    auto on_pool = [&](OpCode c) {
#if GALAY_TEST_WITH_URING
#if GALAY_TEST_POOL_ONLY
        EXPECT_FALSE(detail::uring_fs_op_supported(c)) << "GALAY_FAKE_URING_NO_OPS did not apply";
#endif
        if (GetParam() == Backend::io_uring) return !detail::uring_fs_op_supported(c);
#endif
        (void)c;
        return true; // epoll: every namespace op is a blocking-pool job
    };
    std::uint64_t before = 0;
    auto mark = [&] { before = detail::blocking_stats().jobs_started; };
    auto pool_jobs = [&] { return detail::blocking_stats().jobs_started - before; };
    put(at("f"), "data");
    run([&]() -> Task<void> {
        mark();
        auto f = co_await fs::open(at("f"));
        CO_ASSERT(f.has_value());
        EXPECT_EQ(pool_jobs(), on_pool(OpCode::openat) ? 1u : 0u) << "open";
        mark();
        auto m = co_await fs::stat(at("f"));
        CO_ASSERT(m.has_value());
        EXPECT_EQ(m->size, 4u);
        EXPECT_EQ(pool_jobs(), on_pool(OpCode::statx) ? 1u : 0u) << "stat";
        mark();
        CO_ASSERT(co_await fs::create_dir(at("d")));
        EXPECT_EQ(pool_jobs(), on_pool(OpCode::mkdirat) ? 1u : 0u) << "create_dir";
        mark();
        CO_ASSERT(co_await fs::hard_link(at("f"), at("d/h")));
        EXPECT_EQ(pool_jobs(), on_pool(OpCode::linkat) ? 1u : 0u) << "hard_link";
        mark();
        CO_ASSERT(co_await fs::symlink("h", at("d/s")));
        EXPECT_EQ(pool_jobs(), on_pool(OpCode::symlinkat) ? 1u : 0u) << "symlink";
        mark();
        CO_ASSERT(co_await fs::rename(at("d/s"), at("d/s2")));
        EXPECT_EQ(pool_jobs(), on_pool(OpCode::renameat) ? 1u : 0u) << "rename";
        mark();
        CO_ASSERT(co_await fs::remove(at("d/s2")));
        CO_ASSERT(co_await fs::remove(at("d/h")));
        CO_ASSERT(co_await fs::remove_dir(at("d")));
        EXPECT_EQ(pool_jobs(), on_pool(OpCode::unlinkat) ? 3u : 0u) << "remove, remove_dir";
        // Errors come back the same way on either route.
        auto missing = co_await fs::rename(at("nope"), at("nope2"));
        CO_ASSERT(!missing);
        EXPECT_EQ(missing.error(), std::errc::no_such_file_or_directory);
    }());
    EXPECT_EQ(names_in(dir_), (std::vector<std::string>{"f"}));
}

TEST_P(FsOpsTest, RenameReplaceNoReplaceAndExchange) {
    put(at("x"), "x-content");
    put(at("y"), "y-content");
    run([&]() -> Task<void> {
        if (!GALAY_LINUX_CALLS) { // renameat2's modes are Linux's; a plain rename is renameat
            for (auto mode : {fs::RenameMode::no_replace, fs::RenameMode::exchange}) {
                auto r = co_await fs::rename(at("x"), at("y"), mode);
                CO_ASSERT(!r);
                EXPECT_EQ(r.error(), make_error_code(errc::not_supported));
            }
            CO_ASSERT(co_await fs::rename(at("x"), at("y")));
            EXPECT_EQ(slurp(at("y")), "x-content");
            co_return;
        }
        auto refused = co_await fs::rename(at("x"), at("y"), fs::RenameMode::no_replace);
        CO_ASSERT(!refused);
        EXPECT_EQ(refused.error(), std::errc::file_exists);
        CO_ASSERT(co_await fs::rename(at("x"), at("y"), fs::RenameMode::exchange));
        EXPECT_EQ(slurp(at("x")), "y-content");
        EXPECT_EQ(slurp(at("y")), "x-content");
        CO_ASSERT(co_await fs::rename(at("x"), at("y")));
        EXPECT_EQ(slurp(at("y")), "y-content");
        EXPECT_FALSE(std::filesystem::exists(at("x")));
        CO_ASSERT(co_await fs::rename(at("y"), at("z"), fs::RenameMode::no_replace));
        EXPECT_EQ(slurp(at("z")), "y-content");
    }());
}

TEST_P(FsOpsTest, DirectoriesLinksAndRemoval) {
    put(at("f"), "data");
    run([&]() -> Task<void> {
        CO_ASSERT(co_await fs::create_dir(at("sub")));
        auto again = co_await fs::create_dir(at("sub"));
        CO_ASSERT(!again);
        EXPECT_EQ(again.error(), std::errc::file_exists);
        CO_ASSERT(co_await fs::hard_link(at("f"), at("sub/hard")));
        auto m = co_await fs::stat(at("f"));
        CO_ASSERT(m.has_value());
        EXPECT_EQ(m->nlink, 2u);
        CO_ASSERT(co_await fs::symlink("../f", at("sub/soft")));
        auto link = co_await fs::stat(at("sub/soft"), false);
        CO_ASSERT(link.has_value());
        EXPECT_TRUE(link->is_symlink());
        auto target = co_await fs::stat(at("sub/soft"));
        CO_ASSERT(target.has_value());
        EXPECT_TRUE(target->is_file());
        EXPECT_EQ(target->ino, m->ino);

        auto entries = co_await fs::read_dir(at("sub")).timeout(5s);
        CO_ASSERT(entries.has_value());
        std::vector<std::string> names;
        for (const auto& e : *entries)
            names.push_back(e.name);
        std::sort(names.begin(), names.end());
        EXPECT_EQ(names, (std::vector<std::string>{"hard", "soft"}));
        auto missing = co_await fs::read_dir(at("nope"));
        CO_ASSERT(!missing);
        EXPECT_EQ(missing.error(), std::errc::no_such_file_or_directory);

        auto not_empty = co_await fs::remove_dir(at("sub"));
        CO_ASSERT(!not_empty);
        EXPECT_EQ(not_empty.error(), std::errc::directory_not_empty);
        auto is_dir = co_await fs::remove(at("sub"));
        CO_ASSERT(!is_dir);
        EXPECT_EQ(is_dir.error(), std::errc::is_a_directory);
        CO_ASSERT(co_await fs::remove(at("sub/hard")));
        CO_ASSERT(co_await fs::remove(at("sub/soft")));
        CO_ASSERT(co_await fs::remove_dir(at("sub")));
        CO_ASSERT(co_await fs::sync_dir(dir_));
        auto no_dir = co_await fs::sync_dir(at("sub"));
        CO_ASSERT(!no_dir);
        EXPECT_EQ(names_in(dir_), (std::vector<std::string>{"f"}));
    }());
}

TEST_P(FsOpsTest, ReadFileHonoursItsLimit) {
    put(at("empty"), "");
    put(at("ten"), "0123456789");
    std::string big(200000, 'b');
    put(at("big"), big);
    run([&]() -> Task<void> {
        auto e = co_await fs::read_file(at("empty"), 10);
        CO_ASSERT(e.has_value());
        EXPECT_EQ(*e, "");
        auto exact = co_await fs::read_file(at("ten"), 10);
        CO_ASSERT(exact.has_value());
        EXPECT_EQ(*exact, "0123456789");
        auto over = co_await fs::read_file(at("ten"), 9);
        CO_ASSERT(!over);
        EXPECT_EQ(over.error(), std::errc::file_too_large);
        auto whole = co_await fs::read_file(at("big"), big.size()).timeout(10s);
        CO_ASSERT(whole.has_value());
        EXPECT_EQ(*whole, big);
        auto missing = co_await fs::read_file(at("missing"), 10);
        CO_ASSERT(!missing);
        EXPECT_EQ(missing.error(), std::errc::no_such_file_or_directory);
    }());
}

TEST_P(FsOpsTest, WriteFileAtomicReplacesAndLeavesNoTempFile) {
    put(at("state"), "old");
    run([&]() -> Task<void> {
        CO_ASSERT(co_await fs::write_file_atomic(at("state"), "new content", 0600).timeout(5s));
        EXPECT_EQ(slurp(at("state")), "new content");
        auto m = co_await fs::stat(at("state"));
        CO_ASSERT(m.has_value());
        EXPECT_EQ(m->mode & 0777, 0600u);
        CO_ASSERT(co_await fs::write_file_atomic(at("fresh"), "created"));
        EXPECT_EQ(slurp(at("fresh")), "created");
        auto no_dir = co_await fs::write_file_atomic(at("nodir/x"), "y");
        CO_ASSERT(!no_dir);
    }());
    EXPECT_EQ(names_in(dir_), (std::vector<std::string>{"fresh", "state"}));
}

TEST_P(FsOpsTest, WriteFileAtomicWithAFaultAtEachStep) {
    using detail::OpCode;
    struct Step {
        const char* name;
        OpCode code;
    };
    const Step steps[] = {{"create the temp file", OpCode::openat},
                          {"write", OpCode::write_at},
                          {"fdatasync", OpCode::fdatasync},
                          {"rename", OpCode::renameat},
                          {"fsync the directory", OpCode::fsync}};
    const std::string old_content(5000, 'o');
    const std::string new_content(7000, 'n');
    for (const Step& step : steps) {
        SCOPED_TRACE(step.name);
        put(at("state"), old_content);
        std::uint64_t injected = 0;
        Result<void> r;
        {
            faults::Scope plan({.seed = 5,
                                .ops = 1u << static_cast<unsigned>(step.code),
                                .fail = 0.95,
                                .error = EIO});
            r = run([&]() -> Task<Result<void>> {
                co_return co_await fs::write_file_atomic(at("state"), new_content);
            }());
            injected = faults::counts().fail;
        }
        EXPECT_GT(injected, 0u) << "no fault was injected at this step";
        const std::string now = slurp(at("state"));
        EXPECT_TRUE(now == old_content || now == new_content) << "a mix: " << now.size();
        if (!r) {
            EXPECT_EQ(r.error(), std::errc::io_error) << r.error().message();
            // Before the rename the old content stays; after it, the new content is in place.
            EXPECT_EQ(now, step.code == OpCode::fsync ? new_content : old_content);
        }
        EXPECT_EQ(names_in(dir_), (std::vector<std::string>{"state"})) << "a stray temp file";
    }
    // Interrupted system calls are retried, never seen.
    {
        faults::Scope plan({.seed = 9, .interrupted = 0.5});
        auto r = run([&]() -> Task<Result<void>> {
            co_return co_await fs::write_file_atomic(at("state"), new_content);
        }());
        EXPECT_TRUE(r) << r.error().message();
    }
    EXPECT_EQ(slurp(at("state")), new_content);
}

TEST_P(FsOpsTest, AFileAsAStreamUnderBufWriterAndBufReader) {
    static_assert(io::DuplexStream<fs::FileStream>);
    run([&]() -> Task<void> {
        auto f = co_await fs::open(at("log"), {.read = true, .write = true, .create = true});
        CO_ASSERT(f.has_value());
        fs::FileStream log(std::move(*f));
        {
            io::BufWriter writer(log, 4096);
            for (int i = 0; i < 2000; ++i)
                CO_ASSERT(co_await writer.write("record " + std::to_string(i) + "\n"));
            CO_ASSERT(co_await writer.flush().timeout(5s));
        }
        CO_ASSERT(co_await log.file().fdatasync());
        const std::uint64_t end = log.position();
        auto m = co_await fs::stat(at("log"));
        CO_ASSERT(m.has_value());
        EXPECT_EQ(m->size, end);
        log.seek(0);
        io::BufReader reader(log, 4096);
        for (int i = 0; i < 2000; ++i) {
            auto line = co_await reader.read_line().timeout(5s);
            CO_ASSERT(line.has_value());
            EXPECT_EQ(std::string(*line), "record " + std::to_string(i));
        }
        auto eof = co_await reader.read_line();
        CO_ASSERT(!eof);
        EXPECT_EQ(eof.error(), errc::end_of_stream);

        CO_ASSERT(co_await fs::truncate(log.file(), 10).timeout(5s));
        auto cut = co_await fs::stat(at("log"));
        CO_ASSERT(cut.has_value());
        EXPECT_EQ(cut->size, 10u);
    }());
}

TEST_P(FsOpsTest, BeforeAnyRuntimeExistsAShortLivedSchedulerRunsRecovery) {
    // Recovery at start-up: a Scheduler on the main thread, block_on, gone before the Runtime
    // (or the next scheduler) starts. No raw pread/fsync needed.
    put(at("wal"), "entry-1\nentry-2\n");
    std::string recovered;
    {
        Scheduler recovery(options());
        recovered = recovery.block_on([&]() -> Task<std::string> {
            auto text = co_await fs::read_file(at("wal"), 1 << 20);
            CO_ASSERT(text.has_value());
            CO_ASSERT(co_await fs::write_file_atomic(at("wal.checkpoint"), *text));
            co_return *text;
        }());
    }
    EXPECT_EQ(recovered, "entry-1\nentry-2\n");
    EXPECT_EQ(slurp(at("wal.checkpoint")), recovered);
    // And a Runtime started after it works on the same files.
    Runtime rt({.workers = 1, .scheduler = options()});
    auto size = rt.block_on([&]() -> Task<std::uint64_t> {
        auto m = co_await fs::stat(at("wal.checkpoint"));
        CO_ASSERT(m.has_value());
        co_return m->size;
    }());
    EXPECT_EQ(size, recovered.size());
}

GALAY_INSTANTIATE_BACKENDS(FsOpsTest);
