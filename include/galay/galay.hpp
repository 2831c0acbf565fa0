// galay/galay.hpp: everything at once.
#pragma once

#include "galay/error.hpp"
#include "galay/fs/batch.hpp"
#include "galay/fs/file.hpp"
#include "galay/fs/fixed_buffer.hpp"
#include "galay/io/buf_reader.hpp"
#include "galay/io/buf_writer.hpp"
#include "galay/io/copy.hpp"
#include "galay/net/socket_addr.hpp"
#include "galay/net/tcp.hpp"
#include "galay/net/udp.hpp"
#include "galay/runtime.hpp"
#include "galay/task.hpp"
#include "galay/time/sleep.hpp"
