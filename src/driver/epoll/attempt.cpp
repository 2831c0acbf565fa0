// The epoll driver runs an op's system call (epoll_driver.hpp): at once when the op is submitted,
// and again each time epoll reports its fd ready, until it no longer fails with EAGAIN.
#include "driver/common/faults.hpp"
#include "driver/epoll/epoll_driver.hpp"
#include "driver/mmsg.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

namespace galay::detail {

bool EpollDriver::attempt(IoOp& op) noexcept {
    for (;;) {
        ssize_t r;
        std::size_t len = op.code == OpCode::recv_pooled ? pool_.size() : op.remaining();
        int fake = 0; // a fault injected instead of the system call
        if (faults::on()) [[unlikely]] {
            if (is_mmsg(op.code)) {
                bool blocked = false;
                const bool done = attempt_mmsg(op, &blocked);
                if (blocked) fault_ready_.push_back(op.fd);
                return done;
            }
            if (op.code != OpCode::connect) fake = injected_fault(op, len);
        }
        switch (op.code) {
        case OpCode::recv_pooled: {
            // A buffer is taken only for the system call and given back on EAGAIN, so an
            // idle connection holds none.
            int id = pool_.take();
            if (id < 0) {
                op.result = -ENOBUFS;
                return true;
            }
            char* b = pool_.address(static_cast<std::uint16_t>(id));
            r = fake != 0 ? (errno = fake, -1) : ::recv(op.fd, b, len, op.msg_flags);
            if (r > 0 && static_cast<std::size_t>(r) < len) drained(op);
            if (r > 0) {
                op.result = r;
                op.aux = static_cast<std::uint64_t>(id);
                op.buf = b;
                return true;
            }
            pool_.put(static_cast<std::uint16_t>(id));
            break;
        }
        case OpCode::accept:
            r = fake != 0 ? (errno = fake, -1)
                          : ::accept4(op.fd, op.address(),
                                      reinterpret_cast<socklen_t*>(op.address_length()),
                                      SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (r < 0 && errno == ECONNABORTED) continue; // that peer gave up; next one
            break;
        case OpCode::connect:
            if (op.done == 0) {
                op.done = 1; // the connect(2) has been issued; later: collect its outcome
                r = ::connect(op.fd, op.address(), op.len);
                if (r < 0 && errno == EINPROGRESS) return false;
            } else {
                int err = 0;
                socklen_t len = sizeof err;
                ::getsockopt(op.fd, SOL_SOCKET, SO_ERROR, &err, &len);
                if (err == EINPROGRESS) return false;
                r = err == 0 ? 0 : -1;
                errno = err;
            }
            if (r == 0) {
                op.result = 0;
                return true;
            }
            break;
        case OpCode::recv:
            r = fake != 0 ? (errno = fake, -1) : ::recv(op.fd, op.cursor(), len, op.msg_flags);
            if (r > 0 && static_cast<std::size_t>(r) < len) drained(op);
            break;
        case OpCode::send:
            r = fake != 0 ? (errno = fake, -1)
                          : ::send(op.fd, op.cursor(), len, op.msg_flags | MSG_NOSIGNAL);
            break;
        case OpCode::recvmsg:
            r = fake != 0 ? (errno = fake, -1)
                          : ::recvmsg(op.fd, static_cast<msghdr*>(op.buf), op.msg_flags);
            break;
        case OpCode::sendmsg:
            r = fake != 0 ? (errno = fake, -1)
                          : ::sendmsg(op.fd, static_cast<const msghdr*>(op.buf),
                                      op.msg_flags | MSG_NOSIGNAL);
            break;
        case OpCode::recvmmsg:
        case OpCode::sendmmsg:
            return attempt_mmsg(op);
        default:
            op.result = -EOPNOTSUPP;
            return true;
        }
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
            if (errno == EINTR) continue;
            op.absorb(-errno);
            return true;
        }
        if (op.absorb(r)) continue; // an `all` transfer with bytes still to move
        return true;
    }
}

void EpollDriver::drained(const IoOp& op) noexcept {
    if (static_cast<std::size_t>(op.fd) >= fds_.size() || (op.msg_flags & MSG_PEEK)) return;
    FdState& st = fds_[static_cast<std::size_t>(op.fd)];
    if (!st.peer_closed) st.maybe_readable = false;
}

int EpollDriver::injected_fault(const IoOp& op, std::size_t& len) {
    const int e = faults::refusal(op.code);
    if (e == EAGAIN) fault_ready_.push_back(op.fd);
    if (e == 0 && len > 1 && faults::hit(faults::Kind::short_transfer, op.code))
        len = faults::shorter(static_cast<std::uint32_t>(std::min<std::size_t>(len, UINT32_MAX)));
    return e;
}

} // namespace galay::detail
