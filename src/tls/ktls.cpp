// The kTLS probe: does this kernel accept the "tls" upper-layer protocol on a TCP socket?
#include "tls/context_state.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

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
    // TCP_ULP needs an established connection: a loopback pair made for the purpose.
    Fd listener{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    Fd client{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
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

void note_ktls_fallback(const KtlsProbe& probe) {
    static std::once_flag once;
    std::call_once(once, [&] {
        std::fprintf(stderr, "galay tls: kTLS not used (%s); records are encrypted in user space\n",
                     probe.available ? "galay does not hand the keys to the kernel yet"
                                     : probe.reason.c_str());
    });
}

} // namespace detail

} // namespace galay::tls
