// raw_uring [port] [--unix PATH] [--no-fixed] [--no-defer] [--buf-size BYTES] [--bufs N]
//           [--bundle | --inc] [--threads N] [--idle-spin US]: the hand-written liburing echo
//           server galay is measured against.
// `--unix PATH` serves a Unix stream socket at PATH instead of TCP (the same loop: it shows what
// io_uring itself costs on AF_UNIX, against the epoll loop of raw_unix_echo).
//
// --threads N runs N such loops, one thread and one ring each, each with its own SO_REUSEPORT
// listener on the port (the shape of bench_server --threads N --listen sharded).
//
// One thread, one ring. Multishot accept (direct descriptors by default), one multishot recv per
// connection selecting buffers from one shared provided-buffer ring, a plain send of exactly the
// bytes received, and the buffer goes back into the ring when its send has completed. Every loop
// iteration is a single io_uring_submit_and_wait(): all SQEs produced while reaping one batch of
// CQEs go to the kernel together, and sends usually complete inline during that same call.
//
// Per connection there is only a 12-byte state struct; data lives in the shared ring. Buffers are
// provisioned lazily (the pool grows with demand up to --bufs), so resident memory follows the
// peak number of buffers in use, not the number of connections.
//
// --idle-spin US: before waiting in the kernel, poll for completions (io_uring_get_events, no
// wait) for up to US microseconds, the way SchedulerOptions::idle_spin does, so that galay with
// its spin is measured against a loop that spends the same kind of CPU for the same latency.
//
// --bundle and --inc try the newest receive paths (receive bundles, Linux 6.10; incrementally
// consumed buffers, 6.12) in the floor loop, to see whether they move anything before galay's
// pooled receive takes them (docs/benchmarks/echo.md).
//
// Ordering: several recv completions may arrive for one connection before its first send is done
// (pipelining), and a short send leaves a tail. Sends on one socket are therefore serialised: the
// received buffers form a FIFO per connection (linked through a per-buffer `next` array) and only
// its head is in flight. Two concurrent sends on one socket could interleave their bytes.
//
// Not done: a cap on the data queued per connection. A peer that sends without reading can hold
// the whole pool; the others then wait in the ENOBUFS list (correct, but slow). An echo benchmark
// client reads everything, so this never triggers there.
#include "common.hpp"
#include "galay_cli.hpp"

#include <algorithm>
#include <ctime>
#include <deque>
#include <liburing.h>
#include <memory>
#include <poll.h>
#include <string>
#include <sys/mman.h>
#include <sys/un.h>
#include <thread>
#include <vector>

namespace {

enum Op : uint32_t { kAccept = 1, kRecv, kSend, kSignal, kIgnore };
constexpr uint64_t tag(Op op, uint32_t idx) {
    return (uint64_t{op} << 32) | idx;
}

constexpr uint16_t kNone = 0xffff; // buffer ids are < 32768, the kernel's buffer-ring limit
constexpr int kGroup = 0;
constexpr unsigned kRecvSendBundle = 1U << 4; // IORING_RECVSEND_BUNDLE (Linux 6.10)
constexpr unsigned kPbufRingInc = 2;          // IOU_PBUF_RING_INC (Linux 6.12)
constexpr unsigned kCqeBufMore = 1U << 4;     // IORING_CQE_F_BUF_MORE

enum : uint8_t {
    kOpen = 1,
    kRecvArmed = 2,    // a multishot recv is in the kernel
    kSendInflight = 4, // the head buffer is being sent
    kClosing = 8,      // no new data wanted; close once nothing is in flight
    kAborted = 16,     // the peer is gone: drop queued data instead of sending it
    kStarved = 32,     // recv ended with ENOBUFS; waiting in `starved` for buffers
};

struct Conn {
    uint16_t head = kNone, tail = kNone; // FIFO of received buffers not yet fully sent
    uint32_t sent = 0;                   // bytes of `head` already sent
    uint8_t flags = 0;
};

struct BufPool {
    io_uring_buf_ring* ring = nullptr;
    char* mem = nullptr;
    // As large as raw_epoll's read buffer: with pipelined 16 KiB messages one recv then carries
    // several messages and costs one send (16 KiB buffers measured 1.3x the CPU per request).
    // Pages of a buffer that no recv reaches are never faulted in: a 256 B message costs a page.
    uint32_t size = 64 * 1024;
    unsigned entries = 4096; // power of two, <= 32768
    // Buffers are `size + 64` bytes apart, not `size`: with a power-of-two stride the first cache
    // lines of all buffers (all a small message touches) would compete for the same cache sets.
    static constexpr uint32_t kColour = 64;
    size_t stride() const { return size_t{size} + kColour; }
    char* buf(uint16_t bid) const { return mem + bid * stride(); }
    unsigned provisioned = 0; // ids [0, provisioned) have been handed to the kernel
    int avail = 0;            // buffers the kernel can pick right now (incl. staged)
    int staged = 0;           // added since the last publish()
    std::vector<uint16_t> next;
    std::vector<uint32_t> len;
    // --bundle: a completion names only its first buffer; the others are the ring entries that
    // follow it, so the ring's contents are mirrored (by position) to find them.
    bool mirror = false;            // --bundle
    uint32_t added = 0;             // buffers ever added: the position of the next one
    std::vector<uint16_t> at;       // at[position & mask]: the buffer id put there
    std::vector<uint32_t> position; // position[bid]: where it was put last

    // --inc: the kernel consumes a buffer piece by piece (IOU_PBUF_RING_INC), so one buffer holds
    // the bytes of several receives, of several connections. A connection's queue then links
    // slices, not buffers (`next` and `len` are indexed by slice id); a buffer goes back to the
    // ring once the kernel has moved past it and every slice of it has been sent.
    bool inc = false;
    std::vector<uint16_t> slice_bid;
    std::vector<uint32_t> slice_off;
    std::vector<uint16_t> free_slices;
    std::vector<uint32_t> filled; // bytes of the buffer the kernel has handed out
    std::vector<uint32_t> refs;   // its slices not yet sent
    std::vector<uint8_t> done;    // the kernel has moved on to the next buffer

    char* data(uint16_t id) const { return inc ? buf(slice_bid[id]) + slice_off[id] : buf(id); }
    /// The bytes of queue entry `id` are sent (or dropped).
    void release(uint16_t id) {
        if (!inc) return put(id);
        const uint16_t bid = slice_bid[id];
        free_slices.push_back(id);
        if (--refs[bid] == 0 && done[bid]) recycle(bid);
    }
    void recycle(uint16_t bid) {
        filled[bid] = 0;
        done[bid] = 0;
        put(bid);
    }

    void put(uint16_t bid) {
        io_uring_buf_ring_add(ring, buf(bid), size, bid, io_uring_buf_ring_mask(entries), staged++);
        if (mirror) {
            const uint32_t p = added++;
            at[p & (entries - 1)] = bid;
            position[bid] = p;
        }
        ++avail;
    }
    // One release-store of the tail makes every buffer returned during the batch visible.
    void publish() {
        if (staged) io_uring_buf_ring_advance(ring, staged);
        staged = 0;
    }
    void grow_to(int want) {
        while (avail < want && provisioned < entries)
            put(static_cast<uint16_t>(provisioned++));
    }
};

struct Server {
    io_uring ring{};
    BufPool pool;
    std::vector<Conn> conns; // indexed by direct-descriptor slot (or fd with --no-fixed)
    std::deque<uint32_t> starved;
    int lfd = -1, sfd = -1;
    bool fixed = true;
    bool bundle = false; // --bundle: IORING_RECVSEND_BUNDLE receives (Linux 6.10)
    bool stop = false;
    bool accept_paused = false;
    int64_t spin_ns = 0; // --idle-spin
    int demand = 0;      // buffers asked for during the current batch (consumed or ENOBUFS)
    struct {
        unsigned long accepted, short_sends, enobufs, rearms, bundles;
        unsigned long receives, received, sends; // per-request work (bench/studies/echo_profile.py)
    } stats{}; // printed at exit, so tests see the rare paths were exercised

    io_uring_sqe* sqe() {
        io_uring_sqe* s = io_uring_get_sqe(&ring);
        if (!s) { // SQ full mid-batch (e.g. 10k connections waking at once): flush and go on
            io_uring_submit(&ring);
            s = io_uring_get_sqe(&ring);
        }
        return s;
    }
    io_uring_sqe* conn_sqe(uint32_t idx, Op op) {
        io_uring_sqe* s = sqe();
        io_uring_sqe_set_data64(s, tag(op, idx));
        return s;
    }
    uint8_t file_flag() const { return fixed ? IOSQE_FIXED_FILE : 0; }

    void arm_accept() {
        io_uring_sqe* s = sqe();
        if (fixed)
            io_uring_prep_multishot_accept_direct(s, lfd, nullptr, nullptr, 0);
        else
            io_uring_prep_multishot_accept(s, lfd, nullptr, nullptr, SOCK_CLOEXEC);
        io_uring_sqe_set_data64(s, tag(kAccept, 0));
    }

    void arm_recv(uint32_t idx) {
        conns[idx].flags |= kRecvArmed;
        io_uring_sqe* s = conn_sqe(idx, kRecv);
        io_uring_prep_recv_multishot(s, static_cast<int>(idx), nullptr, 0, 0);
        if (bundle) s->ioprio |= kRecvSendBundle;
        s->flags |= IOSQE_BUFFER_SELECT | file_flag();
        s->buf_group = kGroup;
    }

    void send_head(uint32_t idx) {
        Conn& c = conns[idx];
        c.flags |= kSendInflight;
        ++stats.sends;
        io_uring_sqe* s = conn_sqe(idx, kSend);
        io_uring_prep_send(s, static_cast<int>(idx), pool.data(c.head) + c.sent,
                           pool.len[c.head] - c.sent, MSG_NOSIGNAL);
        s->flags |= file_flag();
    }

    void drop_queue(Conn& c) {
        for (uint16_t id = c.head; id != kNone;) {
            const uint16_t next = pool.next[id];
            pool.release(id);
            id = next;
        }
        c.head = c.tail = kNone;
        c.sent = 0;
    }

    // The peer is gone. A pending multishot recv would hold the socket open forever (closing a
    // direct descriptor only drops the table's reference), so shut it down to end the recv.
    void abort(uint32_t idx) {
        Conn& c = conns[idx];
        if (!(c.flags & kAborted)) {
            c.flags |= kClosing | kAborted;
            if (c.flags & kRecvArmed) {
                io_uring_sqe* s = conn_sqe(idx, kIgnore);
                io_uring_prep_shutdown(s, static_cast<int>(idx), SHUT_RDWR);
                s->flags |= file_flag();
            }
        }
        if (!(c.flags & kSendInflight)) drop_queue(c);
    }

    // The state is reset before the close is even submitted: the slot/fd may be handed to a new
    // connection by the multishot accept as soon as the close has run, before we see any CQE.
    void maybe_close(uint32_t idx) {
        Conn& c = conns[idx];
        if (!(c.flags & kClosing) || (c.flags & (kRecvArmed | kSendInflight)) || c.head != kNone)
            return;
        c = Conn{};
        io_uring_sqe* s = conn_sqe(idx, kIgnore);
        if (fixed)
            io_uring_prep_close_direct(s, idx);
        else
            io_uring_prep_close(s, static_cast<int>(idx));
        s->flags |= IOSQE_CQE_SKIP_SUCCESS;
        if (accept_paused) {
            accept_paused = false;
            arm_accept();
        }
    }

    void on_accept(const io_uring_cqe* cqe) {
        if (cqe->res >= 0) {
            auto idx = static_cast<uint32_t>(cqe->res);
            if (idx >= conns.size()) conns.resize(idx + 1024);
            conns[idx] = Conn{};
            conns[idx].flags = kOpen;
            ++stats.accepted;
            arm_recv(idx);
        } else if (cqe->res == -ENFILE || cqe->res == -EMFILE) {
            std::fprintf(stderr, "raw_uring: accept: %s (pausing accepts until a close)\n",
                         std::strerror(-cqe->res));
            accept_paused = true;
            return;
        } else if (cqe->res != -EINTR && cqe->res != -ECONNABORTED) {
            std::fprintf(stderr, "raw_uring: accept: %s\n", std::strerror(-cqe->res));
        }
        if (!(cqe->flags & IORING_CQE_F_MORE)) arm_accept();
    }

    void on_recv(uint32_t idx, const io_uring_cqe* cqe) {
        Conn& c = conns[idx];
        const int res = cqe->res;
        if (!(cqe->flags & IORING_CQE_F_MORE)) c.flags &= ~kRecvArmed;
        if (pool.inc) return on_recv_inc(idx, cqe);
        if (cqe->flags & IORING_CQE_F_BUFFER) {
            --pool.avail;
            ++demand;
        }
        if (res > 0) {
            ++stats.receives;
            stats.received += static_cast<unsigned long>(res);
            const auto first = static_cast<uint16_t>(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
            // A bundle fills whole buffers in ring order and the last one partly.
            const uint32_t count =
                bundle ? (static_cast<uint32_t>(res) + pool.size - 1) / pool.size : 1;
            pool.avail -= static_cast<int>(count - 1);
            stats.bundles += count > 1;
            demand += static_cast<int>(count - 1);
            uint32_t left = static_cast<uint32_t>(res);
            for (uint32_t k = 0; k < count; ++k) {
                const uint16_t bid =
                    k == 0 ? first : pool.at[(pool.position[first] + k) & (pool.entries - 1)];
                const uint32_t n = std::min(left, pool.size);
                left -= n;
                if (c.flags & kClosing) {
                    pool.put(bid); // late data for a connection we are tearing down
                    continue;
                }
                pool.len[bid] = n;
                pool.next[bid] = kNone;
                if (c.tail == kNone)
                    c.head = bid;
                else
                    pool.next[c.tail] = bid;
                c.tail = bid;
            }
            if (!(c.flags & kClosing)) {
                if (!(c.flags & kSendInflight)) send_head(idx);
                // Multishot can end without an error (e.g. CQ overflow): re-arm.
                if (!(c.flags & kRecvArmed)) {
                    ++stats.rearms;
                    arm_recv(idx);
                }
            }
        } else {
            on_recv_ended(idx, res);
        }
        maybe_close(idx);
    }

    // A receive that brought no bytes: the pool ran dry, the peer finished, or an error.
    void on_recv_ended(uint32_t idx, int res) {
        Conn& c = conns[idx];
        if (res == -ENOBUFS) {
            // The shared ring ran dry; re-arming now would spin. Wait for buffers to return.
            ++demand;
            ++stats.enobufs;
            if (!(c.flags & (kClosing | kRecvArmed | kStarved))) {
                c.flags |= kStarved;
                starved.push_back(idx);
            }
        } else if (res == 0) {
            c.flags |= kClosing; // peer finished sending: echo what is queued, then close
        } else {
            abort(idx); // ECONNRESET and friends
        }
    }

    void on_recv_inc(uint32_t idx, const io_uring_cqe* cqe) {
        Conn& c = conns[idx];
        const int res = cqe->res;
        if (cqe->flags & IORING_CQE_F_BUFFER) {
            const auto bid = static_cast<uint16_t>(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
            const bool kernel_keeps = cqe->flags & kCqeBufMore;
            const uint32_t off = pool.filled[bid];
            pool.filled[bid] += static_cast<uint32_t>(std::max(res, 0));
            if (!kernel_keeps) {
                --pool.avail;
                ++demand;
                pool.done[bid] = 1;
            }
            if (res > 0) ++stats.receives, stats.received += static_cast<unsigned long>(res);
            if (res > 0 && !(c.flags & kClosing) && !pool.free_slices.empty()) {
                const uint16_t id = pool.free_slices.back();
                pool.free_slices.pop_back();
                pool.slice_bid[id] = bid;
                pool.slice_off[id] = off;
                ++pool.refs[bid];
                pool.len[id] = static_cast<uint32_t>(res);
                pool.next[id] = kNone;
                if (c.tail == kNone)
                    c.head = id;
                else
                    pool.next[c.tail] = id;
                c.tail = id;
                if (!(c.flags & kSendInflight)) send_head(idx);
            } else if (res > 0 && !(c.flags & kClosing)) {
                std::fprintf(stderr, "raw_uring: out of slices\n");
                std::exit(1);
            }
            if (pool.done[bid] && pool.refs[bid] == 0) pool.recycle(bid);
        }
        if (res > 0) {
            if (!(c.flags & (kClosing | kRecvArmed))) {
                ++stats.rearms;
                arm_recv(idx);
            }
        } else {
            on_recv_ended(idx, res);
        }
        maybe_close(idx);
    }

    void on_send(uint32_t idx, int res) {
        Conn& c = conns[idx];
        c.flags &= ~kSendInflight;
        if (res <= 0) abort(idx);
        if (c.flags & kAborted) {
            drop_queue(c);
        } else {
            c.sent += static_cast<uint32_t>(res);
            const uint16_t bid = c.head;
            if (c.sent == pool.len[bid]) {
                c.head = pool.next[bid];
                if (c.head == kNone) c.tail = kNone;
                c.sent = 0;
                pool.release(bid);
            } else {
                ++stats.short_sends;
            }
            if (c.head != kNone) send_head(idx); // next buffer, or the rest of a short send
        }
        maybe_close(idx);
    }

    void rearm_starved() {
        // One re-armed recv per available buffer at most, so ENOBUFS cannot turn into a spin.
        int budget = pool.avail;
        while (!starved.empty() && budget > 0) {
            uint32_t idx = starved.front();
            starved.pop_front();
            Conn& c = conns[idx];
            if (!(c.flags & kStarved)) continue; // closed (and maybe reused) meanwhile
            c.flags &= ~kStarved;
            if (c.flags & (kClosing | kRecvArmed)) continue;
            arm_recv(idx);
            --budget;
        }
    }

    // --idle-spin: submit, then poll until a completion is there or the spin's time is up; only
    // then wait in the kernel.
    int spin_then_wait() {
        int r = io_uring_submit(&ring);
        if (r < 0 || io_uring_cq_ready(&ring) > 0) return r;
        const int64_t end = baseline::now_ns() + spin_ns;
        do {
            r = io_uring_get_events(&ring); // runs deferred task work: the completions appear
            if (r < 0 || io_uring_cq_ready(&ring) > 0) return r;
        } while (baseline::now_ns() < end);
        return io_uring_submit_and_wait(&ring, 1);
    }

    void run() {
        arm_accept();
        io_uring_sqe* s = sqe();
        io_uring_prep_poll_add(s, sfd, POLLIN);
        io_uring_sqe_set_data64(s, tag(kSignal, 0));
        while (!stop) {
            // Keep twice the last batch's demand in the ring so the next burst finds buffers.
            pool.grow_to(std::max(64, 2 * demand));
            demand = 0;
            rearm_starved();
            pool.publish();
            int r = spin_ns > 0 ? spin_then_wait() : io_uring_submit_and_wait(&ring, 1);
            if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
                std::fprintf(stderr, "raw_uring: io_uring_submit_and_wait: %s\n",
                             std::strerror(-r));
                std::exit(1);
            }
            unsigned head, n = 0;
            io_uring_cqe* cqe;
            io_uring_for_each_cqe(&ring, head, cqe) {
                ++n;
                const auto idx = static_cast<uint32_t>(cqe->user_data);
                switch (static_cast<Op>(cqe->user_data >> 32)) {
                case kRecv:
                    on_recv(idx, cqe);
                    break;
                case kSend:
                    on_send(idx, cqe->res);
                    break;
                case kAccept:
                    on_accept(cqe);
                    break;
                case kSignal:
                    stop = true;
                    break;
                case kIgnore:
                    break;
                }
            }
            io_uring_cq_advance(&ring, n);
        }
    }
};

const char* setup_name(unsigned flags) {
    if (flags & IORING_SETUP_DEFER_TASKRUN) return "SINGLE_ISSUER|DEFER_TASKRUN";
    if (flags & IORING_SETUP_COOP_TASKRUN) return "COOP_TASKRUN";
    return "plain";
}

/// A listening Unix stream socket at `path` (a stale socket file is removed first).
int make_unix_listener(const char* path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (std::strlen(path) >= sizeof a.sun_path) {
        std::fprintf(stderr, "raw_uring: --unix: path longer than %zu bytes\n",
                     sizeof a.sun_path - 1);
        std::exit(2);
    }
    std::strcpy(a.sun_path, path);
    ::unlink(path);
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) baseline::die("socket");
    const auto len =
        static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + std::strlen(path) + 1);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) baseline::die("bind");
    if (::listen(fd, SOMAXCONN) != 0) baseline::die("listen");
    return fd;
}

/// What every loop is set up with (the command line).
struct Config {
    bool fixed = true, defer = true, bundle = false, inc = false;
    uint32_t buf_size = 64 * 1024;
    unsigned bufs = 4096;
    unsigned spin_us = 0;
};

/// One loop's ring, direct-descriptor table and provided-buffer ring. Returns the ring's setup
/// flags, or exits with a message.
unsigned setup_ring(Server& srv, const Config& cfg, rlim_t nofile) {
    srv.fixed = cfg.fixed;
    srv.bundle = srv.pool.mirror = cfg.bundle;
    srv.pool.inc = cfg.inc;
    srv.pool.size = cfg.buf_size;
    srv.pool.entries = cfg.bufs;
    srv.spin_ns = int64_t(cfg.spin_us) * 1000;
    // Ring: prefer SINGLE_ISSUER|DEFER_TASKRUN (task work runs only inside our submit_and_wait,
    // batched, no IPIs), then COOP_TASKRUN, then plain. A large CQ keeps multishot completions
    // from 10k connections from overflowing.
    const unsigned base = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL;
    const unsigned tries[] = {base | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
                              base | IORING_SETUP_COOP_TASKRUN, base, 0};
    io_uring_params params{};
    int r = -EINVAL;
    for (unsigned flags : tries) {
        if (!cfg.defer && (flags & IORING_SETUP_DEFER_TASKRUN)) continue;
        params = io_uring_params{};
        params.flags = flags;
        params.cq_entries = 32768;
        r = io_uring_queue_init_params(4096, &srv.ring, &params);
        if (r != -EINVAL) break;
    }
    if (r < 0) {
        std::fprintf(stderr, "raw_uring: io_uring unavailable: io_uring_queue_init: %s\n",
                     std::strerror(-r));
        std::exit(1);
    }
    io_uring_register_ring_fd(&srv.ring); // saves an fd lookup per enter; optional

    size_t nconns = nofile < (1u << 20) ? nofile : (1u << 20);
    if (srv.fixed) {
        r = io_uring_register_files_sparse(&srv.ring, static_cast<unsigned>(nconns));
        if (r < 0) {
            std::fprintf(stderr, "raw_uring: no direct descriptors (%s); using plain fds\n",
                         std::strerror(-r));
            srv.fixed = false;
        }
    }
    srv.conns.resize(nconns);

    // Provided-buffer ring (liburing 2.3 has no io_uring_setup_buf_ring: map and register it).
    BufPool& pool = srv.pool;
    const size_t ring_bytes = pool.entries * sizeof(io_uring_buf);
    void* rmem =
        mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    const size_t pool_bytes = pool.entries * pool.stride();
    void* bmem = mmap(nullptr, pool_bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (rmem == MAP_FAILED || bmem == MAP_FAILED) baseline::die("mmap");
    pool.ring = static_cast<io_uring_buf_ring*>(rmem);
    pool.mem = static_cast<char*>(bmem);
    io_uring_buf_ring_init(pool.ring);
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<uintptr_t>(rmem);
    reg.ring_entries = pool.entries;
    reg.bgid = kGroup;
    if (pool.inc) reg.pad = kPbufRingInc; // (the flags field of newer headers)
    r = io_uring_register_buf_ring(&srv.ring, &reg, 0);
    if (r < 0) {
        std::fprintf(stderr, "raw_uring: io_uring_register_buf_ring: %s\n", std::strerror(-r));
        std::exit(1);
    }
    pool.next.resize(pool.entries);
    pool.len.resize(pool.entries);
    if (pool.inc) { // slice ids, as many as a uint16_t names (kNone excluded)
        pool.next.resize(kNone);
        pool.len.resize(kNone);
        pool.slice_bid.resize(kNone);
        pool.slice_off.resize(kNone);
        for (uint16_t id = kNone; id-- > 0;)
            pool.free_slices.push_back(id);
        pool.filled.resize(pool.entries);
        pool.refs.resize(pool.entries);
        pool.done.resize(pool.entries);
    }
    pool.at.resize(pool.entries);
    pool.position.resize(pool.entries);
    return params.flags;
}

/// Prints a stopped loop's figures and releases its ring, buffers and listener.
void finish(Server& srv) {
    BufPool& pool = srv.pool;
    std::fprintf(stderr,
                 "raw_uring: exit: %lu accepted, %lu short sends, %lu ENOBUFS, %lu recv re-arms, "
                 "%u buffers provisioned, %lu receives over several buffers, %lu receives, %lu "
                 "bytes received, %lu sends\n",
                 srv.stats.accepted, srv.stats.short_sends, srv.stats.enobufs, srv.stats.rearms,
                 pool.provisioned, srv.stats.bundles, srv.stats.receives, srv.stats.received,
                 srv.stats.sends);
    io_uring_queue_exit(&srv.ring); // also closes every direct descriptor
    munmap(pool.mem, pool.entries * pool.stride());
    munmap(pool.ring, pool.entries * sizeof(io_uring_buf));
    ::close(srv.lfd);
}

} // namespace

int main(int argc, char** argv) {
    namespace tools = galay::tools;
    std::string port_text = "8080", unix_arg;
    Config cfg;
    bool no_fixed = false, no_defer = false;
    unsigned threads = 1;
    cli::App app{"A hand-written liburing echo server (the baseline for bench_server).",
                 "raw_uring"};
    app.add_option("port", port_text, "TCP port (0: any free port)")
        ->check(tools::whole(0, 65535))
        ->capture_default_str();
    auto* unix_opt = app.add_option("--unix", unix_arg, "listen on this Unix socket path instead")
                         ->check(tools::non_empty());
    app.add_flag("--no-fixed", no_fixed, "no registered (fixed) descriptors");
    app.add_flag("--no-defer", no_defer, "no IORING_SETUP_DEFER_TASKRUN");
    app.add_option("--buf-size", cfg.buf_size, "bytes per provided buffer")
        ->check(tools::whole(64, 1 << 20))
        ->capture_default_str();
    app.add_option("--bufs", cfg.bufs, "provided buffers (a power of two)")
        ->check(tools::whole(1, 32768))
        ->check(cli::Validator(
            [](std::string& s) -> std::string {
                const unsigned long v = std::stoul(s);
                return (v & (v - 1)) == 0 ? "" : "'" + s + "' is not a power of two";
            },
            "", "power-of-two"))
        ->capture_default_str();
    auto* b = app.add_flag("--bundle", cfg.bundle, "receive bundles");
    app.add_flag("--inc", cfg.inc, "incrementally consumed buffers")->excludes(b);
    app.add_option("-t,--threads", threads,
                   "loops, one thread and ring each, each with a SO_REUSEPORT listener on the port")
        ->check(tools::whole(1, 64))
        ->excludes(unix_opt)
        ->capture_default_str();
    app.add_option("--idle-spin", cfg.spin_us,
                   "poll for completions this many microseconds before waiting in the kernel")
        ->check(tools::whole(0, 1000000))
        ->capture_default_str();
    if (auto code = tools::parse_command_line(app, argc, argv, "raw_uring")) return *code;
    cfg.fixed = !no_fixed;
    cfg.defer = !no_defer;
    const char* unix_path = unix_arg.empty() ? nullptr : unix_arg.c_str();
    const int want_port = baseline::parse_port(port_text.c_str());
    const rlim_t nofile = baseline::raise_nofile();

    std::vector<std::unique_ptr<Server>> srvs;
    for (unsigned i = 0; i < threads; ++i)
        srvs.push_back(std::make_unique<Server>());
    // One signalfd, made (and the stop signals blocked) before any thread starts: every ring
    // polls it, and as nobody reads it, it stays readable for all of them.
    const int sfd = baseline::make_signalfd();
    int port = want_port;
    for (auto& srv : srvs) {
        srv->sfd = sfd;
        srv->lfd = unix_path != nullptr ? make_unix_listener(unix_path)
                                        : baseline::make_listener(port, &port, threads > 1);
    }
    // Each ring is set up by the thread that runs it: a SINGLE_ISSUER ring takes submissions
    // only from the thread that created it. A connection that arrives first waits in its
    // listener's backlog.
    std::vector<std::thread> others;
    for (unsigned i = 1; i < threads; ++i)
        others.emplace_back([s = srvs[i].get(), &cfg, nofile] {
            setup_ring(*s, cfg, nofile);
            s->run();
        });
    const unsigned setup_flags = setup_ring(*srvs[0], cfg, nofile);
    std::fprintf(stderr, "raw_uring: %u ring%s %s, %s, buffer ring up to %u x %u B\n", threads,
                 threads > 1 ? "s" : "", setup_name(setup_flags),
                 srvs[0]->fixed ? "direct descriptors" : "plain fds", srvs[0]->pool.entries,
                 srvs[0]->pool.size);
    if (unix_path != nullptr) {
        std::printf("listening on %s (raw_uring, unix)\n", unix_path);
        std::fflush(stdout);
    } else {
        baseline::announce(port, "raw_uring");
    }
    srvs[0]->run();
    for (std::thread& t : others)
        t.join();
    for (auto& srv : srvs)
        finish(*srv);
    ::close(sfd);
    if (unix_path != nullptr) ::unlink(unix_path);
    return 0;
}
