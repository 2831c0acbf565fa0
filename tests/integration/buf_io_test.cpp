// io::BufReader, io::BufWriter and io::copy_bidirectional on every backend, over real loopback
// sockets.
#include "io/relay_pipes.hpp" // the pipes the splice pump holds (src/)
#include "support/backends.hpp"
#include "support/fds.hpp"
#include "support/tcp_pair.hpp"

#include <array>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

/// A TcpStream whose receives return at most `max` bytes each: a real socket read in slices, so
/// that where a read boundary falls is chosen by the test, not by the kernel's timing. It is also
/// a stream type other than TcpStream, which the buffered layer must accept.
struct SlicedStream {
    TcpStream& s;
    std::size_t max;
    auto recv(std::span<char> buf) { return s.recv(buf.first(std::min(buf.size(), max))); }
    auto send(std::span<const char> buf) { return s.send(buf); }
    auto writev(std::span<const iovec> iov) { return s.writev(iov); }
    Result<void> shutdown(Shutdown how) { return s.shutdown(how); }
};
static_assert(io::DuplexStream<SlicedStream>);

std::string pattern(std::size_t n, unsigned seed) {
    std::string s(n, '\0');
    std::uint32_t x = seed * 2654435761u + 1;
    for (char& c : s) {
        x = x * 1103515245u + 12345u;
        c = static_cast<char>('a' + (x >> 16) % 26);
    }
    return s;
}

Task<std::string> read_to_eof(TcpStream& s) {
    std::string out;
    std::array<char, 16384> buf;
    for (;;) {
        auto n = co_await s.recv(buf).timeout(20s);
        if (!n) throw Error(n.error(), "read_to_eof");
        if (*n == 0) co_return out;
        out.append(buf.data(), *n);
    }
}

} // namespace

class BufReaderTest : public test::BackendTest {};

TEST_P(BufReaderTest, LinesFromAPeerSendingOneByteAtATime) {
    run([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        const std::string text = "first line\nsecond\r\n\nlast one\n";
        auto sender = [&]() -> Task<void> {
            for (char ch : text) {
                CO_ASSERT(co_await c.send_all(std::string_view(&ch, 1)));
                co_await yield_now(); // let the reader run between bytes
            }
        };
        auto reader = [&]() -> Task<std::vector<std::string>> {
            SlicedStream one{s, 1}; // and each receive takes one byte, whatever arrived
            io::BufReader r(one, 64);
            std::vector<std::string> lines;
            for (int i = 0; i < 4; ++i) {
                auto line = co_await r.read_line().timeout(10s);
                CO_ASSERT(line);
                lines.emplace_back(*line);
            }
            auto end = co_await r.read_line().timeout(10s);
            CO_ASSERT(!end);
            EXPECT_EQ(end.error(), errc::end_of_stream) << end.error().message();
            co_return lines;
        };
        auto closer = [&]() -> Task<void> {
            co_await sender();
            CO_ASSERT(c.shutdown(Shutdown::write));
        };
        auto [_, lines] = co_await when_all(closer(), reader());
        EXPECT_EQ(lines, (std::vector<std::string>{"first line", "second", "", "last one"}));
    }());
}

TEST_P(BufReaderTest, DelimiterSplitAcrossReadsAtEveryPosition) {
    run([]() -> Task<void> {
        // "head\r\n\r\nbody": for every slice size the delimiter falls across receives somewhere.
        for (std::size_t slice = 1; slice <= 8; ++slice) {
            auto [c, s] = co_await test::loopback_pair();
            const std::string msg = "head\r\n\r\nbody|";
            CO_ASSERT(co_await c.send_all(msg));
            SlicedStream sliced{s, slice};
            io::BufReader r(sliced, 32);
            auto head = co_await r.read_until("\r\n\r\n").timeout(10s);
            CO_ASSERT(head);
            EXPECT_EQ(*head, "head\r\n\r\n") << "slice " << slice;
            auto body = co_await r.read_until("|").timeout(10s);
            CO_ASSERT(body);
            EXPECT_EQ(*body, "body|") << "slice " << slice;
        }
    }());
}

TEST_P(BufReaderTest, LineLongerThanTheLimitIsAClearErrorAndConsumesNothing) {
    run([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        const std::string long_line = std::string(100, 'x') + "\nshort\n";
        CO_ASSERT(co_await c.send_all(long_line));
        io::BufReader r(s, 64);
        auto line = co_await r.read_line().timeout(10s);
        CO_ASSERT(!line);
        EXPECT_EQ(line.error(), errc::limit_exceeded) << line.error().message();
        // Nothing was consumed: the caller sees the 64 bytes it could not take as a line.
        EXPECT_EQ(r.buffered(), std::string(64, 'x'));
        // Once the caller drops them, reading resumes where it stopped.
        r.consume(64);
        auto rest = co_await r.read_line().timeout(10s);
        CO_ASSERT(rest);
        EXPECT_EQ(*rest, std::string(36, 'x'));
        auto next = co_await r.read_line().timeout(10s);
        CO_ASSERT(next);
        EXPECT_EQ(*next, "short");
        // A line of exactly the capacity, delimiter included, fits.
        CO_ASSERT(co_await c.send_all(std::string(63, 'y') + "\n"));
        auto exact = co_await r.read_line().timeout(10s);
        CO_ASSERT(exact);
        EXPECT_EQ(exact->size(), 63u);
    }());
}

TEST_P(BufReaderTest, EofMidLineIsUnexpectedEofAndKeepsThePartialLine) {
    run([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        CO_ASSERT(co_await c.send_all(std::string_view("complete\npartial")));
        CO_ASSERT(c.shutdown(Shutdown::write));
        io::BufReader r(s, 64);
        auto first = co_await r.read_line().timeout(10s);
        CO_ASSERT(first);
        EXPECT_EQ(*first, "complete");
        auto second = co_await r.read_line().timeout(10s);
        CO_ASSERT(!second);
        EXPECT_EQ(second.error(), errc::unexpected_eof) << second.error().message();
        EXPECT_EQ(r.buffered(), "partial"); // not lost
        r.consume(r.buffered().size());
        auto third = co_await r.read_line().timeout(10s);
        CO_ASSERT(!third);
        EXPECT_EQ(third.error(), errc::end_of_stream);
    }());
}

TEST_P(BufReaderTest, TimedOutReadLoosesNothingAndTheNextReadCompletes) {
    run([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        io::BufReader r(s, 64);
        CO_ASSERT(co_await c.send_all(std::string_view("no newline yet")));
        auto line = co_await r.read_line().timeout(30ms);
        CO_ASSERT(!line);
        EXPECT_EQ(line.error(), std::errc::timed_out) << line.error().message();
        EXPECT_EQ(r.buffered(), "no newline yet");
        CO_ASSERT(co_await c.send_all(std::string_view(", now\n")));
        auto done = co_await r.read_line().timeout(10s);
        CO_ASSERT(done);
        EXPECT_EQ(*done, "no newline yet, now");
    }());
}

TEST_P(BufReaderTest, CancelledReadLoosesNothing) {
    run([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        io::BufReader r(s, 64);
        CO_ASSERT(co_await c.send_all(std::string_view("abc")));
        auto reading = [&]() -> Task<Result<std::string_view>> {
            co_return co_await r.read_line();
        };
        auto raced = co_await when_any(reading(), sleep(20ms));
        CO_ASSERT(raced.index() == 1);
        EXPECT_EQ(r.buffered(), "abc");
        CO_ASSERT(co_await c.send_all(std::string_view("def\n")));
        auto line = co_await r.read_line().timeout(10s);
        CO_ASSERT(line);
        EXPECT_EQ(*line, "abcdef");
    }());
}

TEST_P(BufReaderTest, PeekDoesNotConsumeAndReadExactTakesBufferedThenFresh) {
    run([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        const std::string data = pattern(300, 1);
        auto sender = [&]() -> Task<void> {
            for (std::size_t off = 0; off < data.size(); off += 7) {
                CO_ASSERT(co_await c.send_all(std::string_view(data).substr(off, 7)));
                co_await yield_now();
            }
        };
        auto reader = [&]() -> Task<void> {
            io::BufReader r(s, 64);
            auto p = co_await r.peek(10).timeout(10s);
            CO_ASSERT(p);
            EXPECT_EQ(*p, data.substr(0, 10));
            auto p2 = co_await r.peek(64).timeout(10s);
            CO_ASSERT(p2);
            EXPECT_EQ(*p2, data.substr(0, 64));
            auto big = co_await r.peek(65);
            CO_ASSERT(!big);
            EXPECT_EQ(big.error(), errc::limit_exceeded);
            std::string out(100, '\0'); // more than the capacity: the rest bypasses the buffer
            auto n = co_await r.read_exact(std::span(out)).timeout(10s);
            CO_ASSERT(n);
            EXPECT_EQ(*n, 100u);
            EXPECT_EQ(out, data.substr(0, 100));
            std::string rest(200, '\0');
            auto m = co_await r.read_exact(std::span(rest)).timeout(10s);
            CO_ASSERT(m);
            EXPECT_EQ(rest, data.substr(100));
        };
        co_await when_all(sender(), reader());
    }());
}

TEST_P(BufReaderTest, ReadExactAtEofSaysWhetherItHadStarted) {
    run([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        CO_ASSERT(co_await c.send_all(std::string_view("12345")));
        CO_ASSERT(c.shutdown(Shutdown::write));
        io::BufReader r(s, 16);
        std::array<char, 3> three;
        CO_ASSERT(co_await r.read_exact(three));
        auto short_read = co_await r.read_exact(three).timeout(10s);
        CO_ASSERT(!short_read);
        EXPECT_EQ(short_read.error(), errc::unexpected_eof);
        auto at_end = co_await r.read_exact(three).timeout(10s);
        CO_ASSERT(!at_end);
        EXPECT_EQ(at_end.error(), errc::end_of_stream);
    }());
}

TEST_P(BufReaderTest, FillReportsEofAndAFullBuffer) {
    run([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        io::BufReader r(s, 8);
        CO_ASSERT(co_await c.send_all(std::string_view("0123456789")));
        std::size_t got = 0;
        while (got < 8) {
            auto n = co_await r.fill().timeout(10s);
            CO_ASSERT(n);
            got += *n;
        }
        EXPECT_EQ(r.buffered(), "01234567");
        auto full = co_await r.fill();
        CO_ASSERT(!full);
        EXPECT_EQ(full.error(), errc::limit_exceeded);
        r.consume(8);
        CO_ASSERT(c.shutdown(Shutdown::write));
        auto more = co_await r.fill().timeout(10s);
        CO_ASSERT(more);
        EXPECT_EQ(r.buffered(), "89");
        r.consume(2);
        auto eof = co_await r.fill().timeout(10s);
        CO_ASSERT(eof);
        EXPECT_EQ(*eof, 0u);
    }());
}

TEST_P(BufReaderTest, TheBufferGrowsFromSmallToItsCapacityAndNoFurther) {
    run([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        const std::string long_line = pattern(40 * 1024, 7);
        const std::string too_long = pattern(70 * 1024, 8);
        auto send = [](TcpStream& to, std::string data) -> Task<void> {
            CO_ASSERT(co_await to.send_all(data).timeout(20s));
        };
        auto read = [&](io::BufReader<TcpStream>& r) -> Task<void> {
            auto line = co_await r.read_line().timeout(20s);
            CO_ASSERT(line);
            EXPECT_EQ(*line, long_line); // 40 KiB, past the first 2 KiB block many times over
            auto tail = co_await r.read_line().timeout(20s);
            CO_ASSERT(tail);
            EXPECT_EQ(*tail, "tail");
            auto over = co_await r.read_line().timeout(20s);
            CO_ASSERT(!over);
            EXPECT_EQ(over.error(), errc::limit_exceeded) << over.error().message();
            EXPECT_EQ(r.buffered(), std::string_view(too_long).substr(0, 64 * 1024));
        };
        io::BufReader r(s, 64 * 1024);
        co_await when_all(send(c, long_line + "\ntail\n" + too_long + "\n"), read(r));
    }());
}

TEST_P(BufReaderTest, BytesReceivedIntoThePoolAreAppendedAndReadLikeFilledOnes) {
    run([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        io::BufReader r(s, 32);
        CO_ASSERT(co_await c.send_all(std::string_view("first li")).timeout(10s));
        // Received by recv_pooled, into a pool buffer: put behind whatever the reader holds.
        auto got = co_await s.recv_pooled().timeout(10s);
        CO_ASSERT(got && !got->empty());
        const std::string pooled(got->data(), got->size());
        CO_ASSERT(r.append(pooled));
        got->release();
        EXPECT_EQ(r.buffered(), pooled);
        while (r.buffered().size() < 8) { // (the kernel may have split the 8 bytes)
            auto more = co_await s.recv_pooled().timeout(10s);
            CO_ASSERT(more && !more->empty());
            CO_ASSERT(r.append(std::string_view(more->data(), more->size())));
        }
        CO_ASSERT(co_await c.send_all(std::string_view("ne\nsecond\n")).timeout(10s));
        // (Every receive of this stream is a recv_pooled from now on: on io_uring its multishot
        // receive stays armed and takes what arrives, so a plain recv would wait in vain.)
        while (r.buffered().size() < 18) {
            auto more = co_await s.recv_pooled().timeout(10s);
            CO_ASSERT(more && !more->empty());
            CO_ASSERT(r.append(std::string_view(more->data(), more->size())));
        }
        // The lines span the appended pieces; read_line finds them without a receive.
        auto line = co_await r.read_line().timeout(10s);
        CO_ASSERT(line);
        EXPECT_EQ(*line, "first line");
        auto second = co_await r.read_line().timeout(10s);
        CO_ASSERT(second);
        EXPECT_EQ(*second, "second");
        // More than the capacity left: refused whole, nothing taken.
        CO_ASSERT(r.buffered().empty());
        CO_ASSERT(r.append(std::string(20, 'x')));
        EXPECT_FALSE(r.append(std::string(13, 'y')));
        EXPECT_EQ(r.buffered(), std::string(20, 'x'));
        EXPECT_TRUE(r.append(std::string(12, 'z')));
        EXPECT_EQ(r.buffered(), std::string(20, 'x') + std::string(12, 'z'));
        EXPECT_TRUE(r.append(""));
        // give_back: kept while bytes are buffered; once empty, the block goes to the thread's
        // spares, and the next reader to need one takes it.
        io::BufReader a(s, 4096);
        CO_ASSERT(a.append("abc"));
        const char* block = a.buffered().data();
        a.give_back();
        EXPECT_EQ(a.buffered(), "abc");
        EXPECT_EQ(a.buffered().data(), block);
        a.consume(3);
        a.give_back();
        io::BufReader b(c, 4096);
        CO_ASSERT(b.append("x"));
        EXPECT_EQ(b.buffered().data(), block);
        CO_ASSERT(a.append("after")); // and the first one gets another
        EXPECT_EQ(a.buffered(), "after");
    }());
}

GALAY_INSTANTIATE_BACKENDS(BufReaderTest);

class BufWriterTest : public test::BackendTest {};

TEST_P(BufWriterTest, SmallWritesWaitForFlushAndArriveInOrder) {
    run([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        io::BufWriter w(c, 1024);
        std::string expect;
        for (int i = 0; i < 50; ++i) {
            std::string piece = "piece " + std::to_string(i) + ";";
            expect += piece;
            auto n = co_await w.write(piece);
            CO_ASSERT(n);
            EXPECT_EQ(*n, piece.size());
        }
        EXPECT_EQ(w.buffered(), expect.size());
        std::array<char, 64> probe;
        auto none = co_await s.recv(probe).timeout(20ms); // nothing was sent before the flush
        CO_ASSERT(!none);
        EXPECT_EQ(none.error(), std::errc::timed_out);
        CO_ASSERT(co_await w.flush().timeout(10s));
        EXPECT_EQ(w.buffered(), 0u);
        CO_ASSERT(c.shutdown(Shutdown::write));
        EXPECT_EQ(co_await read_to_eof(s), expect);
    }());
}

TEST_P(BufWriterTest, LargeWritesGoOutWholeWithShortSends) {
    run([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        (void)c.set_send_buffer_size(4096); // many short writev/send results
        const std::string small = pattern(100, 2), big = pattern(1 << 20, 3), tail = pattern(10, 4);
        auto writer = [&]() -> Task<void> {
            io::BufWriter w(c, 4096);
            CO_ASSERT(co_await w.write(small));          // buffered
            auto n = co_await w.write(big).timeout(20s); // one writev: buffered + big
            CO_ASSERT(n);
            EXPECT_EQ(*n, big.size());
            CO_ASSERT(co_await w.write(tail));
            CO_ASSERT(co_await w.flush().timeout(20s));
            CO_ASSERT(c.shutdown(Shutdown::write));
        };
        auto [_, got] = co_await when_all(writer(), read_to_eof(s));
        EXPECT_TRUE(got == small + big + tail);
    }());
}

// A flush over a TcpStream is one send_all op; over any other stream (SlicedStream has no
// send_all) the writer's own loop of sends. Both must keep exactly what was not sent.
static_assert(io::ExactSendAll<TcpStream> && !io::ExactSendAll<SlicedStream>);

TEST_P(BufWriterTest, TimedOutFlushKeepsTheUnsentBytes) {
    run([]() -> Task<void> {
        for (const bool direct : {true, false}) {
            auto [c, s] = co_await test::loopback_pair();
            // More than the two socket buffers can hold (a fixed receive buffer, and the
            // sender's, which grows to tcp_wmem's maximum, 4 MiB by default): a flush cannot
            // finish while the peer does not read.
            (void)s.set_recv_buffer_size(64 << 10);
            const std::string data = pattern(16 << 20, 5);
            auto check = [&](auto& w) -> Task<void> {
                CO_ASSERT(w.try_write(data));              // fits exactly
                auto r = co_await w.flush().timeout(50ms); // the peer is not reading
                CO_ASSERT(!r);
                EXPECT_EQ(r.error(), std::errc::timed_out);
                EXPECT_GT(w.buffered(), 0u);
                EXPECT_LT(w.buffered(), data.size());
                auto finish = [&]() -> Task<void> {
                    CO_ASSERT(co_await w.flush().timeout(20s));
                    CO_ASSERT(c.shutdown(Shutdown::write));
                };
                auto [_, got] = co_await when_all(finish(), read_to_eof(s));
                EXPECT_TRUE(got == data)
                    << got.size() << " bytes of " << data.size() << (direct ? " (send_all)" : "");
            };
            if (direct) {
                io::BufWriter w(c, data.size());
                co_await check(w);
            } else {
                SlicedStream generic{c, data.size()};
                io::BufWriter w(generic, data.size());
                co_await check(w);
            }
        }
    }());
}

TEST_P(BufWriterTest, SpareAndCommitFormatInPlace) {
    run([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        io::BufWriter w(c, 64);
        std::span<char> room = w.spare();
        CO_ASSERT(room.size() == 64);
        std::memcpy(room.data(), "hello ", 6);
        w.commit(6);
        CO_ASSERT(w.try_write(std::string_view("world")));
        CO_ASSERT(!w.try_write(std::string(60, 'z'))); // does not fit: nothing copied
        EXPECT_EQ(w.buffered(), 11u);
        CO_ASSERT(co_await w.flush());
        CO_ASSERT(c.shutdown(Shutdown::write));
        EXPECT_EQ(co_await read_to_eof(s), "hello world");
    }());
}

TEST_P(BufWriterTest, SpareGrowsForALargeAnswerUpToTheCapacity) {
    run([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        io::BufWriter w(c, 16 * 1024);
        EXPECT_LT(w.spare().size(), 16u * 1024); // small until something needs more
        const std::string body = pattern(10'000, 3);
        std::span<char> room = w.spare(body.size());
        CO_ASSERT(room.size() >= body.size());
        std::memcpy(room.data(), body.data(), body.size());
        w.commit(body.size());
        EXPECT_EQ(w.spare(1 << 20).size(), 16u * 1024 - body.size()); // never past the capacity
        CO_ASSERT(co_await w.flush().timeout(20s));
        CO_ASSERT(c.shutdown(Shutdown::write));
        EXPECT_EQ(co_await read_to_eof(s), body);
    }());
}

TEST_P(BufWriterTest, WritersOfOneThreadShareTheBlocksTheyGiveBackWhenFlushed) {
    run([]() -> Task<void> {
        auto [c1, s1] = co_await test::loopback_pair();
        auto [c2, s2] = co_await test::loopback_pair();
        io::BufWriter w1(c1, 8192);
        SlicedStream generic{c2, 8192}; // (the writer's own send loop, not send_all)
        io::BufWriter w2(generic, 8192);
        const char* block = w1.spare().data();
        CO_ASSERT(w1.try_write(std::string_view("first;")));
        CO_ASSERT(co_await w1.flush().timeout(10s)); // all sent: the block goes back
        EXPECT_EQ(w2.spare().data(), block);         // and is the next one taken
        // Interleaved: both writers hold bytes at once (so each needs its own block), flush in
        // turns, and every byte reaches its own peer in order.
        std::string expect1 = "first;", expect2;
        auto writer = [&]() -> Task<void> {
            for (int i = 0; i < 200; ++i) {
                const std::string a = pattern(1 + i % 97, i), b = pattern(1 + i % 89, i + 1000);
                CO_ASSERT(w2.try_write(b));
                CO_ASSERT(w1.try_write(a));
                expect1 += a;
                expect2 += b;
                if (i % 3 == 0) CO_ASSERT(co_await w1.flush().timeout(10s));
                if (i % 2 == 0) CO_ASSERT(co_await w2.flush().timeout(10s));
                if (i % 7 == 0) { // larger than the capacity: the writev path, then empty
                    const std::string big = pattern(20'000, i);
                    CO_ASSERT(co_await w1.write(big).timeout(10s));
                    CO_ASSERT(co_await w1.flush().timeout(10s));
                    expect1 += big;
                }
            }
            CO_ASSERT(co_await w1.flush().timeout(10s));
            CO_ASSERT(co_await w2.flush().timeout(10s));
            CO_ASSERT(c1.shutdown(Shutdown::write));
            CO_ASSERT(c2.shutdown(Shutdown::write));
        };
        auto [_, got1, got2] = co_await when_all(writer(), read_to_eof(s1), read_to_eof(s2));
        EXPECT_TRUE(got1 == expect1) << got1.size() << " of " << expect1.size();
        EXPECT_TRUE(got2 == expect2) << got2.size() << " of " << expect2.size();
    }());
}

GALAY_INSTANTIATE_BACKENDS(BufWriterTest);

class CopyTest : public test::BackendTest {};

namespace {

/// client <-> [a  proxy  b] <-> upstream: returns (client, upstream, the proxy's two ends).
struct Proxied {
    TcpStream client, a, b, upstream;
};
Task<Proxied> proxied() {
    auto [client, a] = co_await test::loopback_pair();
    auto [b, upstream] = co_await test::loopback_pair();
    co_return Proxied{std::move(client), std::move(a), std::move(b), std::move(upstream)};
}

} // namespace

TEST_P(CopyTest, BothDirectionsAndHalfCloseGoThrough) {
    run([]() -> Task<void> {
        Proxied p = co_await proxied();
        const std::string request = pattern(200000, 6), response = pattern(300000, 7);
        // The client sends its request and half-closes; the upstream reads it to EOF, only then
        // answers and closes. Without the half-close passed on, this deadlocks (10 s timeouts).
        auto client = [&]() -> Task<std::string> {
            CO_ASSERT(co_await p.client.send_all(request).timeout(10s));
            CO_ASSERT(p.client.shutdown(Shutdown::write));
            co_return co_await read_to_eof(p.client);
        };
        auto upstream = [&]() -> Task<std::string> {
            std::string got = co_await read_to_eof(p.upstream);
            CO_ASSERT(co_await p.upstream.send_all(response).timeout(10s));
            CO_ASSERT(p.upstream.shutdown(Shutdown::write));
            co_return got;
        };
        auto [stats, at_client, at_upstream] = co_await when_all(
            io::copy_bidirectional(p.a, p.b, {.idle_timeout = 20s}), client(), upstream());
        CO_ASSERT(stats);
        EXPECT_EQ(stats->a_to_b, request.size());
        EXPECT_EQ(stats->b_to_a, response.size());
        EXPECT_TRUE(at_upstream == request);
        EXPECT_TRUE(at_client == response);
    }());
}

TEST_P(CopyTest, SixtyFourKibRequestsAndResponsesGoThroughEveryProxySocketWithoutNagle) {
    run([]() -> Task<void> {
        Proxied p = co_await proxied();
        // Nagle would hold the short last segment of each 64 KiB message until the peer's
        // delayed ACK: every socket of the relay must have it off (bench/studies/relay.py measures
        // the stall itself).
        for (TcpStream* s : {&p.client, &p.a, &p.b, &p.upstream})
            EXPECT_EQ(s->nodelay(), true);
        constexpr int kMessages = 16;
        constexpr std::size_t kSize = 64 * 1024;
        auto echo = [&]() -> Task<void> {
            std::string buf(kSize, '\0');
            for (int i = 0; i < kMessages; ++i) {
                CO_ASSERT(co_await p.upstream.recv_exact(buf).timeout(10s));
                CO_ASSERT(co_await p.upstream.send_all(buf).timeout(10s));
            }
            CO_ASSERT(p.upstream.shutdown(Shutdown::write));
        };
        auto client = [&]() -> Task<int> {
            std::string back(kSize, '\0');
            int verified = 0;
            for (int i = 0; i < kMessages; ++i) {
                const std::string msg = pattern(kSize, 100 + i);
                CO_ASSERT(co_await p.client.send_all(msg).timeout(10s));
                CO_ASSERT(co_await p.client.recv_exact(back).timeout(10s));
                verified += back == msg ? 1 : 0;
            }
            CO_ASSERT(p.client.shutdown(Shutdown::write));
            co_return verified;
        };
        auto [stats, _, verified] = co_await when_all(
            io::copy_bidirectional(p.a, p.b, {.idle_timeout = 20s}), echo(), client());
        CO_ASSERT(stats);
        EXPECT_EQ(verified, kMessages);
        EXPECT_EQ(stats->a_to_b, kMessages * kSize);
        EXPECT_EQ(stats->b_to_a, kMessages * kSize);
    }());
}

TEST_P(CopyTest, TcpStreamsAreSplicedAndOtherStreamsCopiedEachPathKeepingEveryByte) {
    run([]() -> Task<void> {
        // Which path runs: spliced between two TcpStreams, copied when asked to, and copied
        // for a stream type of our own (which the kernel cannot splice from).
        for (int path = 0; path < 3; ++path) {
            Proxied p = co_await proxied();
            const std::string request = pattern(300000, 20 + path), response = pattern(200000, 30);
            auto client = [&]() -> Task<std::string> {
                CO_ASSERT(co_await p.client.send_all(request).timeout(10s));
                CO_ASSERT(p.client.shutdown(Shutdown::write));
                co_return co_await read_to_eof(p.client);
            };
            auto upstream = [&]() -> Task<std::string> {
                std::string got = co_await read_to_eof(p.upstream);
                CO_ASSERT(co_await p.upstream.send_all(response).timeout(10s));
                CO_ASSERT(p.upstream.shutdown(Shutdown::write));
                co_return got;
            };
            SlicedStream sliced{p.a, 7000};
            auto relay = [&]() -> Task<Result<io::CopyStats>> {
                if (path == 0) co_return co_await io::copy_bidirectional(p.a, p.b);
                if (path == 1)
                    co_return co_await io::copy_bidirectional(p.a, p.b, {.splice = false});
                co_return co_await io::copy_bidirectional(sliced, p.b);
            };
            auto [stats, at_client, at_upstream] = co_await when_all(relay(), client(), upstream());
            CO_ASSERT(stats);
            EXPECT_EQ(stats->spliced, path == 0 && GALAY_HAVE_SPLICE) << "path " << path;
            EXPECT_EQ(stats->a_to_b, request.size());
            EXPECT_EQ(stats->b_to_a, response.size());
            EXPECT_TRUE(at_upstream == request) << "path " << path;
            EXPECT_TRUE(at_client == response) << "path " << path;
        }
        // The spliced relay gave its pipes back, empty, to this thread's pool.
        if (GALAY_HAVE_SPLICE) {
            EXPECT_GE(io::detail::relay_pipes_pooled(), 1u);
        }
    }());
}

TEST_P(CopyTest, OneWayCopySplicesUntilTheSourceEndsAndPassesTheHalfCloseOn) {
    run([]() -> Task<void> {
        Proxied p = co_await proxied();
        const std::string data = pattern(1 << 20, 41);
        auto client = [&]() -> Task<void> {
            CO_ASSERT(co_await p.client.send_all(data).timeout(10s));
            CO_ASSERT(p.client.shutdown(Shutdown::write));
        };
        auto [moved, _, got] = co_await when_all(io::copy(p.a, p.b, {.idle_timeout = 20s}),
                                                 client(), read_to_eof(p.upstream));
        CO_ASSERT(moved);
        EXPECT_EQ(*moved, data.size());
        EXPECT_TRUE(got == data);
    }());
}

TEST_P(CopyTest, IdleSplicedRelaysHoldNoPipe) {
    run([]() -> Task<void> {
        constexpr int kRelays = 50;
        std::vector<Proxied> relays;
        for (int i = 0; i < kRelays; ++i)
            relays.push_back(co_await proxied());
        const int before = test::open_fds();
        CancelSource stop;
        std::vector<Task<Result<io::CopyStats>>> copies;
        for (Proxied& p : relays)
            copies.push_back(with_cancel(stop, io::copy_bidirectional(p.a, p.b)));
        auto check = [&]() -> Task<int> {
            for (int i = 0; i < 10; ++i)
                co_await yield_now(); // every relay reaches its wait for bytes
            const int during = test::open_fds();
            stop.cancel();
            co_return during;
        };
        auto [results, during] = co_await when_all(when_all(std::move(copies)), check());
        EXPECT_EQ(during, before) << "an idle relay holds pipes";
        for (auto& r : results)
            EXPECT_FALSE(r.has_value()); // cancelled
    }());
}

TEST_P(CopyTest, SplicingIntoAClosedUpstreamIsAnErrorNotSigpipe) {
    run([]() -> Task<void> {
        Proxied p = co_await proxied();
        // The upstream is gone: the relay's first splice into it is answered by a reset, the
        // next ones by EPIPE, which splice(2) would turn into a SIGPIPE that kills the process.
        CO_ASSERT(co_await p.upstream.close());
        const std::string data = pattern(4 << 20, 9);
        auto client = [&]() -> Task<void> {
            (void)co_await p.client.send_all(data).timeout(10s); // may fail once the relay ends
        };
        auto relay = [&]() -> Task<Result<std::uint64_t>> {
            auto r = co_await io::copy(p.a, p.b, {.idle_timeout = 20s});
            (void)p.a.set_linger_reset(); // and the client's send ends too
            (void)co_await p.a.close();
            co_return r;
        };
        auto [moved, _] = co_await when_all(relay(), client());
        CO_ASSERT(!moved);
        EXPECT_TRUE(moved.error() == std::errc::broken_pipe ||
                    moved.error() == std::errc::connection_reset)
            << moved.error().message();
    }());
}

TEST_P(CopyTest, IdleConnectionTimesOut) {
    run([]() -> Task<void> {
        Proxied p = co_await proxied();
        auto r = co_await io::copy_bidirectional(p.a, p.b, {.idle_timeout = 50ms});
        CO_ASSERT(!r);
        EXPECT_EQ(r.error(), std::errc::timed_out) << r.error().message();
        // The streams are left open and usable.
        CO_ASSERT(co_await p.client.send_all(std::string_view("x")));
        std::array<char, 1> one;
        CO_ASSERT(co_await p.a.recv_exact(one).timeout(10s));
    }());
}

TEST_P(CopyTest, AQuietDirectionIsNotIdleWhileTheOtherMoves) {
    run_paused([]() -> Task<void> {
        Proxied p = co_await proxied();
        // upstream -> client streams for several idle periods; client -> upstream says nothing.
        constexpr auto kIdle = 400ms;
        auto upstream = [&]() -> Task<void> {
            // The scheduler's clock: virtual here (run_paused), so the test takes no real time.
            const std::int64_t until =
                Scheduler::now_ns() + std::chrono::nanoseconds(3 * kIdle).count();
            while (Scheduler::now_ns() < until) {
                CO_ASSERT(co_await p.upstream.send_all(std::string_view("tick")));
                (void)co_await sleep(20ms);
            }
            CO_ASSERT(p.upstream.shutdown(Shutdown::write));
        };
        auto client = [&]() -> Task<std::string> {
            std::string got = co_await read_to_eof(p.client);
            CO_ASSERT(p.client.shutdown(Shutdown::write));
            co_return got;
        };
        auto [stats, _, got] = co_await when_all(
            io::copy_bidirectional(p.a, p.b, {.idle_timeout = kIdle}), upstream(), client());
        CO_ASSERT(stats); // not timed out although client -> upstream was silent throughout
        EXPECT_EQ(stats->b_to_a, got.size());
        EXPECT_EQ(stats->a_to_b, 0u);
    }());
}

TEST_P(CopyTest, AResetOnOneSideEndsTheCopyWithTheError) {
    run([]() -> Task<void> {
        Proxied p = co_await proxied();
        auto upstream = [&]() -> Task<void> {
            std::array<char, 5> hello;
            CO_ASSERT(co_await p.upstream.recv_exact(hello).timeout(10s));
            CO_ASSERT(co_await p.upstream.send_all(std::string_view("pending")));
            CO_ASSERT(p.upstream.set_linger_reset());
            TcpStream gone = std::move(p.upstream); // RST
        };
        auto client = [&]() -> Task<void> {
            CO_ASSERT(co_await p.client.send_all(std::string_view("hello")));
        };
        auto [r, a, b] = co_await when_all(io::copy_bidirectional(p.a, p.b), upstream(), client());
        CO_ASSERT(!r);
        EXPECT_EQ(r.error(), std::errc::connection_reset) << r.error().message();
    }());
}

TEST_P(CopyTest, CancellingTheCallerCancelsBothDirections) {
    run([]() -> Task<void> {
        Proxied p = co_await proxied();
        auto raced = co_await when_any(io::copy_bidirectional(p.a, p.b), sleep(20ms));
        CO_ASSERT(raced.index() == 1);
        // Both directions were stopped and finished: the proxy's ends still work.
        CO_ASSERT(co_await p.upstream.send_all(std::string_view("y")));
        std::array<char, 1> one;
        CO_ASSERT(co_await p.b.recv_exact(one).timeout(10s));
        EXPECT_EQ(one[0], 'y');
    }());
}

// An upstream that stops reading: the relay stops too, holding no more than the sockets'
// buffers and one pipe per direction, so the client's sends stop being taken. (Each send is
// given 300 ms: one that times out means the chain is full; the bound holds however early.)
// When the upstream reads again every byte arrives, in order, on both relay paths.
TEST_P(CopyTest, AnUpstreamThatStopsReadingStopsTheRelayWithBoundedMemory) {
    run([]() -> Task<void> {
        for (bool splice : {true, false}) {
            Proxied p = co_await proxied();
            for (TcpStream* s : {&p.client, &p.a, &p.b, &p.upstream}) {
                CO_ASSERT(s->set_send_buffer_size(64 << 10));
                CO_ASSERT(s->set_recv_buffer_size(64 << 10));
            }
            const std::string chunk = pattern(64 << 10, 13);
            std::size_t taken = 0;
            auto client = [&]() -> Task<void> {
                for (;;) {
                    auto n =
                        co_await p.client.send(std::string_view(chunk).substr(taken % chunk.size()))
                            .timeout(300ms);
                    if (!n) {
                        CO_ASSERT(n.error() == std::errc::timed_out);
                        break;
                    }
                    taken += *n;
                    CO_ASSERT(taken < (64u << 20)); // never: the chain would have no bound
                }
            };
            CancelSource stop;
            auto relay = [&]() -> Task<void> {
                (void)co_await with_cancel(stop, io::copy(p.a, p.b, {.splice = splice}));
            };
            auto driver = [&]() -> Task<void> {
                co_await client();
                // Socket buffers (64 KiB each, doubled by the kernel, 4 on the way) plus one
                // pipe (64 KiB) or one copy buffer: well under 2 MiB.
                EXPECT_LT(taken, std::size_t{2} << 20) << (splice ? "splice" : "copy");
                // Now the upstream reads everything the client got in.
                std::string got(taken, '\0');
                CO_ASSERT(co_await p.upstream.recv_exact(std::span(got)).timeout(20s));
                for (std::size_t at = 0; at < got.size(); at += chunk.size()) {
                    const std::size_t n = std::min(chunk.size(), got.size() - at);
                    CO_ASSERT(std::string_view(got).substr(at, n) ==
                              std::string_view(chunk).substr(0, n)); // byte i is chunk[i % size]
                }
                stop.cancel();
            };
            co_await when_all(relay(), driver());
        }
    }());
}

GALAY_INSTANTIATE_BACKENDS(CopyTest);
