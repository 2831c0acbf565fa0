// Which poller the readiness reactor (driver/epoll/epoll_driver.hpp) is built on: kqueue on
// macOS and FreeBSD, epoll on Linux. Chosen at compile time, so the reactor calls the poller
// without a virtual call per event.
//
// A poller provides (see EpollPoller for the reference and the exact signatures):
//   kBackend, kName, kMaxEvents      which Backend it is; events per wait at most
//   kReadable, kWritable, kClosed,   the bits of an event: input (or hangup/error) may be read;
//   kOutput                          output may be written (or hangup/error); the peer closed
//                                    or reset; room to write without an error
//   kReportsLevel                    an event's bits are the fd's poll(2) level when reported
//   watch(fd, tag)                   arm both directions, edge-triggered, for the fd's life;
//                                    its events carry the tag
//   unwatch(fd)                      before a close that may not be the file's last: stop
//                                    watching it (epoll; kqueue's close does it)
//   wait(timeout_ns)                 wait into its event array; the number of events
//   for_each(n, on_ready)            on_ready(fd, bits, tag) per event, wake-ups consumed
//   wake()                           thread-safe: end a blocked wait
//   fd()                             its own descriptor
#pragma once

#include "driver/driver.hpp"

#if GALAY_KQUEUE
#include "driver/poller/kqueue_poller.hpp"
#else
#include "driver/poller/epoll_poller.hpp"
#endif

namespace galay::detail {

#if GALAY_KQUEUE
using Poller = KqueuePoller;
#else
using Poller = EpollPoller;
#endif

} // namespace galay::detail
