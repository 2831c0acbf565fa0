// An intrusive FIFO of IoOps linked through IoOp::next_waiter: no allocation, O(1) push/pop,
// O(n) removal (cancellation). Used by the epoll driver (ops waiting for readiness or for a pool
// buffer) and its file engine (ops waiting for io_submit).
#pragma once

#include "galay/detail/io_op.hpp"

namespace galay::detail {

struct OpQueue {
    IoOp* head = nullptr;
    IoOp* tail = nullptr;

    bool empty() const noexcept { return head == nullptr; }

    void push_back(IoOp& op) noexcept {
        op.next_waiter = nullptr;
        if (tail != nullptr)
            tail->next_waiter = &op;
        else
            head = &op;
        tail = &op;
    }
    void push_front(IoOp& op) noexcept {
        op.next_waiter = head;
        head = &op;
        if (tail == nullptr) tail = &op;
    }
    /// The first op, unlinked; null when empty.
    IoOp* pop_front() noexcept {
        IoOp* op = head;
        if (op == nullptr) return nullptr;
        head = op->next_waiter;
        if (head == nullptr) tail = nullptr;
        op->next_waiter = nullptr;
        return op;
    }
    /// Unlink `op` if it is queued here; returns whether it was.
    bool remove(IoOp& op) noexcept {
        IoOp* prev = nullptr;
        for (IoOp* p = head; p != nullptr; prev = p, p = p->next_waiter) {
            if (p != &op) continue;
            if (prev != nullptr)
                prev->next_waiter = p->next_waiter;
            else
                head = p->next_waiter;
            if (tail == p) tail = prev;
            p->next_waiter = nullptr;
            return true;
        }
        return false;
    }
};

} // namespace galay::detail
