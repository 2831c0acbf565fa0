// detail::FrameCache and CachedTask: the reused frame block behind the buffered I/O slow paths.
#include <galay/detail/cached_task.hpp>
#include <galay/runtime.hpp>
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>

using galay::detail::CachedTask;
using galay::detail::FrameCache;

TEST(FrameCache, ReusesOneBlockAndGrowsToTheLargestFrame) {
    FrameCache cache;
    void* a = cache.allocate(100);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % alignof(std::max_align_t), 0u);
    FrameCache::deallocate(a);
    void* b = cache.allocate(80); // fits in the block: the same memory
    EXPECT_EQ(a, b);
    FrameCache::deallocate(b);
    void* c = cache.allocate(4000); // larger: a new block, kept from now on
    FrameCache::deallocate(c);
    void* d = cache.allocate(4000);
    EXPECT_EQ(c, d);
    FrameCache::deallocate(d);
}

TEST(FrameCache, ASecondFrameWhileTheBlockIsLentComesFromTheHeap) {
    FrameCache cache;
    void* a = cache.allocate(64);
    void* b = cache.allocate(64);
    EXPECT_NE(a, b);
    FrameCache::deallocate(b);
    FrameCache::deallocate(a);
    EXPECT_EQ(cache.allocate(64), a);
    FrameCache::deallocate(a);
}

TEST(FrameCache, BlockLentAtDestructionOrMoveIsStillReturnedCorrectly) {
    void* lent = nullptr;
    {
        FrameCache cache;
        lent = cache.allocate(64);
    } // orphaned: freed by deallocate below (ASan checks it is freed once)
    FrameCache::deallocate(lent);

    FrameCache first;
    void* a = first.allocate(64);
    FrameCache second(std::move(first)); // the block follows the cache
    FrameCache::deallocate(a);
    EXPECT_EQ(second.allocate(64), a);
    FrameCache::deallocate(a);
}

namespace {
CachedTask<int> add(FrameCache&, int x, int y) {
    co_return x + y;
}
CachedTask<int> throws(FrameCache&) {
    throw std::runtime_error("slow path failed");
    co_return 0;
}
galay::Task<int> drive(FrameCache& cache) {
    int a = co_await add(cache, 2, 3);
    int b = co_await add(cache, a, 10);
    co_return b;
}
} // namespace

TEST(CachedTask, RunsInTheCachesBlockAndPropagatesResultsAndExceptions) {
    FrameCache cache;
    EXPECT_EQ(galay::block_on(drive(cache)), 15);
    auto rethrow = [](FrameCache& c) -> galay::Task<void> { (void)co_await throws(c); };
    EXPECT_THROW(galay::block_on(rethrow(cache)), std::runtime_error);
}
