// libaio engine: io_setup / batched io_submit / batched io_getevents.
//
// Waiting: io_getevents(ctx, min, max, events, NULL) blocks until `min` events are there.
// -P (poll): busy-polls io_getevents(ctx, 0, max, events, {0,0}) until `min` events arrived. With a
// zero timeout libaio first looks at the completion ring mapped in user space and returns without a
// syscall when it is empty, so the loop spins in user space; it burns a full core by design.
#pragma once

#include "engine.hpp"

#include <libaio.h>

#include <vector>

namespace aiob {

class LibaioEngine {
public:
    LibaioEngine() = default;
    LibaioEngine(const LibaioEngine&) = delete;
    LibaioEngine& operator=(const LibaioEngine&) = delete;
    ~LibaioEngine();

    std::expected<void, std::string> init(const EngineSetup& s);

    void prep(uint32_t slot, bool write, void* buf, uint32_t len, uint64_t offset) {
        iocb& cb = iocbs_[slot];
        if (write)
            io_prep_pwrite(&cb, fd_, buf, len, static_cast<long long>(offset));
        else
            io_prep_pread(&cb, fd_, buf, len, static_cast<long long>(offset));
        cb.data = reinterpret_cast<void*>(static_cast<uintptr_t>(slot));
        pending_[npending_++] = &cb;
    }

    int submit_and_reap(unsigned min, Completion* out, unsigned max);
    unsigned in_flight() const {
        return inflight_ + npending_ + static_cast<unsigned>(failed_.size());
    }

private:
    io_context_t ctx_ = nullptr;
    int fd_ = -1;
    bool busy_poll_ = false;
    unsigned inflight_ = 0; // in the kernel
    unsigned npending_ = 0;
    std::vector<iocb> iocbs_;
    std::vector<iocb*> pending_;
    std::vector<io_event> events_;
    std::vector<Completion> failed_; // refused by io_submit, returned by the next reap
};

static_assert(Engine<LibaioEngine>);

} // namespace aiob
