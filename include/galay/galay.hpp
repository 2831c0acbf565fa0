// galay/galay.hpp: everything at once.
#pragma once

#include "galay/async_fd.hpp"
#include "galay/backend.hpp"
#include "galay/blocking.hpp"
#include "galay/error.hpp"
#include "galay/fd_handle.hpp"
#include "galay/fs/batch.hpp"
#include "galay/fs/file.hpp"
#include "galay/fs/fixed_buffer.hpp"
#include "galay/fs/ops.hpp"
#include "galay/invoke.hpp"
#include "galay/io/buf_reader.hpp"
#include "galay/io/buf_writer.hpp"
#include "galay/io/copy.hpp"
#include "galay/io/zero_copy.hpp"
#include "galay/join_handle.hpp"
#include "galay/metrics.hpp"
#include "galay/metrics_endpoint.hpp"
#include "galay/net/datagram.hpp"
#include "galay/net/server.hpp"
#include "galay/net/socket_addr.hpp"
#include "galay/net/tcp.hpp"
#include "galay/net/udp.hpp"
#include "galay/net/unix.hpp"
#include "galay/net/unix_addr.hpp"
#include "galay/op_kind.hpp"
#include "galay/owned_fd.hpp"
#include "galay/process.hpp"
#include "galay/runtime.hpp"
#include "galay/scheduler.hpp"
#include "galay/sharded.hpp"
#include "galay/signal.hpp"
#include "galay/sync.hpp"
#include "galay/task.hpp"
#include "galay/task_dump.hpp"
#include "galay/time/interval.hpp"
#include "galay/time/sleep.hpp"
#include "galay/time/timeout.hpp"

/// @namespace galay
/// galay-kernel: coroutine tasks, the schedulers that run them, and the sockets, files, timers
/// and synchronisation primitives they await.

/// @namespace galay::fs
/// Files: buffered and O_DIRECT reads and writes, batches, registered (fixed) buffers.

/// @namespace galay::metrics
/// Per-worker runtime metrics, the stall detector's report, task hooks, Prometheus text.

/// @namespace galay::io
/// Buffered reading and writing over a byte stream, and copying between two streams.
