// fs::FixedBuffer on every backend: on io_uring a registered buffer (READ_FIXED / WRITE_FIXED), on
// epoll an ordinary buffer with exactly the plain operations. Buffered and O_DIRECT files, whole
// buffers and slices, many buffers, buffers that outlive their scheduler or move between threads,
// and a buffer re-created at the address of a destroyed one.
#include "runtime/scheduler_access.hpp" // (the driver's op and pool counts)
#include "support/backends.hpp"
#include "support/file_fixture.hpp"
#include "support/files.hpp"
#include "support/patterns.hpp"

#include <malloc.h>
#include <sys/mman.h>

#include <cstring>
#include <optional>
#include <thread>
#include <vector>

using namespace galay;
using fs::AlignedBuffer;
using fs::Batch;
using fs::File;
using fs::FixedBuffer;
using fs::OpenOptions;
using test::fill_pattern;
using test::has_pattern;
using test::kCreateRw;
using test::kCreateRwDirect;
using test::open_or_throw;

namespace {

bool on_uring() {
    return Scheduler::current()->backend() == Backend::io_uring;
}

/// Registered on io_uring; on epoll an ordinary buffer that says why not.
void expect_registration(const FixedBuffer& b) {
    if (on_uring()) {
        EXPECT_TRUE(b.registered()) << b.registration_error().message();
        EXPECT_GE(b.slot(), 0);
        EXPECT_FALSE(b.registration_error());
    } else {
        EXPECT_FALSE(b.registered());
        EXPECT_EQ(b.slot(), -1);
        EXPECT_EQ(b.registration_error(), std::errc::operation_not_supported)
            << b.registration_error().message();
    }
}

} // namespace

class FixedBufferTest : public test::FileFixture {};

TEST_P(FixedBufferTest, WritesAndReadsThroughAFixedBufferAtSeveralOffsets) {
    for (const auto& [where, direct] : places()) {
        SCOPED_TRACE(direct ? "O_DIRECT" : "buffered");
        run([&]() -> Task<void> {
            File f = open_or_throw(where / "fixed", direct ? kCreateRwDirect : kCreateRw);
            FixedBuffer buf = f.make_fixed_buffer(64 * 1024);
            expect_registration(buf);
            EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buf.data()) % f.logical_block_size(), 0u);
            const std::uint64_t offsets[] = {0, 192 * 1024, (1 << 20) + 7 * 4096, 3ull << 30};
            for (std::size_t i = 0; i < std::size(offsets); ++i) {
                fill_pattern(buf.span(), 17, i);
                auto w = co_await f.write_all_at(buf, offsets[i]);
                CO_ASSERT(w);
                EXPECT_EQ(*w, buf.size());
            }
            AlignedBuffer plain(buf.size());
            for (std::size_t i = 0; i < std::size(offsets); ++i) {
                std::memset(buf.data(), 0, buf.size());
                auto r = co_await f.read_exact_at(buf, offsets[i]); // fixed read
                CO_ASSERT(r);
                EXPECT_TRUE(has_pattern(buf.span(), 17, i)) << "offset " << offsets[i];
                CO_ASSERT(co_await f.read_exact_at(plain, offsets[i])); // what the plain read sees
                EXPECT_TRUE(has_pattern(plain.span(), 17, i)) << "offset " << offsets[i];
            }
            // read_at / write_at (not the exact/all forms), and a short read at the end.
            fill_pattern(buf.span(), 18, 0);
            auto w = co_await f.write_at(buf, 0);
            CO_ASSERT(w);
            EXPECT_EQ(*w, buf.size());
            const std::uint64_t end = f.size().value();
            auto r = co_await f.read_at(buf, end - 4096);
            CO_ASSERT(r);
            EXPECT_EQ(*r, 4096u);
            r = co_await f.read_at(buf, end);
            CO_ASSERT(r);
            EXPECT_EQ(*r, 0u);
            auto exact = co_await f.read_exact_at(buf, end - 4096);
            CO_ASSERT(!exact);
            EXPECT_EQ(exact.error(), errc::unexpected_eof);
            EXPECT_EQ(detail::SchedulerAccess::driver(*Scheduler::current()).in_flight(), 0u);
        }());
    }
}

TEST_P(FixedBufferTest, FixedReadsUseTheRegisteredPages) {
    // What tells READ_FIXED from a plain read: a registered buffer is the pages it had when it was
    // registered. Drop them from the mapping (MADV_DONTNEED: the next touch maps fresh zero
    // pages) and a fixed read lands in the old pages, out of sight; a plain read (epoll, or the
    // same memory not registered) lands in the new ones.
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "pages", kCreateRw);
        AlignedBuffer data(64 * 1024);
        fill_pattern(data.span(), 19, 0);
        CO_ASSERT(co_await f.write_all_at(data, 0));

        FixedBuffer buf(64 * 1024); // 16 whole pages of its own (page-aligned, page-sized)
        expect_registration(buf);
        CO_ASSERT(::madvise(buf.data(), buf.size(), MADV_DONTNEED) == 0);
        auto r = co_await f.read_exact_at(buf, 0);
        CO_ASSERT(r);
        const bool visible = has_pattern(buf.span(), 19, 0);
        if (on_uring()) {
            EXPECT_FALSE(visible) << "the read did not go to the registered pages: not READ_FIXED";
            EXPECT_EQ(std::count(buf.span().begin(), buf.span().end(), std::byte{0}),
                      static_cast<long>(buf.size()));
        } else {
            EXPECT_TRUE(visible) << "a plain read must fill the buffer";
        }
        // The same memory through a plain read (a span is not a FixedBuffer): always visible.
        CO_ASSERT(co_await f.read_exact_at(buf.span(), 0));
        EXPECT_TRUE(has_pattern(buf.span(), 19, 0));
    }());
}

TEST_P(FixedBufferTest, SlicesReadAndWriteOnlyTheirOwnBytes) {
    for (const auto& [where, direct] : places()) {
        SCOPED_TRACE(direct ? "O_DIRECT" : "buffered");
        run([&]() -> Task<void> {
            File f = open_or_throw(where / "slices", direct ? kCreateRwDirect : kCreateRw);
            const std::size_t bs = 4096; // a multiple of any logical block size up to 4 KiB
            FixedBuffer buf = f.make_fixed_buffer(16 * bs);
            expect_registration(buf);
            // Write blocks 3..5 of the buffer to file block 10, block 9 to file block 0.
            fill_pattern(buf.span(), 20, 0);
            auto w = co_await f.write_all_at(buf.slice(3 * bs, 3 * bs), 10 * bs);
            CO_ASSERT(w);
            EXPECT_EQ(*w, 3 * bs);
            CO_ASSERT(co_await f.write_all_at(buf.slice(9 * bs, bs), 0));
            AlignedBuffer plain(3 * bs);
            CO_ASSERT(co_await f.read_exact_at(plain, 10 * bs));
            EXPECT_EQ(std::memcmp(plain.data(), buf.data() + 3 * bs, 3 * bs), 0);
            CO_ASSERT(co_await f.read_exact_at(std::span(plain.data(), bs), 0));
            EXPECT_EQ(std::memcmp(plain.data(), buf.data() + 9 * bs, bs), 0);

            // Read them back into other slices; the bytes around each slice stay as they were.
            AlignedBuffer before(buf.size());
            std::memset(buf.data(), 0xA5, buf.size());
            std::memcpy(before.data(), buf.data(), buf.size());
            auto r = co_await f.read_exact_at(buf.slice(12 * bs, 3 * bs), 10 * bs);
            CO_ASSERT(r);
            CO_ASSERT(co_await f.read_exact_at(buf.slice(bs, bs), 0));
            fill_pattern(before.span(), 20, 0); // what was written, at the source positions
            AlignedBuffer expect(buf.size());
            std::memset(expect.data(), 0xA5, expect.size());
            std::memcpy(expect.data() + 12 * bs, before.data() + 3 * bs, 3 * bs);
            std::memcpy(expect.data() + bs, before.data() + 9 * bs, bs);
            EXPECT_EQ(std::memcmp(expect.data(), buf.data(), buf.size()), 0);

            // The last byte range of the buffer, and an empty slice.
            CO_ASSERT(co_await f.read_exact_at(buf.slice(15 * bs, bs), 10 * bs));
            auto none = co_await f.read_at(buf.slice(16 * bs, 0), 0);
            CO_ASSERT(none);
            EXPECT_EQ(*none, 0u);
            EXPECT_THROW((void)buf.slice(15 * bs, bs + 1), std::out_of_range);
            EXPECT_THROW((void)buf.slice(16 * bs + 1, 0), std::out_of_range);
            if (direct) { // O_DIRECT alignment rules are those of the plain operations
                auto bad = co_await f.read_at(buf.slice(100, bs), 0);
                CO_ASSERT(!bad);
                EXPECT_EQ(bad.error(), errc::misaligned_direct_io);
                bad = co_await f.write_at(buf.slice(0, bs - 512 / 2), 0);
                CO_ASSERT(!bad);
                EXPECT_EQ(bad.error(), errc::misaligned_direct_io);
            }
        }());
    }
}

TEST_P(FixedBufferTest, ManyBuffersAtOnceAndMoreThanTheRingsTableHolds) {
    // The ring's table has 1024 slots: the buffers beyond that are plain buffers (no_buffer_space)
    // and work just the same. Every buffer writes its own block, then reads it back, all at once.
    constexpr std::size_t kBuffers = 1030, kSize = 4096;
    for (const auto& [where, direct] : places()) {
        SCOPED_TRACE(direct ? "O_DIRECT" : "buffered");
        run([&]() -> Task<void> {
            File f = open_or_throw(where / "many", direct ? kCreateRwDirect : kCreateRw);
            CO_ASSERT(co_await f.fallocate(0, 0, kBuffers * kSize));
            std::vector<FixedBuffer> bufs;
            for (std::size_t i = 0; i < kBuffers; ++i)
                bufs.emplace_back(kSize); // also moves the registered ones as the vector grows
            std::size_t registered = 0;
            for (const FixedBuffer& b : bufs) {
                registered += b.registered();
                if (!b.registered() && on_uring()) {
                    EXPECT_EQ(b.registration_error(), std::errc::no_buffer_space)
                        << b.registration_error().message();
                }
            }
            EXPECT_EQ(registered, on_uring() ? 1024u : 0u);
            auto one = [&](std::size_t i) -> Task<bool> {
                FixedBuffer& b = bufs[i];
                fill_pattern(b.span(), 21, i);
                auto w = co_await f.write_all_at(b, i * kSize);
                std::memset(b.data(), 0, kSize);
                auto r = co_await f.read_exact_at(b, i * kSize);
                co_return w&& r&& has_pattern(b.span(), 21, i);
            };
            std::vector<Task<bool>> tasks;
            for (std::size_t i = 0; i < kBuffers; ++i)
                tasks.push_back(one(i));
            auto ok = co_await when_all(std::move(tasks));
            EXPECT_EQ(std::count(ok.begin(), ok.end(), true), static_cast<long>(kBuffers));
            // Freeing registered buffers frees their slots for new ones.
            bufs.erase(bufs.begin(), bufs.begin() + 10);
            FixedBuffer late(kSize);
            expect_registration(late);
        }());
    }
}

TEST_P(FixedBufferTest, ABufferRecreatedAtTheAddressOfADestroyedOneGetsItsOwnRegistration) {
    // 1 MiB buffers are mmap'd by glibc and unmapped when freed (a fixed threshold keeps it from
    // moving them to the heap), so a new one usually gets the old address back with new pages. If
    // the ring still had the old registration there, the new buffer's fixed reads would land in
    // the old, unmapped pages and it would see zeros.
    ::mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    constexpr std::size_t kSize = 1 << 20;
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "reuse", kCreateRw);
        {
            AlignedBuffer d(kSize);
            fill_pattern(d.span(), 22, 0);
            CO_ASSERT(co_await f.write_all_at(d, 0));
        }
        const std::byte* old_addr = nullptr;
        int old_slot = -1;
        {
            FixedBuffer a(kSize);
            expect_registration(a);
            CO_ASSERT(co_await f.read_exact_at(a, 0));
            EXPECT_TRUE(has_pattern(a.span(), 22, 0));
            old_addr = a.data();
            old_slot = a.slot();
        }
        bool same_address = false;
        for (int attempt = 0; attempt < 8 && !same_address; ++attempt) {
            FixedBuffer b(kSize);
            same_address = b.data() == old_addr;
            expect_registration(b);
            EXPECT_EQ(b.slot(), old_slot); // the freed slot is taken again
            auto r = co_await f.read_exact_at(b, 0);
            CO_ASSERT(r);
            EXPECT_TRUE(has_pattern(b.span(), 22, 0)) << "attempt " << attempt;
            fill_pattern(b.span(), 23, attempt); // and writes come from its own pages
            CO_ASSERT(co_await f.write_all_at(b, kSize));
            AlignedBuffer back(kSize);
            CO_ASSERT(co_await f.read_exact_at(back, kSize));
            EXPECT_TRUE(has_pattern(back.span(), 23, attempt)) << "attempt " << attempt;
        }
        if (!same_address)
            std::printf("INFO: the allocator did not hand out the old address again (sanitizer "
                        "allocators keep freed memory aside); checked fresh registrations only\n");
    }());
}

TEST_P(FixedBufferTest, BatchTakesFixedSlices) {
    for (const auto& [where, direct] : places()) {
        SCOPED_TRACE(direct ? "O_DIRECT" : "buffered");
        run([&]() -> Task<void> {
            File f = open_or_throw(where / "batch", direct ? kCreateRwDirect : kCreateRw);
            constexpr std::size_t kOps = 8, kSize = 4096;
            FixedBuffer buf(kOps * kSize);
            expect_registration(buf);
            for (std::size_t i = 0; i < kOps; ++i)
                fill_pattern(buf.span().subspan(i * kSize, kSize), 24, i);
            Batch batch;
            for (std::size_t i = 0; i < kOps; ++i)
                batch.write_all_at(f, buf.slice(i * kSize, kSize), i * kSize);
            batch.fdatasync(f);
            auto done = co_await batch.submit();
            CO_ASSERT(done);
            std::memset(buf.data(), 0, buf.size());
            batch.clear();
            for (std::size_t i = 0; i < kOps; ++i) // reversed
                batch.read_exact_at(f, buf.slice(i * kSize, kSize), (kOps - 1 - i) * kSize);
            done = co_await batch.submit();
            CO_ASSERT(done);
            for (std::size_t i = 0; i < kOps; ++i)
                EXPECT_TRUE(has_pattern(buf.span().subspan(i * kSize, kSize), 24, kOps - 1 - i))
                    << i;
            batch.clear();
            batch.read_at(f, buf, 0);
            batch.write_at(f, buf.slice(0, kSize), kOps * kSize);
            done = co_await batch.submit();
            CO_ASSERT(done);
            EXPECT_EQ(batch.result(0).value_or(0), kOps * kSize);
            EXPECT_EQ(batch.result(1).value_or(0), kSize);
        }());
    }
}

TEST_P(FixedBufferTest, CancellingAFixedReadLeavesBufferAndFileUsable) {
    for (const auto& [where, direct] : places()) {
        for (int turns : {0, 2}) {
            SCOPED_TRACE(std::string(direct ? "O_DIRECT" : "buffered") + ", loop turns " +
                         std::to_string(turns));
            run([&]() -> Task<void> {
                File f = open_or_throw(where / "cancel", direct ? kCreateRwDirect : kCreateRw);
                FixedBuffer buf(1 << 20);
                fill_pattern(buf.span(), 25, 0);
                CO_ASSERT(co_await f.write_all_at(buf, 0));
                ::fdatasync(f.fd());
                ::posix_fadvise(f.fd(), 0, 0, POSIX_FADV_DONTNEED);
                std::memset(buf.data(), 0, buf.size());
                auto reader = [&]() -> Task<Result<std::size_t>> {
                    co_return co_await f.read_at(buf, 0);
                };
                auto other = [&]() -> Task<int> {
                    for (int i = 0; i < turns; ++i)
                        co_await yield_now();
                    co_return 1;
                };
                auto r = co_await when_any(reader(), other());
                if (r.index() == 0) {
                    auto n = std::get<0>(r);
                    EXPECT_TRUE(n) << n.error().message();
                }
                EXPECT_EQ(detail::SchedulerAccess::driver(*Scheduler::current()).in_flight(), 0u);
                auto n = co_await f.read_exact_at(buf, 0);
                CO_ASSERT(n);
                EXPECT_TRUE(has_pattern(buf.span(), 25, 0));
            }());
        }
    }
}

TEST_P(FixedBufferTest, MovesKeepTheRegistrationAndAssignmentReleasesTheOldOne) {
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "moves", kCreateRw);
        FixedBuffer a(8192);
        expect_registration(a);
        const int a_slot = a.slot();
        const std::byte* a_data = a.data();
        FixedBuffer b(std::move(a));
        EXPECT_FALSE(a.registered());
        EXPECT_EQ(a.size(), 0u);
        EXPECT_EQ(b.slot(), a_slot);
        EXPECT_EQ(b.data(), a_data);
        fill_pattern(b.span(), 26, 0);
        CO_ASSERT(co_await f.write_all_at(b, 0));

        FixedBuffer c(8192);
        const int c_slot = c.slot();
        c = std::move(b); // c's own buffer is unregistered, then freed
        EXPECT_EQ(c.slot(), a_slot);
        std::memset(c.data(), 0, c.size());
        CO_ASSERT(co_await f.read_exact_at(c, 0));
        EXPECT_TRUE(has_pattern(c.span(), 26, 0));
        FixedBuffer d(4096);
        EXPECT_EQ(d.slot(), c_slot); // the slot c's old buffer had is free again
        EXPECT_EQ(FixedBuffer().registered(), false);
    }());
}

TEST_P(FixedBufferTest, ABufferThatOutlivesItsSchedulerIsNoLongerRegistered) {
    std::optional<FixedBuffer> outlives, dies_between;
    {
        Scheduler s(options());
        s.block_on([&]() -> Task<void> {
            outlives.emplace(64 * 1024);
            dies_between.emplace(64 * 1024);
            expect_registration(*outlives);
            File f = open_or_throw(dir_ / "outlive", kCreateRw);
            fill_pattern(outlives->span(), 27, 0);
            CO_ASSERT(co_await f.write_all_at(*outlives, 0));
        }());
        const bool uring = s.backend() == Backend::io_uring;
        EXPECT_EQ(outlives->registered(), uring);
        dies_between.reset(); // on its thread, outside block_on: unregistered through the driver
    }
    EXPECT_FALSE(outlives->registered()); // the ring is gone, and its registrations with it
    EXPECT_EQ(outlives->slot(), -1);
    EXPECT_TRUE(has_pattern(outlives->span(), 27, 0)); // the memory is still the buffer's
    std::thread([&] { outlives.reset(); }).join();     // any thread may free it now
    EXPECT_FALSE(outlives);
}

TEST_P(FixedBufferTest, OnAnotherThreadsSchedulerItIsAPlainBuffer) {
    run([&]() -> Task<void> {
        File f = open_or_throw(dir_ / "threads", kCreateRw);
        FixedBuffer mine(64 * 1024);
        expect_registration(mine);
        fill_pattern(mine.span(), 28, 0);
        CO_ASSERT(co_await f.write_all_at(mine, 0));
        auto on_the_other_thread = [&]() -> Task<void> {
            // This ring's first slot holds another buffer; `mine` must not be read as slot
            // mine.slot() of this ring.
            FixedBuffer theirs(64 * 1024);
            expect_registration(theirs);
            EXPECT_EQ(theirs.slot(), mine.slot());
            File g = open_or_throw(dir_ / "threads", {.read = true, .write = true});
            std::memset(mine.data(), 0, mine.size());
            auto r = co_await g.read_exact_at(mine, 0);
            CO_ASSERT(r);
            EXPECT_TRUE(has_pattern(mine.span(), 28, 0));
            fill_pattern(mine.span(), 28, 1);
            CO_ASSERT(co_await g.write_all_at(mine.slice(0, 4096), 64 * 1024));
            EXPECT_EQ(std::count(theirs.span().begin(), theirs.span().end(), std::byte{0}),
                      static_cast<long>(theirs.size()));
        };
        std::thread other([&] {
            Scheduler s(options());
            try {
                s.block_on(on_the_other_thread());
            } catch (const std::exception& e) { // a failed CO_ASSERT: already recorded
                std::printf("other thread: %s\n", e.what());
            }
        });
        other.join();
        EXPECT_EQ(mine.registered(), on_uring()); // still registered with this thread's ring
        AlignedBuffer back(4096);
        CO_ASSERT(co_await f.read_exact_at(back, 64 * 1024));
        EXPECT_EQ(std::memcmp(back.data(), mine.data(), 4096), 0);
    }());
}

GALAY_INSTANTIATE_BACKENDS(FixedBufferTest);

TEST(FixedBufferWithoutScheduler, IsAnOrdinaryBuffer) {
    FixedBuffer b(10000, 512);
    EXPECT_FALSE(b.registered());
    EXPECT_EQ(b.registration_error(), std::errc::operation_not_supported);
    EXPECT_EQ(b.size(), 10000u);
    EXPECT_EQ(b.alignment(), 512u);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 512, 0u);
    EXPECT_EQ(std::count(b.span().begin(), b.span().end(), std::byte{0}), 10000);
    FixedBuffer adopted(AlignedBuffer(4096));
    EXPECT_EQ(adopted.size(), 4096u);
    std::thread([&] { b = FixedBuffer(); }).join(); // never registered: any thread
    EXPECT_TRUE(b.empty());
}

TEST(FixedBufferDeathTest, DestroyingARegisteredBufferOnAnotherThreadStopsWithAMessage) {
    if (!probe_io_uring().usable) {
        if (test::backend_required(Backend::io_uring))
            FAIL() << "io_uring is required here but unavailable: " << probe_io_uring().reason;
        GTEST_SKIP() << "SKIP: io_uring unavailable on this kernel: " << probe_io_uring().reason;
    }
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    auto misuse = [] {
        Scheduler s({.backend = Backend::io_uring});
        std::optional<FixedBuffer> buf;
        s.block_on([&]() -> Task<void> {
            buf.emplace(4096);
            co_return;
        }());
        if (!buf->registered()) {
            std::fprintf(stderr, "not registered: %s\n",
                         buf->registration_error().message().c_str());
            std::exit(0); // not the death we expect: the test fails and says why
        }
        std::thread([&] { buf.reset(); }).join();
    };
    EXPECT_DEATH(misuse(), "galay: fs::FixedBuffer destroyed \\(or assigned to\\) on a thread "
                           "other than the one whose io_uring ring it is registered with");
}
