// Unix domain sockets: addresses, streams, listeners and datagram sockets. Descriptor passing
// is in unix_fds.cpp. Every transfer is an existing op (recv, send, recvmsg, sendmsg, accept,
// connect), so both drivers run them unchanged.
#include "galay/net/unix.hpp"
#include "platform/fd_calls.hpp"

#include "sockopt.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#if defined(__FreeBSD__)
#include <sys/param.h>
#include <sys/ucred.h>
#endif
#if defined(__APPLE__) || defined(__FreeBSD__)
#include <sys/un.h>
#endif
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace galay {

namespace {

constexpr std::size_t kSunPath = sizeof(sockaddr_un{}.sun_path);

Result<UnixAddr> from_name(std::string_view name, bool abstract) {
    // A path needs its terminating NUL inside sun_path; an abstract name has a leading NUL.
    if (name.empty() || (!abstract && name.find('\0') != std::string_view::npos))
        return fail(EINVAL);
    if (name.size() + 1 > kSunPath) return fail(ENAMETOOLONG);
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    std::memcpy(un.sun_path + (abstract ? 1 : 0), name.data(), name.size());
    // A path counts its terminating NUL; an abstract name its leading one.
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + 1);
    return UnixAddr::from_sockaddr(reinterpret_cast<const sockaddr*>(&un), len);
}

Result<UnixAddr> name_of(int fd, bool peer) noexcept {
    UnixAddr a;
    socklen_t len = UnixAddr::capacity();
    int r = peer ? ::getpeername(fd, a.data(), &len) : ::getsockname(fd, a.data(), &len);
    if (r < 0) return fail(errno);
    a.set_size(len);
    return a;
}

// The peer's credentials in each system's form (docs/driver.md, "Above the poller"): all three
// are recorded by the kernel when the connection is made (connect, socketpair).
Result<PeerCred> cred_of(int fd) noexcept {
#if GALAY_HAVE_LINUX_SOCKETS
    ucred c{};
    socklen_t len = sizeof c;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) < 0) return fail(errno);
    return PeerCred{.pid = c.pid, .uid = c.uid, .gid = c.gid};
#elif defined(__FreeBSD__)
    // LOCAL_PEERCRED (what getpeereid(3) reads), for the pid too: cr_pid, FreeBSD 13 on (0 before).
    xucred c{};
    socklen_t len = sizeof c;
    if (::getsockopt(fd, SOL_LOCAL, LOCAL_PEERCRED, &c, &len) < 0) return fail(errno);
    if (c.cr_version != XUCRED_VERSION) return fail(errc::not_supported);
    return PeerCred{.pid = c.cr_pid, .uid = c.cr_uid, .gid = c.cr_groups[0]};
#elif defined(__APPLE__)
    // getpeereid(3) for the ids, LOCAL_PEERPID for the pid (macOS's xucred has none).
    PeerCred c;
    if (::getpeereid(fd, &c.uid, &c.gid) < 0) return fail(errno);
    socklen_t len = sizeof c.pid;
    if (::getsockopt(fd, SOL_LOCAL, LOCAL_PEERPID, &c.pid, &len) < 0) return fail(errno);
    return c;
#else
    (void)fd; // the POSIX profile: glibc has no getpeereid, and SO_PEERCRED is Linux's own
    return fail(errc::not_supported);
#endif
}

/// Is `path` a socket file nobody listens on? (connect is refused.)
bool is_stale_socket(const UnixAddr& addr) noexcept {
    struct stat st {};
    if (::lstat(addr.name().c_str(), &st) < 0 || !S_ISSOCK(st.st_mode)) return false;
    const int fd = platform::socket_cloexec(AF_UNIX, SOCK_STREAM, 0, false);
    if (fd < 0) return false;
    const bool refused = ::connect(fd, addr.data(), addr.size()) < 0 && errno == ECONNREFUSED;
    ::close(fd);
    return refused;
}

void unlink_if_same(const std::string& path, dev_t dev, ino_t ino) noexcept {
    struct stat st {};
    if (path.empty() || ::lstat(path.c_str(), &st) < 0) return;
    if (st.st_dev == dev && st.st_ino == ino) ::unlink(path.c_str());
}

} // namespace

// --- UnixAddr ------------------------------------------------------------------------------------

UnixAddr::UnixAddr() noexcept {
    un_.sun_family = AF_UNIX;
    len_ = offsetof(sockaddr_un, sun_path);
}

Result<UnixAddr> UnixAddr::path(std::string_view path) {
    return from_name(path, false);
}
Result<UnixAddr> UnixAddr::abstract(std::string_view name) {
    return from_name(name, true);
}
Result<UnixAddr> UnixAddr::parse(std::string_view text) {
    if (text.starts_with('@')) return abstract(text.substr(1));
    return path(text);
}

UnixAddr UnixAddr::from_sockaddr(const sockaddr* sa, socklen_t len) noexcept {
    UnixAddr a;
    if (len > capacity()) len = capacity();
    std::memcpy(&a.un_, sa, len);
    a.set_size(len);
    return a;
}

void UnixAddr::set_size(socklen_t len) noexcept {
    len_ = len < offsetof(sockaddr_un, sun_path) ? offsetof(sockaddr_un, sun_path) : len;
}

bool UnixAddr::is_unnamed() const noexcept {
    return len_ <= offsetof(sockaddr_un, sun_path);
}
bool UnixAddr::is_abstract() const noexcept {
    return !is_unnamed() && un_.sun_path[0] == '\0';
}

std::string UnixAddr::name() const {
    if (is_unnamed()) return {};
    const std::size_t n = len_ - offsetof(sockaddr_un, sun_path);
    if (is_abstract()) return std::string(un_.sun_path + 1, n - 1);
    return std::string(un_.sun_path, ::strnlen(un_.sun_path, n));
}

std::string UnixAddr::to_string() const {
    if (is_unnamed()) return "(unnamed)";
    return is_abstract() ? "@" + name() : name();
}

bool operator==(const UnixAddr& a, const UnixAddr& b) noexcept {
    return a.is_abstract() == b.is_abstract() && a.is_unnamed() == b.is_unnamed() &&
           a.name() == b.name();
}

// --- connect / accept ----------------------------------------------------------------------------

namespace detail {

UnixConnectAwaitable::UnixConnectAwaitable(const UnixAddr& addr) noexcept
    : addr_(addr) {
    op_.code = OpCode::connect;
    auto fd = make_socket(AF_UNIX, SOCK_STREAM);
    if (!fd)
        setup_error_ = fd.error().value();
    else
        op_.fd = *fd;
}

UnixConnectAwaitable::UnixConnectAwaitable(UnixConnectAwaitable&& o) noexcept
    : IoAwaitable(std::move(o))
    , addr_(o.addr_)
    , setup_error_(o.setup_error_) {
    o.op_.fd = -1;
}

UnixConnectAwaitable::~UnixConnectAwaitable() {
    close_fd(op_.fd);
}

Result<UnixStream> UnixConnectAwaitable::result() {
    if (setup_error_ != 0) return fail(setup_error_);
    if (op_.result < 0) return fail(static_cast<int>(-op_.result));
    return UnixStream(std::exchange(op_.fd, -1), UnixStream::NonBlocking{});
}

UnixAcceptAwaitable::UnixAcceptAwaitable(int fd, UnixAddr* peer) noexcept
    : peer_(peer) {
    op_.code = OpCode::accept;
    op_.fd = fd;
}

Result<UnixStream> UnixAcceptAwaitable::result() {
    if (op_.result < 0) return fail(static_cast<int>(-op_.result));
    if (peer_ != nullptr) {
        addr_.set_size(addrlen_);
        *peer_ = addr_;
    }
    return UnixStream(static_cast<int>(op_.result), UnixStream::NonBlocking{});
}

UnixRecvFromAwaitable::UnixRecvFromAwaitable(int fd, void* buf, std::size_t len,
                                             UnixAddr* from) noexcept
    : from_(from) {
    op_.code = OpCode::recvmsg;
    op_.fd = fd;
    op_.msg_flags = MSG_TRUNC; // the result is the datagram's real length
    iov_.iov_base = buf;
    iov_.iov_len = len;
}

void UnixRecvFromAwaitable::prepare() noexcept {
    msg_.msg_iov = &iov_;
    msg_.msg_iovlen = 1;
    if (from_ != nullptr) {
        msg_.msg_name = from_->data();
        msg_.msg_namelen = UnixAddr::capacity();
    }
    op_.buf = &msg_;
}

Result<RecvInfo> UnixRecvFromAwaitable::result() {
    if (op_.result < 0) return fail(static_cast<int>(-op_.result));
    const auto real = static_cast<std::size_t>(op_.result);
    if (from_ != nullptr) from_->set_size(msg_.msg_namelen);
    return RecvInfo{.truncated = real > iov_.iov_len,
                    .size = real < iov_.iov_len ? real : iov_.iov_len,
                    .datagram_size = real};
}

} // namespace detail

// --- UnixStream ----------------------------------------------------------------------------------

Result<std::pair<UnixStream, UnixStream>> UnixStream::pair() noexcept {
    int sv[2];
    if (platform::socketpair_cloexec(AF_UNIX, SOCK_STREAM, 0, sv, true) < 0) return fail(errno);
    return std::pair{UnixStream(sv[0], NonBlocking{}), UnixStream(sv[1], NonBlocking{})};
}

Result<PeerCred> UnixStream::peer_cred() const noexcept {
    return cred_of(fd_.get());
}
Result<UnixAddr> UnixStream::peer_addr() const noexcept {
    return name_of(fd_.get(), true);
}
Result<UnixAddr> UnixStream::local_addr() const noexcept {
    return name_of(fd_.get(), false);
}

// --- UnixListener --------------------------------------------------------------------------------

UnixListener::UnixListener(UnixListener&& o) noexcept
    : FdHandle(std::move(o))
    , path_(std::exchange(o.path_, {}))
    , dev_(o.dev_)
    , ino_(o.ino_) {}

UnixListener& UnixListener::operator=(UnixListener&& o) noexcept {
    if (this != &o) {
        remove_file();
        FdHandle::operator=(std::move(o));
        path_ = std::exchange(o.path_, {});
        dev_ = o.dev_;
        ino_ = o.ino_;
    }
    return *this;
}

UnixListener::~UnixListener() {
    remove_file();
}

void UnixListener::remove_file() noexcept {
    unlink_if_same(path_, dev_, ino_);
    path_.clear();
}

Result<UnixListener> UnixListener::bind(const UnixAddr& addr, int backlog) {
    if (addr.is_unnamed()) return fail(EINVAL);
    auto fd = detail::make_socket(AF_UNIX, SOCK_STREAM);
    if (!fd) return std::unexpected(fd.error());
    UnixListener l;
    l.fd_ = OwnedFd(*fd);
    if (::bind(*fd, addr.data(), addr.size()) < 0) {
        const int err = errno;
        if (err != EADDRINUSE || addr.is_abstract() || !is_stale_socket(addr)) return fail(err);
        ::unlink(addr.name().c_str());
        if (::bind(*fd, addr.data(), addr.size()) < 0) return fail(errno);
    }
    if (!addr.is_abstract()) {
        struct stat st {};
        if (::lstat(addr.name().c_str(), &st) == 0) {
            l.path_ = addr.name();
            l.dev_ = st.st_dev;
            l.ino_ = st.st_ino;
        }
    }
    if (::listen(*fd, backlog) < 0) return fail(errno);
    return l;
}

Result<UnixAddr> UnixListener::local_addr() const noexcept {
    return name_of(fd_.get(), false);
}

detail::CloseAwaitable UnixListener::close() noexcept {
    remove_file();
    return FdHandle::close();
}

int UnixListener::release() noexcept {
    path_.clear(); // (the caller's socket: its file stays)
    return FdHandle::release();
}

// --- UnixDatagram --------------------------------------------------------------------------------

Result<UnixDatagram> UnixDatagram::unbound() noexcept {
    auto fd = detail::make_socket(AF_UNIX, SOCK_DGRAM);
    if (!fd) return std::unexpected(fd.error());
    UnixDatagram d;
    d.fd_ = OwnedFd(*fd);
    return d;
}

Result<UnixDatagram> UnixDatagram::bind(const UnixAddr& addr) {
    auto d = unbound();
    if (!d) return d;
    if (::bind(d->fd_.get(), addr.data(), addr.size()) < 0) return fail(errno);
    if (!addr.is_abstract() && !addr.is_unnamed()) d->path_ = addr.name();
    return d;
}

Result<std::pair<UnixDatagram, UnixDatagram>> UnixDatagram::pair() noexcept {
    int sv[2];
    if (platform::socketpair_cloexec(AF_UNIX, SOCK_DGRAM, 0, sv, true) < 0) return fail(errno);
    std::pair<UnixDatagram, UnixDatagram> p;
    p.first.fd_ = OwnedFd(sv[0]);
    p.second.fd_ = OwnedFd(sv[1]);
    return p;
}

UnixDatagram::UnixDatagram(UnixDatagram&& o) noexcept
    : FdHandle(std::move(o))
    , path_(std::exchange(o.path_, {})) {}

UnixDatagram& UnixDatagram::operator=(UnixDatagram&& o) noexcept {
    if (this != &o) {
        if (!path_.empty()) ::unlink(path_.c_str());
        FdHandle::operator=(std::move(o));
        path_ = std::exchange(o.path_, {});
    }
    return *this;
}

UnixDatagram::~UnixDatagram() {
    if (!path_.empty()) ::unlink(path_.c_str());
}

Result<void> UnixDatagram::connect(const UnixAddr& addr) noexcept {
    if (::connect(fd_.get(), addr.data(), addr.size()) < 0) return fail(errno);
    return {};
}
Result<PeerCred> UnixDatagram::peer_cred() const noexcept {
    return cred_of(fd_.get());
}
Result<UnixAddr> UnixDatagram::local_addr() const noexcept {
    return name_of(fd_.get(), false);
}

} // namespace galay
