#include "args/bench_file_io.hpp"

#include "common/tool_support.hpp"

namespace galay::tools::bench_file_io {

std::optional<std::uint64_t> Options::file_bytes() const {
    return checked_mul({ops, block});
}

std::optional<std::uint64_t> Options::total_bytes() const {
    auto f = file_bytes();
    return f ? checked_mul({*f, workers}) : std::nullopt;
}

CliResult<Options> parse_args(std::vector<std::string> args) {
    Options o;
    cli::App app{"File I/O benchmark on galay-kernel: each worker writes its own file, then reads "
                 "it back and verifies every block",
                 "bench_file_io"};
    app.add_option("-w,--workers", o.workers, "workers (coroutines), one file each")
        ->check(cli::Range(1u, 4096u))
        ->capture_default_str();
    app.add_option("-n,--ops", o.ops, "operations per worker and phase (blocks per file)")
        ->check(cli::Range(std::uint64_t{1}, std::uint64_t{1} << 32))
        ->capture_default_str();
    app.add_option("-b,--block-size", o.block, "block size in bytes")
        ->check(cli::Range(std::size_t{1}, std::size_t{64} << 20))
        ->capture_default_str();
    app.add_option("--batch", o.batch,
                   "operations each worker submits at once (also spelled -batch)")
        ->check(cli::Range(1u, 1024u))
        ->capture_default_str();
    app.add_option("-d,--dir", o.dir, "directory for the test files")->capture_default_str();
    app.add_flag("--direct", o.direct, "open the files with O_DIRECT (bypass the page cache)");
    app.add_option("--prealloc", o.prealloc,
                   "lay out the files before the (timed) write phase: fallocate, zero (write "
                   "zeros first: the timed writes overwrite) or none (the writes extend the files)")
        ->check(cli::IsMember({"fallocate", "zero", "none"}))
        ->capture_default_str();
    app.add_flag_callback(
        "--no-prealloc", [&o] { o.prealloc = "none"; }, "same as --prealloc none");
    app.add_flag("--json", o.json, "print one JSON object instead of the table");
    app.add_flag("--fixed", o.fixed,
                 "io_uring: register each worker's buffers with the ring (fs::FixedBuffer: "
                 "READ_FIXED/WRITE_FIXED); on epoll the plain operations");
    add_backend_flag(app, &o.backend);
    app.add_option("--corrupt-block", o.corrupt_block,
                   "(testing) change one byte of worker 0's block N before the read phase")
        ->group(""); // hidden: proves that verification catches a damaged block

    // CLI11 reads "-batch" as "-b atch": the classic single-dash long flag becomes "--batch".
    for (std::string& a : args)
        if (a == "-batch" || a.starts_with("-batch=")) a.insert(0, "-");
    if (auto e = tools::parse_args(app, std::move(args), "bench_file_io"))
        return std::unexpected(*e);

    if (!o.total_bytes())
        return std::unexpected(usage_error(
            "bench_file_io", "-w " + std::to_string(o.workers) + " x -n " + std::to_string(o.ops) +
                                 " x -b " + std::to_string(o.block) +
                                 " bytes of files is more than 2^64 bytes"));
    // Per worker: one buffer per operation of a batch, each rounded up to the 4 KiB alignment,
    // and the expected block.
    const std::uint64_t stride = (o.block + 4095) / 4096 * 4096;
    if (auto e = check_memory(
            "bench_file_io", checked_mul({o.workers, std::uint64_t(o.batch) + 1, stride}),
            "-w " + std::to_string(o.workers) + " x (--batch " + std::to_string(o.batch) +
                " + 1) buffers of -b " + std::to_string(o.block),
            "-w, --batch or -b"))
        return std::unexpected(*e);
    return o;
}

} // namespace galay::tools::bench_file_io
