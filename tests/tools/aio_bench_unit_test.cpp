// Unit tests of aio_bench's parts: size parsing, flag parsing, latency histogram, verify pattern.
#include "config.hpp"
#include "measure/histogram.hpp"
#include "verify.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace aiob;
using galay::tools::LatencyHistogram;

TEST(AioBenchParseSize, AcceptsBytesAndBinarySuffixes) {
    EXPECT_EQ(parse_size("4096"), 4096u);
    EXPECT_EQ(parse_size("4k"), 4096u);
    EXPECT_EQ(parse_size("4K"), 4096u);
    EXPECT_EQ(parse_size("4KiB"), 4096u);
    EXPECT_EQ(parse_size("64k"), 65536u);
    EXPECT_EQ(parse_size("1m"), 1048576u);
    EXPECT_EQ(parse_size("512m"), 512ull << 20);
    EXPECT_EQ(parse_size("1g"), 1ull << 30);
    EXPECT_EQ(parse_size("2t"), 2ull << 40);
    EXPECT_EQ(parse_size("0"), 0u);
}

TEST(AioBenchParseSize, RejectsGarbage) {
    for (const char* s :
         {"", "k", "4x", "-1", "4kk", "1.5m", " 4k", "4k ", "99999999999999999999", "20000000000t"})
        EXPECT_FALSE(parse_size(s).has_value()) << "'" << s << "'";
}

namespace {
std::expected<Config, UsageError> parse(std::vector<std::string> args) {
    args.insert(args.begin(), "aio_bench");
    std::vector<char*> argv;
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    return parse_args(static_cast<int>(args.size()), argv.data());
}
} // namespace

TEST(AioBenchParseArgs, Defaults) {
    auto c = parse({"-f", "x"});
    ASSERT_TRUE(c.has_value()) << c.error().message;
    EXPECT_EQ(c->engine, EngineKind::libaio);
    EXPECT_EQ(c->pattern, Pattern::rand_read);
    EXPECT_EQ(c->depth, 32u);
    EXPECT_EQ(c->threads, 1u);
    EXPECT_EQ(c->block_size, 4096u);
    EXPECT_DOUBLE_EQ(c->runtime_s, 30.0);
    EXPECT_EQ(c->poll, PollMode::none);
    EXPECT_EQ(c->runtime_ns(), 30000000000ull);
}

TEST(AioBenchParseArgs, AllFlags) {
    auto c = parse({"-f",      "x",        "-e",       "io_uring",     "-p",
                    "rand_rw", "-q",       "64",       "-t",           "2",
                    "-r",      "1.5",      "-b",       "64k",          "-P",
                    "-M",      "--direct", "--verify", "--size",       "512m",
                    "--rwmix", "70",       "--json",   "--per-second", "--allow-overwrite",
                    "--keep",  "--ios",    "1000",     "--seed",       "7"});
    ASSERT_TRUE(c.has_value()) << c.error().message;
    EXPECT_EQ(c->engine, EngineKind::io_uring);
    EXPECT_EQ(c->pattern, Pattern::rand_rw);
    EXPECT_EQ(c->depth, 64u);
    EXPECT_EQ(c->threads, 2u);
    EXPECT_DOUBLE_EQ(c->runtime_s, 1.5);
    EXPECT_EQ(c->block_size, 65536u);
    EXPECT_EQ(c->poll, PollMode::iopoll);
    EXPECT_TRUE(c->cpu_counters && c->direct && c->verify && c->json && c->per_second &&
                c->allow_overwrite && c->keep);
    EXPECT_EQ(c->size, 512ull << 20);
    EXPECT_EQ(c->rwmix_read, 70u);
    EXPECT_EQ(c->ios, 1000u);
    EXPECT_EQ(c->seed, 7u);
    EXPECT_EQ(c->runtime_ns(), 1500000000ull); // -r given explicitly: both limits apply
}

TEST(AioBenchParseArgs, IosWithoutRuntimeHasNoTimeLimit) {
    auto c = parse({"-f", "x", "--ios", "10"});
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->runtime_ns(), 0u);
}

TEST(AioBenchParseArgs, PollModes) {
    auto c = parse({"-f", "x", "-e", "io_uring", "--poll-mode", "sqpoll"});
    ASSERT_TRUE(c.has_value()) << c.error().message;
    EXPECT_EQ(c->poll, PollMode::sqpoll);
    c = parse({"-f", "x", "-e", "libaio", "-P"}); // busy-poll io_getevents, no O_DIRECT needed
    ASSERT_TRUE(c.has_value()) << c.error().message;
    EXPECT_EQ(c->poll, PollMode::iopoll);
    EXPECT_FALSE(parse({"-f", "x", "-e", "io_uring", "-P"}).has_value()); // IOPOLL needs --direct
}

TEST(AioBenchHistogram, SmallValuesAreExact) {
    for (uint64_t v = 0; v < 256; ++v) {
        LatencyHistogram h;
        h.record(v);
        EXPECT_EQ(h.fio_percentile(50), double(v));
    }
}

TEST(AioBenchHistogram, BucketsAreContiguousAndPrecise) {
    for (unsigned b = 1; b + 1 < LatencyHistogram::kBuckets; ++b)
        ASSERT_EQ(LatencyHistogram::bucket_low(b) + LatencyHistogram::bucket_width(b),
                  LatencyHistogram::bucket_low(b + 1))
            << b;
    std::mt19937_64 rng(1);
    for (int i = 0; i < 100000; ++i) {
        uint64_t v = rng() >> (rng() % 64);
        unsigned b = LatencyHistogram::bucket_of(v);
        ASSERT_LE(LatencyHistogram::bucket_low(b), v);
        ASSERT_LT(v - LatencyHistogram::bucket_low(b), LatencyHistogram::bucket_width(b));
        LatencyHistogram h;
        h.record(v);
        EXPECT_LE(std::abs(h.fio_percentile(99) - double(v)), double(v) * 0.004 + 0.5) << v;
    }
}

TEST(AioBenchHistogram, PercentilesMatchSortedSamplesWithin1Percent) {
    std::mt19937_64 rng(42);
    std::lognormal_distribution<double> dist(std::log(100000.0), 0.8); // ~100 us, long tail
    std::vector<uint64_t> v;
    LatencyHistogram a, b;
    for (int i = 0; i < 200000; ++i) {
        uint64_t x = static_cast<uint64_t>(dist(rng));
        v.push_back(x);
        (i % 2 ? a : b).record(x); // two "threads"
    }
    a.merge(b);
    std::sort(v.begin(), v.end());
    ASSERT_EQ(a.count(), v.size());
    for (double p : {50.0, 95.0, 99.0, 99.9}) {
        size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * double(v.size())));
        double exact = double(v[rank - 1]);
        EXPECT_NEAR(a.fio_percentile(p), exact, exact * 0.01) << "p" << p;
    }
    double sum = 0;
    for (auto x : v)
        sum += double(x);
    EXPECT_NEAR(a.mean_ns(), sum / double(v.size()), 1e-6 * sum / double(v.size()));
    EXPECT_EQ(a.min_ns(), v.front());
    EXPECT_EQ(a.max_ns(), v.back());
}

TEST(AioBenchHistogram, RecordNIsRecordRepeated) {
    LatencyHistogram a, b;
    a.record_n(12345, 3);
    for (int i = 0; i < 3; ++i)
        b.record(12345);
    EXPECT_EQ(a.count(), b.count());
    EXPECT_EQ(a.mean_ns(), b.mean_ns());
    EXPECT_EQ(a.fio_percentile(50), b.fio_percentile(50));
}

namespace {
struct alignas(4096) Block {
    unsigned char bytes[16384];
};
} // namespace

TEST(AioBenchVerify, StampedBlockChecksOut) {
    Block b;
    stamp_block(b.bytes, sizeof b.bytes, 1 << 20, 77, 5);
    EXPECT_FALSE(check_block(b.bytes, sizeof b.bytes, 1 << 20, 0).has_value());
    EXPECT_FALSE(check_block(b.bytes, sizeof b.bytes, 1 << 20, 77).has_value());
    // Sectors are independent of the block size: the second 4 KiB read alone checks too.
    EXPECT_FALSE(check_block(b.bytes + 4096, 4096, (1 << 20) + 4096, 77).has_value());
}

TEST(AioBenchVerify, DetectsCorruptionInOneSector) {
    Block b;
    stamp_block(b.bytes, sizeof b.bytes, 0, 1, 5);
    b.bytes[3 * 512 + 100] ^= 0x01;
    auto f = check_block(b.bytes, sizeof b.bytes, 0, 0);
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->offset, 0u);
    EXPECT_EQ(f->sector_offset, 3u * 512);
    EXPECT_EQ(f->bad_sectors, 1u);
    EXPECT_NE(f->reason.find("checksum"), std::string::npos) << f->reason;
}

TEST(AioBenchVerify, DetectsMisplacedZeroedAndStaleData) {
    Block b;
    stamp_block(b.bytes, 4096, 8192, 1, 5);
    auto f = check_block(b.bytes, 4096, 12288, 0); // data of another offset
    ASSERT_TRUE(f.has_value());
    EXPECT_NE(f->reason.find("offset stamp"), std::string::npos) << f->reason;
    EXPECT_EQ(f->bad_sectors, 8u);

    f = check_block(b.bytes, 4096, 8192, 2); // a later write (generation 2) was lost
    ASSERT_TRUE(f.has_value());
    EXPECT_NE(f->reason.find("stale"), std::string::npos) << f->reason;

    std::memset(b.bytes, 0, 4096); // never written
    f = check_block(b.bytes, 4096, 8192, 0);
    ASSERT_TRUE(f.has_value());
    EXPECT_NE(f->reason.find("magic"), std::string::npos) << f->reason;
}
