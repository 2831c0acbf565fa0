#include "target.hpp"

#include "verify.hpp"

#include "common/fs_type.hpp"
#include "measure/format.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <utility>

namespace aiob {

Target& Target::operator=(Target&& o) noexcept {
    if (this != &o) {
        this->~Target();
        path = std::move(o.path);
        fd = std::exchange(o.fd, -1);
        created = std::exchange(o.created, false);
        keep = o.keep;
        block_device = o.block_device;
        file_size = o.file_size;
        size = o.size;
        dio_align = o.dio_align;
        device = std::move(o.device);
        fs_type = std::move(o.fs_type);
        fill_seconds = o.fill_seconds;
    }
    return *this;
}

Target::~Target() {
    if (fd >= 0) ::close(fd);
    fd = -1;
    if (created && !keep) ::unlink(path.c_str());
    created = false;
}

namespace {

std::string errstr(int e) {
    return std::strerror(e);
}

// "/dev/vda" for a block device number, from sysfs; "" if unknown.
std::string dev_name(dev_t dev) {
    std::ifstream in("/sys/dev/block/" + std::to_string(major(dev)) + ":" +
                     std::to_string(minor(dev)) + "/uevent");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("DEVNAME=", 0) == 0) return "/dev/" + line.substr(8);
    return "";
}

// O_DIRECT offset alignment of an open file: statx(STATX_DIOALIGN) (Linux 6.1+), else the logical
// block size of the device from sysfs, else 0.
uint32_t dio_alignment(int fd, dev_t dev) {
    struct {
        uint32_t stx_mask, stx_blksize;
        uint64_t stx_attributes;
        uint32_t stx_nlink, stx_uid, stx_gid;
        uint16_t stx_mode, pad0;
        uint64_t stx_ino, stx_size, stx_blocks, stx_attributes_mask;
        uint64_t ts[8]; // atime, btime, ctime, mtime
        uint32_t rdev_major, rdev_minor, dev_major, dev_minor;
        uint64_t mnt_id;
        uint32_t dio_mem_align, dio_offset_align;
        uint64_t spare[12];
    } sx{};
    static_assert(offsetof(decltype(sx), dio_offset_align) == 0x9c);
    constexpr unsigned kStatxDioAlign = 0x2000;
    if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, kStatxDioAlign, &sx) == 0 &&
        (sx.stx_mask & kStatxDioAlign) && sx.dio_offset_align)
        return sx.dio_offset_align;
    std::ifstream in("/sys/dev/block/" + std::to_string(major(dev)) + ":" +
                     std::to_string(minor(dev)) + "/queue/logical_block_size");
    uint32_t v = 0;
    if (in >> v) return v;
    return 0;
}

std::string parent_dir(const std::string& path) {
    auto pos = path.find_last_of('/');
    if (pos == std::string::npos) return ".";
    if (pos == 0) return "/";
    return path.substr(0, pos);
}

// Fills [0, size) with the verify pattern (generation 0) through buffered 1 MiB writes, then
// fdatasync + drop the pages, so the benchmark's reads go to the device.
std::expected<void, std::string> fill(int fd, const std::string& path, uint64_t size,
                                      uint64_t seed) {
    constexpr uint64_t kChunk = 1 << 20;
    std::unique_ptr<unsigned char[]> buf(new unsigned char[kChunk]);
    for (uint64_t off = 0; off < size;) {
        uint64_t n = std::min(kChunk, size - off);
        n -= n % kSectorSize;
        if (n == 0) break;
        stamp_block(buf.get(), static_cast<uint32_t>(n), off, 0, seed);
        ssize_t w = ::pwrite(fd, buf.get(), n, static_cast<off_t>(off));
        if (w < 0) {
            if (errno == EINTR) continue;
            return std::unexpected("filling " + path + " at offset " + std::to_string(off) + ": " +
                                   errstr(errno));
        }
        off += static_cast<uint64_t>(w);
    }
    if (::fdatasync(fd) != 0) return std::unexpected("fdatasync " + path + ": " + errstr(errno));
    return {};
}

} // namespace

std::expected<Target, std::string> open_target(const Config& cfg, uint64_t seed) {
    Target t;
    t.path = cfg.file;
    t.keep = cfg.keep;
    const bool writes = pattern_writes(cfg.pattern);
    const bool need_fill = pattern_reads(cfg.pattern) || cfg.verify;
    const std::string& p = cfg.file;

    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
        if (errno != ENOENT) return std::unexpected("-f " + p + ": " + errstr(errno));
        // Create it. The directory must exist: we never create directories.
        std::string dir = parent_dir(p);
        struct stat dst {};
        if (::stat(dir.c_str(), &dst) != 0)
            return std::unexpected("-f " + p + ": directory " + dir + " does not exist (" +
                                   errstr(errno) + ")");
        if (!S_ISDIR(dst.st_mode))
            return std::unexpected("-f " + p + ": " + dir + " is not a directory");
        const auto magic = galay::tools::fs_magic_of(dir.c_str());
        if (magic) t.fs_type = galay::tools::fs_type_name(*magic);
        if (cfg.direct && magic == TMPFS_MAGIC)
            return std::unexpected("--direct: " + dir +
                                   " is on tmpfs, which has no direct I/O (it accepts O_DIRECT "
                                   "but serves it from the page cache); use a disk filesystem");
        t.device = dev_name(dst.st_dev);
        t.size = cfg.size ? cfg.size : kDefaultCreateSize;
        t.size -= t.size % cfg.block_size;
        if (t.size < cfg.block_size)
            return std::unexpected("--size: too small for block size " +
                                   std::to_string(cfg.block_size));
        int fd = ::open(p.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0644);
        if (fd < 0) return std::unexpected("-f " + p + ": cannot create: " + errstr(errno));
        t.created = true; // from here on the destructor removes it
        t.fd = fd;
        t.file_size = t.size;
        if (::fallocate(fd, 0, 0, static_cast<off_t>(t.size)) != 0) {
            int e = errno;
            if (e == ENOSPC)
                return std::unexpected("-f " + p + ": not enough space for --size " +
                                       galay::tools::human_bytes_compact(t.size));
            if (::ftruncate(fd, static_cast<off_t>(t.size)) != 0)
                return std::unexpected("-f " + p + ": cannot size to " +
                                       galay::tools::human_bytes_compact(t.size) + ": " +
                                       errstr(errno));
        }
        if (need_fill) {
            auto t0 = std::chrono::steady_clock::now();
            if (auto r = fill(fd, p, t.size, seed); !r) return std::unexpected(r.error());
            t.fill_seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        ::close(std::exchange(t.fd, -1));
        if (::stat(p.c_str(), &st) != 0) return std::unexpected("-f " + p + ": " + errstr(errno));
    } else {
        if (S_ISDIR(st.st_mode)) return std::unexpected("-f " + p + ": is a directory");
        if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
            return std::unexpected("-f " + p + ": not a regular file or block device");
        t.block_device = S_ISBLK(st.st_mode);
        if (writes && !cfg.allow_overwrite)
            return std::unexpected(
                "-f " + p + ": refusing to write to an existing " +
                (t.block_device ? std::string("block device")
                                : "file (" + std::to_string(st.st_size) + " bytes)") +
                " with -p " + std::string(to_string(cfg.pattern)) +
                "; pass --allow-overwrite to destroy its data, or use a new path");
    }

    int flags = O_CLOEXEC | (writes ? O_RDWR : O_RDONLY) | (cfg.direct ? O_DIRECT : 0);
    t.fd = ::open(p.c_str(), flags);
    if (t.fd < 0) {
        int e = errno;
        if (e == EINVAL && cfg.direct)
            return std::unexpected("--direct: the filesystem holding " + p +
                                   " does not support O_DIRECT");
        return std::unexpected("-f " + p + ": cannot open " +
                               (writes ? "read-write" : "read-only") + ": " + errstr(e));
    }
    if (t.block_device) {
        uint64_t bytes = 0;
        if (::ioctl(t.fd, BLKGETSIZE64, &bytes) != 0)
            return std::unexpected("-f " + p + ": BLKGETSIZE64: " + errstr(errno));
        t.file_size = bytes;
        int lbs = 0;
        if (::ioctl(t.fd, BLKSSZGET, &lbs) == 0 && lbs > 0)
            t.dio_align = static_cast<uint32_t>(lbs);
        t.device = dev_name(st.st_rdev);
        if (t.device.empty()) t.device = p;
        t.fs_type = "block device";
    } else {
        t.file_size = static_cast<uint64_t>(st.st_size);
        if (const auto magic = galay::tools::fs_magic_of_fd(t.fd)) {
            t.fs_type = galay::tools::fs_type_name(*magic);
            if (cfg.direct && *magic == TMPFS_MAGIC)
                return std::unexpected("--direct: " + p +
                                       " is on tmpfs, which has no direct I/O (it accepts O_DIRECT "
                                       "but serves it from the page cache); use a disk filesystem");
        }
        if (t.device.empty()) t.device = dev_name(st.st_dev);
        if (cfg.direct) t.dio_align = dio_alignment(t.fd, st.st_dev);
    }
    if (t.device.empty()) t.device = "(unknown device)";

    if (!t.created) {
        if (cfg.size > t.file_size)
            return std::unexpected("-f " + p + ": " + std::to_string(t.file_size) +
                                   " bytes, smaller than --size " + std::to_string(cfg.size));
        t.size = cfg.size ? cfg.size : t.file_size;
        t.size -= t.size % cfg.block_size;
        if (t.size < cfg.block_size)
            return std::unexpected("-f " + p + ": " + std::to_string(t.file_size) +
                                   " bytes, too small for block size " +
                                   std::to_string(cfg.block_size));
    }
    if (cfg.direct && t.dio_align > 1 && cfg.block_size % t.dio_align != 0)
        return std::unexpected("-b/--block-size: " + std::to_string(cfg.block_size) +
                               " is not a multiple of " + t.device + "'s O_DIRECT alignment " +
                               std::to_string(t.dio_align) + " (logical block size)");
    // Like fio's invalidate=1: start with none of the range in the page cache.
    ::posix_fadvise(t.fd, 0, static_cast<off_t>(t.size), POSIX_FADV_DONTNEED);
    return t;
}

} // namespace aiob
