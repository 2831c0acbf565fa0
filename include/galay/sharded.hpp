// galay/sharded.hpp: one `T` per worker of a Runtime, each used only on its own worker.
//
//     struct Counter {
//         std::uint64_t n = 0;
//         std::uint64_t add(std::uint64_t k) { return n += k; }
//     };
//     galay::Task<std::uint64_t> demo(galay::Sharded<Counter>& counters) {
//         counters.local().n += 1;                                   // this worker's: no lock
//         auto v = co_await counters.invoke_on(1, &Counter::add, 5); // worker 1's, on worker 1
//         co_await counters.invoke_on_all([](Counter& c) { c.n += 1; }); // every worker's
//         co_return co_await counters.map_reduce([](Counter& c) { return c.n; },
//                                                std::uint64_t{0}, std::plus<>{});
//     }
//     int main() {
//         galay::Runtime rt({.workers = 2});
//         galay::Sharded<Counter> counters(rt); // each Counter made on its own worker
//         std::uint64_t total = rt.block_on(demo(counters));
//         rt.block_on(counters.stop());         // each destroyed on its own worker
//         return total == rt.size() + 6 ? 0 : 1;
//     }
//
// Thread per core without locks: the state is split into shards, shard `i` is made, used and
// destroyed only on worker `i`, and another worker reaches it only by asking worker `i` to run
// a function on it (`invoke_on`, a message to that worker's loop and a reply, galay/invoke.hpp).
// A shard therefore needs no mutex and no atomics, and stays in its core's cache. Which shard a
// piece of state lives on is the program's choice: usually a hash of its key modulo `size()`.
// docs/guide/thread-per-core.md is the guide: what to partition, what must not be shared, what
// is and is not atomic across shards.
//
// - `local()`: the shard of the worker this runs on (a task on a worker of the same Runtime).
// - `invoke_on(i, &T::method, args...)` / `invoke_on(i, fn)`: `method(args...)` or `fn(shard)`
//   on worker i, awaited anywhere or joined on a plain thread; the arguments are copied into the
//   call. On the caller's own worker it runs in place. A method or `fn` may be a coroutine.
// - `invoke_on_all(fn)`: `fn(shard)` on every worker at once (a copy of `fn` each); done when
//   all are; the first exception (in worker order) is rethrown.
// - `map_reduce(map, init, reduce)`: `map(shard)` on every worker at once, then `init =
//   reduce(std::move(init), value)` on the caller, in worker order.
// - `stop()`: on every worker, `shard.stop()` if `T` has one (a plain call or a `Task<void>`,
//   e.g. to end tasks the shard spawned), then its destructor; made as a task to await, or
//   `rt.block_on(s.stop())` from a plain thread. A Sharded still running when its Runtime shuts
//   down is stopped first, each shard on its own worker, before the workers stop; one destroyed
//   unstopped on a plain thread stops itself (blocking), on a worker it leaves the teardown to
//   tasks on each worker. No call may still be running on a shard when it is stopped.
//
// The shards are made by the constructor (a plain thread: it blocks until each worker has made
// its own) or by `co_await Sharded<T>::create(rt, args...)` (a task); each is `T(args...)` from
// the same arguments (a shard that needs its index reads `galay::this_worker()`). A constructor
// that throws on one worker: the shards made on the others are destroyed on their workers, and
// the exception is rethrown.
#pragma once

#include "galay/detail/sharded_state.hpp"
#include "galay/runtime.hpp"
#include "galay/task.hpp"

#include <concepts>
#include <functional>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace galay {

/// One `T` per worker of a Runtime (see the top of this header).
template <class T>
class Sharded {
    using State = detail::ShardedState<T>;

public:
    /// Make one `T(args...)` on each worker of `rt` and wait for them (a thread that is not a
    /// worker: from a task, use `create`). Rethrows a constructor's exception.
    template <class... Args>
    explicit Sharded(Runtime& rt, const Args&... args)
        : st_(State::make(rt)) {
        rt.block_on(st_->construct_all(args...));
    }
    /// As the constructor, from a task.
    template <class... Args>
    [[nodiscard]] static Task<Sharded> create(Runtime& rt, Args... args) {
        Sharded s(State::make(rt));
        co_await s.st_->construct_all(args...);
        co_return std::move(s);
    }
    /// Takes over the shards of `o`.
    Sharded(Sharded&&) noexcept = default;
    Sharded& operator=(Sharded&&) = delete;
    Sharded(const Sharded&) = delete;
    /// Stops it unless `stop()` did (see the top of this header).
    ~Sharded() {
        if (st_) State::abandon(std::move(st_));
    }

    /// The number of shards: the Runtime's workers.
    unsigned size() const noexcept { return st_->size(); }
    /// The Runtime it lives on.
    Runtime& runtime() const noexcept { return st_->runtime(); }

    /// The shard of the current worker. Throws `std::logic_error` on a thread that is not a
    /// worker of this Sharded's Runtime, or once it is stopped.
    T& local() { return st_->local(); }

    /// Call the member function `method` of the shard of worker `worker` with `args`, on that
    /// worker (see invoke_on in galay/invoke.hpp: `co_await` it, or `.join()` on a plain
    /// thread). The arguments are copied into the call.
    template <class M, class... Args>
        requires std::is_member_function_pointer_v<M>
    [[nodiscard]] auto invoke_on(unsigned worker, M method, Args... args) {
        return runtime().invoke_on(
            worker,
            [st = st_.get(), worker, method, ... a = std::move(args)]() mutable -> decltype(auto) {
                return std::invoke(method, st->shard(worker), std::move(a)...);
            });
    }
    /// `fn(shard)` on the shard of worker `worker`, on that worker (`fn` may return a `Task`).
    template <class F>
        requires std::invocable<F&, T&>
    [[nodiscard]] auto invoke_on(unsigned worker, F fn) {
        return runtime().invoke_on(
            worker, [st = st_.get(), worker, f = std::move(fn)]() mutable -> decltype(auto) {
                return std::invoke(f, st->shard(worker));
            });
    }

    /// `fn(shard)` on every worker at once (a copy of `fn` each; a plain call or a `Task<void>`);
    /// done when all are. The first exception, in worker order, is rethrown after all finished.
    template <class F>
        requires std::invocable<F&, T&>
    [[nodiscard]] Task<void> invoke_on_all(F fn) {
        return st_->invoke_on_all(std::move(fn));
    }

    /// `map(shard)` on every worker at once (a copy of `map` each; a value or a `Task` of one),
    /// then `init = reduce(std::move(init), value)` here, in worker order; gives `init`.
    template <class Map, class Acc, class Reduce>
        requires std::invocable<Map&, T&>
    [[nodiscard]] Task<Acc> map_reduce(Map map, Acc init, Reduce reduce) {
        return st_->map_reduce(std::move(map), std::move(init), std::move(reduce));
    }

    /// On every worker at once: `shard.stop()` if `T` has it, then the shard's destructor.
    /// Idempotent; `local()` and calls fail after it.
    [[nodiscard]] Task<void> stop() { return st_->stop_all(st_); }

private:
    explicit Sharded(std::shared_ptr<State> st) noexcept
        : st_(std::move(st)) {}

    std::shared_ptr<State> st_;
};

} // namespace galay
