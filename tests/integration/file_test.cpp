// Files end to end, on every backend: buffered files (io_uring natively; epoll through its thread
// pool and the RWF_NOWAIT fast path) and O_DIRECT files (io_uring; epoll through libaio).
#include "runtime/fd_owners.hpp"        // (which driver holds an fd)
#include "runtime/scheduler_access.hpp" // (the driver's op and pool counts)
#include "support/address_space.hpp"
#include "support/backends.hpp"
#include "support/file_fixture.hpp"
#include "support/files.hpp"
#include "support/patterns.hpp"

#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;
using fs::AlignedBuffer;
using fs::Batch;
using fs::File;
using fs::OpenOptions;
using test::drop_cache;
using test::fill_pattern;
using test::has_pattern;
using test::kCreateRw;
using test::kCreateRwDirect;
using test::open_or_throw;
using test::threads_named;

class FileTest : public test::FileFixture {};

TEST_P(FileTest, WrittenBlocksReadBackIdentical) {
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "data", kCreateRw);
        std::vector<std::byte> out(64 * 1024), in(64 * 1024);
        for (std::uint64_t block = 0; block < 4; ++block) {
            fill_pattern(out, 1, block);
            auto w = co_await f.write_all_at(out, block * out.size());
            CO_ASSERT(w);
            EXPECT_EQ(*w, out.size());
        }
        for (std::uint64_t block = 0; block < 4; ++block) {
            auto r = co_await f.read_exact_at(in, block * in.size());
            CO_ASSERT(r);
            EXPECT_EQ(*r, in.size());
            EXPECT_TRUE(has_pattern(in, 1, block)) << "block " << block;
        }
        auto plain = co_await f.read_at(in, 0);
        CO_ASSERT(plain);
        EXPECT_EQ(*plain, in.size());
        EXPECT_EQ(f.size().value(), 4 * out.size());
    }());
}

TEST_P(FileTest, ReadsPastTheEndAreShortThenEmpty) {
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "short", kCreateRw);
        std::array<char, 1000> data;
        data.fill('x');
        CO_ASSERT(co_await f.write_all_at(data, 0));
        std::vector<char> buf(4096);
        auto r = co_await f.read_at(buf, 0);
        CO_ASSERT(r);
        EXPECT_EQ(*r, 1000u); // short at the end of the file
        r = co_await f.read_at(buf, 1000);
        CO_ASSERT(r);
        EXPECT_EQ(*r, 0u); // at the end
        r = co_await f.read_at(buf, 1 << 20);
        CO_ASSERT(r);
        EXPECT_EQ(*r, 0u); // past it
        auto exact = co_await f.read_exact_at(buf, 0);
        CO_ASSERT(!exact);
        EXPECT_EQ(exact.error(), errc::unexpected_eof) << exact.error().message();
    }());
}

TEST_P(FileTest, ExactAndAllTransfersBeyondOneCallFailBeforeAnyIo) {
    // Linux moves at most 2 GiB - 4 KiB per read/write; read_exact_at/write_all_at of more must
    // fail whole, not return success for the first 2 GiB. The buffer is unreadable address space.
    test::ReservedAddressSpace huge(std::size_t{3} << 30);
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "huge", kCreateRw);
        auto w = co_await f.write_all_at(huge.span(), 0);
        CO_ASSERT(!w);
        EXPECT_EQ(w.error(), errc::transfer_too_large) << w.error().message();
        auto r = co_await f.read_exact_at(huge.span(), 0);
        CO_ASSERT(!r);
        EXPECT_EQ(r.error(), errc::transfer_too_large) << r.error().message();
        EXPECT_EQ(*f.size(), 0u); // nothing was written
        // write_at may move part, as pwrite(2) does, so it is not refused: it reaches the kernel,
        // which cannot read the buffer.
        auto some = co_await f.write_at(huge.span(), 0);
        CO_ASSERT(!some);
        EXPECT_EQ(some.error(), std::errc::bad_address) << some.error().message();
    }());
}

TEST_P(FileTest, UncachedReadReturnsTheWholeBuffer) {
    // Reads of a regular file are short only at its end, also when part of the range is cached
    // and part is not (epoll: RWF_NOWAIT fast path followed by the pool).
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "partial", kCreateRw);
        std::vector<std::byte> out(1 << 20), in(1 << 20);
        fill_pattern(out, 9, 0);
        CO_ASSERT(co_await f.write_all_at(out, 0));
        drop_cache(f);
        std::vector<std::byte> head(4096);
        CO_ASSERT(co_await f.read_exact_at(head, 0)); // the first pages are cached again
        auto r = co_await f.read_at(in, 0);
        CO_ASSERT(r);
        EXPECT_EQ(*r, in.size());
        EXPECT_TRUE(has_pattern(in, 9, 0));
    }());
}

TEST_P(FileTest, FsyncAndFdatasyncSucceed) {
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "sync", kCreateRw);
        std::string s = "durable";
        CO_ASSERT(co_await f.write_all_at(s, 0));
        auto a = co_await f.fsync();
        EXPECT_TRUE(a) << a.error().message();
        auto b = co_await f.fdatasync();
        EXPECT_TRUE(b) << b.error().message();
        File closed;
        auto c = co_await closed.fsync();
        CO_ASSERT(!c);
        EXPECT_EQ(c.error(), std::errc::bad_file_descriptor);
    }());
}

/// Sets an environment variable for the lifetime of the object (the tests run one at a time).
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value)
        : name_(name) {
        ::setenv(name, value, 1);
    }
    ~ScopedEnv() { ::unsetenv(name_); }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
};

TEST_P(FileTest, FsyncAfterWritesNeedsNoPoolAndTheDataReadsBack) {
    // On epoll, fsync and fdatasync go through libaio (IOCB_CMD_FSYNC/FDSYNC) for buffered and
    // O_DIRECT files alike: no pool thread is started for them. The data is written with
    // pwrite(2), so that nothing else could have started one.
    for (const auto& [where, direct] : places()) {
        SCOPED_TRACE(direct ? "O_DIRECT" : "buffered");
        run([&]() -> Task<void> {
            File f = open_or_throw(where / "synced", direct ? kCreateRwDirect : kCreateRw);
            AlignedBuffer data(256 * 1024);
            fill_pattern(data.span(), 12, 0);
            const auto n = static_cast<ssize_t>(data.size());
            CO_ASSERT(::pwrite(f.fd(), data.data(), data.size(), 0) == n);
            const auto jobs = detail::blocking_stats().jobs_started;
            auto a = co_await f.fsync();
            EXPECT_TRUE(a) << a.error().message();
            fill_pattern(data.span(), 12, 1);
            CO_ASSERT(::pwrite(f.fd(), data.data(), data.size(), n) == n);
            auto b = co_await f.fdatasync();
            EXPECT_TRUE(b) << b.error().message();
#if GALAY_TEST_WITH_AIO // (a build without libaio runs every file op on the pool)
            EXPECT_EQ(detail::blocking_stats().jobs_started, jobs)
                << "fsync/fdatasync ran on the blocking pool";
#else
            (void)jobs;
#endif
            EXPECT_EQ(detail::SchedulerAccess::driver(*Scheduler::current()).in_flight(), 0u);

            File back = open_or_throw(where / "synced", {.read = true, .direct = direct});
            AlignedBuffer in(2 * data.size());
            CO_ASSERT(co_await back.read_exact_at(in, 0));
            EXPECT_TRUE(has_pattern(in.span().first(data.size()), 12, 0));
            EXPECT_TRUE(has_pattern(in.span().subspan(data.size()), 12, 1));
        }());
    }
}

TEST_P(FileTest, FsyncThroughAReadOnlyDescriptorWorksAsFsync2Does) {
    // Linux flushes a file through any descriptor of it: fsync(2) on a read-only descriptor
    // succeeds, and a directory (only ever opened read-only) is flushed that way to make a rename
    // durable. The library does what fsync(2) does, on both backends.
    run([&]() -> Task<void> {
        {
            File w = open_or_throw(dir_ / "ro", kCreateRw);
            std::string s = "read-only flush";
            CO_ASSERT(co_await w.write_all_at(s, 0));
        }
        File ro = open_or_throw(dir_ / "ro", {.read = true});
        EXPECT_EQ(::fsync(ro.fd()), 0) << std::strerror(errno);
        auto a = co_await ro.fsync();
        EXPECT_TRUE(a) << a.error().message();
        auto b = co_await ro.fdatasync();
        EXPECT_TRUE(b) << b.error().message();
        File dir(::open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        CO_ASSERT(dir.is_open());
        auto c = co_await dir.fsync();
        EXPECT_TRUE(c) << c.error().message();
    }());
}

TEST_P(FileTest, FsyncOnAClosedOrInvalidDescriptorOrAPipeFailsClearly) {
    run([&]() -> Task<void> {
        File closed;
        auto a = co_await closed.fsync();
        CO_ASSERT(!a);
        EXPECT_EQ(a.error(), std::errc::bad_file_descriptor) << a.error().message();

        // A descriptor number that is not open: the kernel refuses the request (epoll: io_submit
        // refuses the iocb; io_uring: the CQE), and the error says so.
        File invalid(1 << 24);
        for (auto sync : {&File::fsync, &File::fdatasync}) {
            auto r = co_await (invalid.*sync)();
            CO_ASSERT(!r);
            EXPECT_EQ(r.error(), std::errc::bad_file_descriptor) << r.error().message();
            const std::string msg = fs::describe_error("descriptor 16777216", r.error());
            EXPECT_EQ(msg, "descriptor 16777216: Bad file descriptor");
        }
        (void)invalid.release(); // not ours to close

        // A pipe has no fsync: EINVAL, as from fsync(2) (epoll: io_submit refuses the iocb with
        // EINVAL, the pool's fsync(2) says it again).
        int p[2];
        CO_ASSERT(::pipe2(p, O_CLOEXEC) == 0);
        File rd(p[0]), wr(p[1]);
        auto c = co_await rd.fsync();
        CO_ASSERT(!c);
        EXPECT_EQ(c.error(), std::errc::invalid_argument) << c.error().message();
        auto d = co_await wr.fdatasync();
        CO_ASSERT(!d);
        EXPECT_EQ(d.error(), std::errc::invalid_argument) << d.error().message();

        // None of that disturbs the flush of a regular file.
        File f = open_or_throw(dir_ / "after-errors", kCreateRw);
        std::string s = "still fine";
        CO_ASSERT(co_await f.write_all_at(s, 0));
        auto e = co_await f.fsync();
        EXPECT_TRUE(e) << e.error().message();
        EXPECT_EQ(detail::SchedulerAccess::driver(*Scheduler::current()).in_flight(), 0u);
    }());
}

TEST_P(FileTest, ManyConcurrentFsyncsAllComplete) {
    // More flushes at once than the epoll engine has AIO slots (256): the rest wait their turn.
    constexpr std::size_t kFiles = 4, kTasks = 400, kBlock = 4096;
    for (const auto& [where, direct] : places()) {
        SCOPED_TRACE(direct ? "O_DIRECT" : "buffered");
        run([&]() -> Task<void> {
            std::vector<File> files;
            for (std::size_t i = 0; i < kFiles; ++i)
                files.push_back(open_or_throw(where / ("many-sync-" + std::to_string(i)),
                                              direct ? kCreateRwDirect : kCreateRw));
            auto task = [&](std::size_t i) -> Task<bool> {
                const File& f = files[i % kFiles];
                AlignedBuffer buf(kBlock);
                fill_pattern(buf.span(), 13, i);
                auto w = co_await f.write_all_at(buf, (i / kFiles) * kBlock);
                auto s = i % 2 == 0 ? co_await f.fsync() : co_await f.fdatasync();
                if (!s) ADD_FAILURE() << "flush " << i << ": " << s.error().message();
                co_return w&& s;
            };
            std::vector<Task<bool>> tasks;
            for (std::size_t i = 0; i < kTasks; ++i)
                tasks.push_back(task(i));
            auto ok = co_await when_all(std::move(tasks));
            EXPECT_EQ(std::count(ok.begin(), ok.end(), true), static_cast<long>(kTasks));
            EXPECT_EQ(detail::SchedulerAccess::driver(*Scheduler::current()).in_flight(), 0u);
            AlignedBuffer in(kBlock);
            for (std::size_t i = 0; i < kTasks; ++i) {
                CO_ASSERT(co_await files[i % kFiles].read_exact_at(in, (i / kFiles) * kBlock));
                EXPECT_TRUE(has_pattern(in.span(), 13, i)) << i;
            }
        }());
    }
}

TEST_P(FileTest, KernelWithoutAioFsyncFallsBackToThePoolSilently) {
    // GALAY_TEST_AIO_FSYNC_REFUSED makes the epoll engine send fsync iocbs with a field the kernel
    // rejects, so io_submit refuses them with EINVAL, as kernels before 4.18 refuse every AIO
    // fsync. The flushes must still succeed (through the pool), with no error visible; io_uring
    // is not affected.
    ScopedEnv refuse("GALAY_TEST_AIO_FSYNC_REFUSED", "1");
    for (const auto& [where, direct] : places()) {
        SCOPED_TRACE(direct ? "O_DIRECT" : "buffered");
        run([&]() -> Task<void> {
            File f = open_or_throw(where / "refused-sync", direct ? kCreateRwDirect : kCreateRw);
            AlignedBuffer data(64 * 1024);
            fill_pattern(data.span(), 14, 0);
            CO_ASSERT(::pwrite(f.fd(), data.data(), data.size(), 0) ==
                      static_cast<ssize_t>(data.size()));
            const auto jobs = detail::blocking_stats().jobs_started;
            auto a = co_await f.fsync();
            EXPECT_TRUE(a) << a.error().message();
            if (Scheduler::current()->backend() == Backend::epoll) {
                EXPECT_GE(detail::blocking_stats().jobs_started, jobs + 1)
                    << "the refused fsync did not reach the pool";
            } else {
                EXPECT_EQ(detail::blocking_stats().jobs_started, jobs);
            }
            auto b = co_await f.fdatasync();
            EXPECT_TRUE(b) << b.error().message();
            // In a batch, after writes (one io_submit on epoll for the O_DIRECT writes).
            std::vector<AlignedBuffer> bufs;
            Batch batch;
            for (std::size_t i = 0; i < 4; ++i) {
                bufs.emplace_back(4096);
                fill_pattern(bufs.back().span(), 14, i + 1);
                batch.write_all_at(f, bufs.back(), data.size() + i * 4096);
            }
            batch.fsync(f);
            batch.fdatasync(f);
            auto done = co_await batch.submit();
            EXPECT_TRUE(done) << done.error().message();
            EXPECT_EQ(detail::SchedulerAccess::driver(*Scheduler::current()).in_flight(), 0u);
            AlignedBuffer in(data.size() + 4 * 4096);
            CO_ASSERT(co_await f.read_exact_at(in, 0));
            EXPECT_TRUE(has_pattern(in.span().first(data.size()), 14, 0));
            for (std::size_t i = 0; i < 4; ++i)
                EXPECT_TRUE(has_pattern(in.span().subspan(data.size() + i * 4096, 4096), 14, i + 1))
                    << i;
        }());
    }
}

TEST_P(FileTest, CancelledOrTimedOutFsyncHasFinishedWhenTheTaskResumes) {
    // An fsync the kernel holds cannot be stopped (io_cancel has nothing to cancel for AIO fsync;
    // io_uring does not interrupt one either): the task resumes once it has finished, with its
    // real result, or with ECANCELED/ETIMEDOUT if it was still queued.
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "sync-cancel", kCreateRw);
        AlignedBuffer data(4 << 20); // dirty pages: the flush has work to do
        fill_pattern(data.span(), 15, 0);
        CO_ASSERT(::pwrite(f.fd(), data.data(), data.size(), 0) ==
                  static_cast<ssize_t>(data.size()));
        auto flush = [&]() -> Task<Result<void>> { co_return co_await f.fsync(); };
        auto at_once = []() -> Task<int> { co_return 1; };
        auto r = co_await when_any(flush(), at_once());
        if (r.index() == 0) {
            auto v = std::get<0>(r);
            EXPECT_TRUE(v) << v.error().message();
        }
        EXPECT_EQ(detail::SchedulerAccess::driver(*Scheduler::current()).in_flight(), 0u);

        CO_ASSERT(::pwrite(f.fd(), data.data(), data.size(), 0) ==
                  static_cast<ssize_t>(data.size()));
        auto t = co_await f.fdatasync().timeout(1ns);
        if (!t) {
            EXPECT_EQ(t.error(), std::errc::timed_out) << t.error().message();
        }
        EXPECT_EQ(detail::SchedulerAccess::driver(*Scheduler::current()).in_flight(), 0u);
        AlignedBuffer in(data.size());
        CO_ASSERT(co_await f.read_exact_at(in, 0));
        EXPECT_TRUE(has_pattern(in.span(), 15, 0));
    }());
}

TEST_P(FileTest, SchedulerShutdownWaitsForInFlightFsyncs) {
    // Detached tasks still flushing when block_on returns: shutdown cannot cancel their fsyncs
    // and must wait for them before it destroys their frames (the IoOps live there).
    std::filesystem::path ddir = direct_dir();
    std::vector<std::filesystem::path> where{dir_.path()};
    if (!ddir.empty()) where.push_back(ddir);
    for (const auto& w : where) {
        const bool direct = w != dir_.path();
        SCOPED_TRACE(direct ? "O_DIRECT" : "buffered");
        std::size_t in_flight_at_exit = 0;
        {
            Scheduler s(options());
            s.block_on([&]() -> Task<void> {
                for (int i = 0; i < 4; ++i) {
                    const auto p = w / ("shutdown-sync-" + std::to_string(i));
                    File f = open_or_throw(p, direct ? kCreateRwDirect : kCreateRw);
                    AlignedBuffer data(2 << 20);
                    fill_pattern(data.span(), 16, i);
                    CO_ASSERT(::pwrite(f.fd(), data.data(), data.size(), 0) ==
                              static_cast<ssize_t>(data.size()));
                    spawn([](std::filesystem::path p, bool direct) -> Task<void> {
                        File f = open_or_throw(p, {.read = true, .write = true, .direct = direct});
                        (void)co_await f.fsync();
                        (void)co_await f.fdatasync();
                    }(p, direct));
                }
                co_await yield_now(); // let them submit their flushes
                in_flight_at_exit =
                    detail::SchedulerAccess::driver(*Scheduler::current()).in_flight();
            }());
        } // ~Scheduler: shutdown with flushes in flight
        std::printf("flushes in flight at shutdown: %zu\n", in_flight_at_exit);
        for (int i = 0; i < 4; ++i) { // the files are intact
            File f = open_or_throw(w / ("shutdown-sync-" + std::to_string(i)), {.read = true});
            AlignedBuffer in(2 << 20);
            ASSERT_EQ(::pread(f.fd(), in.data(), in.size(), 0), static_cast<ssize_t>(in.size()));
            EXPECT_TRUE(has_pattern(in.span(), 16, i)) << i;
        }
    }
}

TEST_P(FileTest, FallocateGrowsTheFileAndKeepSizeDoesNot) {
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "alloc", kCreateRw);
        auto a = co_await f.fallocate(0, 0, 1 << 20);
        if (!a && a.error() == std::errc::operation_not_supported) {
            ADD_FAILURE() << "fallocate unsupported in " << dir_.path();
            co_return;
        }
        CO_ASSERT(a);
        EXPECT_EQ(f.size().value(), 1u << 20);
        if (!GALAY_LINUX_CALLS) { // posix_fallocate: no modes
            auto keep = co_await f.fallocate(FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20);
            CO_ASSERT(!keep);
            EXPECT_EQ(keep.error(), make_error_code(errc::not_supported));
            co_return;
        }
        CO_ASSERT(co_await f.fallocate(FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20));
        EXPECT_EQ(f.size().value(), 1u << 20);
    }());
}

TEST_P(FileTest, TruncateShrinksAndGrows) {
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "trunc", kCreateRw);
        std::vector<char> data(10000, 'a');
        CO_ASSERT(co_await f.write_all_at(data, 0));
        CO_ASSERT(f.truncate(100));
        EXPECT_EQ(f.size().value(), 100u);
        auto r = co_await f.read_at(data, 0);
        CO_ASSERT(r);
        EXPECT_EQ(*r, 100u);
        CO_ASSERT(f.truncate(5000));
        EXPECT_EQ(f.size().value(), 5000u);
        r = co_await f.read_exact_at(std::span(data).first(5000), 0);
        CO_ASSERT(r);
        EXPECT_EQ(data[99], 'a');
        EXPECT_EQ(data[100], '\0'); // the grown part reads as zeros
    }());
}

TEST_P(FileTest, VectoredWriteAndReadUseEveryBuffer) {
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "vec", kCreateRw);
        std::string a = "hello ", b = "vectored ", c = "world";
        std::array<iovec, 3> out{iovec{a.data(), a.size()}, iovec{b.data(), b.size()},
                                 iovec{c.data(), c.size()}};
        auto w = co_await f.writev_at(out, 10);
        CO_ASSERT(w);
        EXPECT_EQ(*w, a.size() + b.size() + c.size());
        std::array<char, 6> x{};
        std::array<char, 14> y{};
        std::array<iovec, 2> in{iovec{x.data(), x.size()}, iovec{y.data(), y.size()}};
        auto r = co_await f.readv_at(in, 10);
        CO_ASSERT(r);
        EXPECT_EQ(*r, 20u);
        EXPECT_EQ(std::string(x.data(), 6) + std::string(y.data(), 14), "hello vectored world");
    }());
}

TEST_P(FileTest, ThousandConcurrentWritesThenReads) {
    constexpr std::size_t kOps = 1000, kSize = 512;
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "many", kCreateRw);
        auto writer = [&](std::size_t i) -> Task<bool> {
            std::vector<std::byte> buf(kSize);
            fill_pattern(buf, 3, i);
            auto w = co_await f.write_all_at(buf, i * kSize);
            co_return w&&* w == kSize;
        };
        auto reader = [&](std::size_t i) -> Task<bool> {
            std::vector<std::byte> buf(kSize);
            auto r = co_await f.read_exact_at(buf, i * kSize);
            co_return r&& has_pattern(buf, 3, i);
        };
        std::vector<Task<bool>> ws, rs;
        for (std::size_t i = 0; i < kOps; ++i)
            ws.push_back(writer(i));
        auto wrote = co_await when_all(std::move(ws));
        EXPECT_EQ(std::count(wrote.begin(), wrote.end(), true), static_cast<long>(kOps));
        drop_cache(f); // the reads go to the device (epoll: through the pool)
        for (std::size_t i = 0; i < kOps; ++i)
            rs.push_back(reader(i));
        auto read = co_await when_all(std::move(rs));
        EXPECT_EQ(std::count(read.begin(), read.end(), true), static_cast<long>(kOps));
        EXPECT_EQ(detail::SchedulerAccess::driver(*Scheduler::current()).in_flight(), 0u);
    }());
}

TEST_P(FileTest, ThousandConcurrentDirectOpsExceedTheAioDepth) {
    REQUIRE_DIRECT_DIR(ddir);
    constexpr std::size_t kOps = 1000;
    run([&]() -> Task<void> {
        File f = open_or_throw(ddir / "many-direct", kCreateRwDirect);
        const std::size_t bs = f.logical_block_size();
        CO_ASSERT(co_await f.fallocate(0, 0, kOps * bs));
        auto writer = [&](std::size_t i) -> Task<bool> {
            AlignedBuffer buf = f.make_buffer(bs);
            fill_pattern(buf.span(), 4, i);
            auto w = co_await f.write_all_at(buf, i * bs);
            co_return w&&* w == bs;
        };
        auto reader = [&](std::size_t i) -> Task<bool> {
            AlignedBuffer buf = f.make_buffer(bs);
            auto r = co_await f.read_exact_at(buf, i * bs);
            co_return r&& has_pattern(buf.span(), 4, i);
        };
        std::vector<Task<bool>> ws, rs;
        for (std::size_t i = 0; i < kOps; ++i)
            ws.push_back(writer(i));
        auto wrote = co_await when_all(std::move(ws));
        EXPECT_EQ(std::count(wrote.begin(), wrote.end(), true), static_cast<long>(kOps));
        for (std::size_t i = 0; i < kOps; ++i)
            rs.push_back(reader(i));
        auto read = co_await when_all(std::move(rs));
        EXPECT_EQ(std::count(read.begin(), read.end(), true), static_cast<long>(kOps));
    }());
}

TEST_P(FileTest, DirectAppendsWithoutPreallocationAreCompleteAndInOrder) {
    // Writes past the end of an O_DIRECT file: ext4/xfs cannot start them without blocking, so
    // on epoll they come back EAGAIN from libaio (RWF_NOWAIT) and are redone on the pool.
    REQUIRE_DIRECT_DIR(ddir);
    constexpr std::size_t kBlocks = 64;
    run([&]() -> Task<void> {
        const auto jobs = detail::blocking_stats().jobs_started;
        File f = open_or_throw(ddir / "append", kCreateRwDirect);
        const std::size_t bs = 4096;
        auto writer = [&](std::size_t i) -> Task<bool> {
            AlignedBuffer buf(bs);
            fill_pattern(buf.span(), 11, i);
            auto w = co_await f.write_all_at(buf, i * bs);
            co_return w&&* w == bs;
        };
        std::vector<Task<bool>> ws;
        for (std::size_t i = 0; i < kBlocks; ++i)
            ws.push_back(writer(i));
        auto ok = co_await when_all(std::move(ws));
        EXPECT_EQ(std::count(ok.begin(), ok.end(), true), static_cast<long>(kBlocks));
        EXPECT_EQ(f.size().value(), kBlocks * bs);
        AlignedBuffer back(kBlocks * bs);
        CO_ASSERT(co_await f.read_exact_at(back, 0));
        for (std::size_t i = 0; i < kBlocks; ++i)
            EXPECT_TRUE(has_pattern(back.span().subspan(i * bs, bs), 11, i)) << i;
        if (Scheduler::current()->backend() == Backend::epoll) {
            EXPECT_GE(detail::blocking_stats().jobs_started, jobs + 1)
                << "appends did not reach the pool";
        }
    }());
}

TEST_P(FileTest, MisalignedDirectRequestsFailBeforeReachingTheKernel) {
    REQUIRE_DIRECT_DIR(ddir);
    run([&]() -> Task<void> {
        File f = open_or_throw(ddir / "align", kCreateRwDirect);
        CO_ASSERT(f.is_direct());
        const std::size_t bs = f.logical_block_size();
        EXPECT_GE(bs, 512u);
        EXPECT_TRUE(std::has_single_bit(bs)) << bs;
        AlignedBuffer buf = f.make_buffer(4 * bs);
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buf.data()) % bs, 0u);
        fill_pattern(buf.span(), 5, 0);
        auto ok = co_await f.write_all_at(buf, 0); // aligned: works
        CO_ASSERT(ok);
        EXPECT_EQ(*ok, buf.size());

        auto bad_addr = co_await f.read_at(buf.span().subspan(1, bs), 0);
        auto bad_off = co_await f.read_at(buf.span().first(bs), 100);
        auto bad_len = co_await f.read_at(buf.span().first(bs - 1), 0);
        auto bad_write = co_await f.write_at(buf.span().subspan(8, bs), 0);
        iovec odd{buf.data() + 3, bs};
        auto bad_vec = co_await f.readv_at(std::span(&odd, 1), 0);
        for (const auto* r : {&bad_addr, &bad_off, &bad_len, &bad_write, &bad_vec}) {
            CO_ASSERT(!*r);
            EXPECT_EQ(r->error(), errc::misaligned_direct_io) << r->error().message();
        }
        // Nothing reached the kernel; the file still reads back.
        AlignedBuffer in = f.make_buffer(4 * bs);
        auto r = co_await f.read_exact_at(in, 0);
        CO_ASSERT(r);
        EXPECT_TRUE(has_pattern(in.span(), 5, 0));
    }());
}

TEST_P(FileTest, DirectReadAtTheEndOfAnUnalignedFileIsShort) {
    REQUIRE_DIRECT_DIR(ddir);
    run([&]() -> Task<void> {
        {
            File b = open_or_throw(ddir / "tail", kCreateRw);
            std::string s(1000, 't');
            CO_ASSERT(co_await b.write_all_at(s, 0));
        }
        File f = open_or_throw(ddir / "tail", {.read = true, .direct = true});
        AlignedBuffer buf = f.make_buffer(4096);
        auto r = co_await f.read_at(buf, 0);
        CO_ASSERT(r);
        EXPECT_EQ(*r, 1000u);
        auto exact = co_await f.read_exact_at(buf, 0);
        CO_ASSERT(!exact);
        EXPECT_EQ(exact.error(), errc::unexpected_eof);
    }());
}

TEST_P(FileTest, RequestsTheKernelRefusesFailAloneAndLeaveNoTimerBehind) {
    // A read on a write-only O_DIRECT file: io_submit (or io_uring) refuses it with EBADF. It must
    // complete through the normal path, with its deadline disarmed (a deadline left armed would
    // fire into a finished frame: ASan catches that in the sleep below).
    REQUIRE_DIRECT_DIR(ddir);
    run([&]() -> Task<void> {
        File rw = open_or_throw(ddir / "refused", kCreateRwDirect);
        AlignedBuffer buf = rw.make_buffer(4096);
        CO_ASSERT(co_await rw.write_all_at(buf, 0));
        File wo = open_or_throw(ddir / "refused", {.read = false, .write = true, .direct = true});
        auto r = co_await wo.read_at(buf, 0).timeout(5ms);
        CO_ASSERT(!r);
        EXPECT_EQ(r.error(), std::errc::bad_file_descriptor) << r.error().message();
        Batch batch;
        batch.read_exact_at(rw, buf, 0);
        batch.read_at(wo, buf, 0);
        auto done = co_await batch.submit().timeout(5ms);
        CO_ASSERT(!done);
        EXPECT_TRUE(batch.result(0));
        EXPECT_EQ(batch.result(1).error(), std::errc::bad_file_descriptor);
        CO_ASSERT(co_await sleep(20ms)); // past both deadlines
        EXPECT_EQ(detail::SchedulerAccess::driver(*Scheduler::current()).in_flight(), 0u);
    }());
}

TEST_P(FileTest, CancellingAnInFlightReadLeavesTheFileUsable) {
    // Cancel (1) before the driver has submitted the read and (2) after one loop turn, when the
    // kernel (or a pool thread) holds it: either way the read has finished before when_any
    // returns, and the file still reads back.
    for (const auto& [where, direct] : places()) {
        for (int turns : {0, 2}) {
            SCOPED_TRACE(std::string(direct ? "O_DIRECT" : "buffered") + ", loop turns " +
                         std::to_string(turns));
            run([&]() -> Task<void> {
                File f = open_or_throw(where / "cancel", direct ? kCreateRwDirect : kCreateRw);
                AlignedBuffer data(4 << 20);
                fill_pattern(data.span(), 8, 0);
                CO_ASSERT(co_await f.write_all_at(data, 0));
                drop_cache(f);
                AlignedBuffer buf(4 << 20);
                auto reader = [&]() -> Task<Result<std::size_t>> {
                    co_return co_await f.read_at(buf, 0);
                };
                auto other = [&]() -> Task<int> {
                    for (int i = 0; i < turns; ++i)
                        co_await yield_now();
                    co_return 1;
                };
                auto r = co_await when_any(reader(), other());
                if (r.index() == 0) { // the read won the race
                    auto n = std::get<0>(r);
                    EXPECT_TRUE(n) << n.error().message();
                }
                EXPECT_EQ(detail::SchedulerAccess::driver(*Scheduler::current()).in_flight(), 0u);
                AlignedBuffer again(4 << 20);
                auto n = co_await f.read_exact_at(again, 0);
                CO_ASSERT(n);
                EXPECT_TRUE(has_pattern(again.span(), 8, 0));
            }());
        }
    }
}

TEST_P(FileTest, TimedOutReadIsFinishedOrTimedOut) {
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "timeout", kCreateRw);
        std::vector<std::byte> data(1 << 20);
        CO_ASSERT(co_await f.write_all_at(data, 0));
        drop_cache(f);
        auto r = co_await f.read_at(data, 0).timeout(1ns);
        if (!r) {
            EXPECT_EQ(r.error(), std::errc::timed_out) << r.error().message();
        }
        EXPECT_EQ(detail::SchedulerAccess::driver(*Scheduler::current()).in_flight(), 0u);
    }());
}

TEST_P(FileTest, SchedulerShutdownWaitsForPendingFileOps) {
    // Detached tasks still reading when block_on returns: the scheduler's shutdown must wait for
    // the kernel (and the pool) before destroying their frames, which own the buffers.
    std::filesystem::path ddir = direct_dir();
    std::vector<std::filesystem::path> where{dir_.path()};
    if (!ddir.empty()) where.push_back(ddir);
    for (const auto& w : where) {
        const bool direct = w != dir_.path();
        {
            Scheduler s(options());
            s.block_on([&]() -> Task<void> {
                File f = open_or_throw(w / "shutdown", direct ? kCreateRwDirect : kCreateRw);
                AlignedBuffer data(1 << 20);
                CO_ASSERT(co_await f.write_all_at(data, 0));
                drop_cache(f);
                for (int i = 0; i < 4; ++i)
                    spawn([](std::filesystem::path p, bool direct) -> Task<void> {
                        File f = open_or_throw(p, {.read = true, .direct = direct});
                        AlignedBuffer buf(1 << 20);
                        (void)co_await f.read_at(buf, 0);
                    }(w / "shutdown", direct));
                co_await yield_now(); // let them start their reads
                co_await yield_now();
            }());
        } // ~Scheduler: shutdown with reads in flight
        SUCCEED();
    }
}

TEST_P(FileTest, BufferedFilesOnEpollUseTheBlockingPool) {
    run([&]() -> Task<void> {
        const auto jobs = detail::blocking_stats().jobs_started;
        File f = open_or_throw(dir_ / "pool", kCreateRw);
        std::vector<std::byte> data(256 * 1024);
        fill_pattern(data, 10, 0);
        // Many writes at once: on epoll they queue on the pool and complete back on this thread.
        std::vector<Task<bool>> ws;
        for (std::size_t i = 0; i < 64; ++i)
            ws.push_back(
                [](const File& f, std::span<const std::byte> d, std::size_t i) -> Task<bool> {
                    auto w = co_await f.write_all_at(d, i * d.size());
                    co_return w&&* w == d.size();
                }(f, data, i));
        auto ok = co_await when_all(std::move(ws));
        EXPECT_EQ(std::count(ok.begin(), ok.end(), true), 64);
        CO_ASSERT(co_await f.fsync());
        if (Scheduler::current()->backend() == Backend::epoll) {
            // The process-wide pool (the one spawn_blocking uses), within its bound.
            EXPECT_GE(detail::blocking_stats().jobs_started, jobs + 64);
            EXPECT_GE(threads_named("galay-blocking"), 1);
            EXPECT_LE(threads_named("galay-blocking"), static_cast<int>(blocking_threads()));
        } else {
            EXPECT_EQ(detail::blocking_stats().jobs_started, jobs); // io_uring does it itself
        }
        std::vector<std::byte> back(data.size());
        CO_ASSERT(co_await f.read_exact_at(back, 63 * data.size()));
        EXPECT_TRUE(has_pattern(back, 10, 0));
    }());
}

TEST_P(FileTest, OnIoUringAFileTakesARegisteredSlotOnlyOnItsSecondTransfer) {
    // A registered slot costs two slot updates and, at close, a system call to make the kernel
    // let go of it: worth it for a file used many times, not for one read per open (a static
    // file per HTTP request). A registered fd is claimed in FdOwners by the ring that holds it.
    { std::ofstream(dir_ / "page") << "0123456789abcdef"; }
    run([&]() -> Task<void> {
        const bool uring = Scheduler::current()->backend() == Backend::io_uring;
        detail::Driver* me = &detail::SchedulerAccess::driver(*Scheduler::current());
        for (int round = 0; round < 2; ++round) { // (the second: the same fd number, reused)
            File f = open_or_throw(dir_ / "page", OpenOptions{.read = true});
            std::array<char, 16> buf{};
            auto once = co_await f.read_at(buf, 0);
            CO_ASSERT(once && *once == 16);
            EXPECT_EQ(std::string_view(buf.data(), 16), "0123456789abcdef");
            EXPECT_EQ(detail::FdOwners::owner(f.fd()), nullptr) << "registered on its first read";
            auto twice = co_await f.read_at(std::span(buf).first(6), 10);
            CO_ASSERT(twice && *twice == 6);
            EXPECT_EQ(std::string_view(buf.data(), 6), "abcdef");
            if (uring) { // (a kernel without a sparse file table, < 5.19, registers nothing)
                EXPECT_EQ(detail::FdOwners::owner(f.fd()), me) << "not registered when reused";
            }
            const int fd = f.fd();
            CO_ASSERT(co_await f.close());
            EXPECT_EQ(detail::FdOwners::owner(fd), nullptr);
        }
    }());
}

TEST_P(FileTest, OpenErrorsNameThePath) {
    auto missing = File::open(dir_ / "no-such-dir" / "file", kCreateRw);
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error(), std::errc::no_such_file_or_directory);
    const std::string msg = fs::describe_error(dir_ / "no-such-dir" / "file", missing.error());
    EXPECT_NE(msg.find("no-such-dir/file"), std::string::npos) << msg;
    EXPECT_EQ(File::open(dir_ / "x", {.read = true, .truncate = true}).error(),
              std::errc::invalid_argument);
    const std::string direct = fs::describe_error("/dev/shm/x", errc::direct_io_unsupported);
    EXPECT_NE(direct.find("/var/tmp"), std::string::npos) << direct;
}

TEST_P(FileTest, CloseThenOperationsFailWithBadFd) {
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "close", kCreateRw);
        auto c = co_await f.close();
        EXPECT_TRUE(c) << c.error().message();
        EXPECT_FALSE(f.is_open());
        std::array<char, 10> buf;
        auto r = co_await f.read_at(buf, 0);
        CO_ASSERT(!r);
        EXPECT_EQ(r.error(), std::errc::bad_file_descriptor);
    }());
}

TEST_P(FileTest, AFileAdoptedAsBufferedReadsItsBytesAndClosesItsDescriptor) {
    {
        std::ofstream out(dir_ / "adopted", std::ios::binary);
        out << "adopted by the caller, read by galay";
    }
    run([&]() -> Task<void> {
        const int fd = ::open((dir_ / "adopted").c_str(), O_RDONLY | O_CLOEXEC);
        CO_ASSERT(fd >= 0);
        {
            File f(fd, File::Buffered{});
            EXPECT_TRUE(f.is_open());
            EXPECT_EQ(f.fd(), fd);
            std::array<char, 64> buf{};
            for (int i = 0; i < 3; ++i) { // (io_uring registers the fd on its second transfer)
                auto r = co_await f.read_at(buf, 8);
                CO_ASSERT(r);
                EXPECT_EQ(std::string_view(buf.data(), *r), "by the caller, read by galay");
            }
        }
        errno = 0;
        EXPECT_EQ(::fcntl(fd, F_GETFD), -1); // the File closed it
        EXPECT_EQ(errno, EBADF);
    }());
}

GALAY_INSTANTIATE_BACKENDS(FileTest);
