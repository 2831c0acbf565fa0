// The kTLS key hand-off: what OpenSSL's record layer would use next in each direction (key,
// nonce parts, record sequence number), worked out in user space. OpenSSL hands its keys to the
// kernel only for its own socket BIO; galay drives OpenSSL over memory BIOs, so it follows the
// handshake itself (the key log for TLS 1.3 traffic secrets, the message callback for record
// counts, the outgoing bytes for TLS 1.2's explicit nonce) and derives the keys as RFC 8446 /
// RFC 5246 do.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include <sys/uio.h>

#include "galay/detail/cached_task.hpp"
#include "galay/error.hpp"
#include "galay/net/tcp.hpp"

struct ssl_st;
struct ssl_ctx_st;

namespace galay::tls::detail {

struct Core;

/// What the handshake tells the hand-off, gathered while it runs and frozen when it ends.
struct KtlsTrack {
    /// Records sent / received under the current keys of each direction.
    std::uint64_t tx_records = 0, rx_records = 0;
    /// TLS 1.3 traffic secrets (CLIENT_ / SERVER_TRAFFIC_SECRET_0), from the key log.
    std::array<unsigned char, 64> client_secret{}, server_secret{};
    std::size_t client_secret_len = 0, server_secret_len = 0;
    bool key_update = false; // a KeyUpdate went either way: the _0 secrets are stale
    bool following = true;   // counting records: until the hand-off is done or refused
    int attempts = 0;        // hand-offs put off because OpenSSL still held received bytes
    // The outgoing byte stream, parsed to find TLS 1.2's last explicit nonce (OpenSSL starts
    // its GCM nonce counter at a random value and never says where it is).
    std::array<unsigned char, 5> header{};
    std::size_t header_have = 0, body_left = 0, body_seen = 0;
    bool encrypting = false; // a ChangeCipherSpec went out: later records carry a nonce
    bool have_nonce = false;
    std::array<unsigned char, 8> last_nonce{};

    /// Follow `n` ciphertext bytes that went to the peer.
    void sent(const unsigned char* p, std::size_t n) noexcept;

    // After the hand-off, the peer's alerts and handshake messages arrive from the kernel in
    // pieces as large as the caller's buffer: a message header being gathered, or the rest of a
    // message being skipped.
    std::array<unsigned char, 4> control{};
    std::size_t control_have = 0, control_skip = 0;
    unsigned char control_type = 0; // the record type of the message gathered or skipped
};

/// What the peer's control records (alerts, handshake messages) received after the hand-off
/// say, fed in the pieces the kernel returns them in. Pure: it reads the bytes and `t` only (the
/// fuzzer feeds it anything).
struct ControlRead {
    enum class Kind : std::uint8_t { more, close_notify, refused };
    Kind kind = Kind::more;
    std::string reason; ///< refused: why ("tls: ...")
};
ControlRead read_control(KtlsTrack& t, unsigned char type, const unsigned char* p, std::size_t n);

/// The record type a recvmsg's control messages (`control`: `len` bytes, aligned for cmsghdr)
/// give (TLS_GET_RECORD_TYPE), application data (23) when none does. Any bytes are safe.
unsigned char received_record_type(const void* control, std::size_t len) noexcept;

/// One direction's record-layer state, as `struct tls12_crypto_info_aes_gcm_*` wants it.
struct KtlsKeys {
    int version = 0;         ///< TLS1_2_VERSION or TLS1_3_VERSION
    std::size_t key_len = 0; ///< 16 (AES-128-GCM) or 32 (AES-256-GCM)
    std::array<unsigned char, 32> key{};
    std::array<unsigned char, 4> salt{}; ///< the first four bytes of every nonce
    /// TLS 1.3: the other eight bytes of the static IV (the nonce is salt||iv XOR the sequence
    /// number). TLS 1.2: the explicit nonce of the next record sent (received records carry
    /// their own).
    std::array<unsigned char, 8> iv{};
    std::array<unsigned char, 8> rec_seq{}; ///< big-endian
};

/// Contexts made from now on follow their handshakes even where the kernel has no kTLS (the
/// tests check the derivation against the wire on such kernels); without it they do not.
void ktls_follow_always(bool on) noexcept;
bool ktls_follow_always() noexcept;
/// Follow the handshake of `c` (key log and message callback) into a new `c.ktls_track`.
void ktls_follow(Core& c);
/// `n` ciphertext bytes of `c` went to the peer (during the handshake, the hand-off needs TLS
/// 1.2's last explicit nonce).
void ktls_sent(Core& c, const char* p, std::size_t n) noexcept;
/// Stop following it (the state is frozen at the hand-off moment).
void ktls_unfollow(Core& c);
/// The context's key-log callback, which feeds the tracks of its connections.
void ktls_keylog(ssl_ctx_st* ctx);

/// The keys of `c` for sending (`tx`) or receiving, as the handshake left them; nullopt with
/// `why` set when kTLS cannot take this connection exactly.
std::optional<KtlsKeys> ktls_keys(const Core& c, bool tx, std::string& why);

/// Attach the "tls" ULP to `fd` and install `rx`, then `tx`. Returns "" or why not; `rx_done`
/// and `tx_done` say which directions the kernel now has.
std::string ktls_install(int fd, const KtlsKeys& tx, const KtlsKeys& rx, bool& tx_done,
                         bool& rx_done);

/// What the kernel's receive path says about a record that is not application data, after the
/// hand-off: keep reading (`nullopt`), the peer's close_notify (0), or the error.
std::optional<Result<std::size_t>> ktls_control(Core& c, unsigned char type, const unsigned char* p,
                                                std::size_t n);

/// recv after the hand-off: plaintext from the socket, alerts and handshake messages apart.
galay::detail::CachedTask<Result<std::size_t>>
ktls_recv_slow(galay::detail::FrameCache&, Core& c, std::span<char> buf, std::int64_t deadline_ns);
/// send, send_all, writev after the hand-off: plaintext to the socket.
galay::detail::CachedTask<Result<std::size_t>> ktls_write_slow(galay::detail::FrameCache&, Core& c,
                                                               std::span<const iovec> iov, bool all,
                                                               std::int64_t deadline_ns);
/// close_notify as an alert record the kernel encrypts, then the TCP shutdown.
galay::detail::CachedTask<Result<void>> ktls_shutdown_slow(galay::detail::FrameCache&, Core& c,
                                                           Shutdown how, std::int64_t deadline_ns);

/// After a handshake: hand the keys of `c` to the kernel when the option, the kernel and the
/// connection's state allow it exactly; otherwise stay in user space and keep the reason. When
/// only bytes OpenSSL still holds are in the way, the hand-off is put off to a later receive.
void ktls_hand_off(Core& c);
/// At a receive that has to wait: try a put-off hand-off again. True when the kernel now has
/// the received records.
bool ktls_retry(Core& c);

} // namespace galay::tls::detail
