// Watches a directory with inotify and prints each change as it happens, read as an async stream
// of events built on galay::AsyncFd (what a storage node does to reload its configuration).
//   ./watch_dir [--count N] [--idle-timeout SECS] [--backend B] DIR
//   ./watch_dir --count 3 /etc/myservice
// First line, once the watch is in place: "watching DIR". Then one line per event, in order:
//   created NAME | modified NAME | deleted NAME | renamed OLD -> NEW | moved in NAME |
//   moved out NAME | overflow (events were lost: rescan) | gone (DIR was deleted or moved)
// A write is reported once, when the file is closed after it ("modified"). Ends after N events
// (--count; default: never), after SECS seconds with no event (--idle-timeout, exit 1), or when
// DIR goes away. Exit code: 0, 1 on an idle timeout or an error, 2 for a bad argument.
#include "galay_cli_backend.hpp"

#include <galay/galay.hpp>

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

namespace {

/// One change in the watched directory.
struct DirEvent {
    enum Kind { created, modified, deleted, renamed, moved_in, moved_out, overflow, gone };
    Kind kind;
    std::string name;
    std::string new_name; // renamed: where it went
};

/// A directory's inotify events as an async stream: `co_await next()` gives one event at a time.
/// The inotify descriptor is owned by an AsyncFd; a readable wait is followed by reads until
/// EAGAIN (the kernel queues events, and one read returns whole events only).
class DirWatcher {
public:
    static galay::Result<DirWatcher> open(const std::string& dir) {
        galay::OwnedFd fd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
        if (!fd.is_open()) return galay::fail(errno);
        const std::uint32_t mask = IN_CREATE | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM |
                                   IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
        if (::inotify_add_watch(fd.get(), dir.c_str(), mask) < 0) return galay::fail(errno);
        auto afd = galay::AsyncFd::adopt(std::move(fd));
        if (!afd) return std::unexpected(afd.error());
        return DirWatcher(std::move(*afd));
    }

    /// The next event; waits for it at most `idle` (`std::errc::timed_out` after that).
    galay::Task<galay::Result<DirEvent>> next(std::chrono::nanoseconds idle) {
        while (ready_.empty()) {
            if (auto r = drain(); !r) co_return std::unexpected(r.error());
            if (!ready_.empty()) break;
            auto r = co_await afd_.readable().timeout(idle);
            if (!r) co_return std::unexpected(r.error());
        }
        DirEvent e = std::move(ready_.front());
        ready_.pop_front();
        co_return e;
    }

private:
    explicit DirWatcher(galay::AsyncFd afd)
        : afd_(std::move(afd)) {}

    /// Read what the kernel has queued, until EAGAIN, into ready_.
    galay::Result<void> drain() {
        alignas(inotify_event) char buf[16 * 1024];
        for (;;) {
            const ssize_t n = ::read(afd_.fd(), buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) {
                // The kernel queues a rename's two halves together: a MOVED_FROM still alone
                // once the queue is empty left the directory.
                if (pending_from_) flush_move_out();
                return {};
            }
            if (n <= 0) return galay::fail(n < 0 ? errno : EIO);
            for (ssize_t at = 0; at < n;) {
                const auto* ev = reinterpret_cast<const inotify_event*>(buf + at);
                take(*ev, ev->len > 0 ? std::string(ev->name) : std::string());
                at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
            }
        }
    }

    void take(const inotify_event& ev, std::string name) {
        // A rename inside the directory is a MOVED_FROM followed by a MOVED_TO with the same
        // cookie; a MOVED_FROM left unmatched moved out.
        if (!(ev.mask & IN_MOVED_TO) && pending_from_) flush_move_out();
        if (ev.mask & IN_Q_OVERFLOW) {
            ready_.push_back({DirEvent::overflow, {}, {}});
        } else if (ev.mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
            ready_.push_back({DirEvent::gone, {}, {}});
        } else if (ev.mask & IN_CREATE) {
            ready_.push_back({DirEvent::created, std::move(name), {}});
        } else if (ev.mask & IN_CLOSE_WRITE) {
            ready_.push_back({DirEvent::modified, std::move(name), {}});
        } else if (ev.mask & IN_DELETE) {
            ready_.push_back({DirEvent::deleted, std::move(name), {}});
        } else if (ev.mask & IN_MOVED_FROM) {
            pending_from_ = std::move(name);
            cookie_ = ev.cookie;
        } else if (ev.mask & IN_MOVED_TO) {
            if (pending_from_ && cookie_ == ev.cookie) {
                ready_.push_back({DirEvent::renamed, std::move(*pending_from_), std::move(name)});
                pending_from_.reset();
            } else {
                if (pending_from_) flush_move_out();
                ready_.push_back({DirEvent::moved_in, std::move(name), {}});
            }
        }
    }

    void flush_move_out() {
        ready_.push_back({DirEvent::moved_out, std::move(*pending_from_), {}});
        pending_from_.reset();
    }

    galay::AsyncFd afd_;
    std::deque<DirEvent> ready_;
    std::optional<std::string> pending_from_;
    std::uint32_t cookie_ = 0;
};

std::string describe(const DirEvent& e) {
    switch (e.kind) {
    case DirEvent::created:
        return "created " + e.name;
    case DirEvent::modified:
        return "modified " + e.name;
    case DirEvent::deleted:
        return "deleted " + e.name;
    case DirEvent::renamed:
        return "renamed " + e.name + " -> " + e.new_name;
    case DirEvent::moved_in:
        return "moved in " + e.name;
    case DirEvent::moved_out:
        return "moved out " + e.name;
    case DirEvent::overflow:
        return "overflow";
    case DirEvent::gone:
        return "gone";
    }
    return "?";
}

struct Options {
    long count = -1; // -1: no limit
    std::chrono::seconds idle{0};
    galay::Backend backend = galay::Backend::automatic;
    std::string dir;
};

galay::Task<int> watch(const Options& o) {
    auto w = DirWatcher::open(o.dir);
    if (!w) {
        std::fprintf(stderr, "watch_dir: %s: %s\n", o.dir.c_str(), w.error().message().c_str());
        co_return 1;
    }
    std::printf("watching %s\n", o.dir.c_str());
    std::fflush(stdout);
    const auto idle = o.idle.count() > 0 ? std::chrono::nanoseconds(o.idle)
                                         : std::chrono::nanoseconds(std::chrono::hours(24 * 365));
    for (long seen = 0; o.count < 0 || seen < o.count; ++seen) {
        auto e = co_await w->next(idle);
        if (!e) {
            if (e.error() == std::errc::timed_out) {
                std::fprintf(stderr, "watch_dir: no event for %lld s\n",
                             static_cast<long long>(o.idle.count()));
            } else {
                std::fprintf(stderr, "watch_dir: %s\n", e.error().message().c_str());
            }
            co_return 1;
        }
        std::printf("%s\n", describe(*e).c_str());
        std::fflush(stdout);
        if (e->kind == DirEvent::gone) break;
    }
    co_return 0;
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    long idle = 0;
    cli::App app{"Prints each change in DIR (created, modified, deleted, renamed, moved in/out) "
                 "as it happens.",
                 "watch_dir"};
    app.add_option("DIR", o.dir, "the directory to watch")
        ->required()
        ->check(galay::tools::non_empty());
    app.add_option("--count", o.count, "stop after this many events (default: no limit)")
        ->check(galay::tools::whole(0, 1'000'000'000));
    app.add_option("--idle-timeout", idle,
                   "exit 1 after this many seconds without an event (0: never)")
        ->check(galay::tools::whole(0, 86400))
        ->capture_default_str();
    galay::tools::add_backend_flag(app, &o.backend);
    if (auto code = galay::tools::parse_command_line(app, argc, argv, "watch_dir")) return *code;
    o.idle = std::chrono::seconds(idle);
    galay::Scheduler sched({.backend = o.backend});
    return sched.block_on(watch(o));
}
