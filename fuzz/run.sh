#!/usr/bin/env bash
# Run every fuzz target in <bin-dir> for a share of FUZZ_SECONDS (default 60 in total), each from
# its seed corpus fuzz/corpus/<name>/ plus what earlier runs found (build/fuzz/corpus/<name>/),
# and print what each covered. A crash stops the run with the input saved under
# build/fuzz/artifacts/ (it becomes a regression test in the normal suite).
#
#   fuzz/run.sh build/fuzz/bin [seconds]
set -euo pipefail
bin=$1
total=${2:-${FUZZ_SECONDS:-60}}
here=$(cd "$(dirname "$0")" && pwd)
work=$(cd "$bin/.." && pwd)
mapfile -t targets < <(find "$bin" -maxdepth 1 -name '*_fuzz' -type f -executable | sort)
if [ ${#targets[@]} -eq 0 ]; then
    echo "fuzz: no *_fuzz targets in $bin" >&2
    exit 1
fi
each=$((total / ${#targets[@]}))
[ "$each" -lt 1 ] && each=1
mkdir -p "$work/artifacts"
echo "fuzz: ${#targets[@]} targets, ${each} s each"
status=0
for t in "${targets[@]}"; do
    name=$(basename "$t")
    name=${name%_fuzz}
    corpus=$work/corpus/$name
    seeds=$here/corpus/$name
    mkdir -p "$corpus" "$seeds"
    log=$work/$name.log
    if ASAN_OPTIONS=detect_leaks=1 "$t" "$corpus" "$seeds" -max_total_time="$each" \
        -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="$work/artifacts/$name-" >"$log" 2>&1; then
        runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 || echo "cov: ?")
        files=$(find "$corpus" -type f | wc -l)
        printf 'fuzz: %-16s ok: %s executions in %s s, %s edges, corpus %s inputs\n' \
            "$name" "$runs" "$each" "${cov#cov: }" "$files"
    else
        echo "fuzz: $name FAILED (log: $log; input under $work/artifacts/):" >&2
        grep -E 'ERROR|SUMMARY|Test unit written' "$log" >&2 || tail -n 20 "$log" >&2
        status=1
    fi
done
exit $status
