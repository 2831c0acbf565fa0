// The tools' shared command-line pieces (bench/programs/common/cli, bench/programs/common/signals),
// their number formats (bench/measure/format.hpp), the filesystem names of aio_bench and
// bench_file_io (bench/programs/common/fs_type.hpp), and each tool's parser called as a function,
// as the fuzz targets call them.
#include "args/bench_client.hpp"
#include "args/bench_file_io.hpp"
#include "args/bench_udp.hpp"
#include "common/cli.hpp"
#include "common/fs_type.hpp"
#include "common/signals.hpp"
#include "measure/format.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <limits>
#include <set>

namespace {

namespace tools = galay::tools;

TEST(SecondsValidator, RefusesNanInfDenormalAndSubNanosecondValues) {
    EXPECT_TRUE(tools::seconds_problem(std::nan(""), 0, 10));
    EXPECT_TRUE(tools::seconds_problem(INFINITY, 0, 10));
    EXPECT_TRUE(tools::seconds_problem(-INFINITY, 0, 10));
    EXPECT_TRUE(tools::seconds_problem(std::numeric_limits<double>::denorm_min(), 0, 10));
    EXPECT_TRUE(tools::seconds_problem(1e-10, 0, 10)); // 0 ns once converted
    EXPECT_TRUE(tools::seconds_problem(1e-400L, 0, 10));
    EXPECT_TRUE(tools::seconds_problem(11, 0, 10));
    EXPECT_TRUE(tools::seconds_problem(-1, 0, 10));
    EXPECT_FALSE(tools::seconds_problem(0, 0, 10));
    EXPECT_FALSE(tools::seconds_problem(1e-9, 0, 10));
    EXPECT_FALSE(tools::seconds_problem(10, 0, 10));
    EXPECT_NE(tools::seconds_problem(1e-10, 0, 10)->find("below 1 ns"), std::string::npos);
}

TEST(CheckedArithmetic, OverflowIsNullopt) {
    EXPECT_EQ(tools::checked_mul({4096, 1ull << 32, 1ull << 20}), std::nullopt); // 2^64
    EXPECT_EQ(tools::checked_mul({4096, 1ull << 32, 1ull << 19}), 1ull << 63);
    EXPECT_EQ(tools::checked_add({~0ull, 1}), std::nullopt);
    EXPECT_EQ(tools::checked_add({1, 2, 3}), 6u);
    EXPECT_EQ(tools::human_bytes(1536), "1.5 KiB");
    EXPECT_EQ(tools::human_bytes(512ull << 30), "512.0 GiB");
}

// What the tools print: each format exactly as the tools print it.
TEST(Formats, NumbersWithThousandsSeparators) {
    EXPECT_EQ(tools::with_commas(0), "0");
    EXPECT_EQ(tools::with_commas(999), "999");
    EXPECT_EQ(tools::with_commas(1000), "1,000");
    EXPECT_EQ(tools::with_commas(1234567), "1,234,567");
    EXPECT_EQ(tools::with_commas_2dp(34977.264), "34,977.26");
    EXPECT_EQ(tools::with_commas_2dp(999.996), "1,000.00"); // the cents carry into the whole
    EXPECT_EQ(tools::with_commas_2dp(0.5), "0.50");
}

TEST(Formats, BytesInTheToolsMessagesAndInAioBench) {
    EXPECT_EQ(tools::human_bytes(100), "100 bytes");
    EXPECT_EQ(tools::human_bytes(1536), "1.5 KiB");
    EXPECT_EQ(tools::human_bytes(256ull << 20), "256.0 MiB");
    EXPECT_EQ(tools::human_bytes_compact(100), "100 B");
    EXPECT_EQ(tools::human_bytes_compact(1536), "1.5 KiB");
    EXPECT_EQ(tools::human_bytes_compact(256ull << 20), "256 MiB");
    EXPECT_EQ(tools::human_bytes_compact(5ull << 50), "5120 TiB"); // TiB is its largest unit
}

TEST(Formats, FixedGeneralAndRates) {
    EXPECT_EQ(tools::fixed(3.14159, 2), "3.14");
    EXPECT_EQ(tools::fixed(0.00004, 4), "0.0000");
    EXPECT_EQ(tools::general(0.1), "0.1");
    EXPECT_EQ(tools::general(1e7), "1e+07");
    EXPECT_EQ(tools::mib(3 * 1048576.0), 3.0);
    EXPECT_EQ(tools::per_second(10, 2), 5.0);
    EXPECT_EQ(tools::per_second(10, 0), 0.0); // no time passed: no rate, not inf
    EXPECT_EQ(tools::seconds_of(std::chrono::milliseconds(1500)), 1.5);
}

TEST(Formats, TimesInFiveSignificantDigitsAndUtf8Padding) {
    EXPECT_EQ(tools::human_time_ns(1140900), "1.1409 ms");
    EXPECT_EQ(tools::human_time_ns(999), "999.00 ns");
    EXPECT_EQ(tools::human_time_ns(1500), "1.5000 µs");
    EXPECT_EQ(tools::human_time_ns(2.5e9), "2.5000 s");
    EXPECT_EQ(tools::human_time_ns(0), "0 ns");
    EXPECT_EQ(tools::pad_right("µs", 4), "µs  "); // "µ" is two bytes, one character
    EXPECT_EQ(tools::pad_right("abcdef", 3), "abcdef");
}

TEST(StopSignals, TimeoutsDuplicateIsOneRequestAndAnythingElseForcesTheExit) {
    const tools::SignalFacts first{SIGTERM, SI_USER, 100, 1'000'000'000};
    tools::SignalFacts dup = first;
    dup.at_ns += 1'000; // 1 us later, same sender: `timeout` signalling its group
    EXPECT_TRUE(tools::is_duplicate_stop(first, dup));
    tools::SignalFacts other_sender = dup;
    other_sender.pid = 101;
    EXPECT_FALSE(tools::is_duplicate_stop(first, other_sender));
    tools::SignalFacts other_signal = dup;
    other_signal.sig = SIGINT;
    EXPECT_FALSE(tools::is_duplicate_stop(first, other_signal));
    tools::SignalFacts later = dup;
    later.at_ns = first.at_ns + 2'000'000'000;
    EXPECT_FALSE(tools::is_duplicate_stop(first, later));
    // Ctrl-C twice comes from the terminal (SI_KERNEL), however fast: the second one counts.
    const tools::SignalFacts tty{SIGINT, SI_KERNEL, 0, 0};
    tools::SignalFacts tty2 = tty;
    tty2.at_ns = 1000;
    EXPECT_FALSE(tools::is_duplicate_stop(tty, tty2));
}

TEST(ToolParsers, ReturnOptionsOrAnExitCodeWithoutPrinting) {
    auto c = tools::bench_client::parse_args({"-c", "3", "-s", "100", "-d", "0.5"});
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->connections, 3u);
    EXPECT_EQ(c->size, 100u);
    auto help = tools::bench_client::parse_args({"--help"});
    ASSERT_FALSE(help);
    EXPECT_EQ(help.error().code, 0);
    EXPECT_NE(help.error().message.find("--connections"), std::string::npos);
    auto bad = tools::bench_client::parse_args({"-d", "nan"});
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code, 2);

    auto u = tools::bench_udp::parse_args({"server", "-p", "0", "-w", "2"});
    ASSERT_TRUE(u) << u.error().message;
    EXPECT_EQ(u->mode, tools::bench_udp::Mode::server);
    EXPECT_EQ(u->server.workers, 2u);
    auto both = tools::bench_udp::parse_args({"-h", "127.0.0.1", "-s", "300"});
    ASSERT_TRUE(both) << both.error().message;
    EXPECT_EQ(both->server.bind, "127.0.0.1");
    EXPECT_EQ(both->server.buffer, 2048u);
    EXPECT_EQ(both->client.workers, 4u);

    auto f = tools::bench_file_io::parse_args({"-w", "2", "-batch", "8", "-d", "/tmp"});
    ASSERT_TRUE(f) << f.error().message;
    EXPECT_EQ(f->batch, 8u);
    auto wrap = tools::bench_file_io::parse_args(
        {"-w", "4096", "-n", "4294967296", "-b", "1048576"}); // 2^64 bytes of files
    ASSERT_FALSE(wrap);
    EXPECT_EQ(wrap.error().code, 2);
    EXPECT_NE(wrap.error().message.find("2^64"), std::string::npos) << wrap.error().message;
}

TEST(FsTypes, EveryFilesystemHasOneNameAndAnUnknownOneSaysItsNumber) {
    EXPECT_EQ(tools::fs_type_name(0xEF53), "ext4");
    EXPECT_EQ(tools::fs_type_name(TMPFS_MAGIC), "tmpfs");
    EXPECT_EQ(tools::fs_type_name(RAMFS_MAGIC), "ramfs");
    EXPECT_EQ(tools::fs_type_name(0x58465342), "xfs");
    EXPECT_EQ(tools::fs_type_name(0x2011BAB0), "exfat");
    EXPECT_EQ(tools::fs_type_name(0x2FC12FC1), "zfs");
    EXPECT_EQ(tools::fs_type_name(0x1234), "fs type 0x1234");
    std::set<unsigned long> magics;
    std::set<std::string_view> names;
    for (const tools::FsType& t : tools::kFsTypes) {
        EXPECT_TRUE(magics.insert(t.magic).second) << std::hex << t.magic;
        EXPECT_TRUE(names.insert(t.name).second) << t.name;
    }
}

TEST(FsTypes, MagicOfAPathAndOfAnOpenDirectoryAgree) {
    EXPECT_EQ(tools::fs_magic_of("/proc"), static_cast<unsigned long>(PROC_SUPER_MAGIC));
    EXPECT_EQ(tools::fs_magic_of("/no/such/directory"), std::nullopt);
    EXPECT_EQ(tools::fs_magic_of_fd(-1), std::nullopt);
    const int fd = ::open(".", O_RDONLY | O_DIRECTORY);
    ASSERT_GE(fd, 0);
    const auto by_fd = tools::fs_magic_of_fd(fd);
    ::close(fd);
    ASSERT_TRUE(by_fd.has_value());
    EXPECT_EQ(tools::fs_magic_of("."), by_fd);
}

} // namespace
