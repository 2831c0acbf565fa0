// The filesystem a tool's files live on, by statfs magic number: one table for aio_bench and
// bench_file_io, so that both name a filesystem alike in their reports and JSON. Header-only and
// free of galay and CLI11 (aio_bench includes it too).
#pragma once

#include <linux/magic.h>
#include <sys/statfs.h>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace galay::tools {

struct FsType {
    unsigned long magic;
    std::string_view name;
};

// Magic numbers <linux/magic.h> lacks are spelled out (ZFS's is its own, out of tree).
inline constexpr unsigned long kZfsMagic = 0x2FC12FC1;

inline constexpr FsType kFsTypes[] = {
    {EXT4_SUPER_MAGIC, "ext4"}, // ext2 and ext3 share it
    {XFS_SUPER_MAGIC, "xfs"},   {BTRFS_SUPER_MAGIC, "btrfs"},
    {F2FS_SUPER_MAGIC, "f2fs"}, {EXFAT_SUPER_MAGIC, "exfat"},
    {kZfsMagic, "zfs"},         {TMPFS_MAGIC, "tmpfs"},
    {RAMFS_MAGIC, "ramfs"},     {OVERLAYFS_SUPER_MAGIC, "overlayfs"},
    {NFS_SUPER_MAGIC, "nfs"},   {FUSE_SUPER_MAGIC, "fuse"},
};

/// "ext4" for a known magic number, else "fs type 0x..." (the number, so a report still says
/// which filesystem it was).
inline std::string fs_type_name(unsigned long magic) {
    for (const FsType& t : kFsTypes)
        if (t.magic == magic) return std::string(t.name);
    char buf[40];
    std::snprintf(buf, sizeof buf, "fs type 0x%lx", magic);
    return buf;
}

/// The statfs magic number of the filesystem holding `path`, or nullopt if statfs fails.
inline std::optional<unsigned long> fs_magic_of(const char* path) {
    struct statfs s {};
    if (::statfs(path, &s) != 0) return std::nullopt;
    return static_cast<unsigned long>(s.f_type);
}

/// The same for an open file descriptor.
inline std::optional<unsigned long> fs_magic_of_fd(int fd) {
    struct statfs s {};
    if (::fstatfs(fd, &s) != 0) return std::nullopt;
    return static_cast<unsigned long>(s.f_type);
}

} // namespace galay::tools
