#!/usr/bin/env python3
"""bench/studies/idle_memory.py: bad flags are exit 2 with one line; a real run against the galay
HTTP servers of this build (argv[1]: their bin directory) prints a figure per server, and a figure
that is a plausible per-connection size (a connection's frames and reader block: not zero, and at
most argv[2] bytes)."""
import os
import re
import sys

import tool_cli

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "bench", "studies", "idle_memory.py")
BIN = sys.argv[1]
MAX = int(sys.argv[2]) if len(sys.argv) > 2 else 65536  # bytes per connection


def run(*args):
    return tool_cli.run(TOOL, *args)


def expect_exit_2(args, words):
    tool_cli.expect_exit_2(TOOL, args, words)


expect_exit_2(["-n", "0"], "--connections must be 1..8000")
expect_exit_2(["-n", "9000"], "--connections must be 1..8000")
expect_exit_2(["--servers", "nope"], "unknown server(s): nope")
expect_exit_2(["-n", "many"], "invalid int value")

r = run("--bin", BIN, "-n", "300", "--servers", "galay-epoll,galay-io_uring")
uring_required = "io_uring" in os.environ.get("GALAY_REQUIRE_BACKENDS", "")
rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| (galay-\S+) \| (.*)$", r.stdout, re.M)}
assert "galay-epoll" in rows and "galay-io_uring" in rows, (r.stdout, r.stderr)
for name, rest in rows.items():
    if rest.startswith("failed") and name == "galay-io_uring" and not uring_required:
        print(f"test_idle_memory: io_uring unavailable here, skipped: {rest}")
        continue
    cells = [c.strip() for c in rest.rstrip("|").split("|")]
    assert len(cells) == 3, (name, rest)
    per = int(cells[2].replace(",", ""))
    assert 256 <= per <= MAX, (name, per, r.stdout)
assert r.returncode == (0 if not any(v.startswith("failed") for v in rows.values()) else 1), r
print("test_idle_memory: ok")
