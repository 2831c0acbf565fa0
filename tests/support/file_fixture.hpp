// The fixture of the file tests (file_test.cpp, fs_batch_test.cpp): a scratch directory, an
// O_DIRECT one where the machine has one, and dropping a file's cached pages.
#pragma once

#include "support/backends.hpp"
#include "support/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace galay::test {

/// Drop the file's clean pages so the next read has to go to the device.
inline void drop_cache(const fs::File& f) {
    ::fdatasync(f.fd());
    ::posix_fadvise(f.fd(), 0, 0, POSIX_FADV_DONTNEED);
}

class FileFixture : public BackendTest {
protected:
    TempDir dir_;

    /// A scratch directory on a filesystem that accepts O_DIRECT, or skip the test.
    std::filesystem::path direct_dir() {
        std::string tried;
        auto d = direct_io_dir(&tried);
        if (!d && !GALAY_HAVE_DIRECT_IO) {
            skip_reason_ = "SKIP: " + tried;
            return {};
        }
        if (!d) {
            skip_reason_ = "SKIP: no directory accepts O_DIRECT here; tried " + tried +
                           "(set GALAY_TEST_DIRECT_DIR)";
            return {};
        }
        direct_tmp_.emplace(*d);
        return direct_tmp_->path();
    }
    std::optional<TempDir> direct_tmp_;
    std::string skip_reason_;

    /// The buffered directory and, where O_DIRECT works, a direct one (else a line says why).
    std::vector<std::pair<std::filesystem::path, bool>> places() {
        std::vector<std::pair<std::filesystem::path, bool>> v{{dir_.path(), false}};
        if (auto d = direct_dir(); !d.empty())
            v.emplace_back(d, true);
        else
            std::printf("%s\n", skip_reason_.c_str());
        return v;
    }
};

} // namespace galay::test

#define REQUIRE_DIRECT_DIR(var)                                                                    \
    const std::filesystem::path var = direct_dir();                                                \
    if (var.empty()) GTEST_SKIP() << skip_reason_
