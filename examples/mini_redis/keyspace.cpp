// mini_redis/keyspace.cpp: a worker's shard, its periodic expiry, and the totals (keyspace.hpp).
#include "mini_redis/keyspace.hpp"

using namespace std::chrono_literals;

namespace mini_redis {
namespace {

/// Ten times a second, delete some expired keys of this worker's store (store.hpp).
galay::Task<void> expire_keys(Store& store) {
    galay::Interval every(100ms, galay::MissedTick::skip);
    for (;;) {
        auto tick = co_await every.tick();
        if (!tick) co_return; // cancelled: the shard is stopping
        store.expire_some(now_ms());
    }
}

} // namespace

Stats& Stats::operator+=(const Stats& o) noexcept {
    commands += o.commands;
    connections += o.connections;
    open += o.open;
    rejected += o.rejected;
    parser_bytes += o.parser_bytes;
    max_output = std::max(max_output, o.max_output);
    max_input = std::max(max_input, o.max_input);
    keys += o.keys;
    with_deadline += o.with_deadline;
    return *this;
}

Shard::Shard()
    : index(static_cast<unsigned>(galay::this_worker()))
    , expiry_(galay::spawn(expire_keys(store))) {}

galay::Task<void> Shard::stop() {
    expiry_.abort();
    co_await expiry_;
}

galay::Task<Stats> totals(Keyspace& keyspace, bool flush) {
    auto each = [flush](Shard& s) {
        if (flush) s.store.clear();
        Stats st = s.stats;
        st.keys = s.store.size();
        st.with_deadline = s.store.with_deadline();
        return st;
    };
    auto add = [](Stats sum, const Stats& one) { return sum += one; };
    // Bound before the co_await: g++ 12 mishandles an aggregate temporary (Stats{}) inside one.
    auto all = keyspace.map_reduce(each, Stats{}, add);
    co_return co_await std::move(all);
}

} // namespace mini_redis
