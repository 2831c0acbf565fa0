// galay/sync.hpp: the async sync primitives, for tasks on one or several threads. Every wait is
// cancellable and takes `.timeout(d)` / `.deadline(t)`; waking a task on another thread goes
// through its scheduler's `post()`.
#pragma once

#include "galay/sync/broadcast.hpp"
#include "galay/sync/cancel_token.hpp"
#include "galay/sync/channel.hpp"
#include "galay/sync/event.hpp"
#include "galay/sync/latch.hpp"
#include "galay/sync/mutex.hpp"
#include "galay/sync/oneshot.hpp"
#include "galay/sync/rwlock.hpp"
#include "galay/sync/semaphore.hpp"
#include "galay/sync/task_group.hpp"
#include "galay/sync/unbounded_channel.hpp"
#include "galay/sync/waiter.hpp"
#include "galay/sync/watch.hpp"
