// galay::Timeout (galay/time/timeout.hpp): `.timeout()` takes a duration, an optional one, or
// galay::no_timeout; an empty one arms nothing (the operation waits as without `.timeout()`), a
// set one expires as a duration does. On an I/O op, a sync wait, a JoinHandle and galay::timeout.
#include "support/backends.hpp"
#include "support/tcp_pair.hpp"

#include <array>
#include <optional>

using namespace galay;
using namespace std::chrono_literals;

namespace {

class TimeoutValueTest : public test::BackendTest {};

static_assert(!Timeout(no_timeout).has_value());
static_assert(!Timeout(std::optional<std::chrono::seconds>{}).has_value());
static_assert(Timeout(std::optional<std::chrono::seconds>{2s}).value() == 2s);
static_assert(Timeout(0ms).has_value()); // zero is a limit (expires at once), not "none"

Task<void> sender(TcpStream* s, Event* go) {
    (void)co_await go->wait();
    static constexpr std::string_view kMsg = "late";
    auto sent = co_await s->send_all(std::span(kMsg.data(), kMsg.size()));
    CO_ASSERT(sent);
}

Task<void> io_and_waits() {
    auto pair = co_await test::loopback_pair();
    std::array<char, 16> buf{};
    // A set optional expires as the duration does; nothing was consumed.
    std::optional<std::chrono::milliseconds> limit = 1ms;
    auto r = co_await pair.first.recv(buf).timeout(limit);
    CO_ASSERT(!r && r.error() == std::errc::timed_out);
    // An empty one waits for the data however late it comes (it comes only after a timer that
    // would have fired long before, had one been armed).
    Event go;
    spawn(sender(&pair.second, &go));
    limit.reset();
    auto wake = [](Event* go) -> Task<void> {
        auto slept = co_await sleep(5ms);
        (void)slept;
        go->set();
    };
    spawn(wake(&go));
    auto n = co_await pair.first.recv(buf).timeout(limit);
    CO_ASSERT(n && *n == 4);
    // A sync wait: galay::no_timeout, and an expiring optional.
    Event never;
    auto w = co_await never.wait().timeout(std::optional<std::chrono::microseconds>{100us});
    CO_ASSERT(!w && w.error() == std::errc::timed_out);
    Event set;
    set.set();
    auto s = co_await set.wait().timeout(no_timeout);
    CO_ASSERT(s);
}

TEST_P(TimeoutValueTest, AnEmptyTimeoutArmsNothingAndASetOneExpires) {
    run_paused(io_and_waits()); // (the late sender's 5 ms take no real time)
}

Task<int> answer_after(std::chrono::milliseconds d) {
    auto slept = co_await sleep(d);
    (void)slept;
    co_return 42;
}

Task<void> whole_tasks() {
    // galay::timeout(none, task) runs the task to its end, as a Result.
    Result<int> v = co_await galay::timeout(no_timeout, answer_after(2ms));
    CO_ASSERT(v && *v == 42);
    Result<int> late = co_await galay::timeout(std::optional<std::chrono::milliseconds>{1ms},
                                               answer_after(1000ms));
    CO_ASSERT(!late && late.error() == std::errc::timed_out);
    JoinHandle<int> h = spawn(answer_after(1ms));
    Result<int> joined = co_await h.timeout(no_timeout);
    CO_ASSERT(joined && *joined == 42);
}

TEST_P(TimeoutValueTest, WholeTasksAndHandles) {
    run_paused(whole_tasks());
}

} // namespace

GALAY_INSTANTIATE_BACKENDS(TimeoutValueTest);
