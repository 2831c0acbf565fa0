// What the hand-written load generators (raw_client, http_turns, tls_load) share besides
// common.hpp (the clock): resolving the server's address and making room for their sockets.
// Independent of galay, as common.hpp. (Their latency histogram is the one every program of the
// suite uses: measure/histogram.hpp.)
#pragma once

#include "common.hpp"

#include <netdb.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

namespace baseline {

// The address of host:port for a TCP connect, IPv4 first ("localhost" must not become ::1 when
// the servers bind 0.0.0.0), then any family (an IPv6-only name or literal). Returns 0, or
// getaddrinfo's error (gai_strerror).
inline int resolve_tcp(const std::string& host, int port, sockaddr_storage& addr,
                       socklen_t& addr_len) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const std::string service = std::to_string(port);
    int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
    if (rc != 0) {
        hints.ai_family = AF_UNSPEC;
        rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
    }
    if (rc != 0) return rc;
    std::memcpy(&addr, res->ai_addr, res->ai_addrlen);
    addr_len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

// Makes room for `sockets` plus a few fds; false (with a message naming `program`) if impossible.
inline bool ensure_fds(const char* program, size_t sockets) {
    const rlim_t need = static_cast<rlim_t>(sockets) + 32;
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur >= need) return true;
    if (rl.rlim_max >= need) {
        rl.rlim_cur = rl.rlim_max;
        return setrlimit(RLIMIT_NOFILE, &rl) == 0;
    }
    rlimit want{need, need}; // succeeds only with CAP_SYS_RESOURCE
    if (setrlimit(RLIMIT_NOFILE, &want) == 0) return true;
    std::fprintf(stderr,
                 "%s: %zu connections need %llu file descriptors, but RLIMIT_NOFILE allows only "
                 "%llu (hard limit): too many open files; raise it (`ulimit -n`, `ulimit -Hn`, "
                 "/etc/security/limits.conf)\n",
                 program, sockets, static_cast<unsigned long long>(need),
                 static_cast<unsigned long long>(rl.rlim_max));
    return false;
}

} // namespace baseline
