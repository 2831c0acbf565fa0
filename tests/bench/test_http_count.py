#!/usr/bin/env python3
"""bench/http_count.py's error paths: bad flags and a missing tool or server binary are exit 2
with one line saying what is wrong (no valgrind run needed)."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "bench", "http_count.py")


def run(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True,
                          timeout=60)


def expect_exit_2(args, *words):
    r = run(*args)
    assert r.returncode == 2, (args, r.returncode, r.stdout, r.stderr)
    assert r.stdout == "", (args, r.stdout)
    assert any(w in r.stderr for w in words), (args, r.stderr)


expect_exit_2(["--servers", "nope"], "unknown server(s) nope")
expect_exit_2(["--servers", ""], "unknown server(s) (none)")
expect_exit_2(["-c", "0"], "-c and -d must be at least 1")
expect_exit_2(["-d", "0"], "-c and -d must be at least 1")
expect_exit_2(["-c", "many"], "invalid int value")
# A server binary that is not there (or, on a machine without them, valgrind or wrk).
expect_exit_2(["--bin", "/nonexistent/bin"], "/nonexistent/bin/http_server not found",
              "is not installed")
print("test_http_count: ok")
