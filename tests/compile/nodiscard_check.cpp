// Compile-only test (tests/compile/expect_diagnostics.cmake): forgetting `co_await` on any
// operation of the public API must be diagnosed. Every line marked `EXPECT-NODISCARD` must get an
// unused-result diagnostic and no other line may get any, so dropping a single [[nodiscard]]
// from a public header fails the test. Never linked, never run.
#include <galay/galay.hpp>
#include <galay/tls/stream.hpp>

#include <chrono>
#include <span>
#include <string>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

Task<int> answer() {
    co_return 42;
}

Task<void> forgets_co_await(TcpStream& c, TcpListener& l, UdpSocket& u, fs::File& f,
                            fs::FixedBuffer& fixed, tls::Stream& tls_stream) {
    std::string msg = "hello";
    std::vector<char> buf(16);
    std::vector<iovec> iov(1);
    std::vector<Datagram> in(1);
    std::vector<OutDatagram> out(1);
    const SocketAddr addr = SocketAddr::loopback_v4(9);
    fs::Batch batch;
    CancelSource source;
    CancelToken token;
    Channel<int> ch(1);
    UnboundedChannel<int> unbounded;
    std::vector<int> many;
    Broadcast<int> bus(1);
    auto bus_rx = bus.subscribe();
    Watch<int> watch(0);
    auto watch_rx = watch.subscribe();
    RwLock rw;
    Interval every(1s);
    JoinHandle<int> handle;
    TcpServer server;
    AsyncFd afd;

    // A descriptor another library made
    afd.readable();                                         // EXPECT-NODISCARD
    afd.writable().timeout(1s);                             // EXPECT-NODISCARD
    afd.priority();                                         // EXPECT-NODISCARD
    afd.ready(Interest::readable | Interest::writable);     // EXPECT-NODISCARD

    // TCP
    TcpStream::connect(addr);                               // EXPECT-NODISCARD
    TcpStream::connect("localhost", 9);                     // EXPECT-NODISCARD
    c.recv(buf);                                            // EXPECT-NODISCARD
    c.recv_pooled();                                        // EXPECT-NODISCARD
    c.recv_exact(buf);                                      // EXPECT-NODISCARD
    c.send(msg);                                            // EXPECT-NODISCARD
    c.send_all(msg);                                        // EXPECT-NODISCARD
    c.send_all(msg).timeout(1s);                            // EXPECT-NODISCARD
    c.recv(buf).deadline(std::chrono::steady_clock::now()); // EXPECT-NODISCARD
    c.readv(iov);                                           // EXPECT-NODISCARD
    c.writev(iov);                                          // EXPECT-NODISCARD
    c.close();                                              // EXPECT-NODISCARD
    l.accept();                                             // EXPECT-NODISCARD
    l.close();                                              // EXPECT-NODISCARD

    // UDP
    u.send_to(msg, addr);      // EXPECT-NODISCARD
    u.recv_from(buf, nullptr); // EXPECT-NODISCARD
    u.send(msg);               // EXPECT-NODISCARD
    u.recv(buf);               // EXPECT-NODISCARD
    u.recv_batch(in);          // EXPECT-NODISCARD
    u.send_batch(out);         // EXPECT-NODISCARD
    u.close();                 // EXPECT-NODISCARD

    // Files
    f.read_at(buf, 0);                     // EXPECT-NODISCARD
    f.read_exact_at(buf, 0);               // EXPECT-NODISCARD
    f.write_at(msg, 0);                    // EXPECT-NODISCARD
    f.write_all_at(msg, 0);                // EXPECT-NODISCARD
    f.read_at(fixed.slice(0, 1), 0);       // EXPECT-NODISCARD
    f.read_exact_at(fixed.slice(0, 1), 0); // EXPECT-NODISCARD
    f.write_at(fixed.slice(0, 1), 0);      // EXPECT-NODISCARD
    f.write_all_at(fixed.slice(0, 1), 0);  // EXPECT-NODISCARD
    f.readv_at(iov, 0);                    // EXPECT-NODISCARD
    f.writev_at(iov, 0);                   // EXPECT-NODISCARD
    f.send_to(c, 0, 1);                    // EXPECT-NODISCARD
    f.fsync();                             // EXPECT-NODISCARD
    f.fdatasync();                         // EXPECT-NODISCARD
    f.fallocate(0, 0, 1);                  // EXPECT-NODISCARD
    f.close();                             // EXPECT-NODISCARD
    batch.submit();                        // EXPECT-NODISCARD
    batch.submit().timeout(1s);            // EXPECT-NODISCARD

    // Time, tasks, combinators
    sleep(1ms);                                        // EXPECT-NODISCARD
    sleep_until(std::chrono::steady_clock::now());     // EXPECT-NODISCARD
    timeout(1s, answer());                             // EXPECT-NODISCARD
    yield_now();                                       // EXPECT-NODISCARD
    answer();                                          // EXPECT-NODISCARD
    when_all(answer(), answer());                      // EXPECT-NODISCARD
    when_all(std::vector<Task<int>>{});                // EXPECT-NODISCARD
    when_any(answer(), answer());                      // EXPECT-NODISCARD
    when_any(std::vector<Task<int>>{});                // EXPECT-NODISCARD
    as_task(c.recv(buf));                              // EXPECT-NODISCARD
    with_cancel(source, answer());                     // EXPECT-NODISCARD
    resolve("localhost", 9);                           // EXPECT-NODISCARD
    with_cancel(token, answer());                      // EXPECT-NODISCARD
    token.wait();                                      // EXPECT-NODISCARD
    every.tick();                                      // EXPECT-NODISCARD
    handle.timeout(1s);                                // EXPECT-NODISCARD
    handle.deadline(std::chrono::steady_clock::now()); // EXPECT-NODISCARD
    handle.result();                                   // EXPECT-NODISCARD

    // Sync primitives added with the channel family
    ch.recv_many(many, 4);                          // EXPECT-NODISCARD
    ch.recv_many(many, 4).timeout(1s);              // EXPECT-NODISCARD
    bus_rx.recv();                                  // EXPECT-NODISCARD
    watch_rx.changed();                             // EXPECT-NODISCARD
    rw.read();                                      // EXPECT-NODISCARD
    rw.write();                                     // EXPECT-NODISCARD
    server.drain(std::chrono::steady_clock::now()); // EXPECT-NODISCARD
    ch.emplace(1);                                  // EXPECT-NODISCARD
    unbounded.send(1);                              // EXPECT-NODISCARD
    unbounded.recv();                               // EXPECT-NODISCARD
    unbounded.recv_many(many, 4);                   // EXPECT-NODISCARD

    // TLS
    tls_stream.handshake();   // EXPECT-NODISCARD
    tls_stream.recv(buf);     // EXPECT-NODISCARD
    tls_stream.send(msg);     // EXPECT-NODISCARD
    tls_stream.send_all(msg); // EXPECT-NODISCARD
    tls_stream.writev(iov);   // EXPECT-NODISCARD
    tls_stream.shutdown();    // EXPECT-NODISCARD
    tls_stream.close();       // EXPECT-NODISCARD

    // The same calls awaited compile without a diagnostic.
    (void)co_await c.send_all(msg);
    (void)co_await tls_stream.send_all(msg);
    (void)co_await c.close();
    (void)co_await sleep(1ms);
    co_await yield_now();
}

} // namespace

// Keep the function odr-used so that the compiler instantiates everything in it.
auto* keep = &forgets_co_await;
