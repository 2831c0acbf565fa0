// The g++ 12 lambda-temporary hazard, the sibling of the aggregate one
// (aggregate_temporary_test.cpp): a lambda that captures by value, written as a temporary in a
// statement that suspends (`co_await spawn_blocking([s] {...})`, `co_await on(i, [v] {...})`,
// `co_await [c]() -> Task<int> {...}()`), is destroyed twice by g++ 12: its copies are destroyed
// twice (with a std::string, a double free). A lambda named first and moved in, and one that
// captures by reference, destroy each object once on every compiler. check_coroutines reports
// the form (cmake/check_coroutines.py); docs/guide/compilers.md lists it.
#include "support/backends.hpp"

using namespace galay;

namespace {

/// Counts constructions and destructions of itself (no heap: a double destroy is counted, not a
/// crash).
struct Counted {
    static inline int made = 0, destroyed = 0;
    Counted() noexcept { ++made; }
    Counted(const Counted&) noexcept { ++made; }
    Counted(Counted&&) noexcept { ++made; }
    Counted& operator=(const Counted&) = default;
    Counted& operator=(Counted&&) = default;
    ~Counted() { ++destroyed; }
    int value() const noexcept { return 1; }
};

/// Calls `fn` after suspending once: the lambda's statement suspends, as it must for the hazard.
template <class F>
Task<int> call_later(F fn) {
    co_await yield_now();
    co_return fn();
}

constexpr bool kGcc12 =
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
    true;
#else
    false;
#endif

class ClosureTemporaryTest : public test::BackendTest {
protected:
    void SetUp() override {
        test::BackendTest::SetUp();
        Counted::made = Counted::destroyed = 0;
    }
};

} // namespace

TEST_P(ClosureTemporaryTest, ALambdaTemporaryThatCopiesIsDestroyedTwiceOnGcc12Only) {
    const int r = run([]() -> Task<int> {
        Counted c;
        // coroutine-hazard-ok: the form the compilers guide calls unsafe, counted here
        co_return co_await call_later([c] { return c.value(); });
    }());
    EXPECT_EQ(r, 1);
    EXPECT_EQ(Counted::destroyed, Counted::made + (kGcc12 ? 1 : 0));
}

TEST_P(ClosureTemporaryTest, ALambdaCoroutineThatCopiesAwaitedOnTheSpotIsDestroyedTwiceOnGcc12) {
    const int r = run([]() -> Task<int> {
        Counted c;
        // coroutine-hazard-ok: the form the compilers guide calls unsafe, counted here
        co_return co_await [c]() -> Task<int> {
            co_await yield_now();
            co_return c.value();
        }();
    }());
    EXPECT_EQ(r, 1);
    EXPECT_EQ(Counted::destroyed, Counted::made + (kGcc12 ? 1 : 0));
}

TEST_P(ClosureTemporaryTest, ALambdaNamedFirstAndMovedInIsDestroyedOnce) {
    const int r = run([]() -> Task<int> {
        Counted c;
        auto fn = [c] { return c.value(); };
        co_return co_await call_later(std::move(fn));
    }());
    EXPECT_EQ(r, 1);
    EXPECT_EQ(Counted::destroyed, Counted::made);
}

TEST_P(ClosureTemporaryTest, ALambdaThatCapturesByReferenceCopiesNothing) {
    const int r = run([]() -> Task<int> {
        Counted c;
        co_return co_await call_later([&c] { return c.value(); });
    }());
    EXPECT_EQ(r, 1);
    EXPECT_EQ(Counted::made, 1);
    EXPECT_EQ(Counted::destroyed, 1);
}

GALAY_INSTANTIATE_BACKENDS(ClosureTemporaryTest);
