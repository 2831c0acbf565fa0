#!/usr/bin/env python3
"""bench/studies/kv.py's error paths: bad flags and a missing mini_redis or Redis program are
exit 2 with a line saying what is wrong (nothing measured)."""
import os

import tool_cli

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "bench", "studies", "kv.py")


def expect_exit_2(args, *words):
    tool_cli.expect_exit_2(TOOL, args, *words)


expect_exit_2(["--servers", "nope"], "--servers: among galay-io_uring,redis,galay-epoll")
expect_exit_2(["--tests", "incr"], "--tests: set, get or set,get")
expect_exit_2(["--pipelines", "1,x"], "--pipelines: numbers separated by commas")
expect_exit_2(["--rounds", "0"], "must be at least 1")
expect_exit_2(["-c", "many"], "invalid int value")
# mini_redis not built there (or, on a machine without them, redis-server or redis-benchmark).
expect_exit_2(["--bin", "/nonexistent/bin"], "/nonexistent/bin/mini_redis not found",
              "is not installed")
print("test_kv: ok")
