#!/usr/bin/env python3
"""bench/studies/churn.py without measuring: ab() runs each side with its own churn client
(--a-client/--b-client), takes the server's and the client's CPU per connection as ratios within
each pair, gives the range of TIME_WAIT counts the runs saw, and the summary table shows them;
time_wait_sockets() reads this kernel's count. Run by ctest."""
import argparse
import os
import sys

# bench/harness (the shared modules) and bench/studies, as every study puts them on the path.
BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import churn  # noqa: E402

calls = []


def fake_run_one(args, server_cmd, client=None):
    """A run's record as run_one makes it: A's server takes 10 us, B's 20; A's client 30, B's 60."""
    calls.append((server_cmd, client))
    a = server_cmd.startswith("a")
    tw = 1000 * len(calls)
    return {"server": churn.label(server_cmd), "ok": True, "problems": [],
            "conns_per_sec": 100.0, "latency_us": {"p99": 50.0}, "errors": 0, "leaked_fds": 0,
            "server_cpu_us_per_conn": 10.0 if a else 20.0,
            "client_cpu_us_per_conn": 30.0 if a else 60.0,
            "time_wait_before": tw, "time_wait_after": tw + 500}


churn.run_one = fake_run_one
args = argparse.Namespace(pairs=3, a_client="/x/client_a", b_client="/y/client_b")
s = churn.ab(args, "a_server -p {port}", "b_server -p {port}", log=lambda _: None)

# Each side with its own client, in ABBA order.
assert [c[1] for c in calls] == ["/x/client_a", "/y/client_b", "/y/client_b", "/x/client_a",
                                 "/x/client_a", "/y/client_b"], calls
assert all((srv.startswith("a")) == (cl == "/x/client_a") for srv, cl in calls), calls
assert s["pairs_ok"] == 3, s
assert s["cpu_ratio"]["median"] == 0.5 and s["client_cpu_ratio"]["median"] == 0.5, s
assert s["time_wait"] == [1000, 6500], s["time_wait"]
table = "\n".join(churn.summary_lines([s]))
assert "client CPU/conn A/B" in table and "TIME_WAIT" in table, table
assert "1,000-6,500" in table, table

# Without the clients' figure (an older client) the column says so instead of failing.
calls.clear()


def older_client(a, c, client=None):
    rec = fake_run_one(a, c, client)
    del rec["client_cpu_us_per_conn"]
    return rec


churn.run_one = older_client
s = churn.ab(argparse.Namespace(pairs=2), "a_server", "b_server", log=lambda _: None)
assert [c[1] for c in calls] == [None] * 4, calls
assert s["client_cpu_ratio"] is None, s
assert "n/a" in "\n".join(churn.summary_lines([s]))

# This kernel's count (Linux: /proc/net/sockstat has it).
tw = churn.time_wait_sockets()
assert tw is None or (isinstance(tw, int) and tw >= 0), tw
if os.path.exists("/proc/net/sockstat"):
    assert tw is not None
print("churn ab: ok")
