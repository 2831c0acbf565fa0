// fs::Batch on every backend: many file operations submitted at once (one io_submit on epoll for
// O_DIRECT files), each with its own result, and cancellation or a deadline of the whole batch.
#include "runtime/scheduler_access.hpp" // (the driver's op and pool counts)
#include "support/backends.hpp"
#include "support/file_fixture.hpp"
#include "support/files.hpp"
#include "support/patterns.hpp"

#include <cstring>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;
using fs::AlignedBuffer;
using fs::Batch;
using fs::File;
using namespace galay::test;

class BatchTest : public test::FileFixture {};

TEST_P(BatchTest, BatchSubmitsEveryOpAndReportsEachResult) {
    for (const auto& [where, direct] : places()) {
        SCOPED_TRACE(direct ? "O_DIRECT" : "buffered");
        run([&]() -> Task<void> {
            File f = open_or_throw(where / "batch", direct ? kCreateRwDirect : kCreateRw);
            constexpr std::size_t kOps = 8, kSize = 4096;
            std::vector<AlignedBuffer> bufs;
            for (std::size_t i = 0; i < kOps; ++i)
                bufs.emplace_back(kSize);
            Batch batch(kOps + 1);
            for (std::size_t i = 0; i < kOps; ++i) {
                fill_pattern(bufs[i].span(), 6, i);
                EXPECT_EQ(batch.write_all_at(f, bufs[i], i * kSize), i);
            }
            batch.fdatasync(f);
            auto done = co_await batch.submit();
            EXPECT_TRUE(done) << done.error().message();
            for (std::size_t i = 0; i < kOps; ++i)
                EXPECT_EQ(batch.result(i).value_or(0), kSize);

            batch.clear(); // reused: the same batch reads everything back
            for (auto& b : bufs)
                std::memset(b.data(), 0, b.size());
            for (std::size_t i = 0; i < kOps; ++i)
                batch.read_exact_at(f, bufs[i], (kOps - 1 - i) * kSize); // reverse order
            done = co_await batch.submit().timeout(10s);
            EXPECT_TRUE(done) << done.error().message();
            for (std::size_t i = 0; i < kOps; ++i)
                EXPECT_TRUE(has_pattern(bufs[i].span(), 6, kOps - 1 - i)) << i;

            // One bad op fails alone; its neighbours still run.
            batch.clear();
            batch.read_exact_at(f, bufs[0], 0);
            batch.read_exact_at(f, bufs[1], 100 * kSize); // past the end
            if (direct) batch.read_at(f, bufs[2].span().subspan(1, 512), 0);
            done = co_await batch.submit();
            CO_ASSERT(!done);
            EXPECT_EQ(done.error(), errc::unexpected_eof);
            EXPECT_TRUE(batch.result(0));
            EXPECT_EQ(batch.result(1).error(), errc::unexpected_eof);
            if (direct) {
                EXPECT_EQ(batch.result(2).error(), errc::misaligned_direct_io);
            }

            Batch empty;
            EXPECT_TRUE(co_await empty.submit());
        }());
    }
}

namespace {

/// 16 reads of 64 KiB over a 1 MiB file of pattern `seed`, out of the page cache (so that they
/// reach the kernel or the pool and stay pending for a while).
Task<void> queue_cold_reads(File& f, std::uint64_t seed, std::vector<std::vector<std::byte>>& bufs,
                            Batch& batch) {
    std::vector<std::byte> data(1 << 20);
    fill_pattern(data, seed, 0);
    CO_ASSERT(co_await f.write_all_at(data, 0));
    drop_cache(f);
    bufs.assign(16, std::vector<std::byte>(64 * 1024));
    for (std::size_t i = 0; i < bufs.size(); ++i)
        batch.read_at(f, bufs[i], i * bufs[i].size());
}

/// After an interrupted batch: no op in flight, every op that failed failed with `why`, and the
/// file reads back whole.
Task<void> expect_every_op_finished(File& f, std::uint64_t seed, const Batch& batch,
                                    std::errc why) {
    EXPECT_EQ(detail::SchedulerAccess::driver(*Scheduler::current()).in_flight(), 0u);
    for (std::size_t i = 0; i < batch.size(); ++i) {
        auto one = batch.result(i);
        if (!one) {
            EXPECT_EQ(one.error(), why);
        }
    }
    std::vector<std::byte> again(1 << 20);
    CO_ASSERT(co_await f.read_exact_at(again, 0));
    EXPECT_TRUE(has_pattern(again, seed, 0));
}

} // namespace

TEST_P(BatchTest, CancelledBatchFinishesEveryOpBeforeResuming) {
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "batch-cancel", kCreateRw);
        std::vector<std::vector<std::byte>> bufs;
        Batch batch;
        co_await queue_cold_reads(f, 7, bufs, batch);
        auto batch_task = [&]() -> Task<Result<void>> { co_return co_await batch.submit(); };
        auto at_once = []() -> Task<int> { co_return 1; };
        auto r = co_await when_any(batch_task(), at_once());
        (void)r; // either may win; every op has finished now
        co_await expect_every_op_finished(f, 7, batch, std::errc::operation_canceled);
    }());
}

TEST_P(BatchTest, TimedOutBatchFinishesEveryOpAndReportsTimedOut) {
    // The deadline has passed when the batch is submitted: it fires at the loop's next turn and
    // cancels every op still pending, each with its own deadline as any awaitable's op. What the
    // kernel finished first keeps its result; the others fail with timed_out, never with
    // operation_canceled, and all have finished when the batch resumes.
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "batch-timeout", kCreateRw);
        std::vector<std::vector<std::byte>> bufs;
        Batch batch;
        co_await queue_cold_reads(f, 9, bufs, batch);
        auto done = co_await batch.submit().deadline(std::chrono::steady_clock::now() - 1ms);
        if (!done) {
            EXPECT_EQ(done.error(), std::errc::timed_out);
        }
        co_await expect_every_op_finished(f, 9, batch, std::errc::timed_out);
    }());
}

GALAY_INSTANTIATE_BACKENDS(BatchTest);
