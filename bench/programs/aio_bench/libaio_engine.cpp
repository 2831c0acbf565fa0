#include "libaio_engine.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

namespace aiob {

LibaioEngine::~LibaioEngine() {
    if (ctx_) io_destroy(ctx_); // waits for in-flight I/O: buffers stay valid until then
}

std::expected<void, std::string> LibaioEngine::init(const EngineSetup& s) {
    fd_ = s.fd;
    busy_poll_ = s.poll != PollMode::none;
    iocbs_.resize(s.depth);
    pending_.resize(s.depth);
    events_.resize(s.depth);
    failed_.reserve(s.depth);
    int r = io_setup(static_cast<int>(s.depth), &ctx_);
    if (r < 0) {
        ctx_ = nullptr;
        std::string msg = "libaio io_setup(" + std::to_string(s.depth) + "): " + std::strerror(-r);
        if (r == -EAGAIN) {
            std::ifstream nr("/proc/sys/fs/aio-nr"), max("/proc/sys/fs/aio-max-nr");
            unsigned long a = 0, m = 0;
            nr >> a;
            max >> m;
            msg += " (fs.aio-nr " + std::to_string(a) + " of fs.aio-max-nr " + std::to_string(m) +
                   " in use; lower -q/-t or raise fs.aio-max-nr)";
        }
        return std::unexpected(msg);
    }
    return {};
}

int LibaioEngine::submit_and_reap(unsigned min, Completion* out, unsigned max) {
    unsigned i = 0;
    while (i < npending_) {
        int r = io_submit(ctx_, static_cast<long>(npending_ - i), pending_.data() + i);
        if (r > 0) {
            i += static_cast<unsigned>(r);
            inflight_ += static_cast<unsigned>(r);
        } else if (r == -EINTR) {
            continue;
        } else if (r == -EAGAIN && inflight_ > 0) {
            // Kernel queue full: cannot happen while we keep <= depth in flight, but if it does,
            // wait for one completion below and submit the rest next time.
            break;
        } else {
            // The first iocb was refused (bad alignment, bad fd...): complete it with the error.
            if (r == 0) r = -EIO;
            failed_.push_back(Completion{
                static_cast<uint32_t>(reinterpret_cast<uintptr_t>(pending_[i]->data)), r});
            ++i;
        }
    }
    if (i < npending_) {
        // Keep the unsubmitted tail for the next call.
        std::memmove(pending_.data(), pending_.data() + i, (npending_ - i) * sizeof(iocb*));
        npending_ -= i;
    } else {
        npending_ = 0;
    }

    unsigned got = 0;
    while (!failed_.empty() && got < max) {
        out[got++] = failed_.back();
        failed_.pop_back();
    }
    if (got >= max || inflight_ == 0) return static_cast<int>(got);
    unsigned want = min > got ? min - got : 0;
    if (want > inflight_) want = inflight_;
    long room = static_cast<long>(max - got);
    if (room > static_cast<long>(inflight_)) room = inflight_;

    if (busy_poll_) {
        timespec zero{0, 0};
        unsigned reaped = 0;
        do {
            int r = io_getevents(ctx_, 0, room - reaped, events_.data() + reaped, &zero);
            if (r < 0 && r != -EINTR) return r;
            if (r > 0) reaped += static_cast<unsigned>(r);
        } while (reaped < want);
        for (unsigned k = 0; k < reaped; ++k)
            out[got++] =
                Completion{static_cast<uint32_t>(reinterpret_cast<uintptr_t>(events_[k].data)),
                           static_cast<int32_t>(static_cast<long>(events_[k].res))};
        inflight_ -= reaped;
        return static_cast<int>(got);
    }

    int r;
    do {
        r = io_getevents(ctx_, static_cast<long>(want), room, events_.data(), nullptr);
    } while (r == -EINTR && want > 0);
    if (r < 0) return r == -EINTR ? static_cast<int>(got) : r;
    for (int k = 0; k < r; ++k)
        out[got++] = Completion{static_cast<uint32_t>(reinterpret_cast<uintptr_t>(events_[k].data)),
                                static_cast<int32_t>(static_cast<long>(events_[k].res))};
    inflight_ -= static_cast<unsigned>(r);
    return static_cast<int>(got);
}

} // namespace aiob
