// Cancellation scopes: how `when_any`, `with_cancel` and timeouts reach the operation a task is
// suspended on.
//
// Every task promise carries a pointer to the `CancelScope` it runs in (inherited from its
// awaiter). A suspended leaf operation (an I/O op, a sleep) links itself into that scope;
// `request()` asks every linked leaf, and every child scope, to stop. A leaf that is asked
// completes through its normal path (with `operation_canceled`, or with its real result if the
// kernel finished first), so nothing is resumed from inside `request()` and no buffer is released
// while the kernel owns it.
//
// A scope and everything linked into it belong to one scheduler's thread, so the lists here take
// no lock. A cancellation from another thread is carried to that thread first (JoinHandle::abort
// posts it; TaskGroup::cancel and CancelToken wake a watcher task there).
#pragma once

#include "galay/detail/intrusive_list.hpp"

#include <cstdint>

namespace galay::detail {

struct WaitDesc; // what a task dump says a leaf waits on (galay/detail/wait_desc.hpp)
class CancelScope;

/// A node in a scope's intrusive list: a pending leaf operation or a child scope.
class Cancellable {
public:
    virtual void cancel() noexcept = 0;
    /// What this leaf waits on, for a task dump (read on the task's own thread only, while it is
    /// suspended). The default says nothing beyond the time it began.
    virtual void describe(WaitDesc&) const noexcept {}
    /// This node as a child scope, or null for a leaf (a dump walks scopes down to the leaves).
    virtual const CancelScope* as_scope() const noexcept { return nullptr; }
    /// When the wait began, on the scheduler's coarse clock (the last loop turn): set where the
    /// leaf suspends, read by a task dump.
    void set_since(std::int64_t ns) noexcept { since_ns_ = ns; }
    std::int64_t since() const noexcept { return since_ns_; }

protected:
    ~Cancellable() = default;

private:
    friend class CancelScope;
    friend struct CancellableLinks;
    Cancellable* prev_ = nullptr;
    Cancellable* next_ = nullptr;
    CancelScope* owner_ = nullptr;
    std::int64_t since_ns_ = 0;
};

struct CancellableLinks {
    static Cancellable*& next(Cancellable& c) noexcept { return c.next_; }
    static Cancellable*& prev(Cancellable& c) noexcept { return c.prev_; }
};

class CancelScope final : public Cancellable {
public:
    CancelScope() = default;
    CancelScope(const CancelScope&) = delete;
    CancelScope& operator=(const CancelScope&) = delete;

    bool requested() const noexcept { return requested_; }

    /// Ask every linked operation and child scope to stop. Idempotent.
    void request() noexcept {
        if (requested_) return;
        requested_ = true;
        for (Cancellable* c = linked_.front(); c != nullptr;) {
            Cancellable* next = Linked::next(*c); // `cancel()` may unlink `c`
            c->cancel();
            c = next;
        }
    }

    /// Link `c` so that `request()` reaches it. A scope that was already asked asks `c` at once.
    void link(Cancellable& c) noexcept {
        c.owner_ = this;
        linked_.push_back(c);
        if (requested_) c.cancel();
    }

    static void unlink(Cancellable& c) noexcept {
        CancelScope* s = c.owner_;
        if (s == nullptr) return;
        s->linked_.remove(c);
        c.owner_ = nullptr;
    }

    /// Make this scope a child of `parent` (may be null): cancelling the parent cancels it.
    void attach_to(CancelScope* parent) noexcept {
        if (parent != nullptr) parent->link(*this);
    }
    void detach() noexcept { unlink(*this); }

    void cancel() noexcept override { request(); }
    const CancelScope* as_scope() const noexcept override { return this; }
    /// Call `f(node)` for every linked leaf and child scope (a task dump, on the scope's thread).
    template <class F>
    void for_each_linked(F&& f) const {
        for (Cancellable* c = linked_.front(); c != nullptr; c = Linked::next(*c))
            f(static_cast<const Cancellable&>(*c));
    }

    /// The spawned task whose own scope this is (its SpawnBase), or null.
    void set_task(void* task) noexcept { task_ = task; }
    /// The spawned task this scope belongs to: its own, or the nearest enclosing scope's (null
    /// for scopes outside spawned tasks).
    void* task() const noexcept {
        const CancelScope* s = this;
        while (s != nullptr && s->task_ == nullptr)
            s = s->owner_;
        return s != nullptr ? s->task_ : nullptr;
    }
    /// The connection of `galay::serve` whose scope this is (galay::idle finds it), or null.
    void set_connection(void* conn) noexcept { connection_ = conn; }
    /// The connection this scope runs under: its own, or the nearest enclosing scope's.
    void* connection() const noexcept {
        const CancelScope* s = this;
        while (s != nullptr && s->connection_ == nullptr)
            s = s->owner_;
        return s != nullptr ? s->connection_ : nullptr;
    }

private:
    using Linked = IntrusiveList<Cancellable, CancellableLinks>;
    Linked linked_;
    void* task_ = nullptr;
    void* connection_ = nullptr;
    bool requested_ = false;
};

/// A node that passes a request on to another scope. A scope has one parent, but a task under
/// `with_cancel` answers two: the scope it is awaited in (its parent) and its CancelSource's,
/// which reaches it through a relay (one per task, so a source can serve several at once).
class ScopeRelay final : public Cancellable {
public:
    explicit ScopeRelay(CancelScope& target) noexcept
        : target_(target) {}
    ScopeRelay(const ScopeRelay&) = delete;
    ScopeRelay& operator=(const ScopeRelay&) = delete;
    ~ScopeRelay() { CancelScope::unlink(*this); }

    void cancel() noexcept override { target_.request(); }

private:
    CancelScope& target_;
};

} // namespace galay::detail
