#!/usr/bin/env bash
# compare_engines.sh: run libaio and io_uring with identical parameters and print them side by
# side with the difference in % per figure. A thin wrapper over `aio_bench --compare`; every
# aio_bench flag except -e is accepted (--json for one JSON object).
#
#   bench/programs/aio_bench/compare_engines.sh        # rand_rw, -q 32 -t 2 -r 10 on a
#                                                      # temporary file in the current dir
#   bench/programs/aio_bench/compare_engines.sh -f /dev/vdb -p rand_read -q 32 -r 30 --direct -M
#
# The binary: $AIO_BENCH, else build/release/bin/aio_bench of this checkout, else aio_bench on PATH.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${AIO_BENCH:-}
if [ -z "$bin" ]; then
    for c in "$here/../../../build/release/bin/aio_bench" "$(command -v aio_bench || true)"; do
        if [ -n "$c" ] && [ -x "$c" ]; then bin=$c; break; fi
    done
fi
if [ -z "$bin" ]; then
    echo "compare_engines.sh: aio_bench not found; build it (cmake --preset release &&" \
         "cmake --build --preset release) or set AIO_BENCH" >&2
    exit 2
fi
if [ $# -eq 0 ]; then
    # The file study's default comparison; aio_bench creates the file and removes it at exit.
    set -- -f "./aio_bench_compare.$$.dat" -p rand_rw -q 32 -t 2 -r 10
fi
exec "$bin" --compare "$@"
