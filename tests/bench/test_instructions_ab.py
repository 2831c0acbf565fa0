#!/usr/bin/env python3
"""bench/studies/instructions_ab.py: bad flags are exit 2; a short real run of this build's
bench_server against itself on epoll (argv[1]: its bin directory) prints every round and a ratio
line with instructions counted; a server that never starts fails its round, exit 1. Skipped (exit
77) without valgrind."""
import os
import re
import shutil
import sys

import tool_cli

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "bench", "studies", "instructions_ab.py")
BIN = sys.argv[1]
ok = f"{os.path.join(BIN, 'bench_server')} {{port}} --backend epoll"


def run(*args):
    return tool_cli.run(TOOL, "--bin", BIN, *args, timeout=300)


tool_cli.expect_exit_2(TOOL, ["--b", ok], "the following arguments are required: --a")
tool_cli.expect_exit_2(TOOL, ["--a", ok, "--b", ok, "-c", "ten"], "not a list of numbers")
tool_cli.expect_exit_2(TOOL, ["--a", ok, "--b", ok, "--rounds", "0"], "--rounds must be")
tool_cli.expect_exit_2(TOOL, ["--a", ok, "--b", ok, "--short", "2", "--long", "1"], "--short")
if shutil.which("valgrind") is None:
    print("test_instructions_ab: SKIP: no valgrind")
    sys.exit(77)

r = run("--a", ok, "--b", ok, "-c", "8", "--rounds", "1", "--short", "0.3", "--long", "0.8")
assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
counts = re.findall(r"^c=8 round 1 [AB]: ([\d.]+) instructions per request", r.stdout, re.M)
assert len(counts) == 2 and all(float(c) > 100 for c in counts), r.stdout
assert re.search(r"^c=8: A [\d.]+, B [\d.]+ instructions per request; A/B [\d.]+x \[[\d.]+-[\d.]+\]"
                 r" over 1 rounds", r.stdout, re.M), r.stdout

# A server that never starts: its round is reported on stderr, exit 1.
r = run("--a", ok, "--b", "/bin/false {port}", "-c", "4", "--rounds", "1", "--short", "0.2",
        "--long", "0.4")
assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
assert "did not accept" in r.stderr, r.stderr
print("test_instructions_ab: ok")
