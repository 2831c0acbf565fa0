# Thin wrapper around CMake presets. `make bench` and `make test` are the two commands a newcomer runs.
PRESET ?= release
JOBS ?= $(shell nproc)
DEB_PACKAGES := g++ cmake ninja-build pkg-config liburing-dev libaio-dev libconcurrentqueue-dev \
	libgtest-dev libcli11-dev nlohmann-json3-dev python3 util-linux fio python3-matplotlib \
	wrk nginx-light
# `make fuzz` only: libFuzzer comes with clang's runtime.
FUZZ_PACKAGES := clang-16 libclang-rt-16-dev
FUZZ_CXX ?= clang++-16
FUZZ_SECONDS ?= 60
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Debian's python3 (with python3-matplotlib for the plots), even when another python3 is first in PATH.
PYTHON := $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)

.PHONY: deps build test test-asan test-tsan bench fuzz format clean

deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "Installing missing Debian packages: $$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

build: deps
	cmake --preset $(PRESET) >/dev/null
	cmake --build --preset $(PRESET) -j $(JOBS)

# Every test on every backend the machine supports (the suite is parameterised over backends).
test: deps
	cmake --preset debug >/dev/null
	cmake --build --preset debug -j $(JOBS)
	ctest --preset debug -j $(JOBS)

test-asan: deps
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(JOBS)

test-tsan: deps
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan -j $(JOBS)
	ctest --preset tsan -j $(JOBS)

# The main job: build release, run the benchmark suite on every supported backend, print the report.
bench: build
	$(PYTHON) bench/suite.py --bin build/release/bin

# Every fuzz/<name>_fuzz.cpp for FUZZ_SECONDS each, from fuzz/corpus/<name> (read only); new
# inputs go to build/fuzz/corpus/<name>, crashes to build/fuzz/artifacts/. Fails on any finding.
fuzz: deps
	@missing=$$(for p in $(FUZZ_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DCMAKE_CXX_COMPILER=$(FUZZ_CXX) -DGALAY_FUZZ=ON -DGALAY_BUILD_TESTS=OFF \
		-DGALAY_BUILD_TOOLS=OFF >/dev/null
	cmake --build build/fuzz -j $(JOBS)
	@status=0; for f in build/fuzz/bin/*_fuzz; do \
		name=$$(basename $$f _fuzz); \
		mkdir -p build/fuzz/corpus/$$name build/fuzz/artifacts fuzz/corpus/$$name; \
		echo "fuzz: $$name for $(FUZZ_SECONDS) s"; \
		$$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			-artifact_prefix=build/fuzz/artifacts/$$name- \
			build/fuzz/corpus/$$name fuzz/corpus/$$name || status=1; \
	done; \
	if [ $$status -ne 0 ]; then echo "fuzz: FOUND something: see build/fuzz/artifacts/"; fi; \
	exit $$status

format:
	git ls-files '*.hpp' '*.cpp' | xargs clang-format -i

clean:
	rm -rf build
