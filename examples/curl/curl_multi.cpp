// examples/curl/curl_multi.cpp: libcurl's socket and timer callbacks on galay::AsyncFd and a
// galay timer, and fetch() (the contract is at the top of curl_multi.hpp).
#include "curl_multi.hpp"

#include <cerrno>
#include <optional>
#include <stdexcept>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <unordered_map>

namespace galay_curl {

std::string_view Response::header(std::string_view name) const {
    for (const auto& [k, v] : headers)
        if (k.size() == name.size() && ::strncasecmp(k.data(), name.data(), k.size()) == 0)
            return v;
    return {};
}

namespace detail {

using Clock = std::chrono::steady_clock;

/// One descriptor number libcurl has used, and its two watcher tasks. From a socket's first
/// CURL_POLL_IN/OUT the record holds a borrowing AsyncFd on it. libcurl removes a connection's
/// socket whenever it goes back to the connection cache and announces it again for the next
/// transfer: a socket libcurl opened and closes through our callbacks (`ours`) keeps its AsyncFd
/// over that REMOVE (nothing wanted, so nothing is told to libcurl), and is let go of in the
/// close callback, before the close; any other socket (the resolver's) lets go of it at REMOVE.
/// A record per number spares two tasks and an allocation per request, the kept AsyncFd a
/// registration per request.
struct SocketRec {
    explicit SocketRec(curl_socket_t s)
        : fd(s) {}
    curl_socket_t fd;
    galay::AsyncFd afd;             // borrowed: libcurl closes the socket, after REMOVE
    int want = 0;                   // CURL_POLL_IN | CURL_POLL_OUT: what libcurl waits for now
    bool ours = false;              // opened by on_open: on_close ends it
    std::uint64_t gen = 0;          // one more at each REMOVE: a wait begun before is stale
    galay::Event in_gate, out_gate; // wake the watcher of a direction libcurl wants again
};

struct Core;

/// One fetch() in flight: lives in the fetch() frame.
struct Transfer {
    Core* core = nullptr; // gets `easy` back, for the next fetch()
    CURL* easy = nullptr;
    curl_slist* headers = nullptr;
    const FetchOptions* options = nullptr;
    Response response;
    char error[CURL_ERROR_SIZE] = {};
    bool finished = false, refused = false;
    CURLcode result = CURLE_OK;
    galay::Event done;

    ~Transfer();
};

struct Core {
    CURLM* multi = nullptr;
    bool closing = false;
    std::unordered_map<curl_socket_t, std::shared_ptr<SocketRec>> sockets;
    std::optional<Clock::time_point> deadline; // libcurl's timer; none when unset
    std::optional<Clock::time_point> sleeping_until;
    galay::Event timer_gate;
    std::size_t in_flight = 0;
    std::uint64_t connects = 0;
    std::weak_ptr<Core> shared_self; // what the tasks spawned from callbacks hold
    // Easy handles of finished transfers, reset, for the next ones: curl_easy_init costs more
    // than curl_easy_reset, and a reset handle keeps nothing of its last transfer.
    std::vector<CURL*> spare;

    ~Core() {
        for (CURL* e : spare)
            curl_easy_cleanup(e);
        // No callback may reach a Core being destroyed.
        curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, nullptr);
        curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, nullptr);
        curl_multi_cleanup(multi);
    }

    /// Tell libcurl that `s` is ready (or its timer is due), then hand out finished transfers.
    void action(curl_socket_t s, int mask) {
        int running = 0;
        curl_multi_socket_action(multi, s, mask, &running);
        int queued = 0;
        while (CURLMsg* m = curl_multi_info_read(multi, &queued)) {
            if (m->msg != CURLMSG_DONE) continue;
            Transfer* t = nullptr;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &t);
            t->result = m->data.result; // m is invalid once the handle is removed
            curl_multi_remove_handle(multi, t->easy);
            t->finished = true;
            t->done.set(); // its fetch() resumes at the loop's next turn
        }
    }

    /// The socket is gone for libcurl: its waits end now, before libcurl closes it, and its
    /// record is parked.
    static void drop(SocketRec& r) {
        r.afd.reset();
        r.want = 0;
        ++r.gen;
    }

    /// The record of number `s`, made (with its watcher tasks) the first time.
    SocketRec& record(curl_socket_t s);

    void shutdown() {
        closing = true;
        for (auto& [fd, r] : sockets) {
            drop(*r);
            r->in_gate.set();
            r->out_gate.set();
        }
        timer_gate.set();
    }
};

namespace {
galay::Task<void> watch(std::shared_ptr<Core> c, std::shared_ptr<SocketRec> r, int bit);
}

SocketRec& Core::record(curl_socket_t s) {
    std::shared_ptr<SocketRec>& slot = sockets[s];
    if (!slot) {
        slot = std::make_shared<SocketRec>(s);
        // Each watcher holds the Core (shutdown() ends them) and its record.
        galay::spawn(watch(shared_self.lock(), slot, CURL_POLL_IN)).detach();
        galay::spawn(watch(shared_self.lock(), slot, CURL_POLL_OUT)).detach();
    }
    return *slot;
}

Transfer::~Transfer() {
    curl_slist_free_all(headers);
    if (easy == nullptr) return;
    if (core->spare.size() < 1024) {
        curl_easy_reset(easy);
        core->spare.push_back(easy);
    } else {
        curl_easy_cleanup(easy);
    }
}

namespace {

/// Waits for one direction of one socket whenever libcurl wants it, and tells libcurl.
/// Readiness is level-triggered, so waiting again without libcurl having drained the socket
/// completes again: nothing is lost.
galay::Task<void> watch(std::shared_ptr<Core> c, std::shared_ptr<SocketRec> r, int bit) {
    galay::Event& gate = bit == CURL_POLL_IN ? r->in_gate : r->out_gate;
    const galay::Interest interest =
        bit == CURL_POLL_IN ? galay::Interest::readable : galay::Interest::writable;
    const int select = bit == CURL_POLL_IN ? CURL_CSELECT_IN : CURL_CSELECT_OUT;
    while (!c->closing) {
        if ((r->want & bit) == 0) {
            (void)co_await gate.wait();
            continue;
        }
        const std::uint64_t gen = r->gen;
        auto ev = co_await r->afd.ready(interest);
        if (c->closing) break;
        // Removed meanwhile (the wait was for a socket libcurl let go of), or libcurl no
        // longer wants this direction: nothing to tell it.
        if (r->gen != gen || (r->want & bit) == 0) continue;
        if (!ev) {
            // Not a readiness: the socket cannot be waited on. libcurl's next read or write
            // on it reports what is wrong.
            c->action(r->fd, CURL_CSELECT_ERR);
            co_await galay::yield_now();
            continue;
        }
        c->action(r->fd, ev->error() ? select | CURL_CSELECT_ERR : select);
    }
}

/// Sleeps towards libcurl's deadline and calls libcurl when it is due.
galay::Task<void> run_timer(std::shared_ptr<Core> c) {
    while (!c->closing) {
        if (!c->deadline) {
            (void)co_await c->timer_gate.wait();
            continue;
        }
        const Clock::time_point until = *c->deadline;
        if (Clock::now() >= until) {
            c->deadline.reset(); // single-shot: libcurl sets the next one
            c->action(CURL_SOCKET_TIMEOUT, 0);
            co_await galay::yield_now(); // a timer of 0 again must not starve the sockets
            continue;
        }
        c->sleeping_until = until;
        (void)co_await c->timer_gate.wait().deadline(until); // woken early: a nearer deadline
        c->sleeping_until.reset();
    }
}

/// CURLMOPT_SOCKETFUNCTION: record what libcurl wants; never calls libcurl back.
int on_socket(CURL*, curl_socket_t s, int what, void* clientp, void* socketp) {
    auto* c = static_cast<Core*>(clientp);
    auto* r = static_cast<SocketRec*>(socketp);
    if (what == CURL_POLL_REMOVE) {
        if (r == nullptr) return 0; // newer libcurl: REMOVE for a socket never announced
        if (!r->ours) {
            Core::drop(*r);
        } else { // kept until on_close; a wait armed now is stale
            r->want = 0;
            ++r->gen;
        }
        return 0;
    }
    if (r == nullptr) { // a new socket (or a cached connection's, back in use)
        r = &c->record(s);
        if (!r->afd.is_open()) {
            auto afd = galay::AsyncFd::borrow(s);
            if (!afd) return -1; // libcurl fails the transfers on this socket
            r->afd = std::move(*afd);
        }
        r->want = 0;
        curl_multi_assign(c->multi, s, r);
    }
    const int before = r->want;
    r->want = what & (CURL_POLL_IN | CURL_POLL_OUT);
    if ((r->want & CURL_POLL_IN) != 0 && (before & CURL_POLL_IN) == 0) r->in_gate.notify_one();
    if ((r->want & CURL_POLL_OUT) != 0 && (before & CURL_POLL_OUT) == 0) r->out_gate.notify_one();
    return 0;
}

/// CURLMOPT_TIMERFUNCTION: -1 deletes the timer, anything else (re)arms it, 0 meaning now; the
/// timer task calls libcurl, never this callback.
int on_timer(CURLM*, long ms, void* clientp) {
    auto* c = static_cast<Core*>(clientp);
    if (ms < 0) {
        c->deadline.reset(); // a sleeping timer task wakes at its old deadline and finds none
        return 0;
    }
    const Clock::time_point at = Clock::now() + std::chrono::milliseconds(ms);
    c->deadline = at;
    // A later deadline needs no wake-up: the sleep ends first and sleeps on to the new one.
    if (!c->sleeping_until || at < *c->sleeping_until) c->timer_gate.notify_one();
    return 0;
}

/// CURLOPT_OPENSOCKETFUNCTION: the socket libcurl connects with, marked so that its AsyncFd may
/// outlive a REMOVE (on_close lets go of it).
curl_socket_t on_open(void* clientp, curlsocktype, curl_sockaddr* a) {
    auto* c = static_cast<Core*>(clientp);
    const curl_socket_t s = ::socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    if (s == CURL_SOCKET_BAD) return s;
    SocketRec& r = c->record(s);
    Core::drop(r); // nothing of an earlier socket with this number
    r.ours = true;
    return s;
}

/// CURLOPT_CLOSESOCKETFUNCTION: its waits end and galay lets go of it, then it is closed.
int on_close(void* clientp, curl_socket_t s) {
    auto* c = static_cast<Core*>(clientp);
    if (auto it = c->sockets.find(s); it != c->sockets.end()) {
        Core::drop(*it->second);
        it->second->ours = false;
    }
    return ::close(s);
}

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* p) {
    auto* t = static_cast<Transfer*>(p);
    const std::size_t len = size * n;
    t->response.body_bytes += len;
    if (t->options->on_body) {
        if (!t->options->on_body(std::string_view(data, len))) {
            t->refused = true;
            return CURL_WRITEFUNC_ERROR;
        }
    } else {
        t->response.body.append(data, len);
    }
    return len;
}

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* p) {
    auto* t = static_cast<Transfer*>(p);
    std::string_view line(data, size * n);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
        line.remove_suffix(1);
    if (line.starts_with("HTTP/")) {
        t->response.headers.clear(); // a new response: after a redirect, or a 100 Continue
    } else if (const auto colon = line.find(':'); colon != std::string_view::npos) {
        std::string_view value = line.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
            value.remove_prefix(1);
        t->response.headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
    }
    return size * n;
}

} // namespace
} // namespace detail

CurlMulti::CurlMulti(MultiLimits limits)
    : core_(std::make_shared<detail::Core>()) {
    core_->shared_self = core_;
    core_->multi = curl_multi_init();
    if (core_->multi == nullptr) throw std::runtime_error("curl_multi_init failed");
    curl_multi_setopt(core_->multi, CURLMOPT_SOCKETFUNCTION, &detail::on_socket);
    curl_multi_setopt(core_->multi, CURLMOPT_SOCKETDATA, core_.get());
    curl_multi_setopt(core_->multi, CURLMOPT_TIMERFUNCTION, &detail::on_timer);
    curl_multi_setopt(core_->multi, CURLMOPT_TIMERDATA, core_.get());
    if (limits.cached_connections > 0)
        curl_multi_setopt(core_->multi, CURLMOPT_MAXCONNECTS, limits.cached_connections);
    if (limits.host_connections > 0)
        curl_multi_setopt(core_->multi, CURLMOPT_MAX_HOST_CONNECTIONS, limits.host_connections);
    galay::spawn(detail::run_timer(core_)).detach();
}

CurlMulti::~CurlMulti() {
    core_->shutdown(); // the watchers and the timer task end at the loop's next turn
}

std::size_t CurlMulti::in_flight() const noexcept {
    return core_->in_flight;
}
std::uint64_t CurlMulti::connections_opened() const noexcept {
    return core_->connects;
}

galay::Task<FetchResult> CurlMulti::fetch(std::string url, FetchOptions options) {
    std::shared_ptr<detail::Core> c = core_;
    detail::Transfer t;
    t.options = &options;
    t.core = c.get();
    if (!c->spare.empty()) {
        t.easy = c->spare.back();
        c->spare.pop_back();
    } else {
        t.easy = curl_easy_init();
    }
    if (t.easy == nullptr) co_return std::unexpected(FetchError{CURLE_OUT_OF_MEMORY, "no handle"});
    CURL* e = t.easy;
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_PRIVATE, &t);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t.error);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &detail::on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, &detail::on_open);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, c.get());
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, &detail::on_close);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, c.get());
    if (options.keep_headers) {
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &detail::on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
    }
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(options.timeout.count()));
    if (options.follow_redirects) {
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(e, CURLOPT_MAXREDIRS, 10L);
    }
    if (!options.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, options.ca_file.c_str());
    if (options.insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    for (const std::string& h : options.headers)
        t.headers = curl_slist_append(t.headers, h.c_str());
    if (t.headers != nullptr) curl_easy_setopt(e, CURLOPT_HTTPHEADER, t.headers);

    if (const CURLMcode mc = curl_multi_add_handle(c->multi, e); mc != CURLM_OK)
        co_return std::unexpected(FetchError{CURLE_FAILED_INIT, curl_multi_strerror(mc)});
    ++c->in_flight;
    (void)co_await t.done.wait(); // set when libcurl is done; an error: we were cancelled
    --c->in_flight;
    if (!t.finished) {
        // Cancelled: out of the multi handle now (not from inside libcurl: this task runs
        // from the loop), so that libcurl forgets the transfer before `t` goes away.
        curl_multi_remove_handle(c->multi, e);
        co_return std::unexpected(FetchError{CURLE_ABORTED_BY_CALLBACK, "cancelled"});
    }
    long opened = 0;
    curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &opened);
    c->connects += static_cast<std::uint64_t>(opened);
    if (t.result != CURLE_OK) {
        std::string msg = t.refused            ? std::string("body refused")
                          : t.error[0] != '\0' ? std::string(t.error)
                                               : std::string(curl_easy_strerror(t.result));
        co_return std::unexpected(FetchError{t.result, std::move(msg)});
    }
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &t.response.status);
    const char* final_url = nullptr;
    curl_easy_getinfo(e, CURLINFO_EFFECTIVE_URL, &final_url);
    t.response.url = final_url != nullptr ? final_url : url;
    co_return std::move(t.response);
}

} // namespace galay_curl
