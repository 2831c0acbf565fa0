// galay/io/stream.hpp: what the buffered I/O layer asks of a byte stream.
//
// A galay byte stream (TcpStream today) has `recv`, `send` and `writev` operations that are
// awaitables producing `Result<std::size_t>` and take a `.deadline(t)` like every I/O operation.
// BufReader, BufWriter and copy_bidirectional are written against these concepts, so any stream
// with the same shape fits.
//
//     static_assert(galay::io::ReadStream<galay::TcpStream>);
//     static_assert(galay::io::DuplexStream<galay::TcpStream>);
#pragma once

#include "galay/detail/in_place.hpp"
#include "galay/error.hpp"
#include "galay/net/tcp.hpp"
#include "galay/time/timeout.hpp"

#include <sys/uio.h>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <span>
#include <utility>

namespace galay::io {

/// An awaitable operation producing `T` that also takes a deadline (`.deadline(t)`).
template <class A, class T>
concept DeadlineOp = requires(A a, std::chrono::steady_clock::time_point t) {
    { std::move(a).deadline(t).await_resume() } -> std::same_as<T>;
};

/// `recv(span<char>)`: receive up to span.size() bytes (0: the peer closed).
template <class S>
concept ReadStream = requires(S& s, std::span<char> buf) {
    { s.recv(buf) } -> DeadlineOp<Result<std::size_t>>;
};

/// `send(span<const char>)` and `writev(span<const iovec>)`: send some bytes, gathered or not.
template <class S>
concept WriteStream = requires(S& s, std::span<const char> buf, std::span<const iovec> iov) {
    { s.send(buf) } -> DeadlineOp<Result<std::size_t>>;
    { s.writev(iov) } -> DeadlineOp<Result<std::size_t>>;
};

/// A write shutdown done at once (TcpStream: shutdown(2)).
template <class S>
concept SyncWriteShutdown = requires(S& s) {
    { s.shutdown(Shutdown::write) } -> std::same_as<Result<void>>;
};
/// A write shutdown that is an operation to await (TLS: close_notify has to be sent).
template <class S>
concept AsyncWriteShutdown = requires(S& s) {
    { s.shutdown(Shutdown::write) } -> DeadlineOp<Result<void>>;
};

/// Both directions, and a write shutdown (the peer sees EOF while we can still read), done at
/// once or awaited.
template <class S>
concept DuplexStream = ReadStream<S> && WriteStream<S> &&
    (SyncWriteShutdown<S> || AsyncWriteShutdown<S>);

namespace detail {

/// A steady-clock deadline in nanoseconds since the clock's epoch; 0 means none.
inline std::chrono::steady_clock::time_point to_time_point(std::int64_t ns) noexcept {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

/// `op` with deadline `ns` applied (none when 0).
template <class Op>
Op with_deadline(Op&& op, std::int64_t ns) {
    if (ns == 0) return std::move(op);
    return std::move(op).deadline(to_time_point(ns));
}

/// `.timeout(d)` / `.deadline(t)` for a compound operation: one deadline for the whole of it,
/// applied to every single operation it awaits.
template <class Derived>
class Deadlined : public galay::detail::AwaitedInPlace<Derived> {
public:
    Derived&& timeout(Timeout d) && {
        if (d) deadline_ns_ = Scheduler::now_ns() + d.value().count();
        return static_cast<Derived&&>(*this);
    }
    Derived&& deadline(std::chrono::steady_clock::time_point t) && {
        deadline_ns_ =
            std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
        return static_cast<Derived&&>(*this);
    }

protected:
    std::int64_t deadline_ns_ = 0;
};

} // namespace detail

static_assert(ReadStream<TcpStream> && WriteStream<TcpStream> && DuplexStream<TcpStream>);

} // namespace galay::io
