// Runtime::invoke_on (galay/invoke.hpp): where a call starts, and the per-thread cache its
// coroutine frames come from.
#include "galay/runtime.hpp"
#include "runtime/scheduler_access.hpp"

#include <cstddef>
#include <new>

namespace galay::detail {

namespace {

/// Freed invoke frames of one thread, by size class (64-byte steps up to kLargest), each class
/// a bounded LIFO: the block taken is the one freed last, still in this core's cache. A call's
/// frame is freed on the caller's thread (SpawnBase::finish lets go of the worker's reference
/// first), so each thread's cache is fed by its own calls.
class FrameBlocks {
public:
    static constexpr std::size_t kStep = 64;
    static constexpr std::size_t kLargest = 1024;
    static constexpr std::size_t kClasses = kLargest / kStep;
    static constexpr std::size_t kPerClass = 64;

    FrameBlocks() noexcept = default;
    FrameBlocks(const FrameBlocks&) = delete;
    FrameBlocks& operator=(const FrameBlocks&) = delete;
    ~FrameBlocks() {
        for (std::size_t c = 0; c < kClasses; ++c)
            while (count_[c] > 0)
                ::operator delete(blocks_[c][--count_[c]]);
        t_gone = true; // a frame freed later on this thread goes to the heap
    }

    static std::size_t size_class(std::size_t n) noexcept { return (n + kStep - 1) / kStep - 1; }
    void* take(std::size_t c) noexcept { return count_[c] > 0 ? blocks_[c][--count_[c]] : nullptr; }
    bool put(std::size_t c, void* p) noexcept {
        if (count_[c] == kPerClass) return false;
        blocks_[c][count_[c]++] = p;
        return true;
    }

    static thread_local bool t_gone; // trivially destructible: readable after ~FrameBlocks

private:
    void* blocks_[kClasses][kPerClass];
    std::size_t count_[kClasses] = {};
};
thread_local bool FrameBlocks::t_gone = false;
thread_local FrameBlocks t_frames;

} // namespace

void* invoke_frame_alloc(std::size_t n) {
    if (n > FrameBlocks::kLargest) return ::operator new(n);
    // Always the whole size class: the block may end in another thread's cache.
    const std::size_t c = FrameBlocks::size_class(n);
    if (!FrameBlocks::t_gone)
        if (void* p = t_frames.take(c)) return p;
    return ::operator new((c + 1) * FrameBlocks::kStep);
}

void invoke_frame_free(void* p, std::size_t n) noexcept {
    if (n <= FrameBlocks::kLargest && !FrameBlocks::t_gone &&
        t_frames.put(FrameBlocks::size_class(n), p))
        return;
    ::operator delete(p);
}

bool on_worker(const Runtime& rt, unsigned worker) noexcept {
    return Runtime::current() == &rt && this_worker() == static_cast<int>(worker);
}

void invoke_place(Runtime& rt, unsigned worker, SpawnBase& t) noexcept {
    rt.place(worker, t);
}

} // namespace galay::detail
