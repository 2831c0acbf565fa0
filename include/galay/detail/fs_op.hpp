// The awaitable behind the filesystem operations of galay/fs/ops.hpp (fs::open, stat, rename,
// read_file, ...): each is a body run as a task when awaited, with one deadline for all of it.
#pragma once

#include "galay/fs/file.hpp"
#include "galay/io/stream.hpp"
#include "galay/task.hpp"

#include <coroutine>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace galay::fs {
struct Metadata;
struct DirEntry;
} // namespace galay::fs

namespace galay::fs::detail {

/// The arguments of a filesystem operation, owned by the operation.
struct FsArgs {
    std::string path{};
    std::string path2{};
    int flags = 0;
    unsigned mode = 0;
    std::uint64_t number = 0;
    OpenOptions open{};
    const File* file = nullptr;
};

/// A filesystem operation: a body run as a task when awaited, with one deadline for all of it.
template <class T>
class [[nodiscard]] FsOp : public io::detail::Deadlined<FsOp<T>> {
public:
    using Body = Task<Result<T>> (*)(FsArgs args, std::int64_t deadline_ns);
    FsOp(Body body, FsArgs args) noexcept
        : body_(body)
        , args_(std::move(args)) {}
    bool await_ready() const noexcept { return false; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
        task_.emplace(body_(std::move(args_), this->deadline_ns_));
        awaiter_.emplace(std::move(*task_).operator co_await());
        return awaiter_->await_suspend(h);
    }
    Result<T> await_resume() { return awaiter_->await_resume(); }

private:
    Body body_;
    FsArgs args_;
    std::optional<Task<Result<T>>> task_;
    std::optional<typename Task<Result<T>>::Awaiter> awaiter_;
};

Task<Result<File>> open_body(FsArgs a, std::int64_t deadline_ns);
Task<Result<Metadata>> stat_body(FsArgs a, std::int64_t deadline_ns);
Task<Result<void>> namespace_body(FsArgs a, std::int64_t deadline_ns);
Task<Result<std::vector<DirEntry>>> read_dir_body(FsArgs a, std::int64_t deadline_ns);
Task<Result<void>> sync_dir_body(FsArgs a, std::int64_t deadline_ns);
Task<Result<std::string>> read_file_body(FsArgs a, std::int64_t deadline_ns);
Task<Result<void>> write_atomic_body(FsArgs a, std::int64_t deadline_ns);
Task<Result<void>> truncate_body(FsArgs a, std::int64_t deadline_ns);

/// Which namespace call namespace_body makes (FsArgs::number).
enum class NamespaceCall : std::uint8_t { rename, unlink, rmdir, mkdir, link, symlink };

} // namespace galay::fs::detail
