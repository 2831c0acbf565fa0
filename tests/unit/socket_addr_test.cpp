#include "support/backends.hpp"

using namespace galay;

TEST(SocketAddrTest, ParsesIpv4WithPort) {
    auto a = SocketAddr::parse("127.0.0.1:8080");
    ASSERT_TRUE(a);
    EXPECT_TRUE(a->is_v4());
    EXPECT_EQ(a->port(), 8080);
    EXPECT_EQ(a->ip(), "127.0.0.1");
    EXPECT_EQ(a->to_string(), "127.0.0.1:8080");
}

TEST(SocketAddrTest, ParsesBracketedIpv6) {
    auto a = SocketAddr::parse("[::1]:443");
    ASSERT_TRUE(a);
    EXPECT_TRUE(a->is_v6());
    EXPECT_EQ(a->port(), 443);
    EXPECT_EQ(a->to_string(), "[::1]:443");
    EXPECT_EQ(*a, SocketAddr::loopback_v6(443));
}

TEST(SocketAddrTest, RejectsMalformedInput) {
    for (const char* bad : {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "300.1.1.1:80",
                            "::1:80", "[::1]80", "[::1", "localhost:80", "1.2.3.4:8x"}) {
        auto a = SocketAddr::parse(bad);
        EXPECT_FALSE(a) << bad;
        if (!a) {
            EXPECT_EQ(a.error(), std::errc::invalid_argument) << bad;
        }
    }
}

TEST(SocketAddrTest, FromIpAcceptsBothFamilies) {
    EXPECT_TRUE(SocketAddr::from_ip("10.1.2.3", 1)->is_v4());
    EXPECT_TRUE(SocketAddr::from_ip("2001:db8::1", 1)->is_v6());
    EXPECT_FALSE(SocketAddr::from_ip("not-an-ip", 1));
}

// Found by fuzz/socket_addr_fuzz: text with a NUL byte was read as a C string, so
// "[::\0\0\0\0\0\0\0\0]:80" parsed as [::]:80 and "127.0.0.1\0junk" as 127.0.0.1.
TEST(SocketAddrTest, RejectsTextWithANulByte) {
    using namespace std::string_view_literals;
    for (std::string_view bad :
         {"[::\0\0\0\0\0\0\0\x30]:80"sv, "127.0.0.1\0junk:80"sv, "127.0.0.1:80\0"sv, "\0"sv}) {
        auto a = SocketAddr::parse(bad);
        EXPECT_FALSE(a) << bad.size();
    }
    EXPECT_FALSE(SocketAddr::from_ip("127.0.0.1\0junk"sv, 80));
    EXPECT_FALSE(SocketAddr::from_ip("::1\0"sv, 80));
}

TEST(SocketAddrTest, DefaultIsUnspecified) {
    SocketAddr a;
    EXPECT_FALSE(a.is_v4());
    EXPECT_FALSE(a.is_v6());
    EXPECT_EQ(a.size(), 0u);
}

class ResolveTest : public test::BackendTest {};

TEST_P(ResolveTest, ResolvesLocalhostAndNumericHosts) {
    auto r = run(resolve("localhost", 80));
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_FALSE(r->empty());
    for (auto& a : *r)
        EXPECT_EQ(a.port(), 80);
    auto n = run(resolve("127.0.0.1", 81));
    ASSERT_TRUE(n);
    EXPECT_EQ(n->front(), SocketAddr::loopback_v4(81));
}

TEST_P(ResolveTest, UnknownHostIsAnError) {
    auto r = run(resolve("no-such-host.invalid", 80));
    EXPECT_FALSE(r);
}

// An unresolvable host reports the resolver's own error ("Name or service not known", or
// "Temporary failure in name resolution" when no DNS server answers), not "No route to host"
// (EHOSTUNREACH), which would send the user looking at routes instead of at the name.
TEST_P(ResolveTest, UnknownHostSaysTheNameDidNotResolve) {
    auto r = run(resolve("no-such-host.invalid", 80));
    ASSERT_FALSE(r);
    EXPECT_EQ(&r.error().category(), &resolver_category()) << r.error().message();
    EXPECT_NE(r.error(), std::errc::host_unreachable);
    EXPECT_EQ(r.error().message().find("route"), std::string::npos) << r.error().message();
}

GALAY_INSTANTIATE_BACKENDS(ResolveTest);
