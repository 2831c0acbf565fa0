// The opening example of every public header, compiled as the header shows it.
//
// CMake extracts each example (tests/extract_example.cmake) into example_<dir>_<name>.inc. This
// file gives each one the little it takes for granted (a `stream`, a `buf`, the user's own
// functions, declared but not defined: nothing here is linked) and includes it either at
// namespace scope (an example made of declarations) or as the body of a task (an example made of
// statements). Every example has a namespace of its own. The test is that this file compiles;
// CMake refuses to configure when a header with an example is missing here. galay/runtime.hpp's
// example is a whole program: header_example_runtime.cpp builds it and ctest runs it.
#include <galay/galay.hpp>
#include <galay/tls/context.hpp>
#include <galay/tls/error.hpp>
#include <galay/tls/stream.hpp>

#include <fcntl.h>

#include <array>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <vector>

using namespace std::chrono_literals;

namespace examples {

namespace async_fd {
int library_socket();
void library_reads();
galay::Task<void> body() {
#include "example_async_fd.inc"
}
} // namespace async_fd

namespace backend {
void body() {
#include "example_backend.inc"
}
} // namespace backend

namespace blocking {
std::string read_whole_file(const std::string& path);
void use(const std::string& text);
#include "example_blocking.inc"
} // namespace blocking

namespace error {
galay::Task<void> body(galay::TcpStream& stream, std::span<char> buf) {
#include "example_error.inc"
}
} // namespace error

namespace fd_handle {
#include "example_fd_handle.inc"
} // namespace fd_handle

namespace invoke {
std::size_t shard_size();
galay::Task<std::string> load_async();
extern galay::Runtime& rt;
#include "example_invoke.inc"
} // namespace invoke

namespace sharded {
#include "example_sharded.inc"
} // namespace sharded

namespace join_handle {
galay::Task<int> compute();
galay::Task<void> serve_forever();
galay::Task<void> body(galay::Runtime& rt) {
#include "example_join_handle.inc"
}
} // namespace join_handle

namespace metrics {
void body() {
#include "example_metrics.inc"
}
} // namespace metrics

namespace metrics_endpoint {
void body() {
#include "example_metrics_endpoint.inc"
}
} // namespace metrics_endpoint

namespace owned_fd {
void body() {
#include "example_owned_fd.inc"
}
} // namespace owned_fd

namespace op_kind {
void body() {
#include "example_op_kind.inc"
}
} // namespace op_kind

namespace scheduler {
#include "example_scheduler.inc"
} // namespace scheduler

namespace signal {
galay::Task<void> body(galay::Runtime& rt) {
#include "example_signal.inc"
}
} // namespace signal

namespace task {
#include "example_task.inc"
} // namespace task

namespace task_dump {
galay::Task<void> body(galay::Runtime& rt, std::string peer) {
#include "example_task_dump.inc"
}
} // namespace task_dump

namespace fs_aligned_buffer {
galay::Task<void> body() {
#include "example_fs_aligned_buffer.inc"
}
} // namespace fs_aligned_buffer

namespace fs_batch {
void report(std::size_t i, std::error_code ec);
galay::Task<void> body(const galay::fs::File& file, std::vector<galay::fs::AlignedBuffer>& bufs) {
#include "example_fs_batch.inc"
}
} // namespace fs_batch

namespace fs_file {
#include "example_fs_file.inc"
} // namespace fs_file

namespace fs_fixed_buffer {
#include "example_fs_fixed_buffer.inc"
} // namespace fs_fixed_buffer

namespace io_buf_reader {
#include "example_io_buf_reader.inc"
} // namespace io_buf_reader

namespace io_buf_writer {
galay::Task<void> body(galay::TcpStream& conn, std::string_view header, std::string_view body) {
#include "example_io_buf_writer.inc"
}
} // namespace io_buf_writer

namespace io_copy {
#include "example_io_copy.inc"
} // namespace io_copy

namespace io_stream {
#include "example_io_stream.inc"
} // namespace io_stream

namespace io_zero_copy {
#include "example_io_zero_copy.inc"
} // namespace io_zero_copy

namespace net_datagram {
void body() {
#include "example_net_datagram.inc"
}
} // namespace net_datagram

namespace net_server {
void body() {
#include "example_net_server.inc"
}
} // namespace net_server

namespace net_socket_addr {
galay::Task<void> body() {
#include "example_net_socket_addr.inc"
}
} // namespace net_socket_addr

namespace net_tcp {
#include "example_net_tcp.inc"
} // namespace net_tcp

namespace net_udp {
#include "example_net_udp.inc"
} // namespace net_udp

namespace fs_ops {
#include "example_fs_ops.inc"
} // namespace fs_ops

namespace process {
#include "example_process.inc"
} // namespace process

namespace net_unix_addr {
void body() {
#include "example_net_unix_addr.inc"
}
} // namespace net_unix_addr

namespace net_unix {
#include "example_net_unix.inc"
} // namespace net_unix

namespace sync_broadcast {
void report(std::uint64_t missed);
galay::Task<void> body() {
#include "example_sync_broadcast.inc"
}
} // namespace sync_broadcast

namespace sync_cancel_token {
galay::Task<void> serve_client(galay::TcpStream conn);
galay::Task<void> body(galay::Runtime& rt, galay::TcpStream conn) {
#include "example_sync_cancel_token.inc"
}
} // namespace sync_cancel_token

namespace sync_channel {
struct Request {
    int id = 0;
};
void log(const std::string& message);
void handle(Request r);
galay::Task<void> body(Request req) {
#include "example_sync_channel.inc"
}
} // namespace sync_channel

namespace sync_unbounded_channel {
void write_all(const std::vector<std::string>& lines);
galay::Task<void> body() {
#include "example_sync_unbounded_channel.inc"
}
} // namespace sync_unbounded_channel

namespace sync_event {
galay::Task<void> body() {
#include "example_sync_event.inc"
}
} // namespace sync_event

namespace sync_latch {
galay::Task<void> part(unsigned i, galay::Latch& done);
galay::Task<void> body(galay::Runtime& rt) {
#include "example_sync_latch.inc"
}
} // namespace sync_latch

namespace sync_mutex {
#include "example_sync_mutex.inc"
} // namespace sync_mutex

namespace sync_oneshot {
galay::Task<void> worker(galay::OneshotSender<int> tx);
galay::Task<void> body() {
#include "example_sync_oneshot.inc"
}
} // namespace sync_oneshot

namespace sync_rwlock {
#include "example_sync_rwlock.inc"
} // namespace sync_rwlock

namespace sync_semaphore {
#include "example_sync_semaphore.inc"
} // namespace sync_semaphore

namespace sync_task_group {
galay::Task<void> serve(galay::TcpStream conn);
galay::Task<void> body(galay::TcpListener& listener) {
#include "example_sync_task_group.inc"
}
} // namespace sync_task_group

namespace sync_watch {
galay::Task<int> body() {
#include "example_sync_watch.inc"
    co_return now + (changed ? 1 : 0);
}
} // namespace sync_watch

namespace sync_waiter {
#include "example_sync_waiter.inc"
} // namespace sync_waiter

namespace time_interval {
void check_health();
galay::Task<void> body() {
#include "example_time_interval.inc"
}
} // namespace time_interval

namespace time_sleep {
galay::Task<int> fetch();
galay::Task<void> body(galay::TcpStream& stream, std::span<char> buf) {
#include "example_time_sleep.inc"
}
} // namespace time_sleep

namespace time_timeout {
struct Config {
    std::optional<std::chrono::seconds> idle_timeout;
};
galay::Task<void> body(const Config& config, galay::TcpStream& conn, std::span<char> buf) {
#include "example_time_timeout.inc"
}
} // namespace time_timeout

namespace tls_context {
void body() {
#include "example_tls_context.inc"
}
} // namespace tls_context

namespace tls_error {
galay::Task<void> body(galay::tls::Stream& tls_stream) {
#include "example_tls_error.inc"
}
} // namespace tls_error

namespace tls_stream {
#include "example_tls_stream.inc"
} // namespace tls_stream

} // namespace examples
