// detail::MpmcRing, Channel's buffer, on its own: order, fullness, laps over a capacity that is
// not a power of two, and many producers and consumers at once.
#include <galay/detail/mpmc_ring.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace {

using galay::detail::MpmcRing;

/// A ring and its two positions, as Channel holds them.
template <class T>
struct Ring {
    explicit Ring(std::size_t capacity)
        : ring(capacity) {}
    ~Ring() { // the owner pops what is left
        std::optional<T> v;
        while (pop(v))
            v.reset();
    }
    bool push(T& v) { return ring.push(tail, v); }
    bool pop(std::optional<T>& out) { return ring.pop(head, out); }
    std::size_t pushed() const { return ring.ordinal(tail.load()); }
    std::size_t popped() const { return ring.ordinal(head.load()); }

    MpmcRing<T> ring;
    std::atomic<std::size_t> tail{0}, head{0};
};

TEST(MpmcRing, ValuesComeOutInTheOrderTheyWentInOverManyLaps) {
    Ring<int> r(3); // laps of 4 positions, 3 cells: the position skips one index per lap
    int next_in = 0, next_out = 0;
    for (int lap = 0; lap < 10; ++lap) {
        for (int i = 0; i < 2; ++i) {
            int v = next_in++;
            ASSERT_TRUE(r.push(v));
        }
        for (int i = 0; i < 2; ++i) {
            std::optional<int> out;
            ASSERT_TRUE(r.pop(out));
            EXPECT_EQ(*out, next_out++);
        }
    }
    EXPECT_EQ(r.pushed(), 20u);
    EXPECT_EQ(r.popped(), 20u);
}

TEST(MpmcRing, AFullRingRefusesAndLeavesTheValueWithTheCaller) {
    Ring<std::unique_ptr<int>> r(2);
    for (int i = 0; i < 2; ++i) {
        auto v = std::make_unique<int>(i);
        ASSERT_TRUE(r.push(v));
        EXPECT_EQ(v, nullptr); // moved into the ring
    }
    auto extra = std::make_unique<int>(7);
    EXPECT_FALSE(r.push(extra));
    ASSERT_NE(extra, nullptr);
    EXPECT_EQ(*extra, 7);
    std::optional<std::unique_ptr<int>> out;
    ASSERT_TRUE(r.pop(out));
    EXPECT_EQ(**out, 0);
    EXPECT_TRUE(r.push(extra)); // a cell is free again
    EXPECT_EQ(r.pushed() - r.popped(), 2u);
}

TEST(MpmcRing, AnEmptyRingGivesNothing) {
    Ring<int> r(1);
    std::optional<int> out;
    EXPECT_FALSE(r.pop(out));
    EXPECT_FALSE(out.has_value());
    int v = 5;
    ASSERT_TRUE(r.push(v));
    ASSERT_TRUE(r.pop(out));
    EXPECT_EQ(*out, 5);
    out.reset();
    EXPECT_FALSE(r.pop(out));
}

TEST(MpmcRing, ManyProducersAndConsumersLoseAndDuplicateNothing) {
    constexpr int kProducers = 3, kConsumers = 3, kPerProducer = 20000;
    Ring<std::uint32_t> r(7);
    std::vector<std::atomic<int>> seen(kProducers * kPerProducer);
    std::atomic<int> consumed{0};
    std::vector<std::thread> threads;
    for (int p = 0; p < kProducers; ++p)
        threads.emplace_back([&, p] {
            for (int i = 0; i < kPerProducer; ++i) {
                auto v = static_cast<std::uint32_t>(p * kPerProducer + i);
                while (!r.push(v))
                    std::this_thread::yield();
            }
        });
    for (int c = 0; c < kConsumers; ++c)
        threads.emplace_back([&] {
            std::optional<std::uint32_t> out;
            while (consumed.load() < kProducers * kPerProducer) {
                if (!r.pop(out)) {
                    std::this_thread::yield();
                    continue;
                }
                seen[*out].fetch_add(1);
                consumed.fetch_add(1);
            }
        });
    for (auto& t : threads)
        t.join();
    for (std::size_t i = 0; i < seen.size(); ++i)
        ASSERT_EQ(seen[i].load(), 1) << "value " << i;
}

} // namespace
