// The scheduler's timer heap (src/runtime/timer_heap.hpp), on its own: no scheduler, no clock.
#include "runtime/timer_heap.hpp"
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

using galay::detail::TimerHeap;
using galay::detail::TimerNode;

namespace {

// Pops every node; returns their deadlines in the order the heap gave them.
std::vector<std::int64_t> drain(TimerHeap& h) {
    std::vector<std::int64_t> out;
    while (!h.empty()) {
        TimerNode* n = h.pop();
        EXPECT_FALSE(n->armed()) << "a popped node must be disarmed";
        out.push_back(n->deadline_ns);
    }
    return out;
}

TEST(TimerHeap, PopsInDeadlineOrder) {
    const std::int64_t deadlines[] = {50, 10, 40, 30, 70, 20, 60, 0, 90, 80};
    TimerNode n[10];
    TimerHeap h;
    for (int i = 0; i < 10; ++i) {
        n[i].deadline_ns = deadlines[i];
        h.push(n[i]);
        EXPECT_TRUE(n[i].armed());
    }
    EXPECT_EQ(h.size(), 10u);
    EXPECT_EQ(h.top()->deadline_ns, 0);
    EXPECT_EQ(drain(h), (std::vector<std::int64_t>{0, 10, 20, 30, 40, 50, 60, 70, 80, 90}));
}

TEST(TimerHeap, RemovingAMiddleNodeKeepsTheOrderOfTheRest) {
    // Removal moves the last node into the hole; depending on its deadline it must sift down or
    // up. Remove every node in turn from a fresh heap to reach both cases.
    const std::int64_t deadlines[] = {10, 100, 20, 110, 120, 30, 40, 130, 140, 150, 160, 50};
    constexpr int k = 12;
    for (int victim = 0; victim < k; ++victim) {
        TimerNode n[k];
        TimerHeap h;
        for (int i = 0; i < k; ++i) {
            n[i].deadline_ns = deadlines[i];
            h.push(n[i]);
        }
        h.remove(n[victim]);
        EXPECT_FALSE(n[victim].armed());
        EXPECT_EQ(h.size(), std::size_t{k - 1});
        h.remove(n[victim]); // removing a node that is not armed does nothing
        EXPECT_EQ(h.size(), std::size_t{k - 1});

        std::vector<std::int64_t> expected;
        for (std::int64_t d : {10, 20, 30, 40, 50, 100, 110, 120, 130, 140, 150, 160})
            if (d != deadlines[victim]) expected.push_back(d);
        EXPECT_EQ(drain(h), expected)
            << "after removing the node with deadline " << deadlines[victim];
    }
}

TEST(TimerHeap, RemovalsBeforeTheTopAreSkipped) {
    // Removal leaves the entry in the heap, dead: the top must skip it, and several in a row.
    TimerNode n[7];
    const std::int64_t deadlines[] = {1, 100, 2, 101, 102, 3, 4};
    TimerHeap h;
    for (int i = 0; i < 7; ++i) {
        n[i].deadline_ns = deadlines[i];
        h.push(n[i]);
    }
    h.remove(n[0]);
    h.remove(n[2]);
    h.remove(n[3]);
    EXPECT_EQ(h.size(), 4u);
    EXPECT_EQ(h.top(), &n[5]);
    EXPECT_EQ(h.top_deadline(), 3);
    EXPECT_EQ(drain(h), (std::vector<std::int64_t>{3, 4, 100, 102}));
}

TEST(TimerHeap, RemovingTheLastAndTheOnlyNode) {
    TimerNode a, b;
    a.deadline_ns = 1;
    b.deadline_ns = 2;
    TimerHeap h;
    h.push(a);
    h.push(b);
    h.remove(b); // the last slot: nothing moves
    EXPECT_EQ(h.size(), 1u);
    EXPECT_EQ(h.top(), &a);
    h.remove(a);
    EXPECT_TRUE(h.empty());
    EXPECT_FALSE(a.armed());
    EXPECT_FALSE(b.armed());
}

TEST(TimerHeap, ClearDisarmsEveryNode) {
    TimerNode n[5];
    TimerHeap h;
    for (int i = 0; i < 5; ++i) {
        n[i].deadline_ns = 5 - i;
        h.push(n[i]);
    }
    h.clear();
    EXPECT_TRUE(h.empty());
    for (auto& node : n)
        EXPECT_FALSE(node.armed());
    h.remove(n[2]); // a cleared node can be removed again safely (an owner destroyed later)
    // and the heap is usable afterwards
    h.push(n[0]);
    EXPECT_EQ(h.top(), &n[0]);
    EXPECT_TRUE(n[0].armed());
    EXPECT_EQ(h.size(), 1u);
}

TEST(TimerHeap, ManyEqualDeadlines) {
    constexpr int k = 64;
    TimerNode n[k + 2];
    TimerHeap h;
    for (int i = 0; i < k; ++i) {
        n[i].deadline_ns = 7;
        h.push(n[i]);
    }
    n[k].deadline_ns = 3;
    n[k + 1].deadline_ns = 9;
    h.push(n[k + 1]);
    h.push(n[k]);
    EXPECT_EQ(h.top(), &n[k]);
    // Remove a third of the equal ones from wherever they sit; every index stays consistent.
    std::size_t removed = 0;
    for (int i = 0; i < k; i += 3, ++removed)
        h.remove(n[i]);
    std::vector<bool> seen(k + 2, false);
    std::vector<std::int64_t> order;
    while (!h.empty()) {
        TimerNode* t = h.pop();
        seen[static_cast<std::size_t>(t - n)] = true;
        order.push_back(t->deadline_ns);
    }
    for (int i = 0; i < k; ++i)
        EXPECT_EQ(seen[static_cast<std::size_t>(i)], i % 3 != 0) << "node " << i;
    ASSERT_EQ(order.size(), k + 2 - removed);
    EXPECT_EQ(order.front(), 3);
    EXPECT_EQ(order.back(), 9);
    for (std::size_t i = 1; i + 1 < order.size(); ++i)
        EXPECT_EQ(order[i], 7);
}

// Against a reference, under random pushes, removals and pops; every node's index stays right.
TEST(TimerHeap, RandomOperationsMatchAReference) {
    constexpr int kNodes = 300;
    std::vector<TimerNode> n(kNodes);
    std::multimap<std::int64_t, int> ref; // deadline -> node
    std::mt19937 rng(12345);
    TimerHeap h;
    auto erase_ref = [&](int i) {
        auto [lo, hi] = ref.equal_range(n[static_cast<std::size_t>(i)].deadline_ns);
        for (auto it = lo; it != hi; ++it)
            if (it->second == i) {
                ref.erase(it);
                return;
            }
        FAIL() << "node " << i << " not in the reference";
    };
    for (int step = 0; step < 20000; ++step) {
        const int i = static_cast<int>(rng() % kNodes);
        TimerNode& node = n[static_cast<std::size_t>(i)];
        const unsigned what = rng() % 3;
        if (what == 0 && !node.armed()) {
            node.deadline_ns = static_cast<std::int64_t>(rng() % 1000);
            h.push(node);
            ref.emplace(node.deadline_ns, i);
        } else if (what == 1 && node.armed()) {
            erase_ref(i);
            h.remove(node);
            EXPECT_FALSE(node.armed());
        } else if (what == 2 && !h.empty()) {
            ASSERT_EQ(h.top_deadline(), ref.begin()->first);
            TimerNode* top = h.pop();
            EXPECT_EQ(top->deadline_ns, ref.begin()->first);
            erase_ref(static_cast<int>(top - n.data()));
        }
        ASSERT_EQ(h.size(), ref.size());
        ASSERT_LE(h.entries(), 2 * h.size() + 64);
        if (h.size() > 0) {
            ASSERT_EQ(h.top()->deadline_ns, ref.begin()->first);
        }
    }
    std::vector<std::int64_t> expected;
    for (const auto& [deadline, i] : ref)
        expected.push_back(deadline);
    EXPECT_EQ(drain(h), expected);
}

// The way I/O deadlines are used: armed, then disarmed before they fire, over and over (here a
// million times, the same few nodes re-armed with later deadlines). The dead entries must not pile
// up, a re-armed node's earlier entry must never fire it, and the live ones pop in order.
TEST(TimerHeap, ArmAndDisarmChurnKeepsTheHeapBounded) {
    constexpr int kNodes = 8;
    TimerNode n[kNodes];
    TimerNode idle; // one deadline that stays armed throughout, behind every dead entry
    idle.deadline_ns = 5;
    TimerHeap h;
    h.push(idle);
    std::int64_t now = 10;
    std::size_t most = 0;
    for (int step = 0; step < 1'000'000; ++step) {
        TimerNode& node = n[step % kNodes];
        if (node.armed()) h.remove(node);
        node.deadline_ns = now + 1000 + step % 7;
        h.push(node);
        ++now;
        most = std::max(most, h.entries());
    }
    EXPECT_LE(most, 2 * (kNodes + 1) + 64);
    EXPECT_EQ(h.size(), std::size_t{kNodes + 1});
    EXPECT_EQ(h.pop(), &idle);
    std::vector<std::int64_t> order;
    std::vector<int> popped(kNodes, 0);
    while (!h.empty()) {
        TimerNode* t = h.pop();
        ++popped[static_cast<std::size_t>(t - n)];
        order.push_back(t->deadline_ns);
    }
    EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));
    for (int i = 0; i < kNodes; ++i)
        EXPECT_EQ(popped[static_cast<std::size_t>(i)], 1) << "node " << i;
    EXPECT_EQ(h.entries(), 0u);
}

// A node disarmed and armed again (earlier or later) is popped once, at its new deadline.
TEST(TimerHeap, ANodeArmedAgainPopsOnceAtItsNewDeadline) {
    TimerNode a, b, c;
    a.deadline_ns = 10;
    b.deadline_ns = 20;
    c.deadline_ns = 30;
    TimerHeap h;
    h.push(a);
    h.push(b);
    h.push(c);
    h.remove(a);
    a.deadline_ns = 25; // later than before
    h.push(a);
    h.remove(c);
    c.deadline_ns = 5; // earlier than before
    h.push(c);
    std::vector<TimerNode*> order;
    while (!h.empty())
        order.push_back(h.pop());
    EXPECT_EQ(order, (std::vector<TimerNode*>{&c, &b, &a}));
}

} // namespace
