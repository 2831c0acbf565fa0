#!/usr/bin/env python3
"""bench/studies/http_count.py's error paths: bad flags and a missing tool or server binary are
exit 2 with one line saying what is wrong (no valgrind run needed)."""
import os

import tool_cli

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "bench", "studies", "http_count.py")


def expect_exit_2(args, *words):
    tool_cli.expect_exit_2(TOOL, args, *words)


expect_exit_2(["--servers", "nope"], "unknown server(s) nope")
expect_exit_2(["--servers", ""], "unknown server(s) (none)")
expect_exit_2(["-c", "0"], "-c and -d must be at least 1")
expect_exit_2(["-d", "0"], "-c and -d must be at least 1")
expect_exit_2(["-c", "many"], "invalid int value")
# A server binary that is not there (or, on a machine without them, valgrind or wrk).
expect_exit_2(["--bin", "/nonexistent/bin"], "/nonexistent/bin/http_server not found",
              "is not installed")
print("test_http_count: ok")
