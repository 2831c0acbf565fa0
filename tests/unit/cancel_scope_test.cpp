// Cancellation scopes (detail/cancel.hpp) and CancelSource, on their own: leaves that record
// being asked, no scheduler.
#include <galay/detail/cancel.hpp>
#include <galay/task.hpp>
#include <gtest/gtest.h>

#include <vector>

using galay::CancelSource;
using galay::detail::Cancellable;
using galay::detail::CancelScope;

namespace {

// A leaf that records the order it was asked in; optionally unlinks itself when asked, as an I/O
// awaitable whose op completes at once does.
struct Leaf final : Cancellable {
    explicit Leaf(std::vector<int>* log, int id, bool unlink_on_cancel = false)
        : log(log)
        , id(id)
        , unlink_on_cancel(unlink_on_cancel) {}
    void cancel() noexcept override {
        ++asked;
        log->push_back(id);
        if (unlink_on_cancel) CancelScope::unlink(*this);
    }
    std::vector<int>* log;
    int id;
    bool unlink_on_cancel;
    int asked = 0;
};

TEST(CancelScope, RequestAsksEveryLinkedLeafOnceInLinkOrder) {
    std::vector<int> log;
    Leaf a(&log, 1), b(&log, 2), c(&log, 3);
    CancelScope s;
    s.link(a);
    s.link(b);
    s.link(c);
    EXPECT_FALSE(s.requested());
    EXPECT_TRUE(log.empty()) << "linking must not ask";
    s.request();
    EXPECT_TRUE(s.requested());
    EXPECT_EQ(log, (std::vector<int>{1, 2, 3}));
    s.request(); // idempotent
    EXPECT_EQ(log, (std::vector<int>{1, 2, 3}));
    CancelScope::unlink(a);
    CancelScope::unlink(b);
    CancelScope::unlink(c);
}

TEST(CancelScope, AnUnlinkedLeafIsNotAsked) {
    std::vector<int> log;
    Leaf a(&log, 1), b(&log, 2), c(&log, 3);
    CancelScope s;
    s.link(a);
    s.link(b);
    s.link(c);
    CancelScope::unlink(b); // the middle one finished before the request
    CancelScope::unlink(b); // unlinking twice (or a leaf never linked) does nothing
    s.request();
    EXPECT_EQ(log, (std::vector<int>{1, 3}));
    EXPECT_EQ(b.asked, 0);
    CancelScope::unlink(a);
    CancelScope::unlink(c);
}

TEST(CancelScope, LeavesMayUnlinkThemselvesWhileBeingAsked) {
    std::vector<int> log;
    Leaf a(&log, 1, true), b(&log, 2, true), c(&log, 3, true);
    CancelScope s;
    s.link(a);
    s.link(b);
    s.link(c);
    s.request();
    EXPECT_EQ(log, (std::vector<int>{1, 2, 3}));
    // Every leaf is out of the list: linking a new one and unlinking it works on an empty list.
    Leaf d(&log, 4, true);
    s.link(d); // the scope was already asked: d is asked at once
    EXPECT_EQ(d.asked, 1);
}

TEST(CancelScope, LinkingToAnAlreadyRequestedScopeAsksAtOnce) {
    std::vector<int> log;
    CancelScope s;
    s.request();
    Leaf a(&log, 1);
    s.link(a);
    EXPECT_EQ(a.asked, 1);
    CancelScope::unlink(a);
}

TEST(CancelScope, RequestReachesChildScopesButNotTheParent) {
    std::vector<int> log;
    CancelScope parent, child, grandchild;
    Leaf p(&log, 1), c(&log, 2), g(&log, 3);
    parent.link(p);
    child.link(c);
    grandchild.link(g);
    // A child scope is one more node of its parent's list, asked in link order like a leaf.
    child.attach_to(&parent);
    grandchild.attach_to(&child);

    child.request(); // a child's request stays below it
    EXPECT_TRUE(child.requested());
    EXPECT_TRUE(grandchild.requested());
    EXPECT_FALSE(parent.requested());
    EXPECT_EQ(log, (std::vector<int>{2, 3}));

    parent.request();
    EXPECT_EQ(log, (std::vector<int>{2, 3, 1})) << "children already asked are not asked again";

    CancelScope::unlink(p);
    CancelScope::unlink(c);
    CancelScope::unlink(g);
    grandchild.detach();
    child.detach();
}

TEST(CancelScope, ADetachedChildIsNotReached) {
    std::vector<int> log;
    CancelScope parent, child;
    child.attach_to(&parent);
    child.attach_to(nullptr); // no parent: nothing happens
    Leaf c(&log, 1);
    child.link(c);
    child.detach();
    parent.request();
    EXPECT_FALSE(child.requested());
    EXPECT_TRUE(log.empty());
    CancelScope::unlink(c);
}

TEST(CancelSource, CancelRequestsItsScope) {
    std::vector<int> log;
    CancelSource src;
    Leaf a(&log, 1);
    src.scope().link(a);
    EXPECT_FALSE(src.cancelled());
    src.cancel();
    EXPECT_TRUE(src.cancelled());
    EXPECT_EQ(a.asked, 1);
    src.cancel();
    EXPECT_EQ(a.asked, 1);
    CancelScope::unlink(a);
}

} // namespace
