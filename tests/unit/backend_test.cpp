#include "support/backends.hpp"

#include <cstdlib>

using namespace galay;

TEST(BackendTest, ParsesBackendNames) {
    EXPECT_EQ(parse_backend("epoll"), Backend::epoll);
    EXPECT_EQ(parse_backend("io_uring"), Backend::io_uring);
    EXPECT_EQ(parse_backend("auto"), Backend::automatic);
    EXPECT_FALSE(parse_backend("kqueue-on-linux"));
}

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
