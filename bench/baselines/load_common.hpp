// What the hand-written load generators (raw_client, http_turns) share: the clock, the latency
// histogram, resolving the server's address and making room for their sockets. Independent of
// galay, as common.hpp.
#pragma once

#include <netdb.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>
#include <string>
#include <vector>

namespace baseline {

inline int64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// HdrHistogram-style log-linear histogram: exact below 256, then 128 sub-buckets per power of
// two, so a percentile is within 1/128 (0.8%) of a recorded value. Mean and stdev are exact
// (Welford), min and max too.
class Histogram {
    using u64 = uint64_t;
    static constexpr int kSubBits = 7;
    static constexpr u64 kSub = u64{1} << kSubBits;
    std::vector<u64> counts_ = std::vector<u64>((64 - kSubBits + 1) * kSub);
    u64 total_ = 0, max_ = 0, min_ = std::numeric_limits<u64>::max();
    double mean_ = 0, m2_ = 0;

    static size_t index(u64 v) {
        if (v < 2 * kSub) return v;
        const int shift = 63 - __builtin_clzll(v) - kSubBits; // >= 1
        return static_cast<size_t>(shift + 1) * kSub + ((v >> shift) - kSub);
    }
    static double midpoint(size_t i) {
        if (i < 2 * kSub) return static_cast<double>(i);
        const u64 shift = i / kSub - 1, mant = i % kSub + kSub;
        return static_cast<double>(mant << shift) + static_cast<double>(u64{1} << shift) / 2;
    }

public:
    void record(u64 v) {
        ++counts_[index(v)];
        ++total_;
        const double x = static_cast<double>(v), d = x - mean_;
        mean_ += d / static_cast<double>(total_);
        m2_ += d * (x - mean_);
        max_ = std::max(max_, v);
        min_ = std::min(min_, v);
    }
    /// Forget every value (the counts array is kept).
    void reset() {
        std::fill(counts_.begin(), counts_.end(), 0);
        total_ = 0;
        max_ = 0;
        min_ = std::numeric_limits<u64>::max();
        mean_ = m2_ = 0;
    }
    u64 count() const { return total_; }
    double mean() const { return mean_; }
    double stdev() const { return total_ > 1 ? std::sqrt(m2_ / static_cast<double>(total_)) : 0; }
    double min() const { return total_ ? static_cast<double>(min_) : 0; }
    double max() const { return static_cast<double>(max_); }
    double percentile(double p) const {
        if (total_ == 0) return 0;
        const u64 rank =
            std::max<u64>(1, static_cast<u64>(std::ceil(p / 100 * static_cast<double>(total_))));
        u64 seen = 0;
        for (size_t i = 0; i < counts_.size(); ++i) {
            seen += counts_[i];
            if (seen >= rank) return std::clamp(midpoint(i), min(), max());
        }
        return max();
    }
};

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
