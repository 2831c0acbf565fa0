#!/usr/bin/env python3
"""bench/studies/idle_relays.py against this build's tcp_proxy and raw_epoll (argv[1]: their bin
directory): relays that one proxy's descriptor limit cannot hold are split over several proxy
processes, said on stderr, and each idle spliced relay costs its two sockets and no pipe."""
import json
import os
import resource
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "bench", "studies", "idle_relays.py")
BIN = sys.argv[1]


def run(*args, nofile=None):
    def limit():
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    return subprocess.run([sys.executable, TOOL, "--bin", BIN, "--json", *args],
                          capture_output=True, text=True, timeout=120, preexec_fn=limit)


def figures(r):
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return json.loads([l for l in r.stdout.splitlines() if l.startswith("{")][-1])


# A limit of 600 descriptors holds (600 - 64) / 2 - 100 = 168 relays per proxy beyond its warm
# ones: 300 relays take two proxies, and the script says why.
r = run("-n", "300", "--backend", "epoll", nofile=600)
f = figures(r)
assert "split over 2 tcp_proxy processes" in r.stderr, r.stderr
assert "over 2 processes (150 + 150)" in r.stdout, r.stdout
assert f["proxies"] == 2 and [p["relays"] for p in f["per_proxy"]] == [150, 150], f
assert f["relays_held"] == 300 + 2 * 100, f
assert f["fds_per_relay"] == 2.0, f  # its two sockets
assert f["pipes_after"] == f["pipes_before"], f  # pipes are not held by idle relays
assert 0 < f["bytes_per_relay"] < 1 << 20, f

# Relays that fit stay in one proxy unless --proxies asks otherwise.
f = figures(run("-n", "50", "--backend", "epoll"))
assert f["proxies"] == 1 and f["fds_per_relay"] == 2.0, f

uring_required = "io_uring" in os.environ.get("GALAY_REQUIRE_BACKENDS", "")
r = run("-n", "40", "--backend", "io_uring", "--proxies", "2")
if r.returncode != 0 and not uring_required:
    print(f"test_idle_relays: io_uring unavailable here, skipped: {r.stderr.strip()[-200:]}")
else:
    f = figures(r)
    assert f["proxies"] == 2 and [p["relays"] for p in f["per_proxy"]] == [20, 20], f
    assert f["fds_per_relay"] == 2.0 and f["pipes_after"] == f["pipes_before"], f

# More relays than this script can hold sockets for: one line, not a hang.
r = run("-n", "600", "--backend", "epoll", nofile=600)
assert r.returncode != 0 and "relays need more than the limit of 600" in r.stderr, r.stderr
print("test_idle_relays: ok")
