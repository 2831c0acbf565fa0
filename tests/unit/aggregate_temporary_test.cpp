// The g++ 12 aggregate-temporary hazard and the forms that avoid it. `co_await ch.send(Msg{a, b})`
// with an aggregate `Msg` and a send that suspends: g++ 12 destroys the temporary twice (with a
// std::string member, ASan reports a double free). `Channel::emplace(a, b)` builds the value
// inside the awaitable, and a named value moved in is a plain xvalue: both destroy each object
// exactly once on every compiler. The sends here all suspend (the channel is full), as they must
// for the hazard to show.
#include "support/backends.hpp"
#include "support/threads.hpp"

#include <string>

using namespace galay;

namespace {

/// Counts constructions and destructions of itself (no heap: a double destroy is counted, not
/// a crash).
struct Counted {
    static inline int made = 0, destroyed = 0;
    int id = 0;
    explicit Counted(int i) noexcept
        : id(i) {
        ++made;
    }
    Counted(const Counted& o) noexcept
        : id(o.id) {
        ++made;
    }
    Counted(Counted&& o) noexcept
        : id(o.id) {
        ++made;
    }
    Counted& operator=(const Counted&) = default;
    Counted& operator=(Counted&&) = default;
    ~Counted() { ++destroyed; }
    static void reset() { made = destroyed = 0; }
};

/// The shape of the pub/sub message: an aggregate with a member that owns heap memory.
struct Pub {
    Counted topic;
    std::string payload;
};

/// The same without heap memory, for the form g++ 12 miscompiles.
struct Plain {
    Counted topic;
    int n = 0;
};

class AggregateTemporaryTest : public test::BackendTest {
protected:
    void SetUp() override {
        test::BackendTest::SetUp();
        Counted::reset();
    }

    /// Fill a channel so the next send suspends, send through `send_one` from one task while
    /// another receives both values; gives the second value's payload (if it has one).
    template <class T, class Send>
    std::string send_while_full(T first, Send send_one) {
        std::string payload_seen;
        Channel<T> ch(1);
        run([&]() -> Task<void> {
            CO_ASSERT(co_await ch.send(std::move(first)));
            auto sender = [&]() -> Task<void> { co_await send_one(ch); };
            auto receiver = [&]() -> Task<void> {
                co_await test::yield_until([&] { return ch.waiting_senders() == 1; });
                auto a = co_await ch.recv();
                auto b = co_await ch.recv();
                CO_ASSERT(a && b);
                if constexpr (requires { b->payload; }) payload_seen = b->payload;
            };
            co_await when_all(sender(), receiver());
        }());
        return payload_seen;
    }
};

} // namespace

TEST_P(AggregateTemporaryTest, EmplaceBuildsTheAggregateInPlaceAndDestroysItOnce) {
    const std::string payload(64, 'p'); // on the heap: a double destroy is a double free
    std::string seen =
        send_while_full<Pub>(Pub{Counted(0), "first"}, [&](Channel<Pub>& ch) -> Task<void> {
            auto r = co_await ch.emplace(Counted(1), payload);
            CO_ASSERT(r);
        });
    EXPECT_EQ(seen, payload);
    EXPECT_EQ(Counted::made, Counted::destroyed);
}

TEST_P(AggregateTemporaryTest, ANamedValueMovedInIsDestroyedOnce) {
    const std::string payload(64, 'p');
    std::string seen =
        send_while_full<Pub>(Pub{Counted(0), "first"}, [&](Channel<Pub>& ch) -> Task<void> {
            Pub msg{Counted(1), payload};
            auto r = co_await ch.send(std::move(msg));
            CO_ASSERT(r);
        });
    EXPECT_EQ(seen, payload);
    EXPECT_EQ(Counted::made, Counted::destroyed);
}

TEST_P(AggregateTemporaryTest, TheFormReadmeCallsUnsafeDestroysTheTemporaryTwiceOnGcc12Only) {
    // the compilers guide tells g++ 12 users not to write this; the count shows why. On another
    // compiler (or a g++ that fixed it) every object is destroyed once, and the guide must say so.
    send_while_full<Plain>(Plain{Counted(0), 0}, [](Channel<Plain>& ch) -> Task<void> {
        auto r = co_await ch.send(Plain{Counted(1), 1});
        CO_ASSERT(r);
    });
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
    EXPECT_EQ(Counted::destroyed, Counted::made + 1);
#else
    EXPECT_EQ(Counted::destroyed, Counted::made);
#endif
}

GALAY_INSTANTIATE_BACKENDS(AggregateTemporaryTest);
