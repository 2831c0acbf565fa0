// Skipping a test of a Linux-only feature in a build without it (the POSIX profile,
// GALAY_POSIX_ONLY, and macOS/FreeBSD): the skip names the feature, so that make test-posix's
// count of skips says what it did not test. The switches are galay/detail/platform.hpp's.
#pragma once

#include <galay/detail/platform.hpp>
#include <gtest/gtest.h>

/// In a test body (or a fixture's SetUp): skip unless `have` (a GALAY_HAVE_* switch), naming
/// `feature`, e.g. GALAY_SKIP_UNLESS(GALAY_HAVE_SPLICE, "splice").
#define GALAY_SKIP_UNLESS(have, feature)                                                           \
    do {                                                                                           \
        if (!(have)) GTEST_SKIP() << "SKIP: " feature ": Linux-only, not in the POSIX profile";    \
    } while (0)
