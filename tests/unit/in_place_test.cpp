// detail::AwaitedInPlace: `co_await op.timeout(d)` awaits the op where it was made. GCC 12 copied
// an xvalue awaiter into the frame (an I/O op is ~160 bytes, touched twice per operation).
#include "support/backends.hpp"

#include <galay/detail/in_place.hpp>

#include <optional>

using namespace galay;
using namespace std::chrono_literals;

namespace {

/// An awaitable that counts its copies and moves, with a `.timeout()` shaped like the ops'.
struct Counting : detail::AwaitedInPlace<Counting> {
    static inline int copies = 0;
    int value = 0;
    explicit Counting(int v) noexcept
        : value(v) {}
    Counting(const Counting& o) noexcept
        : value(o.value) {
        ++copies;
    }
    Counting(Counting&& o) noexcept
        : value(o.value) {
        ++copies;
    }
    Counting&& timeout(std::chrono::nanoseconds) && { return static_cast<Counting&&>(*this); }
    bool await_ready() const noexcept { return true; }
    void await_suspend(std::coroutine_handle<>) noexcept {}
    int await_resume() const noexcept { return value; }
};

using InPlaceTest = test::BackendTest;

TEST_P(InPlaceTest, AnOpIsAwaitedWhereItWasMadeNotCopied) {
    Counting::copies = 0;
    run([]() -> Task<void> {
        EXPECT_EQ(co_await Counting(1).timeout(1s), 1); // xvalue: GCC copied it
        EXPECT_EQ(co_await Counting(2), 2);             // prvalue
        Counting c(3);
        EXPECT_EQ(co_await c, 3);            // lvalue
        EXPECT_EQ(co_await std::move(c), 3); // xvalue again
        co_return;
    }());
    EXPECT_EQ(Counting::copies, 0);
}

TEST(InPlace, MadeByConstructsInPlace) {
    Counting::copies = 0;
    std::optional<Counting> o;
    o.emplace(detail::MadeBy{[] { return Counting(4); }});
    EXPECT_EQ(o->value, 4);
    EXPECT_EQ(Counting::copies, 0);
}

TEST(InPlace, RealOpsAreAwaitedInPlace) {
    // Every op's awaitable has the reference awaiter (a copy-free co_await is part of its type).
    using Recv = decltype(std::declval<TcpStream&>().recv(std::span<char>{}));
    static_assert(std::is_same_v<decltype(std::declval<Recv&&>().operator co_await()),
                                 detail::InPlace<Recv>>);
    using Fill = io::BufReader<TcpStream>::Fill;
    static_assert(std::is_same_v<decltype(std::declval<Fill&&>().operator co_await()),
                                 detail::InPlace<Fill>>);
    using ReadUntil = io::BufReader<TcpStream>::ReadUntil;
    static_assert(std::is_same_v<decltype(std::declval<ReadUntil&&>().operator co_await()),
                                 detail::InPlace<ReadUntil>>);
    using Lock = decltype(std::declval<Mutex&>().lock());
    static_assert(std::is_same_v<decltype(std::declval<Lock&&>().operator co_await()),
                                 detail::InPlace<Lock>>);
    SUCCEED();
}

GALAY_INSTANTIATE_BACKENDS(InPlaceTest);

} // namespace
