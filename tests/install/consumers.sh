#!/usr/bin/env bash
# Build and run a program against an *installed* galay-kernel, both ways a user would: CMake
# find_package(galay-kernel) and `g++ main.cpp $(pkg-config --cflags --libs galay-kernel)`, for
# the static and the shared library. Run by ctest (install_consumers).
#
#   consumers.sh <source-dir> <work-dir> [<build-dir of this tree>]
#
# The library kind the given build dir already has is installed from it; the other kind is built
# (library only, default options) in <work-dir>. Every consumer runs on the automatic backend and
# on epoll; a library built without GALAY_FAULT_INJECTION (the default, so always the one built
# here) runs once more under GALAY_FAULTS and GALAY_FAKE_URING_PROBE, which it must ignore.
set -euo pipefail
src=$(cd "$1" && pwd)
work=$2
existing=${3:-}
cxx=${CXX:-c++}
rm -rf "$work"
mkdir -p "$work"

# auto: io_uring where the kernel allows it (CI requires it), else epoll; and epoll forced.
backends="auto epoll"

faults_off=0 # set by install_kind: the installed library has no fault injection
ignored_checks=0
install_kind() { # <kind> <prefix>
    local kind=$1 prefix=$2 shared=OFF
    [ "$kind" = shared ] && shared=ON
    if [ -n "$existing" ] && [ -f "$existing/CMakeCache.txt" ] &&
        grep -q "^BUILD_SHARED_LIBS:BOOL=$shared" "$existing/CMakeCache.txt"; then
        cmake --install "$existing" --prefix "$prefix" >/dev/null
        faults_off=0
        grep -q "^GALAY_FAULT_INJECTION:BOOL=ON" "$existing/CMakeCache.txt" || faults_off=1
        return
    fi
    faults_off=1
    # Without debug information: the consumers only link it and run it, and its build is part
    # of the suite's time.
    cmake -S "$src" -B "$work/$kind-build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
        -DCMAKE_CXX_FLAGS_DEBUG="-Og" -DBUILD_SHARED_LIBS=$shared -DGALAY_BUILD_TESTS=OFF \
        -DGALAY_BUILD_TOOLS=OFF -DGALAY_BUILD_EXAMPLES=OFF >/dev/null
    cmake --build "$work/$kind-build" -j 2 >/dev/null
    cmake --install "$work/$kind-build" --prefix "$prefix" >/dev/null
}

run_all_backends() { # <what> <program> [env...]
    local what=$1 program=$2
    shift 2
    for b in $backends; do
        out=$(env "$@" GALAY_BACKEND=$b "$program") || {
            echo "FAIL: $what on $b: $out" >&2
            exit 1
        }
        echo "$what: $out"
    done
    [ "$faults_off" = 1 ] || return 0
    # Fault injection is not compiled into an installed library: every operation failing and a
    # refused io_uring probe, asked for through the environment, change nothing.
    local plain faulty
    plain=$(env "$@" "$program")
    faulty=$(env "$@" GALAY_FAULTS=fail=0.99,error=ECONNRESET GALAY_FAKE_URING_PROBE=EPERM \
        "$program" 2>&1) || {
        echo "FAIL: $what under GALAY_FAULTS: $faulty" >&2
        exit 1
    }
    [ "$faulty" = "$plain" ] || {
        echo "FAIL: $what: GALAY_FAULTS changed the installed library ('$plain' -> '$faulty')" >&2
        exit 1
    }
    echo "$what, GALAY_FAULTS set: $faulty (ignored)"
    ignored_checks=$((ignored_checks + 1))
}

for kind in static shared; do
    prefix=$work/$kind-prefix
    install_kind "$kind" "$prefix"
    lib=$(dirname "$(find "$prefix" -name galay-kernel.pc | head -n 1)")/..
    lib=$(cd "$lib" && pwd)
    if [ "$kind" = shared ]; then
        test -e "$lib/libgalay-kernel.so" || { echo "FAIL: no libgalay-kernel.so in $lib" >&2; exit 1; }
    else
        test -e "$lib/libgalay-kernel.a" || { echo "FAIL: no libgalay-kernel.a in $lib" >&2; exit 1; }
    fi

    # 1. CMake: find_package(galay-kernel), target galay::kernel, galay_check_coroutines.
    cmake -S "$src/tests/install/consumer" -B "$work/$kind-cmake" -G Ninja \
        -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Debug >/dev/null
    cmake --build "$work/$kind-cmake" >/dev/null
    run_all_backends "$kind, find_package" "$work/$kind-cmake/consumer"
    if [ "$kind" = static ]; then
        # The package's galay_check_coroutines stops the build of a source with the g++ 12
        # hazards, naming each by file and line (the second from types in the installed headers).
        cmake -S "$src/tests/install/unsafe" -B "$work/unsafe-cmake" -G Ninja \
            -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Debug >/dev/null
        if out=$(cmake --build "$work/unsafe-cmake" 2>&1); then
            echo "FAIL: galay_check_coroutines let a source with unsafe forms build" >&2
            exit 1
        fi
        for want in "main.cpp:13: co_await in if condition" \
            "main.cpp:14: aggregate temporary galay::RuntimeOptions{...}"; do
            grep -qF "$want" <<<"$out" || {
                echo "FAIL: galay_check_coroutines did not report '$want':" >&2
                echo "$out" >&2
                exit 1
            }
        done
        [ ! -e "$work/unsafe-cmake/unsafe" ] || {
            echo "FAIL: the unsafe program was linked despite the check" >&2
            exit 1
        }
        echo "$kind, galay_check_coroutines: the unsafe source stopped the build, both lines named"
    fi

    # 2. pkg-config, the command line the README gives.
    flags=$(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --cflags --libs galay-kernel)
    # shellcheck disable=SC2086 # the flags are words
    # shellcheck disable=SC2086 # CXXFLAGS too
    "$cxx" ${CXXFLAGS:-} -Wall -Wextra -o "$work/$kind-pkgconfig" \
        "$src/tests/install/consumer/main.cpp" $flags
    run_all_backends "$kind, pkg-config" "$work/$kind-pkgconfig" LD_LIBRARY_PATH="$lib"
done
[ "$ignored_checks" -gt 0 ] || {
    echo "FAIL: no installed library without fault injection was checked" >&2
    exit 1
}
echo "install_consumers: ok"
