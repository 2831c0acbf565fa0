// galay/galay.hpp: everything at once.
#pragma once

#include "galay/blocking.hpp"
#include "galay/error.hpp"
#include "galay/fs/batch.hpp"
#include "galay/fs/file.hpp"
#include "galay/fs/fixed_buffer.hpp"
#include "galay/join_handle.hpp"
#include "galay/net/server.hpp"
#include "galay/net/socket_addr.hpp"
#include "galay/net/tcp.hpp"
#include "galay/net/udp.hpp"
#include "galay/runtime.hpp"
#include "galay/signal.hpp"
#include "galay/sync.hpp"
#include "galay/task.hpp"
#include "galay/time/sleep.hpp"
