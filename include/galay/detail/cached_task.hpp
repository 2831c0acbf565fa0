// The coroutine behind the slow path of a compound operation (BufReader::read_until,
// BufWriter::flush, ...): a Task whose frame comes from a block the owning object keeps and
// reuses, so an operation that has to wait for the network allocates nothing in steady state.
//
// A compound operation first tries to finish from what is already buffered (no coroutine at all);
// only when it must wait does it start one of these, which then loops over single I/O operations.
// The frame is carved from the owner's `FrameCache` when the coroutine function's first parameter
// is that cache:
//
//     static CachedTask<Result<std::size_t>> slow(FrameCache& cache, Self& self, ...);
//
// Like `Task`, it starts lazily, hands over by symmetric transfer, inherits the awaiting task's
// cancellation scope (so the leaf operations it awaits are cancelled with that task) and rethrows
// an exception in its awaiter.
#pragma once

#include "galay/task.hpp"

#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>
#include <utility>

namespace galay::detail {

/// One reusable block for the coroutine frame of an object's slow path. The block grows to the
/// largest frame asked for and is kept until the cache is destroyed. A second frame requested
/// while the block is in use (two operations at once on one object) comes from the heap.
class FrameCache {
public:
    FrameCache() noexcept = default;
    FrameCache(FrameCache&& o) noexcept
        : block_(std::exchange(o.block_, nullptr))
        , in_use_(std::exchange(o.in_use_, false)) {
        if (block_ != nullptr) block_->owner = this;
    }
    FrameCache& operator=(FrameCache&& o) noexcept {
        if (this != &o) {
            release();
            block_ = std::exchange(o.block_, nullptr);
            in_use_ = std::exchange(o.in_use_, false);
            if (block_ != nullptr) block_->owner = this;
        }
        return *this;
    }
    FrameCache(const FrameCache&) = delete;
    FrameCache& operator=(const FrameCache&) = delete;
    ~FrameCache() { release(); }

    /// `n` bytes for a coroutine frame, aligned like operator new.
    void* allocate(std::size_t n);
    /// Give back memory from allocate() (to its cache, or to the heap).
    static void deallocate(void* p) noexcept;

private:
    // Precedes every frame: who lent it (null: the heap) and how big the block is.
    struct alignas(alignof(std::max_align_t)) Header {
        FrameCache* owner;
        std::size_t capacity;
    };
    void release() noexcept;

    Header* block_ = nullptr;
    bool in_use_ = false;
};

template <class T>
class [[nodiscard]] CachedTask {
public:
    struct promise_type : PromiseBase {
        std::optional<T> value;
        std::exception_ptr error;

        template <class... Args>
        static void* operator new(std::size_t n, FrameCache& cache, Args&&...) {
            return cache.allocate(n);
        }
        static void operator delete(void* p, std::size_t) noexcept { FrameCache::deallocate(p); }

        CachedTask get_return_object() noexcept {
            return CachedTask(std::coroutine_handle<promise_type>::from_promise(*this));
        }
        template <class U>
        void return_value(U&& v) {
            value.emplace(std::forward<U>(v));
        }
        void unhandled_exception() noexcept { error = std::current_exception(); }
    };
    using handle_type = std::coroutine_handle<promise_type>;

    CachedTask() noexcept = default;
    explicit CachedTask(handle_type h) noexcept
        : h_(h) {}
    CachedTask(CachedTask&& o) noexcept
        : h_(std::exchange(o.h_, {})) {}
    CachedTask& operator=(CachedTask&& o) noexcept {
        if (this != &o) {
            if (h_) h_.destroy();
            h_ = std::exchange(o.h_, {});
        }
        return *this;
    }
    ~CachedTask() {
        if (h_) h_.destroy();
    }

    bool valid() const noexcept { return static_cast<bool>(h_); }

    /// Start the coroutine for the awaiting coroutine `caller` (await_suspend of a wrapper).
    template <class P>
    std::coroutine_handle<> start(std::coroutine_handle<P> caller) noexcept {
        h_.promise().continuation = caller;
        if (h_.promise().scope == nullptr) h_.promise().scope = scope_of(caller);
        return h_;
    }
    /// The result, once the coroutine has finished (await_resume of a wrapper).
    T take() {
        auto& p = h_.promise();
        if (p.error) std::rethrow_exception(p.error);
        return std::move(*p.value);
    }

    // Awaitable directly too: `co_await slow(cache, ...)`.
    bool await_ready() const noexcept { return false; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> caller) noexcept {
        return start(caller);
    }
    T await_resume() { return take(); }

private:
    handle_type h_;
};

} // namespace galay::detail
