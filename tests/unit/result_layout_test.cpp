// The value types galay returns in a Result leave no tail padding when they are trivially
// copyable: libc++ 16 and 17 put std::expected's has-value flag into its value's tail padding,
// and copying such a value (a memcpy of the whole object) then overwrites the flag. A Result
// returned through a coroutine read as an error with a garbage category on that library.
#include <galay/fs/ops.hpp>
#include <galay/galay.hpp>
#include <galay/io/copy.hpp>
#include <galay/net/unix.hpp>
#include <galay/process.hpp>

#include <gtest/gtest.h>

#include <type_traits>

namespace {

template <class T>
struct Probe {
    [[no_unique_address]] T value;
    bool flag;
};

/// True when another member can live in T's tail padding (what std::expected's flag does there).
template <class T>
constexpr bool reuses_tail_padding = sizeof(Probe<T>) == sizeof(T);

template <class T>
constexpr bool safe_in_result = !std::is_trivially_copyable_v<T> || !reuses_tail_padding<T>;

// The probe itself: a struct that is not a C++03 POD (a default member initializer is enough) and
// ends in padding has its tail reused.
struct Padded {
    long a = 0;
    bool b = false;
};
static_assert(reuses_tail_padding<Padded>, "the probe must detect reusable tail padding");
static_assert(safe_in_result<galay::io::CopyStats>);
static_assert(safe_in_result<galay::RecvInfo>);
static_assert(safe_in_result<galay::SocketAddr>);
static_assert(safe_in_result<galay::UnixAddr>);
static_assert(safe_in_result<galay::PeerCred>);
static_assert(safe_in_result<galay::process::ExitStatus>);
static_assert(safe_in_result<galay::fs::Metadata>);

galay::Task<galay::Result<galay::io::CopyStats>> stats_through_a_coroutine() {
    galay::io::CopyStats s;
    s.spliced = true;
    s.a_to_b = 1;
    s.b_to_a = 2;
    co_return s;
}

} // namespace

TEST(ResultLayout, AValueReturnedThroughACoroutineIsStillAValue) {
    galay::Scheduler sched;
    auto r = sched.block_on(stats_through_a_coroutine());
    ASSERT_TRUE(r.has_value());
    EXPECT_TRUE(r->spliced);
    EXPECT_EQ(r->a_to_b, 1u);
    EXPECT_EQ(r->b_to_a, 2u);
}
