#!/usr/bin/env python3
"""bench/studies/tls.py: bad flags are exit 2 with one line; then, when this machine has the tools,
a tiny real run (argv[1]: the bin directory of this build, with tls_load and tls_echo_raw) against
nginx or Go, the raw-OpenSSL proxy and, when this build has galay's TLS examples (http_server
--tls-cert, tls_proxy), their epoll servers: every part measured something, with 0 errors, the
resumed handshakes resumed, and the JSON on stdout. Missing tools: SKIP (exit 77), said in one
line."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import tool_cli

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "bench", "studies", "tls.py")
BIN = sys.argv[1] if len(sys.argv) > 1 else None


def expect_exit_2(args, *words):
    tool_cli.expect_exit_2(TOOL, args, *words)
    # one line, not argparse's usage block
    r = tool_cli.run(TOOL, *args)
    assert len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)


expect_exit_2(["--parts", "nope"], "unknown part 'nope'")
expect_exit_2(["--parts", ","], "--parts: none given")
expect_exit_2(["--servers", "apache"], "--servers: unknown apache")
expect_exit_2(["-c", "0"], "-c must be at least 1")
expect_exit_2(["-c", "many"], "-c: expected comma-separated numbers")
expect_exit_2(["--pairs", "0"], "--pairs and -c must be at least 1")
expect_exit_2(["-d", "0"], "-d above 0")
expect_exit_2(["--bytes", "0"], "--bytes must be at least 1")
expect_exit_2(["--pairs", "x"], "invalid int value")
expect_exit_2(["--baseline-bin", HERE, "--parts", "https"],
              "--baseline-bin: only with --parts handshake")
print("test_tls_bench: bad flags ok")

if BIN is None:
    print("test_tls_bench: SKIP the real run: no bin directory given")
    sys.exit(77)
missing = [t for t in ("openssl", "taskset") if not shutil.which(t)]
missing += [b for b in ("tls_load", "tls_echo_raw", "raw_epoll")
            if not os.access(os.path.join(BIN, b), os.X_OK)]
peer = ("nginx" if shutil.which("nginx") or os.access("/usr/sbin/nginx", os.X_OK)
        else "go" if shutil.which("go") else None)
if peer is None:
    missing.append("nginx or go")
if missing:
    print(f"test_tls_bench: SKIP the real run: missing {', '.join(missing)}")
    sys.exit(77)



def has_tls_flag(binary):
    if not os.access(binary, os.X_OK):
        return False
    r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10)
    return "--tls-cert" in r.stdout + r.stderr


https = [peer] + (["galay-epoll"] if has_tls_flag(os.path.join(BIN, "http_server")) else [])
proxies = ["raw-tls-proxy"] + (["galay-tls-proxy-epoll"]
                               if os.access(os.path.join(BIN, "tls_proxy"), os.X_OK) else [])
floor = (["raw-openssl"] if os.access(os.path.join(BIN, "tls_handshake_raw"), os.X_OK)
         else [])  # (handshake cases only: it closes after one answer)
print(f"test_tls_bench: a real run of {', '.join(https + floor + proxies)}")
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "tls.json")
    r = tool_cli.run(TOOL, "--bin", BIN, "--quick", "--servers",
                     ",".join(https + floor + proxies),
                     "--json", "--out", out, timeout=200)
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    res = json.loads(r.stdout)
    with open(out) as f:
        assert json.load(f)["config"] == res["config"]

assert not res["failures"], res["failures"]
(keepalive,) = res["https"]
assert not set(floor) & set(keepalive["runs"][0]), keepalive["runs"][0].keys()
for name in https + floor:
    if name in floor:
        label = f"nginx/{name}" if peer == "nginx" else f"{name}/go"
        assert label in res["handshake"][0]["ratios"], res["handshake"][0]["ratios"].keys()
    else:
        rec = keepalive["runs"][0][name]
        assert rec["ok"] and rec["requests"] > 0 and rec["errors"] == 0, rec
        assert rec["negotiated"] == "TLSv1.3 TLS_AES_128_GCM_SHA256 x25519", rec
        assert rec["cpu_us_per_req"] > 0, rec
    hs = {e["resume"]: e["runs"][0][name] for e in res["handshake"]}
    for resume, rec in hs.items():
        assert rec["ok"] and rec["handshakes"] > 0 and rec["errors"] == 0, rec
        assert rec["negotiated"] == "TLSv1.3 TLS_AES_128_GCM_SHA256 x25519", rec
        assert rec["hs_per_cpu_s"] > 0, rec
    assert hs[False]["resumed_pct"] == 0, hs[False]
    assert hs[True]["resumed_pct"] > 50, hs[True]
(echo,) = res["echo"]
for name in proxies:
    rec = echo["runs"][0][name]
    assert rec["ok"] and rec["bytes"] > 0 and rec["errors"] == 0, rec
    assert rec["negotiated"] == "TLSv1.3 TLS_AES_128_GCM_SHA256 x25519", rec
    assert rec["mb_per_cpu_s"] > 0, rec
print("test_tls_bench: ok")
