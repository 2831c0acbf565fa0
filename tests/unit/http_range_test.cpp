// The HTTP server's Range header parsing (apps/http/range.hpp).
#include "http/range.hpp"

#include <gtest/gtest.h>

using http::ByteRange;
using http::parse_range;

namespace {

::testing::AssertionResult partial(std::string_view v, std::uint64_t size, std::uint64_t first,
                                   std::uint64_t length) {
    ByteRange r = parse_range(v, size);
    if (r.kind != ByteRange::Kind::partial)
        return ::testing::AssertionFailure() << "'" << v << "' is not partial";
    if (r.first != first || r.length != length)
        return ::testing::AssertionFailure() << "'" << v << "' -> " << r.first << "+" << r.length
                                             << ", want " << first << "+" << length;
    return ::testing::AssertionSuccess();
}

ByteRange::Kind kind(std::string_view v, std::uint64_t size) {
    return parse_range(v, size).kind;
}

} // namespace

TEST(HttpRange, OneRangeOfEveryFormIsPartialAndClampedToTheSize) {
    EXPECT_TRUE(partial("bytes=0-0", 10, 0, 1));
    EXPECT_TRUE(partial("bytes=2-5", 10, 2, 4));
    EXPECT_TRUE(partial("bytes=2-", 10, 2, 8));
    EXPECT_TRUE(partial("bytes=2-99", 10, 2, 8));
    EXPECT_TRUE(partial("bytes=9-9", 10, 9, 1));
    EXPECT_TRUE(partial("bytes=-3", 10, 7, 3));
    EXPECT_TRUE(partial("bytes=-30", 10, 0, 10));
    EXPECT_TRUE(partial(" Bytes = 1-2 ", 10, 1, 2));
    EXPECT_TRUE(partial("bytes=, 1-2 ,", 10, 1, 2)); // empty list elements are allowed
    EXPECT_TRUE(partial("bytes=0-18446744073709551615", 10, 0, 10));
}

TEST(HttpRange, PastTheEndOrEmptyIsUnsatisfiable) {
    EXPECT_EQ(kind("bytes=10-", 10), ByteRange::Kind::unsatisfiable);
    EXPECT_EQ(kind("bytes=10-20", 10), ByteRange::Kind::unsatisfiable);
    EXPECT_EQ(kind("bytes=-0", 10), ByteRange::Kind::unsatisfiable);
    EXPECT_EQ(kind("bytes=0-", 0), ByteRange::Kind::unsatisfiable);
    EXPECT_EQ(kind("bytes=-5", 0), ByteRange::Kind::unsatisfiable);
    EXPECT_EQ(kind("bytes=10-11,12-", 10), ByteRange::Kind::unsatisfiable); // none of several
}

TEST(HttpRange, MalformedOtherUnitsAndSeveralRangesGetTheWholeFile) {
    for (std::string_view v :
         {"", "bytes", "bytes=", "bytes=,", "bytes=5-2", "bytes=a-b", "bytes=1-2-3", "bytes=--1",
          "bytes=+1-2", "bytes=1 -2", "bytes=1", "bytes=18446744073709551616-", "items=0-1",
          "bytes 0-1", "=0-1", "bytes=0-1,5-6", "bytes=0-5,3-8", "bytes=0-1,20-30",
          "bytes=0-1,x"}) {
        EXPECT_EQ(kind(v, 10), ByteRange::Kind::whole) << "'" << v << "'";
    }
}
