// Awaiting an operation where it already is.
//
// `co_await conn.recv(buf).timeout(1s)` hands co_await an xvalue (`timeout` returns the op as
// `Derived&&`). GCC (12) copies such an awaiter into the coroutine frame before awaiting it, so
// the op is written twice, in two places of the frame: for an I/O op that is ~160 bytes, three
// more cache lines touched per operation, which a server with a thousand connections pays in
// misses (the frames are cold). Clang does not copy. An `operator co_await` that returns a
// reference awaiter takes the copy away on both: the op stays the temporary it was created as.
//
// Every awaitable base (IoAwaitable, Waiter, Deadlined, ...) derives from AwaitedInPlace.
#pragma once

#include <coroutine>
#include <utility>

namespace galay::detail {

/// The awaiter of an awaitable `A` that stays where it is (a temporary of the co_await
/// expression, or the caller's variable).
template <class A>
class InPlace {
public:
    explicit InPlace(A& a) noexcept
        : a_(a) {}
    decltype(auto) await_ready() { return a_.await_ready(); }
    template <class P>
    decltype(auto) await_suspend(std::coroutine_handle<P> h) {
        return a_.await_suspend(h);
    }
    decltype(auto) await_resume() { return a_.await_resume(); }

private:
    A& a_;
};

/// CRTP base: `co_await x` awaits `x` itself, never a copy of it.
template <class Derived>
class AwaitedInPlace {
public:
    InPlace<Derived> operator co_await() & noexcept {
        return InPlace<Derived>(static_cast<Derived&>(*this));
    }
    InPlace<Derived> operator co_await() && noexcept {
        return InPlace<Derived>(static_cast<Derived&>(*this));
    }
};

/// A value made where it is needed: `opt.emplace(MadeBy{[&] { return make(); }})` constructs
/// the result of `make()` in `opt`, where `opt.emplace(make())` would move it there.
template <class F>
struct MadeBy {
    F make;
    operator decltype(std::declval<F&>()())() { return make(); }
};
template <class F>
MadeBy(F) -> MadeBy<F>;

} // namespace galay::detail
