#!/usr/bin/env python3
"""bench/studies/http_ab.py: bad flags are exit 2 with one line; short real runs of this build's
http_server against itself (argv[1]: its bin directory), GET / and the static file, print every
round and a ratio line; a server that never starts fails its round."""
import os
import re
import sys

import tool_cli

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "bench", "studies", "http_ab.py")
BIN = sys.argv[1]
SERVER = os.path.join(BIN, "http_server")


def run(*args):
    return tool_cli.run(TOOL, *args)


def expect_exit_2(args, words):
    tool_cli.expect_exit_2(TOOL, args, words)


ok = f"{SERVER} {{port}} --backend epoll"
expect_exit_2(["--b", ok], "the following arguments are required: --a")
expect_exit_2(["--a", ok, "--b", ok, "-c", "0"], "must be positive")
expect_exit_2(["--a", ok, "--b", ok, "-c", "ten"], "not a list of numbers")
expect_exit_2(["--a", ok, "--b", ok, "--rounds", "0"], "must be positive")
expect_exit_2(["--a", SERVER, "--b", ok], "must contain {port}")
expect_exit_2(["--a", ok, "--b", ok, "--scenario", "x"], "invalid choice: 'x'")
expect_exit_2(["--a", ok, "--b", ok, "--warmup", "-1"], "--warmup must not be negative")
expect_exit_2(["--a", "/nonexistent/http_server {port}", "--b", ok],
              "/nonexistent/http_server: not found")

backend = "io_uring" if "io_uring" in os.environ.get("GALAY_REQUIRE_BACKENDS", "") else "epoll"
r = run("--a", ok, "--b", f"{SERVER} {{port}} --backend {backend}", "-c", "8", "--rounds", "2",
        "-d", "0.5", "--slice", "0.25")
assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
rounds = re.findall(r"^c=8 round \d/2: A ([\d.]+) us/req, B ([\d.]+) us/req", r.stdout, re.M)
assert len(rounds) == 2, r.stdout
assert all(float(a) > 0 and float(b) > 0 for a, b in rounds), r.stdout
assert re.search(r"^c=8: CPU per request B/A [\d.]+x \[[\d.]+-[\d.]+\] over 2 rounds", r.stdout,
                 re.M), r.stdout

# The static file, from the {root} the tool provides.
r = run("--a", ok + " --root {root}", "--b", ok + " --root {root}", "--scenario", "file",
        "-c", "4", "--rounds", "1", "-d", "0.5", "--slice", "0.25")
assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
assert re.search(r"^c=4: CPU per request B/A [\d.]+x", r.stdout, re.M), r.stdout

# A server that never starts: that round is reported, exit 1.
r = run("--a", ok, "--b", "/bin/false {port}", "-c", "4", "--rounds", "1", "-d", "0.25",
        "--slice", "0.25")
assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
assert "FAILED: server b: did not accept" in r.stdout, r.stdout
print("test_http_ab: ok")
