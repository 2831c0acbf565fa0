// The HTTP server's request parser (apps/http/request_parser.hpp).
#include "http/request_parser.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace http;

namespace {

struct Parsed {
    ParseResult result;
    Request request;
};

Parsed parse(std::string_view text, Limits limits = {}) {
    RequestParser p(limits);
    Parsed out;
    out.result = p.parse(text, out.request);
    return out;
}

/// The status a request is refused with (0 when accepted, -1 when incomplete).
int refusal(std::string_view text, Limits limits = {}) {
    Parsed p = parse(text, limits);
    if (p.result.status == ParseStatus::complete) return 0;
    if (p.result.status == ParseStatus::incomplete) return -1;
    return p.result.error_status;
}

/// The same, with the bytes arriving `step` at a time: the first refusal or completion.
int trickled_refusal(std::string_view text, Limits limits, std::size_t step) {
    RequestParser p(limits);
    Request req;
    for (std::size_t n = std::min(step, text.size());; n = std::min(n + step, text.size())) {
        ParseResult r = p.parse(text.substr(0, n), req);
        if (r.status == ParseStatus::error) return r.error_status;
        if (r.status == ParseStatus::complete) return 0;
        if (n == text.size()) return -1;
    }
}

} // namespace

TEST(HttpParser, ParsesARequestAndItsHeaders) {
    const std::string text = "GET /index.html?x=1 HTTP/1.1\r\nHost: example.com\r\n"
                             "User-Agent: test\r\nAccept:  */*  \r\n\r\nNEXT";
    Parsed p = parse(text);
    ASSERT_EQ(p.result.status, ParseStatus::complete);
    EXPECT_EQ(p.result.consumed, text.size() - 4);
    EXPECT_EQ(p.request.method, Method::get);
    EXPECT_EQ(p.request.method_name, "GET");
    EXPECT_EQ(p.request.target, "/index.html?x=1");
    EXPECT_EQ(p.request.version_minor, 1);
    EXPECT_EQ(p.request.host, "example.com");
    EXPECT_EQ(p.request.header_count, 3u);
    EXPECT_EQ(p.request.header("accept"), "*/*"); // case-insensitive name, value trimmed
    EXPECT_EQ(p.request.header("USER-AGENT"), "test");
    EXPECT_EQ(p.request.header("missing"), "");
    EXPECT_TRUE(p.request.keep_alive);
    EXPECT_EQ(p.request.content_length, 0u);
}

TEST(HttpParser, ByteAtATimeIsIncompleteUntilTheBlankLine) {
    const std::string text =
        "HEAD /a HTTP/1.1\r\nHost: h\r\nX-Long: " + std::string(500, 'v') + "\r\n\r\n";
    RequestParser p;
    Request req;
    for (std::size_t n = 1; n < text.size(); ++n) {
        ParseResult r = p.parse(std::string_view(text).substr(0, n), req);
        ASSERT_EQ(r.status, ParseStatus::incomplete) << "after " << n << " bytes";
    }
    ParseResult r = p.parse(text, req);
    ASSERT_EQ(r.status, ParseStatus::complete);
    EXPECT_EQ(r.consumed, text.size());
    EXPECT_EQ(req.method, Method::head);
    EXPECT_EQ(req.header("x-long").size(), 500u);
}

TEST(HttpParser, PipelinedRequestsParseOneAfterAnother) {
    const std::string one = "GET /1 HTTP/1.1\r\nHost: h\r\n\r\n";
    const std::string two = "GET /2 HTTP/1.1\nHost: h\n\n"; // bare LF line ends are accepted
    const std::string all = one + two + "GET /3";
    RequestParser p;
    Request req;
    std::string_view rest = all;
    ParseResult r = p.parse(rest, req);
    ASSERT_EQ(r.status, ParseStatus::complete);
    EXPECT_EQ(req.target, "/1");
    rest.remove_prefix(r.consumed);
    p.reset();
    r = p.parse(rest, req);
    ASSERT_EQ(r.status, ParseStatus::complete);
    EXPECT_EQ(req.target, "/2");
    EXPECT_EQ(r.consumed, two.size());
    rest.remove_prefix(r.consumed);
    p.reset();
    EXPECT_EQ(p.parse(rest, req).status, ParseStatus::incomplete);
}

TEST(HttpParser, EmptyLinesBeforeTheRequestLineAreSkippedAndCounted) {
    const std::string text = "\r\n\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
    Parsed p = parse(text);
    ASSERT_EQ(p.result.status, ParseStatus::complete);
    EXPECT_EQ(p.result.consumed, text.size());
    EXPECT_EQ(refusal("\r\n\r\n"), -1);
    EXPECT_EQ(refusal("\r"), -1);
    EXPECT_EQ(refusal("\rX"), 400);
}

TEST(HttpParser, ConnectionPersistenceFollowsTheVersion) {
    EXPECT_TRUE(parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n").request.keep_alive);
    EXPECT_FALSE(
        parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n").request.keep_alive);
    EXPECT_FALSE(parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, CLOSE\r\n\r\n")
                     .request.keep_alive);
    EXPECT_FALSE(parse("GET / HTTP/1.0\r\n\r\n").request.keep_alive); // no Host needed in 1.0
    EXPECT_EQ(parse("GET / HTTP/1.0\r\n\r\n").request.version_minor, 0);
    EXPECT_TRUE(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").request.keep_alive);
    EXPECT_EQ(parse("GET / HTTP/1.7\r\nHost: h\r\n\r\n").request.version_minor, 1);
}

TEST(HttpParser, BodiesAreFramedStrictly) {
    Parsed p = parse("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 42\r\n\r\n");
    ASSERT_EQ(p.result.status, ParseStatus::complete);
    EXPECT_EQ(p.request.content_length, 42u);
    EXPECT_EQ(p.request.method, Method::post);
    // The same length twice is one length; two different ones are a smuggling attempt.
    EXPECT_EQ(
        refusal("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"), 0);
    EXPECT_EQ(
        refusal("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"),
        400);
    EXPECT_EQ(refusal("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\n"), 400);
    EXPECT_EQ(refusal("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n"), 400);
    EXPECT_EQ(refusal("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: \r\n\r\n"), 400);
    EXPECT_EQ(refusal("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x10\r\n\r\n"), 400);
    // Larger than the limit, or than 64 bits: 413.
    EXPECT_EQ(refusal("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1048577\r\n\r\n"), 413);
    EXPECT_EQ(
        refusal("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999999\r\n\r\n"),
        413);
    // Chunked (last) is understood; other codings are not; both framings at once is refused.
    Parsed c = parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
    ASSERT_EQ(c.result.status, ParseStatus::complete);
    EXPECT_TRUE(c.request.chunked);
    EXPECT_EQ(refusal("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
              501);
    EXPECT_EQ(refusal("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
              400);
    EXPECT_EQ(refusal("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n"), 400);
    EXPECT_EQ(refusal("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                      "Content-Length: 3\r\n\r\n"),
              400);
    EXPECT_EQ(refusal("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
    EXPECT_TRUE(parse("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n")
                    .request.expect_continue);
    EXPECT_EQ(refusal("POST / HTTP/1.1\r\nHost: h\r\nExpect: tea\r\n\r\n"), 417);
}

TEST(HttpParser, MalformedRequestLinesAre400) {
    EXPECT_EQ(refusal("GET\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET /\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET  / HTTP/1.1\r\nHost: h\r\n\r\n"), 400); // empty target
    EXPECT_EQ(refusal("GET / HTTP/1.1 \r\nHost: h\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET / http/1.1\r\nHost: h\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET / HTTP/1.x\r\nHost: h\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET / HTTP/1\r\nHost: h\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET / HTTP/11.1\r\nHost: h\r\n\r\n"), 400);
    EXPECT_EQ(refusal("G(T / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    EXPECT_EQ(refusal(std::string("GET /\x01 HTTP/1.1\r\nHost: h\r\n\r\n")), 400);
    EXPECT_EQ(refusal("GET / HTTP/1.1\rHost: h\r\n\r\n"), 400); // bare CR
}

TEST(HttpParser, OtherVersionsAre505) {
    EXPECT_EQ(refusal("GET / HTTP/2.0\r\n\r\n"), 505);
    EXPECT_EQ(refusal("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 505); // the HTTP/2 preface
    EXPECT_EQ(refusal("GET / HTTP/3\r\n\r\n"), 505);
    EXPECT_EQ(refusal("GET / HTTP/0.9\r\n\r\n"), 505);
}

TEST(HttpParser, MalformedHeadersAre400) {
    EXPECT_EQ(refusal("GET / HTTP/1.1\r\n\r\n"), 400); // 1.1 without Host
    EXPECT_EQ(refusal("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET / HTTP/1.1\r\nHost: h\r\nName : v\r\n\r\n"), 400); // space before ':'
    EXPECT_EQ(refusal("GET / HTTP/1.1\r\nHost: h\r\nNo colon\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET / HTTP/1.1\r\nHost: h\r\n: empty name\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET / HTTP/1.1\r\nHost: h\r\nA: b\r\n folded\r\n\r\n"), 400); // obs-fold
    EXPECT_EQ(refusal(std::string("GET / HTTP/1.1\r\nHost: h\r\nA: b\0c\r\n\r\n", 36)), 400);
    EXPECT_EQ(refusal("GET / HTTP/1.1\r\nHost: h\r\nA: b\rc\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET / HTTP/1.1\r\nHost:\r\n\r\n"), 0); // an empty Host is allowed
    EXPECT_EQ(refusal("GET / HTTP/1.1\r\nHost: h\r\nX: caf\xc3\xa9\r\n\r\n"), 0); // obs-text
}

TEST(HttpParser, LimitsAre414And431And501) {
    Limits lim;
    lim.max_request_line = 64;
    lim.max_head = 256;
    lim.max_headers = 4;
    const std::string long_target = "GET /" + std::string(100, 'a');
    EXPECT_EQ(refusal(long_target, lim), 414); // before the line even ends
    EXPECT_EQ(refusal(long_target + " HTTP/1.1\r\n", lim), 414);
    EXPECT_EQ(refusal(long_target + " HTTP/1.1\r\nHost: h\r\n\r\n", lim), 414);
    const std::string head = "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(300, 'x');
    EXPECT_EQ(refusal(head, lim), 431); // before the head ends
    EXPECT_EQ(refusal(head + "\r\n\r\n", lim), 431);
    std::string many = "GET / HTTP/1.1\r\nHost: h\r\n";
    for (int i = 0; i < 4; ++i)
        many += "H" + std::to_string(i) + ": v\r\n";
    EXPECT_EQ(refusal(many + "\r\n", lim), 431);        // 5 header fields, 4 allowed
    EXPECT_EQ(refusal(std::string(40, 'A'), lim), 501); // a method longer than any
    EXPECT_EQ(refusal(std::string(40, 'A') + " / HTTP/1.1\r\nHost: h\r\n\r\n", lim), 501);
    EXPECT_EQ(refusal(std::string("\x16\x03\x01\x02\x00", 5), lim), 400); // a TLS hello: at once
    EXPECT_EQ(refusal(std::string(300, '\n'), lim), 400);                 // nothing but empty lines
}

TEST(HttpParser, AnErrorInTheRequestLineIsReportedBeforeTheHeadEnds) {
    EXPECT_EQ(refusal("GET / HTTP/2.0\r\nHost: h\r\n"), 505);
    EXPECT_EQ(refusal("GET / HTTP/1.1 extra\r\nHost"), 400);
    EXPECT_EQ(refusal("GET / HTTP/1.1\r\nHost"), -1);
}

TEST(HttpParser, TheSameBytesGetTheSameAnswerHoweverTheyArrive) {
    // Found by fuzz/http_parser_fuzz.cpp: a 40-character method on a line over its 24-byte limit
    // was 414 when it trickled in (the line's limit is reached before the method's 32) and 501
    // at once. The refusal decided at the earliest position now wins either way.
    Limits lim;
    lim.max_request_line = 24;
    lim.max_head = 40;
    lim.max_headers = 1;
    const std::string found =
        std::string(40, '!') +
        std::string("\r;\r\nMET /\n\x01\x12\n\r\nG\r\n \r\n\r3\0\0C\0\0\xa0\n", 27);
    EXPECT_EQ(refusal(found, lim), 414);
    EXPECT_EQ(trickled_refusal(found, lim, 1), 414);
    lim.max_request_line = 64; // now the method's limit comes first
    EXPECT_EQ(refusal(found, lim), 501);
    EXPECT_EQ(trickled_refusal(found, lim, 1), 501);
    // A bad method character before the line limit: 400 both ways, not 414.
    const std::string bad = "GE(T /" + std::string(100, 'a') + " HTTP/1.1\r\nHost: h\r\n\r\n";
    EXPECT_EQ(refusal(bad, lim), 400);
    EXPECT_EQ(trickled_refusal(bad, lim, 1), 400);
    // A malformed line within the limit, in a head over its limit: the line's 400 comes first.
    const std::string line =
        "GET / HTTP/1.1 x\r\nHost: h\r\nX: " + std::string(100, 'x') + "\r\n\r\n";
    lim.max_request_line = 64;
    EXPECT_EQ(refusal(line, lim), 400);
    EXPECT_EQ(trickled_refusal(line, lim, 7), 400);
}

TEST(HttpParser, WholeRequestsReadInOnePassMatchTheCarefulPath) {
    // A request that is all there on the first call is read in one pass (parse_whole); its bytes
    // split anywhere go through the careful path, which resumes where it stopped. Both must find
    // the same request: the same length, fields and header views. (Debug builds also check every
    // one-pass parse against the careful path with asserts, and so does the fuzz target.)
    const std::string requests[] = {
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n",
        "GET /a/b?c=d HTTP/1.1\nHost: h\nAccept: */*\n\n",    // LF only
        "HEAD /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", // 1.0, kept alive
        "GET / HTTP/1.1\r\nHost: h\r\nConnection: Keep-Alive, CLOSE\r\n\r\n",
        "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\n\r\n", // a body follows
        "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n",
        "PUT /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST /p HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n",
        "PATCH http://h/abs HTTP/1.1\r\nHost: h\r\nX-Tab:\tv\t \r\nX-Empty:\r\nX-8: "
        "\xc3\xa9\r\n\r\n",
        "BREW /pot HTTP/1.9\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n",
        "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\nGET / HTTP/1.1\r\n", // the next request's start
    };
    for (const std::string& text : requests) {
        SCOPED_TRACE(text);
        Parsed whole = parse(text);
        ASSERT_EQ(whole.result.status, ParseStatus::complete);
        for (std::size_t split = 1; split < whole.result.consumed; ++split) {
            RequestParser p;
            Request req;
            ASSERT_EQ(p.parse(std::string_view(text).substr(0, split), req).status,
                      ParseStatus::incomplete)
                << "split at " << split;
            const ParseResult r = p.parse(text, req);
            ASSERT_EQ(r.status, ParseStatus::complete) << "split at " << split;
            EXPECT_EQ(r.consumed, whole.result.consumed);
            const Request& a = whole.request;
            EXPECT_EQ(req.method, a.method);
            EXPECT_EQ(req.method_name.data(), a.method_name.data());
            EXPECT_EQ(req.target, a.target);
            EXPECT_EQ(req.version_minor, a.version_minor);
            EXPECT_EQ(req.keep_alive, a.keep_alive);
            EXPECT_EQ(req.chunked, a.chunked);
            EXPECT_EQ(req.expect_continue, a.expect_continue);
            EXPECT_EQ(req.content_length, a.content_length);
            EXPECT_EQ(req.host, a.host);
            ASSERT_EQ(req.header_count, a.header_count);
            for (std::size_t i = 0; i < a.header_count; ++i) {
                EXPECT_EQ(req.headers[i].name.data(), a.headers[i].name.data());
                EXPECT_EQ(req.headers[i].name, a.headers[i].name);
                EXPECT_EQ(req.headers[i].value.data(), a.headers[i].value.data());
                EXPECT_EQ(req.headers[i].value, a.headers[i].value);
            }
        }
    }
    // What the one pass leaves to the careful path is still refused there, whole or split.
    EXPECT_EQ(refusal("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n"),
              400);
    EXPECT_EQ(refusal("GET / HTTP/1.1\r\nHost: a\r\nExpect: tea\r\n\r\n"), 417);
    EXPECT_EQ(refusal("GET / HTTP/1.1\r\n\r\n"), 400); // no Host
    EXPECT_EQ(refusal("GET / HTTP/1.1\r\nHost: a\r\nX : y\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n"), 400);
    EXPECT_EQ(refusal("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n"), 400);
    EXPECT_EQ(refusal("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), 0); // empty line first
}

TEST(HttpParser, EveryByteOfALongHeaderValueIsChecked) {
    // A header value is scanned sixteen bytes at a time where the machine can: one character
    // put at every position of a 40-byte value (inside a block, at its edges, in the tail) must
    // be refused or kept as the RFC says, in one pass (whole) and on the careful path (split).
    struct Case {
        char c;
        bool allowed;
    };
    const Case cases[] = {{'\x01', false}, {'\x0b', false}, {'\x1f', false}, {'\x7f', false},
                          {'\r', false},   {'\0', false},   {'\t', true},    {' ', true},
                          {'\x80', true},  {'\xff', true},  {'~', true},     {'\x20', true}};
    for (const Case& k : cases) {
        for (std::size_t at = 0; at < 40; ++at) {
            std::string value(40, 'v');
            value[at] = k.c;
            const std::string text = "GET / HTTP/1.1\r\nHost: h\r\nX-Long: " + value + "\r\n\r\n";
            SCOPED_TRACE(testing::Message()
                         << "byte " << static_cast<int>(k.c & 0xff) << " at " << at);
            const Parsed whole = parse(text);
            if (!k.allowed) {
                EXPECT_EQ(refusal(text), 400);
                EXPECT_EQ(trickled_refusal(text, {}, 7), 400);
                continue;
            }
            ASSERT_EQ(whole.result.status, ParseStatus::complete);
            EXPECT_EQ(trickled_refusal(text, {}, 7), 0);
            ASSERT_EQ(whole.request.header_count, 2u);
            // (the value is trimmed of the whitespace at its ends)
            std::string_view expected(value);
            while (!expected.empty() && (expected.front() == ' ' || expected.front() == '\t'))
                expected.remove_prefix(1);
            while (!expected.empty() && (expected.back() == ' ' || expected.back() == '\t'))
                expected.remove_suffix(1);
            EXPECT_EQ(whole.request.headers[1].value, expected);
        }
    }
}

TEST(HttpParser, HeaderNamesAreTokensOfExactlyTheRfcCharacters) {
    // Every byte value in the middle of a header name: accepted exactly when it is a tchar
    // (RFC 9110 5.6.2: ALPHA, DIGIT and !#$%&'*+-.^_`|~), or a ':' (which ends the name there).
    auto tchar = [](unsigned char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) !=
                   std::string_view::npos;
    };
    for (int c = 0; c < 256; ++c) {
        std::string text = "GET / HTTP/1.1\r\nHost: h\r\nA";
        text += static_cast<char>(c);
        text += "b: v\r\n\r\n";
        SCOPED_TRACE(testing::Message() << "byte " << c);
        const bool allowed = tchar(static_cast<unsigned char>(c)) || c == ':';
        EXPECT_EQ(refusal(text), allowed ? 0 : 400);
        EXPECT_EQ(trickled_refusal(text, {}, 5), allowed ? 0 : 400);
    }
}

TEST(HttpParser, ReasonPhrases) {
    EXPECT_EQ(reason_phrase(200), "OK");
    EXPECT_EQ(reason_phrase(431), "Request Header Fields Too Large");
    EXPECT_EQ(reason_phrase(505), "HTTP Version Not Supported");
    EXPECT_EQ(reason_phrase(299), "");
}
