// mini_redis/connection.hpp: one client connection, from its first request to its close.
#pragma once

#include "mini_redis/server.hpp"

#include <galay/galay.hpp>

namespace mini_redis {

/// Serve one client on the worker that accepted it: read requests (pipelined: every request
/// received is run before anything is sent), run each where its keys are, send the replies in
/// one write per batch. Ends when the client closes, sends QUIT or a malformed request, when the
/// server drains, or when it is cancelled.
galay::Task<void> serve_connection(Server& server, galay::TcpStream conn);

} // namespace mini_redis
