// The filesystem namespace: each public operation is a body awaited by fs::detail::FsOp. The
// single-call ones are one op (NamespaceOp); a driver that answers EOPNOTSUPP (an io_uring
// without that opcode) gets the same system call run on the blocking pool instead.
#include "galay/fs/ops.hpp"

#include "driver/common/faults.hpp"
#include "driver/fs_ops.hpp"
#include "galay/blocking.hpp"
#include "platform/fd_calls.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#if defined(__linux__)
#include <sys/sysmacros.h> // major, minor
#endif
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>

namespace galay::fs::detail {

namespace {

using galay::detail::IoOp;
using galay::detail::OpCode;

/// One namespace op. The paths and the statx buffer belong to the awaiting body's frame.
class [[nodiscard]] NamespaceOp : public galay::detail::IoAwaitable<NamespaceOp> {
public:
    NamespaceOp(OpCode code, const char* path, const void* second, int flags,
                unsigned len) noexcept {
        op_.code = code;
        op_.fd = AT_FDCWD;
        op_.buf = const_cast<char*>(path);
        op_.aux = reinterpret_cast<std::uintptr_t>(second);
        op_.msg_flags = flags;
        op_.len = len;
    }
    std::int64_t result() const noexcept { return op_.result; }
    const IoOp& op() const noexcept { return op_; }
};

/// Run `op` (deadline `dl`); on EOPNOTSUPP from the driver, its system call on the pool.
Task<std::int64_t> run(NamespaceOp op, std::int64_t dl) {
    const IoOp copy = op.op();
    std::int64_t r = co_await io::detail::with_deadline(std::move(op), dl);
    if (r != -EOPNOTSUPP) co_return r;
    // On the pool, a fault plan refuses it as the drivers refuse their own ops.
    namespace faults = galay::detail::faults;
    if (faults::on() && faults::hit(faults::Kind::fail, copy.code))
        co_return -faults::refusal_error();
    auto pooled = co_await io::detail::with_deadline(spawn_blocking([copy]() -> std::int64_t {
                                                         const long v =
                                                             galay::detail::namespace_syscall(copy);
                                                         return v < 0 ? -errno : v;
                                                     }),
                                                     dl);
    if (!pooled) co_return -pooled.error().value();
    co_return *pooled;
}

Result<void> as_void(std::int64_t r) {
    if (r < 0) return fail(static_cast<int>(-r));
    return {};
}

int open_flags(const OpenOptions& o) {
    int flags = O_CLOEXEC | (o.read && o.write ? O_RDWR : o.write ? O_WRONLY : O_RDONLY);
    if (o.create) flags |= O_CREAT;
    if (o.truncate) flags |= O_TRUNC;
    if (o.append) flags |= O_APPEND;
    if (o.direct) flags |= platform::kODirect;
    return flags;
}

/// openat through the driver; `direct`: a `direct` file (whose open flags were open_flags's).
Task<Result<File>> open_raw(const std::string& path, int flags, unsigned mode, std::int64_t dl,
                            bool direct = false) {
    auto r = co_await run(NamespaceOp(OpCode::openat, path.c_str(), nullptr, flags, mode), dl);
    if (r < 0) co_return fail(static_cast<int>(-r));
    const int fd = static_cast<int>(r);
    if (!direct) co_return File(fd, File::Buffered{});
    if (platform::set_direct(fd) < 0) {
        const int err = errno;
        ::close(fd);
        co_return fail(err);
    }
    co_return File(fd);
}

std::string parent_of(const std::string& path) {
    auto p = std::filesystem::path(path).parent_path();
    return p.empty() ? std::string(".") : p.string();
}

} // namespace

Task<Result<File>> open_body(FsArgs a, std::int64_t dl) {
    const OpenOptions& o = a.open;
    if (!o.read && !o.write) co_return fail(EINVAL);
    if (o.truncate && !o.write) co_return fail(EINVAL);
    if (o.direct && !GALAY_HAVE_DIRECT_IO) co_return fail(errc::not_supported);
    auto f = co_await open_raw(a.path, open_flags(o), o.mode, dl, o.direct);
    if (!f && o.direct && f.error() == std::errc::invalid_argument) {
        // As File::open: find out whether O_DIRECT is what the filesystem refused.
        auto probe = co_await open_raw(
            a.path, open_flags(o) & ~(platform::kODirect | O_CREAT | O_TRUNC), 0, dl);
        if (probe) co_return fail(errc::direct_io_unsupported);
    }
    co_return f;
}

Task<Result<Metadata>> stat_body(FsArgs a, std::int64_t dl) {
#if !GALAY_LINUX_CALLS // fstatat (driver/fs_ops.hpp)
    struct stat st {};
    const int at = a.flags != 0 ? AT_SYMLINK_NOFOLLOW : 0;
    auto rs = co_await run(NamespaceOp(OpCode::statx, a.path.c_str(), &st, at, 0), dl);
    if (rs < 0) co_return fail(static_cast<int>(-rs));
    Metadata md;
    md.size = static_cast<std::uint64_t>(st.st_size);
    md.mode = st.st_mode;
    md.nlink = static_cast<std::uint32_t>(st.st_nlink);
    md.uid = st.st_uid;
    md.gid = st.st_gid;
    md.ino = st.st_ino;
    // major()/minor() are unsigned on Linux, int on FreeBSD and macOS.
    md.dev = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(major(st.st_dev))) << 32) |
             static_cast<std::uint32_t>(minor(st.st_dev));
#if defined(__APPLE__)
    md.mtime_ns = st.st_mtimespec.tv_sec * 1000000000LL + st.st_mtimespec.tv_nsec;
#else
    md.mtime_ns = st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
#endif
    co_return md;
#else
    struct statx sx {};
    const int flags = a.flags != 0 ? AT_SYMLINK_NOFOLLOW : 0;
    auto r =
        co_await run(NamespaceOp(OpCode::statx, a.path.c_str(), &sx, flags, STATX_BASIC_STATS), dl);
    if (r < 0) co_return fail(static_cast<int>(-r));
    Metadata m;
    m.size = sx.stx_size;
    m.mode = sx.stx_mode;
    m.nlink = sx.stx_nlink;
    m.uid = sx.stx_uid;
    m.gid = sx.stx_gid;
    m.ino = sx.stx_ino;
    m.dev = (std::uint64_t{sx.stx_dev_major} << 32) | sx.stx_dev_minor;
    m.mtime_ns = sx.stx_mtime.tv_sec * 1000000000LL + sx.stx_mtime.tv_nsec;
    co_return m;
#endif
}

Task<Result<void>> namespace_body(FsArgs a, std::int64_t dl) {
    const char* p = a.path.c_str();
    const char* p2 = a.path2.c_str();
    switch (static_cast<NamespaceCall>(a.number)) {
    case NamespaceCall::rename: {
        const auto mode = static_cast<RenameMode>(a.flags);
#if !GALAY_LINUX_CALLS // renameat2's modes are Linux's
        if (mode != RenameMode::replace) co_return fail(errc::not_supported);
        const int flags = 0;
#else
        const int flags = mode == RenameMode::no_replace ? RENAME_NOREPLACE
                          : mode == RenameMode::exchange ? RENAME_EXCHANGE
                                                         : 0;
#endif
        co_return as_void(co_await run(NamespaceOp(OpCode::renameat, p, p2, flags, 0), dl));
    }
    case NamespaceCall::unlink:
        co_return as_void(co_await run(NamespaceOp(OpCode::unlinkat, p, nullptr, 0, 0), dl));
    case NamespaceCall::rmdir:
        co_return as_void(
            co_await run(NamespaceOp(OpCode::unlinkat, p, nullptr, AT_REMOVEDIR, 0), dl));
    case NamespaceCall::mkdir:
        co_return as_void(co_await run(NamespaceOp(OpCode::mkdirat, p, nullptr, 0, a.mode), dl));
    case NamespaceCall::link:
        co_return as_void(co_await run(NamespaceOp(OpCode::linkat, p, p2, 0, 0), dl));
    case NamespaceCall::symlink:
        co_return as_void(co_await run(NamespaceOp(OpCode::symlinkat, p, p2, 0, 0), dl));
    }
    co_return fail(EINVAL);
}

Task<Result<std::vector<DirEntry>>> read_dir_body(FsArgs a, std::int64_t dl) {
    auto r =
        co_await io::detail::with_deadline(spawn_blocking([&a]() -> Result<std::vector<DirEntry>> {
                                               DIR* d =
                                                   ::opendir(a.path.c_str()); // O_CLOEXEC (glibc)
                                               if (d == nullptr) return fail(errno);
                                               std::vector<DirEntry> out;
                                               errno = 0;
                                               while (dirent* e = ::readdir(d)) {
                                                   const std::string_view n = e->d_name;
                                                   if (n != "." && n != "..")
                                                       out.push_back({std::string(n), e->d_type});
                                               }
                                               const int err = errno;
                                               ::closedir(d);
                                               if (err != 0) return fail(err);
                                               return out;
                                           }),
                                           dl);
    co_return r;
}

Task<Result<void>> sync_dir_body(FsArgs a, std::int64_t dl) {
    auto d = co_await open_raw(a.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, dl);
    if (!d) co_return std::unexpected(d.error());
    auto s = co_await io::detail::with_deadline(d->fsync(), dl);
    auto c = co_await d->close();
    if (!s) co_return s;
    co_return c;
}

Task<Result<std::string>> read_file_body(FsArgs a, std::int64_t dl) {
    auto f = co_await open_raw(a.path, O_RDONLY | O_CLOEXEC, 0, dl);
    if (!f) co_return std::unexpected(f.error());
    const std::size_t limit = a.number;
    std::string out;
    for (;;) {
        // One byte past the limit tells a file of exactly `limit` bytes from a longer one.
        const std::size_t room = limit + 1 - out.size();
        const std::size_t chunk = room < 65536 ? room : 65536;
        const std::size_t at = out.size();
        out.resize(at + chunk);
        auto n = co_await io::detail::with_deadline(
            f->read_at(std::span(out.data() + at, chunk), at), dl);
        if (!n) co_return std::unexpected(n.error());
        out.resize(at + *n);
        if (out.size() > limit) co_return fail(EFBIG);
        if (*n == 0) co_return out;
    }
}

Task<Result<void>> write_atomic_body(FsArgs a, std::int64_t dl) {
    static std::atomic<std::uint64_t> counter{0};
    const std::string dir = parent_of(a.path);
    const std::string name = std::filesystem::path(a.path).filename().string();
    const std::string temp = dir + "/." + name + ".tmp." + std::to_string(::getpid()) + "." +
                             std::to_string(counter.fetch_add(1));
    auto f = co_await open_raw(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, a.mode, dl);
    if (!f) co_return std::unexpected(f.error());
    // Every step until the rename: on failure the temp file goes, the old content stays.
    // (Plain statements around each co_await: g++ 12 mishandles temporaries across them.)
    std::error_code failed;
    Result<std::size_t> written =
        co_await io::detail::with_deadline(f->write_all_at(a.path2, 0), dl);
    if (!written) failed = written.error();
    if (!failed) {
        Result<void> synced = co_await io::detail::with_deadline(f->fdatasync(), dl);
        if (!synced) failed = synced.error();
    }
    Result<void> closed = co_await f->close();
    if (!closed && !failed) failed = closed.error();
    if (!failed) {
        NamespaceOp rename_op(OpCode::renameat, temp.c_str(), a.path.c_str(), 0, 0);
        const std::int64_t renamed = co_await run(std::move(rename_op), dl);
        if (renamed < 0) failed = errno_code(static_cast<int>(-renamed));
    }
    if (failed) {
        // Not bounded by the deadline: a temp file must not outlive a clean error.
        for (int attempt = 0; attempt < 3; ++attempt) {
            NamespaceOp unlink_op(OpCode::unlinkat, temp.c_str(), nullptr, 0, 0);
            const std::int64_t removed = co_await run(std::move(unlink_op), 0);
            if (removed >= 0 || removed == -ENOENT) break;
        }
        co_return std::unexpected(failed);
    }
    FsArgs dir_args;
    dir_args.path = dir;
    Result<void> dir_synced = co_await sync_dir_body(std::move(dir_args), dl);
    co_return dir_synced;
}

Task<Result<void>> truncate_body(FsArgs a, std::int64_t dl) {
    const int fd = a.file->fd();
    const auto len = static_cast<off_t>(a.number);
    auto r = co_await io::detail::with_deadline(spawn_blocking([fd, len]() -> Result<void> {
                                                    if (::ftruncate(fd, len) < 0)
                                                        return fail(errno);
                                                    return {};
                                                }),
                                                dl);
    co_return r;
}

} // namespace galay::fs::detail
