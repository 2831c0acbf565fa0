#include "support/backends.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

using namespace galay;

TEST(BackendTest, ParsesBackendNames) {
    EXPECT_EQ(parse_backend("epoll"), Backend::epoll);
    EXPECT_EQ(parse_backend("io_uring"), Backend::io_uring);
    EXPECT_EQ(parse_backend("auto"), Backend::automatic);
    EXPECT_EQ(parse_backend("kqueue"), Backend::kqueue);
    EXPECT_STREQ(backend_name(Backend::kqueue), "kqueue");
    EXPECT_FALSE(parse_backend("kqueue-on-linux"));
}

#if defined(__linux__)
// kqueue is macOS and FreeBSD's: on Linux the value exists (code that names it compiles
// everywhere), asking for it is a clear error, and automatic never picks it.
TEST(BackendTest, KqueueOnLinuxIsAClearError) {
    const std::vector<Backend> built(built_backends().begin(), built_backends().end());
    EXPECT_EQ(std::count(built.begin(), built.end(), Backend::kqueue), 0);
    ::testing::internal::CaptureStderr();
    Result<Backend> b = resolve_backend(Backend::kqueue);
    std::string err = ::testing::internal::GetCapturedStderr();
    ASSERT_FALSE(b.has_value());
    EXPECT_EQ(b.error(), make_error_code(errc::backend_unavailable));
    EXPECT_NE(err.find("kqueue was requested but cannot be used: kqueue is not on this system "
                       "(kqueue is macOS and FreeBSD's)"),
              std::string::npos)
        << err;
    try {
        Scheduler s({.backend = Backend::kqueue});
        ADD_FAILURE() << "a scheduler was created on kqueue on Linux";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), make_error_code(errc::backend_unavailable));
    }
}
#endif

TEST(BackendTest, ForcedEpollIsEpoll) {
    Scheduler s({.backend = Backend::epoll});
    EXPECT_EQ(s.backend(), Backend::epoll);
    EXPECT_STREQ(s.backend_name(), "epoll");
}

TEST(BackendTest, GalayBackendEnvironmentForcesTheChoice) {
    ::setenv("GALAY_BACKEND", "epoll", 1);
    Scheduler s({.backend = Backend::automatic});
    ::unsetenv("GALAY_BACKEND");
    EXPECT_EQ(s.backend(), Backend::epoll);
}

TEST(BackendTest, AutoPicksIoUringWhenTheKernelAllowsIt) {
    if (!probe_io_uring().usable) GTEST_SKIP() << "SKIP: " << probe_io_uring().reason;
    Scheduler s({.backend = Backend::automatic});
    EXPECT_EQ(s.backend(), Backend::io_uring);
}

// The registry lists what this build contains, in the order Backend::automatic tries them.
TEST(BackendTest, BuiltBackendsAreInAutomaticOrder) {
    std::vector<Backend> built(built_backends().begin(), built_backends().end());
#if GALAY_TEST_WITH_URING
    EXPECT_EQ(built, (std::vector<Backend>{Backend::io_uring, Backend::epoll}));
#else
    EXPECT_EQ(built, (std::vector<Backend>{Backend::epoll}));
#endif
}

TEST(BackendTest, AutoPicksTheFirstBuiltBackendTheKernelAllows) {
    ::unsetenv("GALAY_BACKEND");
    Result<Backend> b = resolve_backend(Backend::automatic);
    ASSERT_TRUE(b.has_value()) << b.error().message();
    EXPECT_EQ(*b, probe_io_uring().usable ? Backend::io_uring : Backend::epoll);
    Scheduler s({.backend = Backend::automatic});
    EXPECT_EQ(s.backend(), *b);
}

#if !GALAY_TEST_WITH_URING
// Built with GALAY_WITH_URING=OFF: io_uring is not in the registry, and asking for it is a clear
// error that names the option, never a crash or a silent epoll.
TEST(BackendTest, IoUringLeftOutOfTheBuildIsAClearError) {
    EXPECT_FALSE(probe_io_uring().usable);
    EXPECT_EQ(probe_io_uring().error, make_error_code(errc::backend_unavailable));
    EXPECT_EQ(probe_io_uring().reason, "galay was built without io_uring (GALAY_WITH_URING=OFF)");
    ::testing::internal::CaptureStderr();
    try {
        Scheduler s({.backend = Backend::io_uring});
        ADD_FAILURE() << "a scheduler was created on an io_uring this build does not contain";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), make_error_code(errc::backend_unavailable));
    }
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("io_uring was requested but cannot be used: galay was built without "
                       "io_uring (GALAY_WITH_URING=OFF)"),
              std::string::npos)
        << err;
}

TEST(BackendTest, GalayBackendIoUringLeftOutOfTheBuildIsAClearError) {
    ::setenv("GALAY_BACKEND", "io_uring", 1);
    ::testing::internal::CaptureStderr();
    Result<Backend> b = resolve_backend(Backend::automatic);
    std::string err = ::testing::internal::GetCapturedStderr();
    ::unsetenv("GALAY_BACKEND");
    ASSERT_FALSE(b.has_value());
    EXPECT_EQ(b.error(), make_error_code(errc::backend_unavailable));
    EXPECT_NE(err.find("GALAY_WITH_URING=OFF"), std::string::npos) << err;
}

TEST(BackendTest, AutoWithoutIoUringInTheBuildIsEpollWithoutAFallbackMessage) {
    ::unsetenv("GALAY_BACKEND");
    ::testing::internal::CaptureStderr();
    Scheduler s({.backend = Backend::automatic});
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(s.backend(), Backend::epoll);
    EXPECT_EQ(err.find("falling back"), std::string::npos) << err; // nothing to fall back from
}
#endif
