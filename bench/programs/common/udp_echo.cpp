#include "common/udp_echo.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

namespace galay::tools::udp {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint32_t kMagic = 0x45504455; // "UDPE"

std::uint64_t mix(std::uint64_t x) noexcept { // splitmix64
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/// The pattern word `i` of message (client, seq).
std::uint64_t pattern_word(std::uint64_t base, std::size_t i) noexcept {
    return base + i * 0xD6E8FEB86659FD93ull;
}

std::uint64_t pattern_base(std::uint32_t client, std::uint64_t seq) noexcept {
    return mix((std::uint64_t{client} << 40) ^ seq);
}

} // namespace

void stamp(std::span<std::byte> msg, std::uint32_t client, std::uint64_t seq) noexcept {
    std::byte* p = msg.data();
    std::memcpy(p, &client, 4);
    std::memcpy(p + 4, &kMagic, 4);
    std::memcpy(p + 8, &seq, 8);
    const std::uint64_t base = pattern_base(client, seq);
    std::size_t off = kHeaderSize, i = 0;
    for (; off + 8 <= msg.size(); off += 8, ++i) {
        const std::uint64_t w = pattern_word(base, i);
        std::memcpy(p + off, &w, 8);
    }
    const std::uint64_t w = pattern_word(base, i);
    std::memcpy(p + off, &w, msg.size() - off);
}

namespace {
/// The body of check(), inline: the client loop verifies every datagram with it, and the call
/// (which the compiler stopped inlining as the surrounding code grew) cost bench_udp ~5%.
[[gnu::always_inline]] inline Check check_datagram(std::span<const std::byte> msg,
                                                   std::size_t expected_size, std::uint32_t client,
                                                   std::uint64_t* seq) noexcept {
    if (msg.size() != expected_size) return Check::wrong_size;
    const std::byte* p = msg.data();
    std::uint32_t id, magic;
    std::memcpy(&id, p, 4);
    std::memcpy(&magic, p + 4, 4);
    std::memcpy(seq, p + 8, 8);
    if (magic != kMagic) return Check::corrupt;
    if (id != client) return Check::wrong_client;
    const std::uint64_t base = pattern_base(client, *seq);
    std::size_t off = kHeaderSize, i = 0;
    for (; off + 8 <= msg.size(); off += 8, ++i) {
        std::uint64_t got;
        std::memcpy(&got, p + off, 8);
        if (got != pattern_word(base, i)) return Check::corrupt;
    }
    const std::uint64_t w = pattern_word(base, i);
    if (std::memcmp(p + off, &w, msg.size() - off) != 0) return Check::corrupt;
    return Check::ok;
}
} // namespace

Check check(std::span<const std::byte> msg, std::size_t expected_size, std::uint32_t client,
            std::uint64_t* seq) noexcept {
    return check_datagram(msg, expected_size, client, seq);
}

const char* to_string(Check c) noexcept {
    switch (c) {
    case Check::ok:
        return "ok";
    case Check::wrong_size:
        return "the echo has the wrong length";
    case Check::wrong_client:
        return "the echo belongs to another client";
    case Check::corrupt:
        return "the echoed bytes differ from what was sent";
    }
    return "?";
}

LossLedger::Echo LossLedger::echo(std::uint64_t seq) noexcept {
    if (seq >= state_.size()) return Echo::never_sent;
    std::uint8_t& s = state_[seq];
    switch (s) {
    case kInFlight:
        s = kEchoed;
        --in_flight_;
        ++received_;
        return Echo::fresh;
    case kGivenUp:
        s = kEchoed;
        ++received_;
        return Echo::late;
    default:
        ++duplicates_;
        return Echo::duplicate;
    }
}

void LossLedger::give_up_in_flight() noexcept {
    for (std::uint64_t i = oldest_in_flight_; i < state_.size(); ++i)
        if (state_[i] == kInFlight) state_[i] = kGivenUp;
    in_flight_ = 0;
    oldest_in_flight_ = state_.size();
}

namespace {

struct Shared {
    const ClientConfig& cfg;
    LiveCounters* live;
    ClientReport report;
    bool stop_sending = false; // duration mode: the measured window is over
    Clock::time_point first_send = Clock::time_point::max();
    Clock::time_point last_echo = Clock::time_point::min();

    void error(std::uint32_t client, const std::string& what, std::uint64_t* counter) {
        ++*counter;
        if (report.first_errors.size() < 10)
            report.first_errors.push_back("client " + std::to_string(client) + ": " + what);
    }
};

/// One client: keeps `pipeline` datagrams in flight until it has sent its share, then waits for
/// the last echoes for at most `drain_timeout`.
Task<void> client(std::uint32_t id, UdpSocket sock, Shared& sh) {
    const ClientConfig& c = sh.cfg;
    const std::size_t window = c.pipeline;
    const std::size_t in_size = c.size + 1; // a longer echo shows up as truncated/wrong length
    std::unique_ptr<std::byte[]> out_buf(new std::byte[window * c.size]);
    std::unique_ptr<std::byte[]> in_buf(new std::byte[window * in_size]);
    std::vector<OutDatagram> out(window);
    std::vector<Datagram> in(window);
    for (std::size_t i = 0; i < window; ++i) {
        out[i] = OutDatagram(std::span(out_buf.get() + i * c.size, c.size));
        in[i] = Datagram(std::span(in_buf.get() + i * in_size, in_size));
    }
    LossLedger ledger;
    const bool timed = c.duration.count() > 0;
    // May datagram `seq` still be sent?
    auto allowed = [&](std::uint64_t seq) {
        if (c.stop != nullptr && c.stop->cancelled()) return false;
        return timed ? !sh.stop_sending : seq < c.messages;
    };
    auto more = [&] { return allowed(ledger.next_seq()); };
    bool draining = false;
    Clock::time_point drain_deadline;

    for (;;) {
        // Top up the window.
        std::size_t k = 0;
        while (ledger.in_flight() + k < window && allowed(ledger.next_seq() + k)) {
            stamp(std::span(out_buf.get() + k * c.size, c.size), id, ledger.next_seq() + k);
            ++k;
        }
        if (k > 0) {
            if (sh.first_send == Clock::time_point::max()) sh.first_send = Clock::now();
            for (std::size_t sent = 0; sent < k;) {
                auto r = co_await sock.send_batch(std::span(out).subspan(sent, k - sent));
                if (!r) {
                    sh.error(id, "send: " + r.error().message(), &sh.report.io_errors);
                    k = sent; // what did leave is still accounted for
                    break;
                }
                sent += *r;
            }
            for (std::size_t i = 0; i < k; ++i)
                ledger.send();
            sh.live->sent += k;
            if (k == 0) break; // the socket refuses to send: stop this client
        }

        const LossCounts now_counts = ledger.counts();
        if (!more()) {
            if (now_counts.lost() == 0) break; // every datagram came back
            if (!draining) {
                draining = true;
                drain_deadline = Clock::now() + c.drain_timeout;
            }
        }
        const auto deadline = draining ? drain_deadline : Clock::now() + c.stall_timeout;
        auto r = co_await sock.recv_batch(in).deadline(deadline);
        if (!r) {
            if (r.error() != std::errc::timed_out) {
                sh.error(id, "receive: " + r.error().message(), &sh.report.io_errors);
                break; // e.g. connection refused: nobody listens on the server port
            }
            if (draining) break; // what has not come back by now is lost
            ledger.give_up_in_flight();
            continue;
        }
        sh.last_echo = Clock::now();
        std::uint64_t fresh = 0;
        for (std::size_t i = 0; i < *r; ++i) {
            std::uint64_t seq = 0;
            const Check ok = check_datagram(in[i].data(), c.size, id, &seq);
            if (ok != Check::ok) {
                sh.error(id, to_string(ok), &sh.report.wrong_payload);
                continue;
            }
            const LossLedger::Echo e = ledger.echo(seq);
            if (e == LossLedger::Echo::never_sent)
                sh.error(id, "an echo of a sequence number never sent", &sh.report.wrong_payload);
            else if (e != LossLedger::Echo::duplicate)
                ++fresh;
        }
        sh.live->received += fresh;
    }
    sh.report.counts += ledger.counts();
}

/// Duration mode: warm up, measure the window, then tell the clients to stop sending. Run under
/// ClientConfig::stop, whose cancellation cuts both sleeps short.
Task<void> controller(Shared& sh) {
    const ClientConfig& c = sh.cfg;
    if (c.warmup.count() > 0) (void)co_await sleep(c.warmup);
    const LiveCounters before = *sh.live;
    const auto start = Clock::now();
    (void)co_await sleep(c.duration);
    const LiveCounters after = *sh.live;
    sh.report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    sh.report.window_sent = after.sent - before.sent;
    sh.report.window_received = after.received - before.received;
    sh.stop_sending = true;
}

} // namespace

Task<ClientReport> run_echo_clients(const ClientConfig& cfg, LiveCounters* live) {
    LiveCounters own;
    Shared sh{cfg, live != nullptr ? live : &own, {}};
    std::vector<UdpSocket> socks;
    socks.reserve(cfg.clients);
    for (unsigned i = 0; i < cfg.clients; ++i) {
        auto s =
            UdpSocket::open(cfg.server.family(), {.recv_buffer_size = cfg.recv_buffer_size,
                                                  .segmentation_offload = cfg.segmentation_offload,
                                                  .receive_offload = cfg.receive_offload});
        Result<void> connected =
            s ? s->connect(cfg.server) : Result<void>(std::unexpected(s.error()));
        if (!connected) {
            sh.error(i,
                     "socket/connect to " + cfg.server.to_string() + ": " +
                         connected.error().message(),
                     &sh.report.io_errors);
            co_return std::move(sh.report);
        }
        socks.push_back(std::move(*s));
    }
    sh.report.any_client_started = true;
    std::vector<Task<void>> clients;
    clients.reserve(cfg.clients);
    for (unsigned i = 0; i < cfg.clients; ++i)
        clients.push_back(client(i, std::move(socks[i]), sh));
    if (cfg.duration.count() > 0) {
        Task<void> control =
            cfg.stop != nullptr ? with_cancel(*cfg.stop, controller(sh)) : controller(sh);
        co_await when_all(when_all(std::move(clients)), std::move(control));
    } else {
        co_await when_all(std::move(clients));
        if (sh.last_echo > sh.first_send)
            sh.report.seconds = std::chrono::duration<double>(sh.last_echo - sh.first_send).count();
        sh.report.window_sent = sh.report.counts.sent;
        sh.report.window_received = sh.report.counts.received;
    }
    sh.report.stopped_early = cfg.stop != nullptr && cfg.stop->cancelled();
    co_return std::move(sh.report);
}

Task<void> serve_echo(UdpSocket& sock, ServerCounters& c, std::size_t buffer_size) {
    constexpr std::size_t kSlots = UdpSocket::max_batch;
    // Pad the slots so that the 64 buffers' first lines do not all land in the same cache sets.
    const std::size_t stride = (buffer_size + 63) / 64 * 64 + 64;
    std::unique_ptr<std::byte[]> storage(new std::byte[stride * kSlots]); // not touched: no RSS
    std::vector<Datagram> in(kSlots);
    std::vector<OutDatagram> out(kSlots);
    for (std::size_t i = 0; i < kSlots; ++i)
        in[i] = Datagram(std::span(storage.get() + i * stride, buffer_size));
    for (;;) {
        auto n = co_await sock.recv_batch(in);
        if (!n) {
            if (n.error() == std::errc::operation_canceled) co_return;
            ++c.errors; // an ICMP error reported on the socket: it does not stop the worker
            continue;
        }
        for (std::size_t i = 0; i < *n; ++i) {
            out[i] = OutDatagram(in[i].data(), &in[i].from);
            if (in[i].truncated && c.truncated++ == 0)
                std::fprintf(stderr,
                             "echo server: a %zu-byte datagram from %s was cut to %zu bytes "
                             "(raise --buffer); further ones are counted\n",
                             in[i].datagram_size, in[i].from.to_string().c_str(), in[i].size);
        }
        c.received += *n;
        for (std::size_t done = 0; done < *n;) {
            auto s = co_await sock.send_batch(std::span(out).subspan(done, *n - done));
            if (!s) {
                if (s.error() == std::errc::operation_canceled) co_return;
                ++c.errors; // this datagram cannot be sent (its client sees it as lost): skip it
                ++done;
                continue;
            }
            done += *s;
            c.sent += *s;
        }
    }
}

} // namespace galay::tools::udp
