// The one intrusive list galay keeps its nodes in: cancellation scopes (their pending operations),
// the epoll driver's per-fd queues of waiting ops, a scheduler's detached tasks, and the waiter
// lists of every sync primitive. No allocation, O(1) push/pop, nodes live wherever their owner put
// them (usually an awaiting coroutine's frame).
//
// A `Links` type tells the list where a node keeps its links:
//
//     struct MyLinks {
//         static Node*& next(Node& n) noexcept { return n.next; }
//         static Node*& prev(Node& n) noexcept { return n.prev; } // optional
//     };
//     IntrusiveList<Node, MyLinks> list;
//
// With `prev`, removal from the middle is O(1). Without it the list is a singly linked FIFO (one
// pointer per node, as an IoOp keeps it small) and removal searches. Only the list's member
// functions touch the node type, so a list can be a member of a class where `Node` is incomplete.
#pragma once

#include <cstddef>

namespace galay::detail {

template <class T, class Links>
class IntrusiveList {
public:
    static constexpr bool kDoublyLinked = requires(T & n) { Links::prev(n); };

    IntrusiveList() noexcept = default;
    IntrusiveList(const IntrusiveList&) = delete;
    IntrusiveList& operator=(const IntrusiveList&) = delete;
    // Moving takes the nodes along (no node points back at its list).
    IntrusiveList(IntrusiveList&& o) noexcept
        : head_(o.head_)
        , tail_(o.tail_) {
        o.head_ = o.tail_ = nullptr;
    }
    IntrusiveList& operator=(IntrusiveList&& o) noexcept {
        if (this != &o) {
            head_ = o.head_;
            tail_ = o.tail_;
            o.head_ = o.tail_ = nullptr;
        }
        return *this;
    }

    bool empty() const noexcept { return head_ == nullptr; }
    T* front() const noexcept { return head_; }
    T* back() const noexcept { return tail_; }
    /// The node after `n` in its list, or null.
    static T* next(T& n) noexcept { return Links::next(n); }

    void push_back(T& n) noexcept {
        Links::next(n) = nullptr;
        if constexpr (kDoublyLinked) Links::prev(n) = tail_;
        if (tail_ != nullptr)
            Links::next(*tail_) = &n;
        else
            head_ = &n;
        tail_ = &n;
    }

    void push_front(T& n) noexcept {
        Links::next(n) = head_;
        if constexpr (kDoublyLinked) {
            Links::prev(n) = nullptr;
            if (head_ != nullptr) Links::prev(*head_) = &n;
        }
        head_ = &n;
        if (tail_ == nullptr) tail_ = &n;
    }

    /// The first node, unlinked; null when the list is empty.
    T* pop_front() noexcept {
        T* n = head_;
        if (n == nullptr) return nullptr;
        head_ = Links::next(*n);
        if (head_ == nullptr)
            tail_ = nullptr;
        else if constexpr (kDoublyLinked)
            Links::prev(*head_) = nullptr;
        Links::next(*n) = nullptr;
        return n;
    }

    /// Unlink `n` if it is in this list; returns whether it was. Doubly linked: O(1), and `n`
    /// must not be in another list of the same links (a node unlinked by this list has null
    /// links, so "not linked at all" is recognised). Singly linked: searches from the front.
    bool remove(T& n) noexcept {
        if constexpr (kDoublyLinked) {
            T* prev = Links::prev(n);
            T* next = Links::next(n);
            if (prev == nullptr && head_ != &n) return false;
            if (prev != nullptr)
                Links::next(*prev) = next;
            else
                head_ = next;
            if (next != nullptr)
                Links::prev(*next) = prev;
            else
                tail_ = prev;
            Links::prev(n) = Links::next(n) = nullptr;
            return true;
        } else {
            T* prev = nullptr;
            for (T* p = head_; p != nullptr; prev = p, p = Links::next(*p)) {
                if (p != &n) continue;
                if (prev != nullptr)
                    Links::next(*prev) = Links::next(*p);
                else
                    head_ = Links::next(*p);
                if (tail_ == p) tail_ = prev;
                Links::next(*p) = nullptr;
                return true;
            }
            return false;
        }
    }

    /// Move every node of `other` to the back of this list, in order; `other` becomes empty.
    void splice_back(IntrusiveList& other) noexcept {
        if (other.head_ == nullptr) return;
        if (tail_ == nullptr) {
            head_ = other.head_;
        } else {
            Links::next(*tail_) = other.head_;
            if constexpr (kDoublyLinked) Links::prev(*other.head_) = tail_;
        }
        tail_ = other.tail_;
        other.head_ = other.tail_ = nullptr;
    }

    /// Number of nodes (walks the list).
    std::size_t count() const noexcept {
        std::size_t n = 0;
        for (T* p = head_; p != nullptr; p = Links::next(*p))
            ++n;
        return n;
    }

private:
    T* head_ = nullptr;
    T* tail_ = nullptr;
};

} // namespace galay::detail
