#!/usr/bin/env bash
# `cmake --install` puts the library, headers, CMake package, .pc file and the coroutine-hazard
# checker (share/galay-kernel) into the prefix and no executable in bin/; `--component tools` adds
# the tools, and nothing else. Run by ctest.
#
#   components.sh <build-dir> <work-dir>
set -euo pipefail
build=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
fail() {
    echo "install_components: $*" >&2
    exit 1
}

cmake --install "$build" --prefix "$work/plain" >/dev/null
[ -f "$work/plain/lib/pkgconfig/galay-kernel.pc" ] || fail "no .pc file in a plain install"
[ -f "$work/plain/lib/cmake/galay-kernel/galay-kernel-config.cmake" ] ||
    fail "no CMake package in a plain install"
[ -f "$work/plain/include/galay/galay.hpp" ] || fail "no headers in a plain install"
ls "$work/plain/lib/"libgalay-kernel.* >/dev/null 2>&1 || fail "no library in a plain install"
[ ! -e "$work/plain/bin" ] || fail "a plain install put executables in bin/: $(ls "$work/plain/bin")"
# The coroutine-hazard checker: the script (runnable by hand) and the package's CMake helper.
checker=$work/plain/share/galay-kernel/check_coroutines.py
[ -x "$checker" ] || fail "no executable share/galay-kernel/check_coroutines.py in a plain install"
[ -f "$work/plain/lib/cmake/galay-kernel/galay-check-coroutines.cmake" ] ||
    fail "no galay-check-coroutines.cmake next to the CMake package"
"$checker" --help | grep -q "co_await in a condition" || fail "the installed checker's --help"
"$checker" "$work/plain/include/galay" ||
    fail "the installed checker finds unsafe forms in the installed headers"
# The installed headers are the public ones and what they include: not the test-only fault
# injection plan, and nothing that names a header left in src/.
[ ! -e "$work/plain/include/galay/detail/faults.hpp" ] || fail "the fault injection header is installed"
for h in $(cd "$work/plain/include" && find galay -name '*.hpp'); do
    for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$work/plain/include/$h"); do
        [ -f "$work/plain/include/$inc" ] || fail "$h includes $inc, which is not installed"
    done
done

cmake --install "$build" --prefix "$work/tools" --component tools >/dev/null
for tool in aio_bench bench_server bench_client bench_sync; do
    [ -x "$work/tools/bin/$tool" ] || fail "--component tools did not install $tool"
done
[ ! -e "$work/tools/include" ] || fail "--component tools installed headers too"
[ ! -e "$work/tools/share" ] || fail "--component tools installed the checker too"
echo "install_components: plain install without tools (its headers self-contained), --component tools with them"
