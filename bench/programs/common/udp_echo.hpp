// The UDP echo benchmark's moving parts, kept apart from bench_udp's command line so the test
// suite runs the very same code (tests/integration/udp_test.cpp drives the clients against a
// server that drops every 10th datagram and checks the reported loss is exactly 10%).
//
//   Message:    [client id u32][magic u32][sequence u64][pattern derived from (client, seq)]
//   LossLedger: per client, the fate of every sequence number sent: in flight, echoed, or given
//               up on for now (a late echo still counts). Lost = sent - echoed, exactly.
//   run_echo_clients: N clients on connected sockets, each keeping `pipeline` datagrams in flight
//               with send_batch/recv_batch, then draining for `drain_timeout`.
//   serve_echo: one server worker: recv_batch, then send_batch every datagram back to its sender.
#pragma once

#include <galay/galay.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace galay::tools::udp {

inline constexpr std::size_t kHeaderSize = 16; // the smallest message that can be checked

/// Write message `seq` of `client` into `msg` (msg.size() >= kHeaderSize).
void stamp(std::span<std::byte> msg, std::uint32_t client, std::uint64_t seq) noexcept;

enum class Check { ok, wrong_size, wrong_client, corrupt };
/// Check an echo received by `client`: right length, its own id, and the bytes `stamp` wrote for
/// the sequence number it carries (returned in `*seq`).
Check check(std::span<const std::byte> msg, std::size_t expected_size, std::uint32_t client,
            std::uint64_t* seq) noexcept;
const char* to_string(Check c) noexcept;

/// Totals of one or many ledgers.
struct LossCounts {
    std::uint64_t sent = 0;
    std::uint64_t received = 0;   ///< distinct sequence numbers echoed
    std::uint64_t duplicates = 0; ///< echoes of a sequence number already echoed
    std::uint64_t lost() const noexcept { return sent - received; }
    /// Percentage of sent datagrams never echoed (0 when nothing was sent).
    double loss_percent() const noexcept {
        return sent == 0 ? 0.0 : 100.0 * double(lost()) / double(sent);
    }
    LossCounts& operator+=(const LossCounts& o) noexcept {
        sent += o.sent;
        received += o.received;
        duplicates += o.duplicates;
        return *this;
    }
};

/// What became of every datagram one client sent. Sequence numbers are issued in order from 0.
class LossLedger {
public:
    enum class Echo { fresh, late, duplicate, never_sent };

    /// The next datagram is leaving: returns its sequence number.
    std::uint64_t send() {
        state_.push_back(kInFlight);
        ++in_flight_;
        return state_.size() - 1;
    }
    /// An echo of `seq` arrived. `fresh`: it was in flight; `late`: it had been given up on (it
    /// counts as received all the same); `duplicate`: already echoed; `never_sent`: bogus.
    Echo echo(std::uint64_t seq) noexcept;
    /// No echo for a while: stop waiting for the datagrams in flight (frees the window). Their
    /// echoes still count if they turn up later.
    void give_up_in_flight() noexcept;

    std::uint64_t in_flight() const noexcept { return in_flight_; }
    std::uint64_t next_seq() const noexcept { return state_.size(); }
    LossCounts counts() const noexcept { return {state_.size(), received_, duplicates_}; }

private:
    enum : std::uint8_t { kInFlight, kEchoed, kGivenUp };
    std::vector<std::uint8_t> state_; // indexed by sequence number
    std::uint64_t in_flight_ = 0;
    std::uint64_t received_ = 0;
    std::uint64_t duplicates_ = 0;
    std::uint64_t oldest_in_flight_ = 0; // everything below it is echoed or given up
};

/// Live counters the clients bump as they go (one scheduler thread; read by a reporter task).
struct LiveCounters {
    std::uint64_t sent = 0;
    std::uint64_t received = 0;
};

struct ClientConfig {
    SocketAddr server;
    unsigned clients = 100;
    std::uint64_t messages = 1000; ///< per client; ignored when `duration` > 0
    std::size_t size = 256;
    unsigned pipeline = 10;               ///< datagrams in flight per client
    std::chrono::nanoseconds duration{0}; ///< > 0: send for this long instead
    std::chrono::nanoseconds warmup{0};   ///< duration mode: traffic before measuring
    std::chrono::nanoseconds stall_timeout{200'000'000};   ///< no echo this long: free the window
    std::chrono::nanoseconds drain_timeout{1'000'000'000}; ///< after the last send
    int recv_buffer_size = 0;                              ///< SO_RCVBUF of each client socket
    bool segmentation_offload = true; ///< UdpOptions::segmentation_offload of each client socket
    bool receive_offload = true;      ///< UdpOptions::receive_offload of each client socket
    /// Cancelling it ends the run early (Ctrl-C): the clients send nothing more, the datagrams
    /// in flight get the drain timeout, and the report covers what was measured until then
    /// (in duration mode the measured window closes at once). Null: run to the end.
    CancelSource* stop = nullptr;
};

struct ClientReport {
    LossCounts counts;
    std::uint64_t wrong_payload = 0;       ///< echoes that failed `check` (an error)
    std::uint64_t io_errors = 0;           ///< failed sends/receives (an error)
    std::vector<std::string> first_errors; ///< the first few, for the user
    /// Message mode: first send to last echo. Duration mode: the measured window.
    double seconds = 0;
    std::uint64_t window_sent = 0;     ///< datagrams sent inside the measured window
    std::uint64_t window_received = 0; ///< echoes received inside it
    bool any_client_started = false;
    bool stopped_early = false; ///< ClientConfig::stop was cancelled before the end
};

/// Run the clients to completion on the current scheduler. `live`, if given, is updated as
/// datagrams move (for per-second progress lines).
Task<ClientReport> run_echo_clients(const ClientConfig& config, LiveCounters* live = nullptr);

/// Per-worker server counters.
struct ServerCounters {
    std::uint64_t received = 0;
    std::uint64_t sent = 0;
    std::uint64_t truncated = 0;
    std::uint64_t errors = 0;
};

/// Echo every datagram on `sock` back to its sender until the task is cancelled. `buffer_size`
/// is the largest datagram echoed whole.
Task<void> serve_echo(UdpSocket& sock, ServerCounters& counters, std::size_t buffer_size);

} // namespace galay::tools::udp
