// The one intrusive list (detail/intrusive_list.hpp), doubly and singly linked.
#include <galay/detail/intrusive_list.hpp>
#include <gtest/gtest.h>

#include <vector>

using galay::detail::IntrusiveList;

namespace {

struct Node {
    int id = 0;
    Node* prev = nullptr;
    Node* next = nullptr;
};
struct Doubly {
    static Node*& next(Node& n) noexcept { return n.next; }
    static Node*& prev(Node& n) noexcept { return n.prev; }
};
struct Singly {
    static Node*& next(Node& n) noexcept { return n.next; }
};

template <class L>
std::vector<int> ids(const L& l) {
    std::vector<int> out;
    for (Node* n = l.front(); n != nullptr; n = L::next(*n))
        out.push_back(n->id);
    return out;
}

template <class Links>
class IntrusiveListTest : public ::testing::Test {};
using Kinds = ::testing::Types<Doubly, Singly>;
TYPED_TEST_SUITE(IntrusiveListTest, Kinds);

TYPED_TEST(IntrusiveListTest, KeepsFifoOrderAndPopsFromTheFront) {
    Node n[4]{{0}, {1}, {2}, {3}};
    IntrusiveList<Node, TypeParam> l;
    EXPECT_TRUE(l.empty());
    EXPECT_EQ(l.pop_front(), nullptr);
    l.push_back(n[1]);
    l.push_back(n[2]);
    l.push_front(n[0]);
    l.push_back(n[3]);
    EXPECT_EQ(ids(l), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(l.count(), 4u);
    EXPECT_EQ(l.back(), &n[3]);
    EXPECT_EQ(l.pop_front(), &n[0]);
    EXPECT_EQ(n[0].next, nullptr);
    EXPECT_EQ(ids(l), (std::vector<int>{1, 2, 3}));
}

TYPED_TEST(IntrusiveListTest, RemovesFromFrontMiddleAndBack) {
    Node n[5]{{0}, {1}, {2}, {3}, {4}};
    IntrusiveList<Node, TypeParam> l;
    for (auto& x : n)
        l.push_back(x);
    EXPECT_TRUE(l.remove(n[2]));
    EXPECT_TRUE(l.remove(n[0]));
    EXPECT_TRUE(l.remove(n[4]));
    EXPECT_EQ(ids(l), (std::vector<int>{1, 3}));
    EXPECT_EQ(l.back(), &n[3]);
    EXPECT_FALSE(l.remove(n[2])) << "a node no longer in the list";
    l.push_back(n[4]); // the tail was fixed up
    EXPECT_EQ(ids(l), (std::vector<int>{1, 3, 4}));
    EXPECT_TRUE(l.remove(n[1]));
    EXPECT_TRUE(l.remove(n[3]));
    EXPECT_TRUE(l.remove(n[4]));
    EXPECT_TRUE(l.empty());
    EXPECT_EQ(l.back(), nullptr);
}

TYPED_TEST(IntrusiveListTest, SpliceMovesEveryNodeInOrder) {
    Node n[4]{{0}, {1}, {2}, {3}};
    IntrusiveList<Node, TypeParam> a, b;
    a.splice_back(b); // both empty
    EXPECT_TRUE(a.empty());
    b.push_back(n[0]);
    b.push_back(n[1]);
    a.splice_back(b);
    EXPECT_TRUE(b.empty());
    b.push_back(n[2]);
    b.push_back(n[3]);
    a.splice_back(b);
    EXPECT_EQ(ids(a), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(a.back(), &n[3]);
    if constexpr (IntrusiveList<Node, TypeParam>::kDoublyLinked) {
        EXPECT_EQ(n[2].prev, &n[1]);
    }
    IntrusiveList<Node, TypeParam> moved(std::move(a));
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(ids(moved), (std::vector<int>{0, 1, 2, 3}));
}

TEST(IntrusiveListDoubly, RemovalDuringIterationWithTheNextSavedIsSafe) {
    Node n[6]{{0}, {1}, {2}, {3}, {4}, {5}};
    IntrusiveList<Node, Doubly> l;
    for (auto& x : n)
        l.push_back(x);
    for (Node* p = l.front(); p != nullptr;) {
        Node* next = decltype(l)::next(*p);
        if (p->id % 2 == 0) l.remove(*p);
        p = next;
    }
    EXPECT_EQ(ids(l), (std::vector<int>{1, 3, 5}));
    EXPECT_EQ(n[1].prev, nullptr);
    EXPECT_EQ(n[3].prev, &n[1]);
}

} // namespace
