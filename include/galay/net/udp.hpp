// galay/net/udp.hpp: UDP sockets, one datagram at a time or in batches.
//
//     galay::Task<void> echo_worker(std::uint16_t port) {
//         auto sock = galay::UdpSocket::bind(galay::SocketAddr::any_v4(port));
//         if (!sock) co_return; // e.g. EADDRINUSE: another socket holds the port
//         std::vector<std::array<char, 2048>> storage(32);
//         std::vector<galay::Datagram> in(storage.begin(), storage.end()); // a buffer each
//         std::vector<galay::OutDatagram> out(in.size());
//         for (;;) {
//             auto n = co_await sock->recv_batch(in); // up to 32 datagrams at once
//             if (!n) co_return;
//             for (std::size_t i = 0; i < *n; ++i)
//                 out[i] = galay::OutDatagram(in[i].data(), &in[i].from);
//             co_await sock->send_batch(std::span(out).first(*n)); // all of them
//         }
//     }
//
//     auto socks = galay::UdpSocket::bind_group(addr, 4); // 4 workers on one port, nobody else
//     auto r = co_await sock.recv_from(buf, &from).timeout(2s);   // Result<RecvInfo>
//     if (r && r->truncated) { /* r->datagram_size bytes were sent, r->size fit in buf */ }
//
// Every operation returns `Result<...>` and accepts `.timeout(d)`; destroying a socket closes it.
//
// How batches reach the kernel: one `recvmmsg`/`sendmmsg` per batch (on io_uring, which has no
// such opcode, the same system calls once io_uring reports the socket ready: src/driver/mmsg.hpp).
// By default a socket also uses the kernel's UDP offloads, probed per socket: send_batch sends a
// run of equal-size datagrams to one destination as one UDP_SEGMENT (GSO) message, and receives
// accept UDP_GRO, so one receive may carry a sender's whole run. Each datagram still arrives in
// its own buffer, in order; per datagram this costs several times less kernel work (bench_udp:
// server CPU per echoed 256-byte packet 0.6-0.8 us with offloads, 3.4-4 us without).
#pragma once

#include "galay/detail/buffers.hpp"
#include "galay/detail/close_op.hpp"
#include "galay/detail/io_awaitable.hpp"
#include "galay/detail/owned_fd.hpp"
#include "galay/net/socket_addr.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace galay {

/// What one receive produced. (The flag comes first: no tail padding, see io::CopyStats.)
struct RecvInfo {
    bool truncated = false;        ///< the datagram did not fit; its tail was discarded
    std::size_t size = 0;          ///< bytes stored in the caller's buffer
    std::size_t datagram_size = 0; ///< the datagram's real length (> size when truncated)
};

/// One slot of `recv_batch`: the caller's buffer (in) and what arrived in it (out).
struct Datagram {
    Datagram() noexcept = default;
    /// A slot receiving into `buf`, which must outlive the receive.
    template <MutableBuffer B>
    explicit Datagram(B&& buf) noexcept
        : buffer(reinterpret_cast<std::byte*>(std::ranges::data(buf)), std::ranges::size(buf)) {}

    std::span<std::byte> buffer;   ///< in: where the datagram goes
    std::size_t size = 0;          ///< out: bytes stored in `buffer`
    std::size_t datagram_size = 0; ///< out: the datagram's real length
    bool truncated = false;        ///< out: datagram_size > buffer.size()
    SocketAddr from;               ///< out: the sender
    SocketAddr local; ///< out: the address it was sent to (UdpOptions::local_address), else unset

    /// The bytes received: the first `size` bytes of `buffer`.
    std::span<std::byte> data() const noexcept { return buffer.first(size); }
};

/// One datagram for `send_batch`. `to` must stay valid until the send completes; null sends to
/// the connected peer.
struct OutDatagram {
    OutDatagram() noexcept = default;
    /// `bytes` (which must outlive the send) to `dest`, or to the connected peer when null.
    template <ConstBuffer B>
    explicit OutDatagram(const B& bytes, const SocketAddr* dest = nullptr) noexcept
        : data(reinterpret_cast<const std::byte*>(std::ranges::data(bytes)),
               std::ranges::size(bytes))
        , to(dest) {}

    /// The datagram's bytes.
    std::span<const std::byte> data;
    /// The destination; null: the connected peer.
    const SocketAddr* to = nullptr;
};

/// Socket options for UdpSocket::bind and UdpSocket::open.
struct UdpOptions {
    /// SO_REUSEADDR.
    bool reuse_addr = false;
    /// SO_REUSEPORT: share the port with every socket of the same user that set it too,
    /// another process's included (a leftover server would take part of the traffic). To share
    /// a port among your own sockets only, use UdpSocket::bind_group.
    bool reuse_port = false;
    bool v6_only = false;     ///< an IPv6 socket refuses IPv4 traffic
    int recv_buffer_size = 0; ///< SO_RCVBUF in bytes (0: system default; capped by rmem_max)
    int send_buffer_size = 0; ///< SO_SNDBUF in bytes (0: system default)
    /// IP_PKTINFO / IPV6_RECVPKTINFO: report the local address each datagram was sent to
    /// (`recv_from(buf, &from, &local)`, `Datagram::local`). Useful on wildcard binds.
    bool local_address = false;
    /// send_batch: a run of datagrams of one size to one destination leaves as one UDP_SEGMENT
    /// (GSO) send, which the kernel splits into the same datagrams. If the kernel or the route
    /// refuses it, the socket quietly goes back to one datagram per message.
    bool segmentation_offload = true;
    /// UDP_GRO: the kernel may hand one receive several datagrams from one sender at once (its
    /// GSO send, or NIC GRO), which is several times cheaper per datagram. Receives then land in
    /// pooled 64 KiB blocks and are split into the caller's buffers: the API is unchanged, each
    /// datagram still fills its own buffer.
    bool receive_offload = true;
};

class UdpSocket;

namespace detail {

/// A free list of T: acquire() allocates only when every T is in use, so a socket's operations
/// allocate nothing once warm.
template <class T>
class Pool {
public:
    T* acquire() {
        if (free_.empty()) {
            owned_.push_back(std::unique_ptr<T>(new T)); // default-initialised: not zeroed
            free_.reserve(owned_.size());                // release() never allocates
            return owned_.back().get();
        }
        T* t = free_.back();
        free_.pop_back();
        return t;
    }
    void release(T* t) noexcept { free_.push_back(t); }

private:
    std::vector<std::unique_ptr<T>> owned_;
    std::vector<T*> free_;
};

/// The receive side of UdpOptions::receive_offload. A receive lands in a 64 KiB block (one
/// coalesced message may carry many datagrams); each message is queued as a run of datagrams and
/// handed out one per caller buffer, in arrival order. What a receive could not hand out waits
/// for the next one. Blocks are pooled: no allocation once warm.
class GroStash {
public:
    static constexpr std::size_t kPayload = 65536; // more than the largest UDP payload
    static constexpr std::size_t kControl = 64;    // UDP_GRO and IP(V6)_PKTINFO
    struct Block {
        std::byte payload[kPayload];
        SocketAddr from;
        alignas(8) unsigned char control[kControl];
    };

    Block* acquire() { return blocks_.acquire(); }
    void release(Block* b) noexcept { blocks_.release(b); }
    /// Queue `len` bytes of `b` as datagrams of `segment` bytes each (the last may be shorter;
    /// 0: one datagram). Takes ownership of `b` until its last datagram is taken.
    void push(Block* b, std::uint32_t len, std::uint32_t segment, const SocketAddr& local);
    bool has_pending() const noexcept { return head_ < runs_.size(); }
    /// Datagrams left in the oldest queued run (one sender's coalesced message).
    std::size_t front_run_size() const noexcept {
        const Run& r = runs_[head_];
        return r.segment == 0 ? 1 : (r.left + r.segment - 1) / r.segment;
    }
    /// Copy the next queued datagram into `dst` (truncating it to dst.size()).
    RecvInfo take(std::span<std::byte> dst, SocketAddr* from, SocketAddr* local) noexcept;

private:
    struct Run {
        Block* block;
        std::uint32_t offset;
        std::uint32_t left;
        std::uint32_t segment;
        SocketAddr local;
    };
    Pool<Block> blocks_;
    std::vector<Run> runs_;
    std::size_t head_ = 0;
};

/// sendmsg to an address (or to the connected peer when `to` is null).
class [[nodiscard]] SendToAwaitable : public IoAwaitable<SendToAwaitable> {
public:
    SendToAwaitable(int fd, int family, const void* buf, std::size_t len,
                    const SocketAddr* to) noexcept;
    bool await_ready() const noexcept { return setup_error_ != 0; }
    void prepare() noexcept;
    Result<std::size_t> result();

private:
    msghdr msg_{};
    iovec iov_{};
    SocketAddr to_;
    bool has_to_ = false;
    int setup_error_ = 0;
};

/// recvmsg with MSG_TRUNC (the kernel reports the real length of a datagram that did not fit).
class [[nodiscard]] RecvFromAwaitable : public IoAwaitable<RecvFromAwaitable> {
public:
    RecvFromAwaitable(int fd, void* buf, std::size_t len, SocketAddr* from, SocketAddr* local,
                      std::uint16_t local_port, GroStash* gro) noexcept;
    /// With receive offload, a datagram left over from an earlier receive is taken at once.
    bool await_ready() const noexcept { return gro_ != nullptr && gro_->has_pending(); }
    void prepare();
    Result<RecvInfo> result();

private:
    msghdr msg_{};
    iovec iov_{};
    SocketAddr* from_;
    SocketAddr* local_;
    std::uint16_t local_port_;
    GroStash* gro_;
    std::span<std::byte> caller_;      // the caller's buffer
    GroStash::Block* block_ = nullptr; // receive offload: where the kernel writes
    alignas(8) unsigned char control_[64];
};

inline constexpr std::size_t kMaxUdpBatch = 64;

// The kernel-facing arrays of one batch (Linux mmsghdr, iovecs, control data) live in a
// per-socket pool, defined with the socket's code (src/net/udp_batch.hpp): users never see them.
struct RecvBatchScratch;
struct SendBatchScratch;
struct BatchScratch;
struct BatchScratchDelete { // (defined in the library, where BatchScratch is complete)
    void operator()(BatchScratch* p) const noexcept;
};

/// recvmmsg into up to kMaxUdpBatch caller buffers.
class [[nodiscard]] RecvBatchAwaitable : public IoAwaitable<RecvBatchAwaitable> {
public:
    RecvBatchAwaitable(int fd, std::span<Datagram> out, bool local_address,
                       std::uint16_t local_port, GroStash* gro, BatchScratch* pool) noexcept;
    bool await_ready() const noexcept {
        return out_.empty() || (gro_ != nullptr && gro_->has_pending());
    }
    void prepare();
    Result<std::size_t> result();

private:
    Result<std::size_t> offload_result();
    Result<std::size_t> plain_result();

    std::span<Datagram> out_;
    bool local_address_;
    std::uint16_t local_port_;
    GroStash* gro_;
    BatchScratch* pool_;
    RecvBatchScratch* s_ = nullptr; // from prepare() to result(): the kernel was asked
};

/// sendmmsg of up to kMaxUdpBatch datagrams; finishes the batch unless an error stops it. Runs
/// of equal-size datagrams to one destination go as one UDP_SEGMENT message when `gso` says the
/// socket may (the flag is cleared if the kernel refuses, and the rest is sent one by one).
class [[nodiscard]] SendBatchAwaitable : public IoAwaitable<SendBatchAwaitable> {
public:
    SendBatchAwaitable(int fd, int family, std::span<const OutDatagram> in, bool* gso,
                       BatchScratch* pool) noexcept;
    bool await_ready() const noexcept { return count_ == 0; }
    void prepare();
    Result<std::size_t> result();

private:
    std::size_t datagrams_in(std::size_t messages) const noexcept;
    Result<std::size_t> outcome();
    void one_message_per_datagram(std::size_t from) noexcept;
    Result<std::size_t> send_rest_without_gso(std::size_t from) noexcept;

    std::span<const OutDatagram> in_;
    std::size_t count_ = 0; // datagrams handed to the kernel (stops before a bad address)
    int setup_error_ = 0;   // the address of datagram `count_` is unusable
    bool* gso_;             // the socket's "UDP_SEGMENT works" flag (null: never coalesce)
    BatchScratch* pool_;
    SendBatchScratch* s_ = nullptr;
    std::size_t messages_ = 0;
};

} // namespace detail

/// A UDP socket (IPv4 or IPv6). Move-only; destroying it closes the socket.
class UdpSocket {
public:
    /// The most datagrams one recv_batch/send_batch call moves; larger spans are served in part
    /// (the returned count says how many).
    static constexpr std::size_t max_batch = detail::kMaxUdpBatch;

    UdpSocket() noexcept = default;
    /// Takes over the socket of `o`, which is empty after.
    UdpSocket(UdpSocket&& o) noexcept = default;
    /// Closes its own socket, then takes over the one of `o`.
    UdpSocket& operator=(UdpSocket&& o) noexcept = default;
    ~UdpSocket() = default;

    /// socket + options + bind. Port 0 picks a free port (see local_addr()). A port another
    /// socket holds is EADDRINUSE (unless both set reuse_port / reuse_addr).
    static Result<UdpSocket> bind(const SocketAddr& addr, UdpOptions options = {}) noexcept;
    /// `count` sockets on one address that share it with SO_REUSEPORT (the kernel spreads the
    /// datagrams over them by sender: one per worker or thread) and with nobody else: if any
    /// other socket holds the port, one of another process included, SO_REUSEPORT or not, this
    /// fails with EADDRINUSE. (The first socket binds without SO_REUSEPORT, so the kernel itself
    /// checks that the port is free, and sets it afterwards for the others to join.) Port 0
    /// picks a free port for all of them. `reuse_addr`/`reuse_port` in `options` are ignored.
    static Result<std::vector<UdpSocket>> bind_group(const SocketAddr& addr, std::size_t count,
                                                     UdpOptions options = {});
    /// An unbound socket of `family` (AF_INET or AF_INET6); the first send binds it to an
    /// ephemeral port.
    static Result<UdpSocket> open(int family, UdpOptions options = {}) noexcept;

    /// Fix the peer: send()/recv() then talk to `addr` only, and datagrams from anyone else are
    /// dropped by the kernel. Synchronous (UDP connect sends nothing).
    Result<void> connect(const SocketAddr& addr) noexcept;

    /// Send `buf` as one datagram to `to`. An unspecified address or one of the wrong family is
    /// `address_family_not_supported`.
    template <ConstBuffer B>
    [[nodiscard]] detail::SendToAwaitable send_to(const B& buf, const SocketAddr& to) noexcept {
        return {fd_.get(), family_, detail::buffer_data(buf), std::ranges::size(buf), &to};
    }
    /// Receive one datagram into `buf`; `from` (optional) gets the sender, `local` (optional,
    /// with UdpOptions::local_address) the address it was sent to.
    template <MutableBuffer B>
    [[nodiscard]] detail::RecvFromAwaitable recv_from(B&& buf, SocketAddr* from,
                                                      SocketAddr* local = nullptr) noexcept {
        return {fd_.get(), std::ranges::data(buf), std::ranges::size(buf), from, local, local_port_,
                gro_.get()};
    }
    /// Send one datagram to the connected peer.
    template <ConstBuffer B>
    [[nodiscard]] detail::SendToAwaitable send(const B& buf) noexcept {
        return {fd_.get(), family_, detail::buffer_data(buf), std::ranges::size(buf), nullptr};
    }
    /// Receive one datagram (from the connected peer, on a connected socket).
    template <MutableBuffer B>
    [[nodiscard]] detail::RecvFromAwaitable recv(B&& buf) noexcept {
        return {fd_.get(), std::ranges::data(buf), std::ranges::size(buf), nullptr, nullptr, 0,
                gro_.get()};
    }

    /// Receive at least one and up to min(out.size(), max_batch) datagrams, one per slot, in
    /// arrival order. Returns how many slots were filled.
    [[nodiscard]] detail::RecvBatchAwaitable recv_batch(std::span<Datagram> out) noexcept {
        return {fd_.get(), out, local_address_, local_port_, gro_.get(), scratch_.get()};
    }
    /// Send up to min(in.size(), max_batch) datagrams in order. Returns how many were sent: all
    /// of them unless an error stopped the batch (the error is returned when none was sent).
    [[nodiscard]] detail::SendBatchAwaitable send_batch(std::span<const OutDatagram> in) noexcept {
        return {fd_.get(), family_, in, &gso_, scratch_.get()};
    }

    /// Close asynchronously; the socket is empty at once.
    [[nodiscard]] detail::CloseAwaitable close() noexcept {
        return detail::CloseAwaitable(fd_.take());
    }

    /// SO_RCVBUF, in bytes (capped by the kernel's rmem_max).
    Result<void> set_recv_buffer_size(int bytes) noexcept;
    /// SO_SNDBUF, in bytes (capped by the kernel's wmem_max).
    Result<void> set_send_buffer_size(int bytes) noexcept;
    /// The kernel's SO_RCVBUF / SO_SNDBUF (it doubles what was asked, for bookkeeping).
    Result<int> recv_buffer_size() const noexcept;
    /// The kernel's SO_SNDBUF.
    Result<int> send_buffer_size() const noexcept;
    /// SO_BROADCAST: allow sends to a broadcast address.
    Result<void> set_broadcast(bool on) noexcept;
    /// The address the socket is bound to (getsockname).
    Result<SocketAddr> local_addr() const noexcept;
    /// The connected peer (getpeername); fails when not connected.
    Result<SocketAddr> peer_addr() const noexcept;

    /// True while it holds an open socket.
    bool is_open() const noexcept { return fd_.is_open(); }
    /// The socket's file descriptor, still owned by the UdpSocket (-1 when empty).
    int fd() const noexcept { return fd_.get(); }
    /// AF_INET or AF_INET6.
    int family() const noexcept { return family_; }
    /// UdpOptions::segmentation_offload is on and the kernel accepted it (so far).
    bool segmentation_offload() const noexcept { return gso_; }
    /// UdpOptions::receive_offload is on and the kernel accepted it.
    bool receive_offload() const noexcept { return gro_ != nullptr; }

private:
    static Result<UdpSocket> create(int family, const UdpOptions& options) noexcept;

    detail::OwnedFd fd_;
    int family_ = AF_UNSPEC;
    std::uint16_t local_port_ = 0; // for `local` addresses (pktinfo carries no port)
    bool local_address_ = false;
    bool gso_ = false; // UdpOptions::segmentation_offload, and the kernel has UDP_SEGMENT
    std::unique_ptr<detail::GroStash> gro_; // UdpOptions::receive_offload, and UDP_GRO is on
    // recv_batch/send_batch arrays, pooled
    std::unique_ptr<detail::BatchScratch, detail::BatchScratchDelete> scratch_;
};

} // namespace galay
