#!/usr/bin/env python3
"""The Rust and Go controls of the PostgreSQL comparison (bench/control/tokio_postgres: pg_tokio;
bench/control/go_pgx: pg_pgx), built here with cargo and go (their lock files pinned) and run
against a real PostgreSQL (bench/harness/postgres.py) with raw_pg's flags: both modes, unnamed
and prepared statements, every reply checked (JSON: queries > 0, errors 0, raw_pg's fields); bad
flags are one line and exit 2; a wrong password is exit 1 with the server's message; a restart
mid-run ends the run with errors and exit 1. A missing toolchain, or a build that cannot
download its dependencies, is one line and that control is skipped (exit 77 when both are).
No timing is asserted. Run by ctest."""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench")
sys.path.insert(0, os.path.join(BENCH, "harness"))
import postgres  # noqa: E402
import harness  # noqa: E402
from foreign_runs import (check_pg_run, expect_usage, expect_wrong_password,  # noqa: E402
                          restart_mid_run, run)

OFFLINE = ("failed to download", "Could not resolve host", "failed to get", "dial tcp",
           "no such host", "network is unreachable", "timed out")


def build(tmp):
    """name -> binary of the controls that could be built; prints a line for each that could
    not, and fails the test on a build error that is not a missing toolchain or network."""
    out = {}
    path, why = harness.cargo_build(os.path.join(BENCH, "control", "tokio_postgres"), "pg_tokio")
    if path is None and "cargo build failed" in why and not any(w in why for w in OFFLINE):
        raise AssertionError(f"pg_tokio: {why}")
    out["pg_tokio"] = (path, why)
    path, why = harness.go_build(os.path.join(BENCH, "control", "go_pgx"),
                                 os.path.join(tmp, "pg_pgx"))
    if path is None and "build of" in why and not any(w in why for w in OFFLINE):
        raise AssertionError(f"pg_pgx: {why}")
    out["pg_pgx"] = (path, why)
    for name, (path, why) in out.items():
        if path is None:
            print(f"test_foreign_controls: SKIP {name}: {why}")
    return {name: path for name, (path, why) in out.items() if path}


def check(name, binary, pg):
    for args, words in ((["--conninfo", "x", "--connections", "0"], "--connections"),
                        (["--conninfo", "x", "--mode", "nope"], "--mode"),
                        (["--bogus"], "bogus"), ([], "--conninfo is required")):
        expect_usage(name, [binary] + args, words)
    r = run([binary, "--help"])
    assert r.returncode == 0 and "--conninfo" in r.stdout, r

    short = ["--connections", "4", "--duration", "0.5", "--warmup", "0.2"]
    for statement in ("params", "prepared"):
        flag = ["--prepared"] if statement == "prepared" else []
        check_pg_run([binary, "--conninfo", pg.conninfo()] + short + flag, implementation=name,
                     mode="single", statement=statement, connections=4, inflight=4, depth=1)
        pipe = ["--mode", "pipeline"] + (["--depth", "8"] if name == "pg_pgx" else
                                         ["--inflight", "64"])
        check_pg_run([binary, "--conninfo", pg.url()] + short + flag + pipe, mode="pipeline",
                     statement=statement, inflight=32 if name == "pg_pgx" else 64)
    expect_wrong_password([binary] + short, pg)
    for mode in ("single", "pipeline"):
        restart_mid_run([binary, "--mode", mode], pg)
    print(f"test_foreign_controls: {name}: flags, both modes, both statements, a wrong password, "
          "a restart mid-run ok")


with tempfile.TemporaryDirectory() as tmp:
    controls = build(tmp)
    if not controls:
        print("test_foreign_controls: SKIP: neither control could be built")
        sys.exit(77)
    try:
        server = postgres.Server()
    except postgres.Unavailable as e:
        print(f"test_foreign_controls: SKIP the runs: {e}")
        sys.exit(77)
    with server as pg:
        for name, binary in controls.items():
            check(name, binary, pg)
