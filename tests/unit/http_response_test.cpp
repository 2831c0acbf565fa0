// https_get's parsers (examples/http_response.hpp) on bytes: URLs, response heads, chunked
// bodies fed whole and one byte at a time, and what each refuses.
#include "http_response.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hr = http_response;

namespace {

/// Decode `body` fed in pieces of `step` bytes, as https_get does (unconsumed bytes kept and
/// given again with the next piece). The body, or the first error.
std::expected<std::string, std::string> dechunk(std::string_view body, std::size_t step) {
    hr::ChunkedDecoder d;
    std::string pending, out;
    for (std::size_t at = 0; !d.done(); at += step) {
        if (at >= body.size() && pending.empty()) return std::unexpected("incomplete");
        pending.append(body.substr(std::min(at, body.size()), step));
        std::string_view view = pending;
        while (!d.done()) {
            auto s = d.next(view);
            if (!s) return std::unexpected(s.error());
            if (s->consumed == 0) break;
            out.append(s->data);
            view.remove_prefix(s->consumed);
        }
        pending.erase(0, pending.size() - view.size());
        if (at >= body.size() && !d.done()) return std::unexpected("incomplete");
    }
    return out;
}

TEST(HttpResponseUrl, TakesHostPortPathAndQuery) {
    auto u = hr::parse_url("https://example.org");
    ASSERT_TRUE(u) << u.error();
    EXPECT_EQ(u->host, "example.org");
    EXPECT_EQ(u->port, 443);
    EXPECT_EQ(u->path, "/");
    u = hr::parse_url("HTTPS://localhost:8443/a/b?x=1#frag");
    ASSERT_TRUE(u) << u.error();
    EXPECT_EQ(u->host, "localhost");
    EXPECT_EQ(u->port, 8443);
    EXPECT_EQ(u->path, "/a/b?x=1");
    u = hr::parse_url("https://[::1]:9/");
    ASSERT_TRUE(u) << u.error();
    EXPECT_EQ(u->host, "::1");
    EXPECT_EQ(u->port, 9);
    u = hr::parse_url("https://h?q");
    ASSERT_TRUE(u) << u.error();
    EXPECT_EQ(u->path, "/?q");
}

TEST(HttpResponseUrl, RefusesPortsThatAreNotPlainNumbersAndBytesThatWouldSplitTheRequest) {
    for (const char* bad :
         {"https://h:18443abc/", "https://h:0/", "https://h:65536/", "https://h:-1/",
          "https://h:+443/", "https://h:/", "https://h: 443/", "https://h:0x1bb/",
          "https://h:99999999999999999999/", "https://h/a b", "https://h/a\r\nX: y", "https://u@h/",
          "https:///", "https://[::1/", "https://[zz]/", "https://::1/", "http://h/", "h", ""}) {
        EXPECT_FALSE(hr::parse_url(bad)) << bad;
    }
}

TEST(HttpResponseHead, WaitsForTheWholeHeadAndReadsItsFraming) {
    const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: y\r\n\r\nhello";
    for (std::size_t n = 0; n < head.size() - 5; ++n) {
        auto h = hr::parse_head(std::string_view(head).substr(0, n));
        ASSERT_TRUE(h) << n << ": " << h.error();
        EXPECT_FALSE(*h) << n;
    }
    auto h = hr::parse_head(head);
    ASSERT_TRUE(h && *h);
    EXPECT_EQ((*h)->status, 200);
    EXPECT_EQ((*h)->framing, hr::Framing::content_length);
    EXPECT_EQ((*h)->content_length, 5u);
    EXPECT_EQ((*h)->size, head.size() - 5);

    auto chunked = hr::parse_head("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
                                  "transfer-encoding: gzip, Chunked\r\n\r\n");
    ASSERT_TRUE(chunked && *chunked);
    EXPECT_EQ((*chunked)->framing, hr::Framing::chunked); // it overrides Content-Length
    auto close = hr::parse_head("HTTP/1.0 200 OK\r\n\r\n");
    ASSERT_TRUE(close && *close);
    EXPECT_EQ((*close)->framing, hr::Framing::until_close);
    auto no_reason = hr::parse_head("HTTP/1.1 204\r\n\r\n");
    ASSERT_TRUE(no_reason && *no_reason);
    EXPECT_EQ((*no_reason)->framing, hr::Framing::none);
    auto interim = hr::parse_head("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n");
    ASSERT_TRUE(interim && *interim);
    EXPECT_EQ((*interim)->status, 100);
    EXPECT_EQ((*interim)->framing, hr::Framing::none);
    auto same_length = hr::parse_head("HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\n\r\n");
    ASSERT_TRUE(same_length && *same_length);
    EXPECT_EQ((*same_length)->content_length, 7u);
}

TEST(HttpResponseHead, RefusesWhatIsMalformed) {
    for (const char* bad : {
             "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
             "HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n",
             "HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n\r\n",
             "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
             "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
             "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
             "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n",
             "HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n",
             "HTTP/1.1 200 OK\r\nBad Name: v\r\n\r\n",
             "HTTP/1.1 200 OK\r\nX: a\nb\r\n\r\n",
             "HTTP/1.1 200 OK\r\nX: a\x01\r\n\r\n",
             "HTTP/1.1 20 OK\r\n\r\n",
             "HTTP/1.1 099 OK\r\n\r\n",
             "HTTP/2.0 200 OK\r\n\r\n",
             "HTTP/1.1 200OK\r\n\r\n",
             "http/1.1 200 OK\r\n\r\n",
         }) {
        auto h = hr::parse_head(bad);
        EXPECT_FALSE(h) << bad;
    }
    // Not HTTP at all is refused at once, not after 64 KiB.
    EXPECT_FALSE(hr::parse_head("SSH-2.0"));
    // A head that never ends is refused at the limit.
    std::string endless = "HTTP/1.1 200 OK\r\n";
    while (endless.size() < hr::kMaxHead)
        endless += "X: " + std::string(100, 'a') + "\r\n";
    auto h = hr::parse_head(endless);
    ASSERT_FALSE(h);
    EXPECT_NE(h.error().find("longer than"), std::string::npos);
}

TEST(HttpChunkedDecoder, DecodesWholeAndByteByByte) {
    const std::string body =
        "5\r\nhello\r\n6;a=b;c=\"q \\\" d\" ; e\r\n world\r\n000\r\nTrailer: x\r\n\r\nIGNORED";
    for (std::size_t step : {std::size_t{1}, std::size_t{2}, std::size_t{7}, body.size()}) {
        auto out = dechunk(body, step);
        ASSERT_TRUE(out) << step << ": " << out.error();
        EXPECT_EQ(*out, "hello world") << step;
    }
    // A large chunk passes through in pieces without being held.
    const std::string big = "10000\r\n" + std::string(0x10000, 'b') + "\r\n0\r\n\r\n";
    auto out = dechunk(big, 1000);
    ASSERT_TRUE(out) << out.error();
    EXPECT_EQ(out->size(), 0x10000u);
}

TEST(HttpChunkedDecoder, RefusesSizesThatAreNotHexOrOverflow) {
    EXPECT_EQ(*hr::parse_chunk_size_line("ffffffffffffffff"), ~std::uint64_t(0));
    EXPECT_EQ(*hr::parse_chunk_size_line("00000000000000000000000001"), 1u);
    for (const char* bad : {"-2", "+2", " 2", "x", "", "0x10", "10000000000000000", "1;", "1;=v",
                            "1;a=", "1;a=\"open", "1;a=b c", "1;a=\"\x01\""}) {
        EXPECT_FALSE(hr::parse_chunk_size_line(bad)) << bad;
    }
    for (const char* bad : {"4\r\nabcdXY\r\n0\r\n\r\n", "4\nabcd\r\n0\r\n\r\n",
                            "0\r\nbad trailer\r\n\r\n", "0\r\n folded: x\r\n\r\n"}) {
        EXPECT_FALSE(dechunk(bad, 1)) << bad;
        EXPECT_FALSE(dechunk(bad, 100)) << bad;
    }
}

TEST(HttpChunkedDecoder, BoundsLinesAndTrailers) {
    // A size line that never ends: refused once it passes the limit, whatever the pieces.
    const std::string endless_line = "1" + std::string(hr::kMaxChunkLine + 10, '0');
    auto r = dechunk(endless_line, 512);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().find("longer than"), std::string::npos) << r.error();
    std::string trailers = "0\r\n";
    while (trailers.size() < hr::kMaxTrailers + 100)
        trailers += "T: " + std::string(1000, 't') + "\r\n";
    trailers += "\r\n";
    r = dechunk(trailers, 4096);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().find("trailers longer than"), std::string::npos) << r.error();
}

} // namespace
