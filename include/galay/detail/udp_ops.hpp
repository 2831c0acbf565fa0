// The awaitables of UdpSocket's operations (galay/net/udp.hpp), and what receive offload keeps
// between receives. Each awaitable is made only by UdpSocket, on the descriptor it owns
// (docs/driver.md: who makes an operation).
#pragma once

#include "galay/detail/io_awaitable.hpp"
#include "galay/error.hpp"
#include "galay/net/datagram.hpp"
#include "galay/net/socket_addr.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace galay {
class UdpSocket;
} // namespace galay

namespace galay::detail {

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
    bool await_ready() const noexcept { return setup_error_ != 0; }
    void prepare() noexcept;
    Result<std::size_t> result();

private:
    friend class galay::UdpSocket;
    SendToAwaitable(int fd, int family, const void* buf, std::size_t len,
                    const SocketAddr* to) noexcept;

    msghdr msg_{};
    iovec iov_{};
    SocketAddr to_;
    bool has_to_ = false;
    int setup_error_ = 0;
};

/// recvmsg with MSG_TRUNC (the kernel reports the real length of a datagram that did not fit).
class [[nodiscard]] RecvFromAwaitable : public IoAwaitable<RecvFromAwaitable> {
public:
    /// With receive offload, a datagram left over from an earlier receive is taken at once.
    bool await_ready() const noexcept { return gro_ != nullptr && gro_->has_pending(); }
    void prepare();
    Result<RecvInfo> result();

private:
    friend class galay::UdpSocket;
    RecvFromAwaitable(int fd, void* buf, std::size_t len, SocketAddr* from, SocketAddr* local,
                      std::uint16_t local_port, GroStash* gro) noexcept;

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
    bool await_ready() const noexcept {
        return out_.empty() || (gro_ != nullptr && gro_->has_pending());
    }
    void prepare();
    Result<std::size_t> result();

private:
    friend class galay::UdpSocket;
    RecvBatchAwaitable(int fd, std::span<Datagram> out, bool local_address,
                       std::uint16_t local_port, GroStash* gro, BatchScratch* pool) noexcept;
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
    bool await_ready() const noexcept { return count_ == 0; }
    void prepare();
    Result<std::size_t> result();

private:
    friend class galay::UdpSocket;
    SendBatchAwaitable(int fd, int family, std::span<const OutDatagram> in, bool* gso,
                       BatchScratch* pool) noexcept;
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

} // namespace galay::detail
