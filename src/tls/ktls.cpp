// kTLS: the probe (does this kernel accept the "tls" upper-layer protocol on a TCP socket?),
// installing the keys, and the hand-off after a handshake.
#include "tls/ktls.hpp"
#include "galay/tls/stream.hpp"
#include "platform/fd_calls.hpp"
#include "tls/context_state.hpp"

#include <linux/tls.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace galay::tls {

namespace {

struct Fd {
    int fd;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

KtlsProbe run_probe() {
    if (!GALAY_HAVE_LINUX_SOCKETS) return {false, "kTLS: Linux-only, not in the POSIX profile"};
    // TCP_ULP needs an established connection: a loopback pair made for the purpose.
    Fd listener{platform::socket_cloexec(AF_INET, SOCK_STREAM, 0, false)};
    Fd client{platform::socket_cloexec(AF_INET, SOCK_STREAM, 0, false)};
    if (listener.fd < 0 || client.fd < 0)
        return {false, std::string("socket: ") + std::strerror(errno)};
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener.fd, 1) != 0 ||
        ::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        ::connect(client.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
        return {false, std::string("loopback connection for the probe: ") + std::strerror(errno)};
    if (::setsockopt(client.fd, IPPROTO_TCP, TCP_ULP, "tls", sizeof "tls") == 0) return {true, ""};
    const int err = errno;
    if (err == ENOENT || err == ENOPROTOOPT)
        return {false,
                std::string("kernel has no kTLS (CONFIG_TLS): setsockopt TCP_ULP \"tls\": ") +
                    std::strerror(err)};
    return {false, std::string("setsockopt TCP_ULP \"tls\": ") + std::strerror(err)};
}

} // namespace

const KtlsProbe& probe_ktls() {
    static const KtlsProbe probe = run_probe();
    return probe;
}

namespace detail {

void note_ktls_fallback(const std::string& reason) {
    static std::once_flag once;
    std::call_once(once, [&] {
        std::fprintf(stderr, "galay tls: %s; records are encrypted in user space\n",
                     reason.c_str());
    });
}

namespace {

template <class Info>
std::string install_one(int fd, int direction, const KtlsKeys& k, unsigned short cipher) {
    Info info{};
    info.info.version = k.version == TLS1_3_VERSION ? TLS_1_3_VERSION : TLS_1_2_VERSION;
    info.info.cipher_type = cipher;
    static_assert(sizeof info.iv == 8 && sizeof info.salt == 4 && sizeof info.rec_seq == 8);
    std::memcpy(info.key, k.key.data(), sizeof info.key);
    std::memcpy(info.salt, k.salt.data(), sizeof info.salt);
    std::memcpy(info.iv, k.iv.data(), sizeof info.iv);
    std::memcpy(info.rec_seq, k.rec_seq.data(), sizeof info.rec_seq);
    const int r = ::setsockopt(fd, SOL_TLS, direction, &info, sizeof info);
    const int err = errno;
    OPENSSL_cleanse(&info, sizeof info);
    if (r == 0) return "";
    return std::string("setsockopt SOL_TLS ") + (direction == TLS_TX ? "TLS_TX" : "TLS_RX") + ": " +
           std::strerror(err);
}

std::string install_direction(int fd, int direction, const KtlsKeys& k) {
    if (k.key_len == 16)
        return install_one<tls12_crypto_info_aes_gcm_128>(fd, direction, k, TLS_CIPHER_AES_GCM_128);
    return install_one<tls12_crypto_info_aes_gcm_256>(fd, direction, k, TLS_CIPHER_AES_GCM_256);
}

} // namespace

std::string ktls_install(int fd, const KtlsKeys& tx, const KtlsKeys& rx, bool& tx_done,
                         bool& rx_done) {
    tx_done = rx_done = false;
    if (::setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", sizeof "tls") != 0)
        return std::string("setsockopt TCP_ULP \"tls\": ") + std::strerror(errno);
    // Receiving first: a socket whose receive keys the kernel refused is still plain TCP.
    std::string why = install_direction(fd, TLS_RX, rx);
    if (!why.empty()) return why;
    rx_done = true;
    why = install_direction(fd, TLS_TX, tx);
    if (!why.empty())
        return why + " (received records are decrypted by the kernel, sent ones "
                     "by OpenSSL)";
    tx_done = true;
    return "";
}

namespace {

std::atomic<bool> follow_always{false};

} // namespace

void ktls_follow_always(bool on) noexcept {
    follow_always.store(on, std::memory_order_relaxed);
}
bool ktls_follow_always() noexcept {
    return follow_always.load(std::memory_order_relaxed);
}

namespace {

// A hand-off put off this many times (receives that found a partial record in OpenSSL's buffer)
// is given up: the connection stays in user space.
constexpr int kMaxAttempts = 16;

/// Whether the kernel can take the socket exactly here: every ciphertext byte OpenSSL made is
/// sent, and OpenSSL holds nothing received (no partial record, no plaintext not yet read).
bool exact_moment(Core& c) {
    return BIO_ctrl_pending(c.net) == 0 && BIO_ctrl_pending(SSL_get_rbio(c.ssl)) == 0 &&
           SSL_has_pending(c.ssl) == 0 && !c.write_lock.is_locked();
}

} // namespace

void ktls_hand_off(Core& c) {
    if (!c.ktls_track) {
        if (c.ctx->ktls == Ktls::off) {
            c.ktls_why = "kTLS not used: the context turns it off (Ktls::off)";
            return;
        }
        c.ktls_why = "kTLS not used: " + probe_ktls().reason; // (not followed: no kernel kTLS)
        if (c.ctx->ktls == Ktls::preferred) note_ktls_fallback(c.ktls_why);
        return;
    }
    std::string why;
    const KtlsProbe& probe = probe_ktls();
    if (!exact_moment(c)) {
        if (++c.ktls_track->attempts <= kMaxAttempts) {
            c.ktls_why = "kTLS waits: OpenSSL still holds records received with the handshake";
            return; // (a later receive tries again)
        }
        why = "OpenSSL kept holding part of a received record";
    } else if (!probe.available) {
        why = probe.reason;
    } else {
        std::optional<KtlsKeys> tx = ktls_keys(c, true, why);
        std::optional<KtlsKeys> rx = tx ? ktls_keys(c, false, why) : std::nullopt;
        if (tx && rx) why = ktls_install(c.tcp.fd(), *tx, *rx, c.ktls_tx, c.ktls_rx);
    }
    ktls_unfollow(c);
    c.ktls_why.clear();
    if (why.empty()) return;
    c.ktls_why = (c.ktls_rx ? "kTLS for received records only: " : "kTLS not used: ") + why;
    if (c.ctx->ktls == Ktls::preferred) note_ktls_fallback(c.ktls_why);
}

bool ktls_retry(Core& c) {
    // (After the peer's FIN the user-space path says whether a close_notify came first.)
    if (c.ktls_track && c.ktls_track->following && c.handshaken && !c.peer_eof) ktls_hand_off(c);
    return c.ktls_rx;
}

} // namespace detail

} // namespace galay::tls
