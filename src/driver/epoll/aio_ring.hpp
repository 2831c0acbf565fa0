// Reading Linux AIO completions straight from the ring the kernel maps at the address of an AIO
// context (fs/aio.c), without the io_getevents system call (private to the epoll file engine).
// Inline: it runs after every wait that may have completed an O_DIRECT read or write.
#pragma once

#include <libaio.h>

namespace galay::detail {

// The completion ring's layout. Reading it directly is what libaio's io_getevents does for an
// empty ring and what fio's userspace_reap does for a full one: the kernel publishes `tail` after
// writing the event, and takes back the slots up to `head` (which user space may advance) when it
// next completes a request.
struct AioRing {
    unsigned id;
    unsigned nr;
    unsigned head;
    unsigned tail;
    unsigned magic;
    unsigned compat_features;
    unsigned incompat_features;
    unsigned header_length;
    io_event events[];
};
inline constexpr unsigned kAioRingMagic = 0xa10a10a1;

/// Hand every completion waiting in `ctx`'s ring to `on_event(const io_event&)`, advancing the
/// ring's head past each before the call. Returns false (and reads nothing) when the ring does
/// not have the layout we know: the caller collects with io_getevents instead. `on_event` may
/// queue work but must not submit: the kernel has to be the only other writer of the ring.
template <class OnEvent>
bool read_aio_ring(io_context_t ctx, OnEvent&& on_event) {
    auto* ring = reinterpret_cast<AioRing*>(ctx);
    if (ring->magic != kAioRingMagic || ring->incompat_features != 0) return false;
    unsigned head = ring->head;
    const unsigned tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
    while (head != tail) {
        const io_event ev = ring->events[head];
        head = head + 1 == ring->nr ? 0 : head + 1;
        __atomic_store_n(&ring->head, head, __ATOMIC_RELEASE);
        on_event(ev);
    }
    return true;
}

} // namespace galay::detail
