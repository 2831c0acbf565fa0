// galay/fs/ops.hpp: the filesystem namespace, asynchronously: open, stat, rename, remove,
// directories, links, and the helpers that are easy to get wrong (read_file with a limit,
// write_file_atomic).
//
//     galay::Task<void> save(std::string path, std::string state) {
//         auto ok = co_await galay::fs::write_file_atomic(path, state).timeout(5s);
//         if (!ok) co_return;                  // the old content is intact, no temp file left
//         auto back = co_await galay::fs::read_file(path, 1 << 20);   // Result<std::string>
//         auto meta = co_await galay::fs::stat(path);                 // Result<fs::Metadata>
//         if (meta) { /* meta->size, meta->is_file(), meta->mtime_ns */ }
//         (void)back;
//     }
//
// On io_uring each operation is one SQE (IORING_OP_OPENAT, STATX, RENAMEAT, UNLINKAT, MKDIRAT,
// LINKAT, SYMLINKAT) where the kernel has the opcode (probed once each); otherwise, and on epoll,
// it runs on the blocking pool. read_dir always uses the pool (io_uring has no getdents). Every
// operation takes `.timeout(d)` / `.deadline(t)` and cancellation; one that has started in the
// kernel or on a pool thread finishes first (a rename is then done or not done, never half).
#pragma once

#include "galay/detail/fs_op.hpp"
#include "galay/fs/file.hpp"
#include "galay/io/stream.hpp"
#include "galay/task.hpp"

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace galay::fs {

/// What `stat` knows about a file (from statx).
struct Metadata {
    std::uint64_t size = 0;    ///< bytes
    std::uint32_t mode = 0;    ///< type and permission bits (st_mode)
    std::uint32_t nlink = 0;   ///< hard links
    std::uint32_t uid = 0;     ///< owner
    std::uint32_t gid = 0;     ///< group
    std::uint64_t ino = 0;     ///< inode number
    std::uint64_t dev = 0;     ///< device (major << 32 | minor)
    std::int64_t mtime_ns = 0; ///< last modification, ns since the epoch
    /// A regular file.
    bool is_file() const noexcept { return S_ISREG(mode); }
    /// A directory.
    bool is_dir() const noexcept { return S_ISDIR(mode); }
    /// A symbolic link (only from `stat(path, false)`).
    bool is_symlink() const noexcept { return S_ISLNK(mode); }
};

/// How `rename` treats an existing target.
enum class RenameMode {
    replace,    ///< replace it atomically (rename(2))
    no_replace, ///< fail with EEXIST if it exists (RENAME_NOREPLACE)
    exchange,   ///< swap the two, both must exist (RENAME_EXCHANGE)
};

/// One entry of a directory.
struct DirEntry {
    std::string name;       ///< the file name (no "." or "..")
    unsigned char type = 0; ///< DT_REG, DT_DIR, DT_LNK, ... (DT_UNKNOWN on some filesystems)
};

/// Open `path` without blocking the worker (File::open is the synchronous form): same options,
/// same errors.
inline detail::FsOp<File> open(std::string path, const OpenOptions& options = {}) {
    return {&detail::open_body, {.path = std::move(path), .open = options}};
}
/// statx(2). `follow`: a symlink's target (else the link itself).
inline detail::FsOp<Metadata> stat(std::string path, bool follow = true) {
    return {&detail::stat_body, {.path = std::move(path), .flags = follow ? 0 : 0x100}};
}
/// Rename `from` to `to` (same filesystem), replacing, refusing or exchanging per `mode`.
inline detail::FsOp<void> rename(std::string from, std::string to,
                                 RenameMode mode = RenameMode::replace) {
    return {&detail::namespace_body,
            {.path = std::move(from),
             .path2 = std::move(to),
             .flags = static_cast<int>(mode),
             .number = static_cast<std::uint64_t>(detail::NamespaceCall::rename)}};
}
/// Remove a file (unlink). A directory is EISDIR: use remove_dir.
inline detail::FsOp<void> remove(std::string path) {
    return {&detail::namespace_body,
            {.path = std::move(path),
             .number = static_cast<std::uint64_t>(detail::NamespaceCall::unlink)}};
}
/// Remove an empty directory (rmdir).
inline detail::FsOp<void> remove_dir(std::string path) {
    return {&detail::namespace_body,
            {.path = std::move(path),
             .number = static_cast<std::uint64_t>(detail::NamespaceCall::rmdir)}};
}
/// Create a directory (its parent must exist); EEXIST if it does.
inline detail::FsOp<void> create_dir(std::string path, unsigned mode = 0777) {
    return {&detail::namespace_body,
            {.path = std::move(path),
             .mode = mode,
             .number = static_cast<std::uint64_t>(detail::NamespaceCall::mkdir)}};
}
/// A second name `link` for the file `target` (link(2)).
inline detail::FsOp<void> hard_link(std::string target, std::string link) {
    return {&detail::namespace_body,
            {.path = std::move(target),
             .path2 = std::move(link),
             .number = static_cast<std::uint64_t>(detail::NamespaceCall::link)}};
}
/// A symbolic link `link` pointing at `target` (which need not exist).
inline detail::FsOp<void> symlink(std::string target, std::string link) {
    return {&detail::namespace_body,
            {.path = std::move(target),
             .path2 = std::move(link),
             .number = static_cast<std::uint64_t>(detail::NamespaceCall::symlink)}};
}
/// The entries of a directory, in the order the filesystem gives them (on the blocking pool).
inline detail::FsOp<std::vector<DirEntry>> read_dir(std::string path) {
    return {&detail::read_dir_body, {.path = std::move(path)}};
}
/// fsync a directory: makes the creations, renames and removals in it durable.
inline detail::FsOp<void> sync_dir(std::string path) {
    return {&detail::sync_dir_body, {.path = std::move(path)}};
}
/// The whole file, if it has at most `limit` bytes; a longer one is `std::errc::file_too_large`
/// (EFBIG), read no further.
inline detail::FsOp<std::string> read_file(std::string path, std::size_t limit) {
    return {&detail::read_file_body, {.path = std::move(path), .number = limit}};
}
/// Replace `path`'s content by `bytes` so that a crash at any moment leaves the old content or
/// the new, never a mix: a temp file in the same directory, write, fdatasync, rename over
/// `path`, fsync the directory. On an error before the rename the old content is intact and the
/// temp file is removed; an error from the final directory sync means the new content is in
/// place but perhaps not yet durable. The new file gets mode `mode` (before the umask).
inline detail::FsOp<void> write_file_atomic(std::string path, std::string bytes,
                                            unsigned mode = 0644) {
    return {&detail::write_atomic_body,
            {.path = std::move(path), .path2 = std::move(bytes), .mode = mode}};
}
/// ftruncate(2) on the blocking pool (File::truncate is the synchronous form). `file` must
/// outlive the operation.
inline detail::FsOp<void> truncate(const File& file, std::uint64_t length) {
    return {&detail::truncate_body, {.number = length, .file = &file}};
}

/// A file used as a byte stream with a cursor: `recv` reads at the cursor, `send`/`writev` write
/// at it, each moving it on, so io::BufReader and io::BufWriter work on a log file as on a
/// socket. One operation at a time. `shutdown` does nothing (a file has no peer).
class FileStream {
public:
    /// A stream over `file` (which it owns), starting at `position`.
    explicit FileStream(File file, std::uint64_t position = 0) noexcept
        : file_(std::move(file))
        , pos_(position) {}

    /// The awaitable of one transfer: the file op, then the cursor moved by what it moved.
    template <class Inner>
    class [[nodiscard]] Step : public galay::detail::AwaitedInPlace<Step<Inner>> {
    public:
        /// The file operation `inner`; `pos` is the cursor it moves on success.
        Step(Inner inner, std::uint64_t* pos) noexcept
            : inner_(std::move(inner))
            , pos_(pos) {}
        /// The whole transfer must finish by `t`.
        Step&& deadline(std::chrono::steady_clock::time_point t) && {
            (void)std::move(inner_).deadline(t);
            return std::move(*this);
        }
        /// The whole transfer must finish within `d`.
        Step&& timeout(Timeout d) && {
            (void)std::move(inner_).timeout(d);
            return std::move(*this);
        }
        /// Awaiter protocol: as the file operation's.
        bool await_ready() const noexcept { return inner_.await_ready(); }
        /// Awaiter protocol: starts the file operation.
        template <class P>
        auto await_suspend(std::coroutine_handle<P> h) {
            return inner_.await_suspend(h);
        }
        /// Awaiter protocol: the bytes moved (the cursor moved by as many), or why not.
        Result<std::size_t> await_resume() {
            auto r = inner_.await_resume();
            if (r) *pos_ += *r;
            return r;
        }

    private:
        Inner inner_;
        std::uint64_t* pos_;
    };

    /// Read up to `buf.size()` bytes at the cursor (0: end of file).
    template <MutableBuffer B>
    Step<galay::detail::FileTransferAwaitable> recv(B&& buf) noexcept {
        return {file_.read_at(std::forward<B>(buf), pos_), &pos_};
    }
    /// Write some of `buf` at the cursor.
    template <ConstBuffer B>
    Step<galay::detail::FileTransferAwaitable> send(const B& buf) noexcept {
        return {file_.write_at(buf, pos_), &pos_};
    }
    /// Write several buffers at the cursor (pwritev).
    Step<galay::detail::FileTransferAwaitable> writev(std::span<const iovec> iov) noexcept {
        return {file_.writev_at(iov, pos_), &pos_};
    }
    /// Nothing to do for a file; here so that the stream is an io::DuplexStream.
    Result<void> shutdown(Shutdown) noexcept { return {}; }

    /// The cursor: where the next transfer starts.
    std::uint64_t position() const noexcept { return pos_; }
    /// Move the cursor.
    void seek(std::uint64_t position) noexcept { pos_ = position; }
    /// The file, for fsync and the rest.
    File& file() noexcept { return file_; }

private:
    File file_;
    std::uint64_t pos_;
};

} // namespace galay::fs
