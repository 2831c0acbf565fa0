// Scratch directories for file tests, finding one where O_DIRECT works, and opening test files.
#pragma once

#include <galay/detail/platform.hpp>
#include <galay/galay.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>

namespace galay::test {

/// A fresh directory under `base` (default: $TMPDIR or /tmp), removed with its contents.
class TempDir {
public:
    explicit TempDir(std::filesystem::path base = default_base()) {
        std::string tmpl = (base / "galay-test-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr)
            throw std::system_error(errno, std::system_category(), "mkdtemp in " + base.string());
        path_ = tmpl;
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::filesystem::path& path() const noexcept { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

    static std::filesystem::path default_base() {
        const char* t = std::getenv("TMPDIR");
        return t != nullptr && *t ? t : "/tmp";
    }

private:
    std::filesystem::path path_;
};

/// The first of $GALAY_TEST_DIRECT_DIR, /var/tmp, /tmp, the working directory where a file can
/// be created with O_DIRECT. `tried` lists what was tried, for a SKIP message.
/// None in a build without direct files (galay/detail/platform.hpp).
inline std::optional<std::filesystem::path> direct_io_dir(std::string* tried = nullptr) {
#if !GALAY_HAVE_DIRECT_IO
    if (tried != nullptr)
        *tried = "O_DIRECT: not in the POSIX profile (it has no F_NOCACHE to test)";
    return std::nullopt;
#else
    std::string candidates[4];
    int n = 0;
    if (const char* env = std::getenv("GALAY_TEST_DIRECT_DIR"); env != nullptr && *env)
        candidates[n++] = env;
    candidates[n++] = "/var/tmp";
    candidates[n++] = "/tmp";
    candidates[n++] = std::filesystem::current_path().string();
    for (int i = 0; i < n; ++i) {
        std::string probe = candidates[i] + "/galay-dio-probe-XXXXXX";
        int fd = ::mkstemp(probe.data());
        if (fd < 0) {
            if (tried != nullptr) *tried += candidates[i] + " (cannot create files) ";
            continue;
        }
        ::close(fd);
#if defined(__APPLE__)
        fd = ::open(probe.c_str(), O_RDWR | O_CLOEXEC); // F_NOCACHE: every filesystem takes it
#else
        fd = ::open(probe.c_str(), O_RDWR | O_DIRECT | O_CLOEXEC);
#endif
        const int err = errno;
        ::unlink(probe.c_str());
        if (fd >= 0) {
            ::close(fd);
            return candidates[i];
        }
        if (tried != nullptr) *tried += candidates[i] + " (O_DIRECT: " + std::strerror(err) + ") ";
    }
    return std::nullopt;
#endif
}

/// Read-write, created and truncated; and the same with O_DIRECT.
inline constexpr fs::OpenOptions kCreateRw{
    .read = true, .write = true, .create = true, .truncate = true};
inline constexpr fs::OpenOptions kCreateRwDirect{
    .read = true, .write = true, .create = true, .truncate = true, .direct = true};

/// Open `p` or throw with the library's message (which names the path).
inline fs::File open_or_throw(const std::filesystem::path& p, const fs::OpenOptions& o) {
    auto f = fs::File::open(p, o);
    if (!f) throw Error(f.error(), fs::describe_error(p, f.error()));
    return std::move(*f);
}

} // namespace galay::test
