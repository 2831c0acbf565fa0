#!/usr/bin/env python3
"""Scrapes GET /metrics from this build's bench_server (--metrics PORT) and http_server, after
real echoes and requests, and parses the text with Python's Prometheus parser
(python3-prometheus-client): every family is galay_*, per-worker series carry `worker`, and the
counters show the traffic sent. Exit 77 (skip) without the parser. Usage: test_metrics_scrape.py BIN_DIR
"""
import os
import socket
import subprocess
import sys
import urllib.request

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    # Debian's python3 has the package even when another python3 is first in PATH.
    if os.path.exists("/usr/bin/python3") and \
            os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("SKIP: python3-prometheus-client is not installed")
    sys.exit(77)


def start(argv, pattern):
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            stdin=subprocess.DEVNULL)
    lines = {}
    while len(lines) < len(pattern):
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"FAIL: {argv[0]} exited before printing {pattern}: {proc.wait()}")
        for key, prefix in pattern.items():
            if line.startswith(prefix):
                lines[key] = line
    return proc, lines


def families(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200, r.status
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers
        text = r.read().decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    for name, fam in fams.items():
        assert name.startswith("galay_"), name
    return fams


def value(fams, name, **labels):
    total = 0.0
    for s in fams[name].samples:
        if s.name in (name, name + "_total") and all(s.labels.get(k) == v for k, v in labels.items()):
            total += s.value
    return total


def check_bench_server(bin_dir):
    proc, lines = start([os.path.join(bin_dir, "bench_server"), "0", "--bind", "127.0.0.1",
                         "--threads", "2", "--metrics", "0", "--recv", "copy"],
                        {"echo": "listening on", "metrics": "metrics on"})
    try:
        echo_port = int(lines["echo"].split()[2].rsplit(":", 1)[1])
        url = lines["metrics"].split()[-1]
        sent = 0
        for _ in range(4):
            with socket.create_connection(("127.0.0.1", echo_port)) as c:
                for _ in range(25):
                    c.sendall(b"x" * 100)
                    got = b""
                    while len(got) < 100:
                        got += c.recv(100 - len(got))
                    sent += 100
        # The client has every echoed byte before the server's worker has necessarily counted the
        # send that carried it (the completion is reaped after the bytes left): scrape again, a
        # bounded number of times, until the last sends are counted.
        for _ in range(200):
            fams = families(url)
            if value(fams, "galay_ops_completed", op="send") >= 100:
                break
        for w in ("0", "1"):
            assert any(s.labels.get("worker") == w for s in fams["galay_tasks_alive"].samples), w
        # (the scrape's own connection is counted too: at least the echoed bytes)
        assert value(fams, "galay_op_bytes", op="recv") >= sent, value(fams, "galay_op_bytes", op="recv")
        assert value(fams, "galay_ops_completed", op="send") >= 100
        assert fams["galay_completions_per_turn"].type == "histogram"
        assert fams["galay_busy_seconds"].type == "counter"
        with urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=10) as r:
            raise SystemExit(f"FAIL: /other answered {r.status}")
    except urllib.error.HTTPError as e:
        assert e.code == 404, e.code
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print("bench_server --metrics: parsed, per-worker series, traffic counted")


def check_http_server(bin_dir):
    path = os.path.join(bin_dir, "http_server")
    if not os.path.exists(path):
        print("http_server not built: its /metrics not checked")
        return
    proc, lines = start([path, "0", "--workers", "2"], {"listen": "listening on"})
    try:
        port = int(lines["listen"].split()[2].rsplit(":", 1)[1])
        for _ in range(10):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read()
        fams = families(f"http://127.0.0.1:{port}/metrics")
        assert value(fams, "galay_tasks_spawned") >= 1
        assert value(fams, "galay_op_bytes", op="send") > 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print("http_server /metrics: parsed")


if __name__ == "__main__":
    check_bench_server(sys.argv[1])
    check_http_server(sys.argv[1])
    print("OK")
