// The state behind galay::Sharded<T> (galay/sharded.hpp): the shards, one cache line apart, and
// how they are made, reached and torn down, each on its own worker. Shared (a shared_ptr) by the
// Sharded, the Runtime's list of what to stop before its workers stop, and the teardown tasks a
// Sharded destroyed on a worker leaves behind.
#pragma once

#include "galay/runtime.hpp"
#include "galay/task.hpp"

#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace galay::detail {

/// What a Runtime stops before its workers stop (RuntimeCore keeps weak references).
class RuntimeStopHook {
public:
    /// On the thread calling Runtime::shutdown, before the workers are told to stop (blocking).
    virtual void stop_before_shutdown() noexcept = 0;

protected:
    ~RuntimeStopHook() = default;
};
/// Have `rt` call `hook->stop_before_shutdown()` when it shuts down, if the hook is alive then.
void on_runtime_shutdown(Runtime& rt, std::weak_ptr<RuntimeStopHook> hook);

/// A shard type with a `stop()` for its teardown.
template <class T>
concept HasStop = requires(T& t) { t.stop(); };

template <class T>
class ShardedState final : public RuntimeStopHook,
                           public std::enable_shared_from_this<ShardedState<T>> {
public:
    explicit ShardedState(Runtime& rt)
        : rt_(rt)
        , shards_(rt.size()) {}

    static std::shared_ptr<ShardedState> make(Runtime& rt) {
        auto st = std::make_shared<ShardedState>(rt);
        on_runtime_shutdown(rt, std::weak_ptr<RuntimeStopHook>(st));
        return st;
    }

    unsigned size() const noexcept { return static_cast<unsigned>(shards_.size()); }
    Runtime& runtime() const noexcept { return rt_; }

    /// Shard `i` (on worker i).
    T& shard(unsigned i) {
        T* p = shards_[i].value.get();
        if (p == nullptr) throw std::logic_error("galay: Sharded: used after stop()");
        return *p;
    }
    T& local() {
        const int w = this_worker();
        if (w < 0 || Runtime::current() != &rt_)
            throw std::logic_error("galay: Sharded::local() off the workers of its Runtime");
        return shard(static_cast<unsigned>(w));
    }

    template <class... Args>
    Task<void> construct_all(const Args&... args) {
        std::vector<Task<void>> made;
        made.reserve(size());
        for (unsigned i = 0; i < size(); ++i)
            made.push_back(construct_on(i, args...));
        std::exception_ptr error;
        try {
            co_await when_all(std::move(made));
        } catch (...) {
            error = std::current_exception();
        }
        if (!error) co_return;
        co_await destroy_all(); // the shards that were made, each on its worker
        std::rethrow_exception(error);
    }

    template <class F>
    Task<void> invoke_on_all(F fn) {
        std::vector<Task<void>> calls;
        calls.reserve(size());
        for (unsigned i = 0; i < size(); ++i)
            calls.push_back(call_on(this, i, fn));
        co_await when_all(std::move(calls));
    }

    template <class Map, class Acc, class Reduce>
    Task<Acc> map_reduce(Map map, Acc init, Reduce reduce) {
        using V = typename InvokeValue<Map, std::invoke_result_t<Map&, T&>>::type;
        std::vector<Task<V>> calls;
        calls.reserve(size());
        for (unsigned i = 0; i < size(); ++i)
            calls.push_back(map_on<V>(this, i, map));
        std::vector<V> values = co_await when_all(std::move(calls));
        for (V& v : values)
            init = reduce(std::move(init), std::move(v));
        co_return init;
    }

    /// stop(): the first caller tears down, the others return at once.
    static Task<void> stop_all(std::shared_ptr<ShardedState> self) {
        if (self->stopped_.exchange(true, std::memory_order_acq_rel)) co_return;
        co_await self->destroy_all();
    }

    /// ~Sharded without stop().
    static void abandon(std::shared_ptr<ShardedState> self) noexcept {
        if (self->stopped_.exchange(true, std::memory_order_acq_rel)) return;
        if (Scheduler::current() == nullptr) {
            try {
                self->rt_.block_on(self->destroy_all());
            } catch (...) { // the runtime is shut down: the shards go with the state, here
            }
            return;
        }
        // On a worker, which must not block: a task on each worker destroys its shard.
        for (unsigned i = 0; i < self->size(); ++i)
            self->rt_.spawn_on(i, teardown_detached(self, i));
    }

    void stop_before_shutdown() noexcept override {
        if (stopped_.exchange(true, std::memory_order_acq_rel)) return;
        try {
            rt_.block_on(destroy_all());
        } catch (...) {
        }
    }

private:
    template <class... Args>
    Task<void> construct_on(unsigned i, const Args&... args) {
        // (args live in construct_all's frame, which outlives this call)
        co_await rt_.invoke_on(
            i, [this, i, &args...] { shards_[i].value = std::make_unique<T>(args...); });
    }

    template <class F>
    static Task<void> call_on(ShardedState* st, unsigned i, F fn) {
        // Named first: g++ 12 destroys an owning closure twice when it is an awaited temporary.
        // coroutine-hazard-ok (the checker takes this named lambda for a temporary)
        auto on_shard = [st, i, f = std::move(fn)]() mutable {
            return std::invoke(f, st->shard(i));
        };
        auto call = st->rt_.invoke_on(i, std::move(on_shard));
        co_await std::move(call);
    }

    template <class V, class Map>
    static Task<V> map_on(ShardedState* st, unsigned i, Map map) {
        // coroutine-hazard-ok (a named lambda, as in call_on)
        auto on_shard = [st, i, m = std::move(map)]() mutable {
            return std::invoke(m, st->shard(i));
        };
        auto call = st->rt_.invoke_on(i, std::move(on_shard));
        co_return co_await std::move(call);
    }

    /// On worker i: the shard's stop() (if it has one), then its destructor.
    static Task<void> teardown(ShardedState* st, unsigned i) {
        std::unique_ptr<T> shard = std::move(st->shards_[i].value);
        if (!shard) co_return;
        if constexpr (HasStop<T>) {
            if constexpr (IsTask<decltype(shard->stop())>::value)
                co_await shard->stop();
            else
                shard->stop();
        }
    }
    static Task<void> teardown_detached(std::shared_ptr<ShardedState> st, unsigned i) {
        co_await teardown(st.get(), i);
    }

    Task<void> destroy_all() {
        std::vector<Task<void>> done;
        done.reserve(size());
        for (unsigned i = 0; i < size(); ++i)
            done.push_back(destroy_on(this, i));
        co_await when_all(std::move(done));
    }
    static Task<void> destroy_on(ShardedState* st, unsigned i) {
        co_await st->rt_.invoke_on(i, [st, i] { return teardown(st, i); });
    }

    // One cache line each. (coroutine-hazard-ok: a declaration, not a temporary)
    struct alignas(64) Slot {
        std::unique_ptr<T> value;
    };

    Runtime& rt_;
    std::vector<Slot> shards_;
    std::atomic<bool> stopped_{false};
};

} // namespace galay::detail
