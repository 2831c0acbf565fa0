// The epoll driver's queue of waiting ops (src/driver/common/op_queue.hpp): IoOps linked through
// the op's driver scratch. The list itself is tested in intrusive_list_test.cpp; this checks what
// the epoll driver and its file engine rely on when they use it for IoOps.
#include "driver/common/op_queue.hpp"

#include <gtest/gtest.h>

#include <vector>

using galay::detail::IoOp;
using galay::detail::OpQueue;

namespace {

std::vector<int> fds(const OpQueue& q) {
    std::vector<int> out;
    for (IoOp* op = q.front(); op != nullptr; op = OpQueue::next(*op))
        out.push_back(op->fd);
    return out;
}

TEST(OpQueue, LinksThroughTheDriverScratchInFifoOrder) {
    IoOp ops[3];
    OpQueue q;
    for (int i = 0; i < 3; ++i) {
        ops[i].fd = i;
        q.push_back(ops[i]);
    }
    EXPECT_EQ(OpQueue::next(ops[0]), &ops[1]);
    EXPECT_EQ(OpQueue::next(ops[1]), &ops[2]);
    EXPECT_EQ(OpQueue::next(ops[2]), nullptr);
    EXPECT_EQ(q.pop_front(), &ops[0]);
    EXPECT_EQ(OpQueue::next(ops[0]), nullptr) << "a popped op must not point into the queue";
    EXPECT_EQ(fds(q), (std::vector<int>{1, 2}));
}

TEST(OpQueue, CancellingAQueuedOpRemovesItWherever) {
    // cancel() of an op still waiting for readiness / io_submit takes it out of the queue.
    IoOp ops[4];
    OpQueue q;
    for (int i = 0; i < 4; ++i) {
        ops[i].fd = i;
        q.push_back(ops[i]);
    }
    EXPECT_TRUE(q.remove(ops[1]));
    EXPECT_EQ(OpQueue::next(ops[1]), nullptr);
    EXPECT_FALSE(q.remove(ops[1])) << "an op no longer queued is not found";
    EXPECT_TRUE(q.remove(ops[3])); // the tail: a later push must still land at the back
    IoOp late;
    late.fd = 9;
    q.push_back(late);
    EXPECT_EQ(fds(q), (std::vector<int>{0, 2, 9}));
    EXPECT_TRUE(q.remove(ops[0]));
    EXPECT_TRUE(q.remove(ops[2]));
    EXPECT_TRUE(q.remove(late));
    EXPECT_TRUE(q.empty());
    EXPECT_EQ(q.back(), nullptr);
}

TEST(OpQueue, AnOpTheKernelRefusedGoesBackToTheFront) {
    // The file engine pops ops to submit and pushes the ones io_submit did not take back to the
    // front, in their original order.
    IoOp ops[4];
    OpQueue q;
    for (int i = 0; i < 4; ++i) {
        ops[i].fd = i;
        q.push_back(ops[i]);
    }
    std::vector<IoOp*> batch;
    while (IoOp* op = q.pop_front())
        batch.push_back(op);
    // the kernel took the first one; the other three go back, last first
    for (std::size_t i = batch.size(); i-- > 1;)
        q.push_front(*batch[i]);
    EXPECT_EQ(fds(q), (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(q.back(), &ops[3]);
}

} // namespace
