// Descriptor passing over Unix sockets: SCM_RIGHTS control messages on sendmsg/recvmsg.
// Received descriptors are close-on-exec (MSG_CMSG_CLOEXEC) and owned at once, so no path out of
// a receive (a truncated control message included) leaves one open.
#include "galay/net/unix.hpp"
#include "net/scm_rights.hpp"
#include "platform/fd_calls.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace galay::detail {

void scm_rights_fds(std::span<const std::byte> control, std::vector<int>& out) {
    std::size_t at = 0;
    while (control.size() - at >= sizeof(cmsghdr)) {
        cmsghdr h;
        std::memcpy(&h, control.data() + at, sizeof h); // (the buffer may be unaligned)
        const std::size_t len = h.cmsg_len;
        if (len < CMSG_LEN(0) || len > control.size() - at) return;
        if (h.cmsg_level == SOL_SOCKET && h.cmsg_type == SCM_RIGHTS) {
            const std::size_t n = (len - CMSG_LEN(0)) / sizeof(int);
            for (std::size_t i = 0; i < n; ++i) {
                int fd;
                std::memcpy(&fd, control.data() + at + CMSG_LEN(0) + i * sizeof(int), sizeof fd);
                out.push_back(fd);
            }
        }
#if defined(CMSG_ALIGN)
        const std::size_t step = CMSG_ALIGN(len);
#else // (macOS, FreeBSD) the header is aligned already: align the payload as CMSG_SPACE does
        const std::size_t step = CMSG_SPACE(len - CMSG_LEN(0));
#endif
        if (step > control.size() - at) return;
        at += step;
    }
}

FdSendAwaitable::FdSendAwaitable(int fd, const void* buf, std::size_t len, std::span<const int> fds,
                                 const UnixAddr* to)
    : to_(to) {
    op_.code = OpCode::sendmsg;
    op_.fd = fd;
    iov_.iov_base = const_cast<void*>(buf);
    iov_.iov_len = len;
    // A stream carries descriptors with a byte; zero bytes would send nothing, them included.
    if (fds.size() > kMaxFdsPerMessage || (!fds.empty() && len == 0)) {
        setup_error_ = EINVAL;
        return;
    }
    if (fds.empty()) return;
    control_.assign(CMSG_SPACE(fds.size_bytes()), 0);
    msg_.msg_control = control_.data();
    msg_.msg_controllen = control_.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg_);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(fds.size_bytes());
    std::memcpy(CMSG_DATA(c), fds.data(), fds.size_bytes());
}

void FdSendAwaitable::prepare() noexcept {
    msg_.msg_iov = &iov_;
    msg_.msg_iovlen = 1;
    msg_.msg_control = control_.empty() ? nullptr : control_.data();
    msg_.msg_controllen = control_.size();
    if (to_ != nullptr) {
        msg_.msg_name = const_cast<sockaddr*>(to_->data());
        msg_.msg_namelen = to_->size();
    }
    op_.buf = &msg_;
}

Result<std::size_t> FdSendAwaitable::result() {
    if (setup_error_ != 0) return fail(setup_error_);
    if (op_.result < 0) return fail(static_cast<int>(-op_.result));
    return static_cast<std::size_t>(op_.result);
}

FdRecvAwaitable::FdRecvAwaitable(int fd, void* buf, std::size_t len, std::size_t max_fds) {
    op_.code = OpCode::recvmsg;
    op_.fd = fd;
#if defined(MSG_CMSG_CLOEXEC)
    op_.msg_flags = MSG_CMSG_CLOEXEC;
#endif // (macOS has none: result() sets FD_CLOEXEC on each descriptor received)
    iov_.iov_base = buf;
    iov_.iov_len = len;
    if (max_fds > kMaxFdsPerMessage) max_fds = kMaxFdsPerMessage;
    if (max_fds > 0) control_.assign(CMSG_SPACE(max_fds * sizeof(int)), 0);
}

void FdRecvAwaitable::prepare() noexcept {
    msg_.msg_iov = &iov_;
    msg_.msg_iovlen = 1;
    msg_.msg_control = control_.empty() ? nullptr : control_.data();
    msg_.msg_controllen = control_.size();
    op_.buf = &msg_;
}

Result<FdMessage> FdRecvAwaitable::result() {
    if (op_.result < 0) return fail(static_cast<int>(-op_.result));
    FdMessage m;
    m.size = static_cast<std::size_t>(op_.result);
    if (msg_.msg_controllen > 0) {
        std::vector<int> fds;
        scm_rights_fds(
            std::as_bytes(std::span(control_.data(),
                                    std::min<std::size_t>(msg_.msg_controllen, control_.size()))),
            fds);
        for (const int fd : fds) {
#if !defined(MSG_CMSG_CLOEXEC)
            (void)platform::set_fd_flags(fd, false);
#endif
            m.fds.emplace_back(fd);
        }
    }
    // (A stream never sets MSG_TRUNC: what does not fit stays queued for the next receive.)
    m.truncated = (msg_.msg_flags & MSG_TRUNC) != 0;
    // The descriptors that did fit are owned by `m` and close with it.
    if (msg_.msg_flags & MSG_CTRUNC)
        return std::unexpected(make_error_code(errc::control_truncated));
    return m;
}

} // namespace galay::detail
