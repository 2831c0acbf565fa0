# Thin wrapper around CMake presets. `make bench` and `make test` are the two commands a newcomer runs.
PRESET ?= release
JOBS ?= $(shell nproc)
# Tests wait on sockets, children and the kernel much of the time: ctest runs twice as many as
# there are cores (on 2 cores: debug suite 84 -> 63 s, asan 71 -> 51 s, tsan 180 -> 101 s).
CTEST_JOBS ?= $(shell echo $$(( $$(nproc) * 2 )))
DEB_PACKAGES := g++ cmake ninja-build pkg-config liburing-dev libaio-dev libconcurrentqueue-dev \
	libgtest-dev libcli11-dev nlohmann-json3-dev python3 util-linux fio python3-matplotlib \
	wrk nginx-light libssl-dev openssl python3-prometheus-client \
	libpq-dev postgresql libcurl4-openssl-dev curl redis-server redis-tools valgrind
# The second compiler (make test-clang, and make test-tsan, whose build is clang's): clang-16 with
# libc++-16; GoogleTest is built from Debian's source package (googletest) for that library.
CLANG_DEB_PACKAGES := clang-16 libc++-16-dev libc++abi-16-dev libclang-rt-16-dev googletest
# `make fuzz` only: libFuzzer comes with clang.
FUZZ_DEB_PACKAGES := clang-16 libclang-rt-16-dev
FUZZ_SECONDS ?= 60
# `make docs` only: the API reference's generator (python3 runs its header filter).
DOCS_DEB_PACKAGES := doxygen python3
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Debian's python3 (with python3-matplotlib for the plots), even when another python3 is first in PATH.
PYTHON := $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)

# Every suite below runs under tests/leftovers.py, which fails the run when it left a process, a
# listening port or a temporary file behind, and names it (it gives the run a TMPDIR of its own
# and is the subreaper of everything the run starts).
LEFTOVERS := $(PYTHON) tests/leftovers.py --

.PHONY: deps deps-all deps-clang deps-fuzz deps-docs deps-cross docs build test test-asan test-tsan test-clang test-no-uring test-posix zig cross bench soak fuzz \
	format clean

# Install the Debian packages of $(1) that are missing.
define install_missing
	@missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "Installing missing Debian packages: $$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
endef

deps:
	$(call install_missing,$(DEB_PACKAGES))

deps-clang:
	$(call install_missing,$(DEB_PACKAGES) $(CLANG_DEB_PACKAGES))

# Everything every target below installs, in one apt transaction (CI's first step: one package
# index download instead of one per phase); $(sort) drops the names two lists share.
deps-all:
	$(call install_missing,$(sort $(DEB_PACKAGES) $(CLANG_DEB_PACKAGES) $(FUZZ_DEB_PACKAGES) \
		$(DOCS_DEB_PACKAGES) $(CROSS_DEB_PACKAGES)))

deps-fuzz:
	$(call install_missing,$(DEB_PACKAGES) $(FUZZ_DEB_PACKAGES))

deps-docs:
	$(call install_missing,$(DOCS_DEB_PACKAGES))

build: deps
	cmake --preset $(PRESET) >/dev/null
	cmake --build --preset $(PRESET) -j $(JOBS)

# Every test on every backend the machine supports (the suite is parameterised over backends).
test: deps
	cmake --preset debug >/dev/null
	cmake --build --preset debug -j $(JOBS)
	$(LEFTOVERS) ctest --preset debug -j $(CTEST_JOBS)

test-asan: deps
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)
	$(LEFTOVERS) ctest --preset asan -j $(CTEST_JOBS)

# ThreadSanitizer on the second compiler (clang-16, libc++-16): the library and its own suites.
# The tools and examples are not built: the threads they start are the library's, checked here,
# and their tests run in make test and make test-asan (make test-clang builds everything with clang).
test-tsan: deps-clang
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan -j $(JOBS)
	$(LEFTOVERS) ctest --preset tsan -j $(CTEST_JOBS)

# The whole suite built by clang-16 with libc++-16, without a sanitizer.
test-clang: deps-clang
	cmake --preset clang >/dev/null
	cmake --build --preset clang -j $(JOBS)
	$(LEFTOVERS) ctest --preset clang -j $(CTEST_JOBS)

# The epoll half of the suite in a build without io_uring and libaio (the no-uring preset,
# build/no-uring): what a kernel or distribution without liburing gets.
test-no-uring: deps
	cmake --preset no-uring >/dev/null
	cmake --build --preset no-uring -j $(JOBS)
	$(LEFTOVERS) ctest --preset no-uring -j $(CTEST_JOBS)

# The POSIX profile (the posix preset, build/posix: GALAY_POSIX_ONLY=ON): the epoll backend with
# only the calls macOS and FreeBSD also have, so every fallback they run is tested here. A test of
# a feature the profile has no form of (splice, kTLS, inotify ...) skips naming it; the count of
# skips and their reasons are printed at the end. POSIX_PRESET=posix-asan runs it under ASan+UBSan,
# without the benchmark programs and their tests.
POSIX_PRESET ?= posix
test-posix: deps
	cmake --preset $(POSIX_PRESET) >/dev/null
	cmake --build --preset $(POSIX_PRESET) -j $(JOBS)
	GALAY_REQUIRE_BACKENDS=epoll $(LEFTOVERS) ctest --preset $(POSIX_PRESET) -j $(CTEST_JOBS) \
		--output-junit posix-tests.xml
	$(PYTHON) tests/skips.py build/$(POSIX_PRESET)/posix-tests.xml

# Cross builds for macOS and FreeBSD with Zig's C/C++ toolchain (cmake/toolchains/zig-*.cmake;
# the version is pinned in cmake/zig.lock and installed with pip when missing): the library with
# the kqueue poller and the POSIX forms, and the examples that make sense there, compile and link
# for each target, and so does tests/cross/poller_check (the poller alone: the first program to
# run on a Mac or a FreeBSD machine). TLS is off (no OpenSSL for those targets here: the TLS
# sources, the HTTPS examples and apps/http are left out), as are libpq and libcurl; so are the
# examples that are Linux's: watch_dir (inotify), hot_restart (SO_DOMAIN, accept4). Nothing of it
# can run here.
# Where the time goes on a fresh machine: Zig builds compiler_rt, libc++ and libc++abi (and
# FreeBSD's libc stubs) once per target, kept in ~/.cache/zig (ZIG_GLOBAL_CACHE_DIR); CI that
# keeps that directory between runs (keyed on cmake/zig.lock) saves nearly half of the CPU time
# (docs/benchmarks/portability.md, "Cross builds"). The builds are made for linking, not
# debugging: -O0 and CROSS_FLAGS, which are -g0 (Zig's clang emits debug information unless told
# not to) and -s (stripped: Zig then builds libc++ and its other runtime libraries without debug
# information too; the toolchain adds them to every compile and link, CMake's own checks included,
# since a link with other flags makes Zig build another set of those libraries); without the
# UBSan instrumentation Zig adds by default (its runtime would be one more library built per
# target); and unity batches for every target (mini_redis's seven sources parse galay's headers
# once).
# Each target is its own make target (cross-aarch64-macos ...), so `make -j3 cross` builds the
# three at once.
# x86_64-macos is aarch64-macos's twin (the same headers and code paths, another CPU): it builds
# the library, poller_check and one example, which is what can differ by CPU; the other two build
# every cross example.
CROSS_TARGETS ?= aarch64-macos x86_64-macos x86_64-freebsd
CROSS_PROGRAMS := galay-kernel echo_server runtime_echo tcp_proxy run_jobs mini_redis
CROSS_PROGRAMS_x86_64-macos := galay-kernel echo_server
CROSS_FLAGS := -g0 -s
ZIG_PYTHON ?= $(PYTHON)
ZIG_VERSION := $(shell sed -n 's/^ziglang==//p' cmake/zig.lock)
CCACHE := $(shell command -v ccache 2>/dev/null)
# pip for Zig (python3-pip: Debian's python3 has no pip of its own).
CROSS_DEB_PACKAGES := python3-pip
deps-cross:
	$(call install_missing,$(DEB_PACKAGES) $(CROSS_DEB_PACKAGES))

zig: deps-cross
	@[ "$$($(ZIG_PYTHON) -m ziglang version 2>/dev/null)" = "$(ZIG_VERSION)" ] || \
		$(ZIG_PYTHON) -m pip install -q "ziglang==$(ZIG_VERSION)" || \
		$(ZIG_PYTHON) -m pip install -q --user --break-system-packages "ziglang==$(ZIG_VERSION)"

cross: $(addprefix cross-,$(CROSS_TARGETS))

cross-%: zig
	@mkdir -p build/cross; start=$$(date +%s); \
	GALAY_ZIG_PYTHON=$(ZIG_PYTHON) GALAY_ZIG_FLAGS="$(CROSS_FLAGS)" \
		cmake -S . -B build/cross/$* -G Ninja \
		-DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/zig-$*.cmake -DCMAKE_BUILD_TYPE=Debug \
		-DCMAKE_CXX_FLAGS_DEBUG=-O0 -DCMAKE_UNITY_BUILD=ON \
		$(if $(CCACHE),-DCMAKE_CXX_COMPILER_LAUNCHER=$(CCACHE)) -DGALAY_WITH_TLS=OFF \
		-DGALAY_BUILD_TESTS=OFF -DGALAY_BUILD_TOOLS=OFF -DGALAY_BUILD_EXAMPLES=ON \
		>build/cross/$*.log || { cat build/cross/$*.log; exit 1; }; \
	GALAY_ZIG_PYTHON=$(ZIG_PYTHON) cmake/zig/zig-c++ -target $* -fno-sanitize=undefined \
		-O0 $(CROSS_FLAGS) -std=c++23 -Wall -Wextra -Iinclude -Isrc -o build/cross/$*/poller_check \
		tests/cross/poller_check.cpp || exit 1; \
	GALAY_ZIG_PYTHON=$(ZIG_PYTHON) cmake --build build/cross/$* -j $(JOBS) \
		--target $(or $(CROSS_PROGRAMS_$*),$(CROSS_PROGRAMS)) || exit 1; \
	echo "cross $*: poller_check $(or $(CROSS_PROGRAMS_$*),$(CROSS_PROGRAMS)) linked in $$(( $$(date +%s) - start )) s"

# Bounded soak (tests/soak/soak.py), on a release build with fault injection (the soak preset):
# connection churn against bench_server and UDP/file/TCP
# open-close loops in one galay program, on each backend; fails if fds or RSS do not come back.
# A few minutes by default; CI runs SOAK_SECONDS=30. Not part of `make test`.
# SOAK_PRESET picks another build with fault injection (CI soaks the debug build that make test
# has just built, instead of compiling a fourth one).
SOAK_SECONDS ?= 180
SOAK_PRESET ?= soak
soak: deps
	cmake --preset $(SOAK_PRESET) >/dev/null
	cmake --build --preset $(SOAK_PRESET) -j $(JOBS) --target bench_server soak_local
	$(LEFTOVERS) $(PYTHON) tests/soak/soak.py --bin build/$(SOAK_PRESET)/bin --duration $(SOAK_SECONDS)

# The main job: build release, run the benchmark suite on every supported backend, print the report.
bench: build
	$(LEFTOVERS) $(PYTHON) bench/suite.py --bin build/release/bin

# Build the libFuzzer targets (fuzz/, clang-16) and run each for a share of FUZZ_SECONDS. Only
# the targets and what they link: the preset's tree also knows the benchmark programs, which
# nothing here runs.
fuzz: deps-fuzz
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz -j $(JOBS) --target fuzz_targets
	$(LEFTOVERS) fuzz/run.sh build/fuzz/bin $(FUZZ_SECONDS)

# The API reference, from the comments of the public headers (docs/Doxyfile), in
# build/docs/html/index.html. Any doxygen warning fails it, an undocumented public name included.
docs: deps-docs
	mkdir -p build/docs
	doxygen docs/Doxyfile

format:
	git ls-files '*.hpp' '*.cpp' | xargs clang-format -i

clean:
	rm -rf build
