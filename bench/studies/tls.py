#!/usr/bin/env python3
"""TLS on galay against nginx, Go and raw OpenSSL, in one command.

    python3 bench/studies/tls.py [--bin build/release/bin] [--parts https,handshake,echo]
                                 [-c 100,1000] [--pairs 3] [-d 5] [--warmup 1]
                                 [--https-load tls_load|wrk] [--hs-conns 100] [--echo-conns 50]
                         [--bytes 16384,262144] [--servers NAMES] [--quick] [--json] [--out FILE]
                         [--baseline-bin DIR]

Three parts, every server pinned to CPU 1 (--server-cpu), every load generator to CPU 0
(--client-cpu), with one ECDSA P-256 certificate made at run time (openssl CLI: a CA and a leaf
for localhost and 127.0.0.1, the leaf alone sent by every server) and one TLS 1.3 cipher suite and
group for every server: the clients (wrk, tls_load) run with an OpenSSL configuration
(OPENSSL_CONF) that offers only TLS 1.3, TLS_AES_128_GCM_SHA256 and X25519, so no server can pick
another (the one Go picks on its own). The negotiated version, suite and group are in the tables.

  https      HTTPS keep-alive GET / ("Hello, World!") at each -c: galay-io_uring and
             galay-epoll (http_server --tls-cert --tls-key --backend B), nginx (one worker,
             ssl_protocols TLSv1.3, the config made in a temp dir), go (net/http
             ListenAndServeTLS, GOMAXPROCS=1: bench/control/go_https). The survey's columns of
             bench/studies/http_servers.py (requests/s, server CPU per request, latency
             percentiles, errors).
             The load (--https-load): tls_load --mode keepalive by default, wrk -t1's closed loop
             (one request outstanding per connection) on raw OpenSSL, whose measured window
             begins once every connection has done its handshake; or wrk -t1 on https://
             (Debian's wrk has OpenSSL), whose measured run opens its -c connections itself: at
             1,000 connections those handshakes were a quarter of nginx's CPU in a 5 s run.
  handshake  New TLS 1.3 connections per server CPU-second, same four servers: tls_load (a
             one-thread epoll load generator on raw OpenSSL, bench/baselines/tls_load.cpp) keeps
             --hs-conns connections in flight, each a handshake, one GET / with
             `Connection: close`, the response, close_notify, close; without and with
             resumption (the newest session ticket offered: PSK with X25519, no certificate,
             no signature); with them the floor, raw-openssl (bench/baselines/tls_handshake_raw:
             raw OpenSSL on plain sockets and epoll doing only the handshake, one request, a
             fixed answer, close_notify, close), so that what is OpenSSL's own price (raw-openssl
             / go) is told apart from what a server adds to it (galay / raw-openssl).
             tls_load does not build the server's chain (it still checks the
             CertificateVerify signature, as TLS 1.3 requires): an ECDSA verify costs the client
             more than the sign costs the server, so on two cores the server may not be fully
             busy; its CPU per handshake is what is compared, and its CPU use is in the table.
  echo       TLS echo through a TLS-terminating proxy (TLS in, plain TCP out to an echo
             upstream, raw_epoll on the client CPU): galay's TLS proxy example
             (copy_bidirectional(tls, tcp)), the same proxy without TLS (tcp_proxy, with
             tls_load --plain) and the hand-written floor, tls_echo_raw --upstream (raw OpenSSL
             over epoll, bench/baselines/tls_echo_raw.cpp); --echo-conns persistent connections
             each echoing messages of each --bytes size (16 KiB and 256 KiB: a relay is judged
             at large messages), every byte compared. Figure: bytes through per
             proxy CPU-second (the upstream's CPU not counted).

Method (bench/studies/http_servers.py's): every round starts every server once, in an order rotated
from round to round, and runs all of that server's cases on a fresh port after one real request
checked (HTTPS GET / with the chain and name verified against the CA, or an echo through the proxy);
each case gets --warmup seconds not counted, then -d measured. Server CPU: time on a CPU of the
server's process tree over the measured run (/proc/PID/task/*/schedstat). Ratios galay / other
are per round, quoted as median [min-max] over the rounds, with a verdict only when the whole
spread is on one side of 1.00 (at least 3 rounds). The issue's targets are read off the spreads.

An A/B of a change to galay's TLS: --baseline-bin DIR (with --parts handshake) adds the
http_server of another build (DIR: its bin/) as galay-io_uring@base and galay-epoll@base, run in
the same rounds, in the same rotation, and the ratios galay-B/galay-B@base.

A missing wrk, nginx, Go toolchain, openssl CLI or galay TLS example is one line in the report,
and the rest goes on. Exit status 1 when a galay server failed to start, answered wrong or had
errors under load; 2 on bad flags. Standard library only. `suite_section()` is the short form
`make bench` (bench/suite.py) runs.
"""
import argparse
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
import harness  # noqa: E402  (ports, server start/stop, CPU accounting, spreads, verdicts)
import http_servers as hb  # noqa: E402  (wrk's report hook, records, nginx, tables)

BODY = hb.BODY
GALAY_HTTPS = ("galay-io_uring", "galay-epoll")
OTHER_HTTPS = ("nginx", "go")
RAW_HS = "raw-openssl"  # the handshake part's floor (no keep-alive: handshake cases only)
GALAY_BASE = tuple(f"{g}@base" for g in GALAY_HTTPS)  # --baseline-bin: the build before a change
GALAY_TLS_PROXY = ("galay-tls-proxy-io_uring", "galay-tls-proxy-epoll")
GALAY_TCP_PROXY = ("galay-tcp-proxy-io_uring", "galay-tcp-proxy-epoll")
RAW_TLS_PROXY = "raw-tls-proxy"
PARTS = ("https", "handshake", "echo")

# What every client offers: one suite, one group, TLS 1.3 only (OPENSSL_CONF for wrk and
# tls_load; Go and nginx then have nothing else to pick).
CLIENT_OPENSSL_CNF = """openssl_conf = galay_bench
[galay_bench]
ssl_conf = galay_bench_ssl
[galay_bench_ssl]
system_default = galay_bench_client
[galay_bench_client]
MinProtocol = TLSv1.3
Ciphersuites = TLS_AES_128_GCM_SHA256
Groups = X25519
"""

note = hb.note


# ---------------------------------------------------------------------------------------------
# Certificates and servers
# ---------------------------------------------------------------------------------------------

def make_certificates(work):
    """A P-256 CA and a leaf for localhost/127.0.0.1 signed by it, in `work`: {"ca", "cert",
    "key"} paths, or raises RuntimeError with openssl's message."""
    ext = os.path.join(work, "leaf.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n")
    p = {k: os.path.join(work, v) for k, v in
         (("ca_key", "ca.key"), ("ca", "ca.pem"), ("key", "key.pem"), ("csr", "leaf.csr"),
          ("cert", "cert.pem"))}
    steps = [
        ["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", p["ca_key"]],
        ["openssl", "req", "-x509", "-new", "-key", p["ca_key"], "-subj", "/CN=galay bench CA",
         "-days", "2", "-out", p["ca"]],
        ["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", p["key"]],
        ["openssl", "req", "-new", "-key", p["key"], "-subj", "/CN=localhost", "-out", p["csr"]],
        ["openssl", "x509", "-req", "-in", p["csr"], "-CA", p["ca"], "-CAkey", p["ca_key"],
         "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", p["cert"]],
    ]
    for argv in steps:
        cp = children.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if cp.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:3])}: {cp.stdout.strip()[-200:]}")
    for k in ("key", "cert", "ca"):
        os.chmod(p[k], 0o644)  # (nginx's worker reads them as the current user)
    return p


def nginx_tls_conf(prefix, port, root, cert, key):
    """bench/studies/http_servers.py's nginx configuration with TLS 1.3 on its one listener."""
    plain = f"listen {port} backlog=4096;"
    conf = hb.nginx_conf(prefix, port, root)
    assert plain in conf, "bench/studies/http_servers.py's nginx_conf changed its listen line"
    return conf.replace(plain, f"listen {port} ssl backlog=4096;\n"
                               f"        ssl_certificate {cert};\n"
                               f"        ssl_certificate_key {key};\n"
                               f"        ssl_protocols TLSv1.3;")


def help_mentions(binary, flag):
    """Whether `binary --help` (or its usage on a bad flag) mentions `flag`."""
    try:
        cp = children.run([binary, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return flag in cp.stdout


class Servers:
    """What can run here. `https`: name -> function(port) -> (argv, env); `proxies`: name ->
    (function(port, upstream) -> (argv, env), tls: bool)."""

    def __init__(self, bindir, work, certs, want_parts, only=None, base_bin=None):
        """`only`: the names that will run (None: all); Go is built only when it is one.
        `base_bin`: another build's bin/, whose http_server runs as galay-B@base."""
        self.bindir, self.work, self.certs = bindir, work, certs
        self.https, self.proxies, self.missing = {}, {}, []
        self.root = os.path.join(work, "www")
        os.makedirs(self.root, exist_ok=True)
        os.chmod(work, 0o755)
        os.chmod(self.root, 0o755)
        cert, key = certs["cert"], certs["key"]
        tls_flags = ["--tls-cert", cert, "--tls-key", key]

        server = os.path.join(bindir, "http_server")
        if not os.access(server, os.X_OK):
            self.missing.append(f"galay: {server} not built (make build): galay HTTPS skipped")
        elif not help_mentions(server, "--tls-cert"):
            self.missing.append(f"galay: {server} has no --tls-cert (galay's TLS not in this "
                                "build): galay HTTPS skipped")
        else:
            for be in ("io_uring", "epoll"):
                self.https[f"galay-{be}"] = (
                    lambda port, be=be: ([server, str(port), "--backend", be] + tls_flags, None))
        base = os.path.join(base_bin, "http_server") if base_bin else None
        if base and not os.access(base, os.X_OK):
            self.missing.append(f"--baseline-bin: {base} not built: no A/B")
        elif base:
            for be in ("io_uring", "epoll"):
                self.https[f"galay-{be}@base"] = (
                    lambda port, be=be: ([base, str(port), "--backend", be] + tls_flags, None))

        raw = os.path.join(bindir, "tls_handshake_raw")
        if "handshake" in want_parts and os.access(raw, os.X_OK):
            self.https[RAW_HS] = lambda port: (
                [raw, str(port), "--cert", cert, "--key", key], None)
        elif "handshake" in want_parts:
            self.missing.append(f"tls_handshake_raw: {raw} not built (needs libssl-dev): the "
                                "raw OpenSSL floor of the handshakes skipped")
        if {"https", "handshake"} & set(want_parts):
            nginx = shutil.which("nginx") or (
                "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
            if nginx:
                self.https["nginx"] = lambda port: self._nginx(nginx, port)
            else:
                self.missing.append("nginx: not installed (apt-get install nginx-light): skipped")
            go_bin = self._go_server() if only is None or "go" in only else None
            if go_bin:
                env = dict(os.environ, GOMAXPROCS="1")
                self.https["go"] = lambda port: (
                    [go_bin, "-port", str(port), "-cert", cert, "-key", key], env)

        if "echo" in want_parts:
            self._find_proxies(tls_flags)

    def _find_proxies(self, tls_flags):
        bindir = self.bindir
        tls_proxy = os.path.join(bindir, "tls_proxy")
        tcp_proxy = os.path.join(bindir, "tcp_proxy")
        if os.access(tls_proxy, os.X_OK):
            galay_tls = tls_proxy
        elif os.access(tcp_proxy, os.X_OK) and help_mentions(tcp_proxy, "--tls-cert"):
            galay_tls = tcp_proxy
        else:
            galay_tls = None
            self.missing.append(f"galay: no TLS proxy example in {bindir} (tls_proxy, or "
                                "tcp_proxy --tls-cert): galay's TLS echo skipped")
        for be in ("io_uring", "epoll"):
            env = dict(os.environ, GALAY_BACKEND=be)
            if galay_tls:
                self.proxies[f"galay-tls-proxy-{be}"] = (
                    lambda port, up, env=env: ([galay_tls, str(port), up] + tls_flags, env), True)
            if os.access(tcp_proxy, os.X_OK):
                self.proxies[f"galay-tcp-proxy-{be}"] = (
                    lambda port, up, env=env: ([tcp_proxy, str(port), up], env), False)
        if not os.access(tcp_proxy, os.X_OK):
            self.missing.append(f"galay: {tcp_proxy} not built: the proxy without TLS skipped")
        raw = os.path.join(bindir, "tls_echo_raw")
        if os.access(raw, os.X_OK):
            self.proxies[RAW_TLS_PROXY] = (
                lambda port, up: ([raw, str(port), "--cert", self.certs["cert"], "--key",
                                   self.certs["key"], "--upstream", up], None), True)
        else:
            self.missing.append(f"tls_echo_raw: {raw} not built (needs libssl-dev): the raw "
                                "OpenSSL floor skipped")

    def _go_server(self):
        built = os.path.join(self.bindir, "go_https_server")
        go = shutil.which("go")
        if not go:
            if os.access(built, os.X_OK):
                return built
            self.missing.append("go: no Go toolchain on PATH: the Go server is skipped")
            return None
        out, why = harness.go_build(os.path.join(BENCH, "control", "go_https"),
                                    os.path.join(self.work, "go_https_server"), "./server")
        if out is None:
            self.missing.append(f"go: {why}: the Go server is skipped")
        return out

    def _nginx(self, nginx, port):
        prefix = tempfile.mkdtemp(prefix="nginx-", dir=self.work)
        os.chmod(prefix, 0o755)
        conf = os.path.join(prefix, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_tls_conf(prefix, port, self.root, self.certs["cert"],
                                   self.certs["key"]))
        return [nginx, "-p", prefix, "-c", conf], None


# ---------------------------------------------------------------------------------------------
# Checks and runs
# ---------------------------------------------------------------------------------------------

def https_get(port, ca, timeout=5.0):
    """GET / over TLS, the chain and the name (localhost) verified: (status, body, what was
    negotiated) or raises."""
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                head, sep, body = data.partition(b"\r\n\r\n")
                if sep:
                    length = next((int(l.split(b":", 1)[1]) for l in head.split(b"\r\n")[1:]
                                   if l.lower().startswith(b"content-length:")), None)
                    if length is not None and len(body) >= length:
                        break
                try:
                    chunk = s.recv(65536)
                except ssl.SSLError as e:  # (EOF without close_notify after the body)
                    if sep:
                        break
                    raise OSError(str(e)) from e
                if not chunk:
                    break
                data += chunk
            what = f"{s.version()} {s.cipher()[0]}"
    status = int(head.split(b" ", 2)[1])
    return status, body.decode(errors="replace"), what


def echo_check(port, ca, tls, payload=b"galay tls bench echo check\n", timeout=5.0):
    """One message through the proxy and back: None when it came back whole, else why not."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
        s = raw
        if tls:
            s = ssl.create_default_context(cafile=ca).wrap_socket(raw,
                                                                  server_hostname="localhost")
        s.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        if tls:
            s.close()
    return None if got == payload else f"echo check: sent {payload!r}, got {got!r}"


def start(make, name, tag, args, logdir, rec):
    """The server `make(port)` gives (argv, env) for, on a free port, pinned to the server CPU
    and waited for until it accepts: (proc, log, port); a failure is in rec['problems']."""
    port = harness.free_port()
    argv, env = make(port)
    log = open(os.path.join(logdir, f"{tag}-{name}.server.log"), "w")
    proc = children.popen(["taskset", "-c", str(args.server_cpu)] + argv, env=env, stdout=log,
                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                          preexec_fn=harness.raise_nofile)
    if not harness.wait_accepting(proc, port, 10.0):
        rec["problems"].append(f"did not accept on port {port} (exit {proc.poll()}); "
                               f"log {log.name}")
    return proc, log, port


def client_env(args):
    env = dict(os.environ, OPENSSL_CONF=args.client_cnf)
    # The load generator exits without freeing OpenSSL's objects; in a sanitizer build of the
    # tools that is a leak report and exit 1, which says nothing about the server under test.
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
    return env


def run_wrk(rec, proc, port, conns, args):
    """HTTPS keep-alive: wrk warm-up, then the measured wrk run; fills the survey's columns."""
    url = f"https://127.0.0.1:{port}/"
    env = client_env(args)
    if args.warmup > 0:
        children.run(hb.wrk_argv(args, conns, args.lua, args.warmup, url), env=env,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     preexec_fn=harness.raise_nofile, timeout=args.warmup + 60)
    cpu0 = harness.tree_cpu_s(proc.pid)
    try:
        cp = children.run(hb.wrk_argv(args, conns, args.lua, args.duration, url), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=harness.raise_nofile, timeout=args.duration + 60)
    except subprocess.TimeoutExpired:
        rec["problems"].append("wrk did not finish")
        rec["ok"] = False
        return
    cpu1 = harness.tree_cpu_s(proc.pid)
    hb.fill_record(rec, proc, cp.returncode, cp.stdout, cp.stderr, cpu1 - cpu0)


def run_keepalive(rec, proc, port, conns, args):
    """HTTPS keep-alive under tls_load --mode keepalive: the survey's columns from its measured
    window, which begins once every connection has done its handshake."""
    r, cpu, problem = run_tls_load(proc, port, ["-c", str(conns), "--mode", "keepalive"], args)
    if problem:
        rec["problems"].append(problem)
        rec["ok"] = False
        return
    hb.set_columns(rec, proc, r["requests"], r["errors"], r["error_kinds"],
                   100.0 * r["errors"] / max(r["requests"] + r["errors"], 1), r["duration_s"],
                   r["latency_us"], cpu, r["requests"])
    rec["negotiated"] = r["negotiated"]
    if not r["requests"]:
        rec["problems"].append(f"no response in the measured window ({r['first_error']})")
        rec["ok"] = False


def run_tls_load(proc, port, extra, args):
    """tls_load on the client CPU with --warmup and -d, the server tree's CPU read when its
    measured window begins (its `measuring` line) and when it exits: (its JSON or None, server
    CPU seconds, problem or None)."""
    argv = ["taskset", "-c", str(args.client_cpu), os.path.join(args.bin, "tls_load"),
            "127.0.0.1", str(port), "-d", str(args.duration), "--warmup", str(args.warmup),
            "--json", "--mark"] + extra
    p = children.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=client_env(args), preexec_fn=harness.raise_nofile)
    cpu0 = None
    line = p.stdout.readline()
    if line.strip() == "measuring":
        cpu0 = harness.tree_cpu_s(proc.pid)
    try:
        out, err = p.communicate(timeout=args.warmup + args.duration + 60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return None, 0.0, "tls_load did not finish"
    cpu1 = harness.tree_cpu_s(proc.pid)
    if p.returncode != 0 or cpu0 is None:
        return None, 0.0, f"tls_load exit {p.returncode}: {(err or line).strip()[-200:]}"
    try:
        return json.loads(out.strip().splitlines()[-1]), cpu1 - cpu0, None
    except (ValueError, IndexError):
        return None, 0.0, f"tls_load printed no JSON: {out.strip()[-200:]}"


def handshake_record(name, resume, r, cpu_s):
    rec = {"server": name, "case": "resumed" if resume else "full", "ok": True, "problems": []}
    hs = r["handshakes"]
    rec.update({
        "handshakes": hs, "requests": r["requests"], "errors": r["errors"],
        "error_detail": r["error_kinds"], "first_error": r["first_error"],
        "negotiated": r["negotiated"],
        "resumed_pct": 100.0 * r["resumed"] / hs if hs else None,
        "hs_per_s": hs / r["duration_s"] if r["duration_s"] else None,
        "cpu_us_per_hs": 1e6 * cpu_s / hs if hs else None,
        "hs_per_cpu_s": hs / cpu_s if cpu_s > 0 else None,
        "server_cpu_pct": 100.0 * cpu_s / r["duration_s"] if r["duration_s"] else None,
        "client_cpu_pct": 100.0 * r["client_cpu_s"] / r["duration_s"] if r["duration_s"] else None,
    })
    if not hs:
        rec["problems"].append(f"no handshake completed ({r['first_error']})")
    elif resume and r["resumed"] * 2 < hs:
        rec["problems"].append(f"only {r['resumed']} of {hs} handshakes resumed")
    rec["ok"] = not rec["problems"]
    return rec


def echo_record(name, r, cpu_s):
    rec = {"server": name, "case": "echo", "ok": True, "problems": []}
    secs = r["duration_s"]
    rec.update({
        "messages": r["requests"], "bytes": r["bytes"], "errors": r["errors"],
        "error_detail": r["error_kinds"], "first_error": r["first_error"],
        "negotiated": r["negotiated"] or "plain TCP",
        "mb_per_s": r["bytes"] / secs / 1e6 if secs else None,
        "mb_per_cpu_s": r["bytes"] / cpu_s / 1e6 if cpu_s > 0 else None,
        "cpu_ns_per_byte": 1e9 * cpu_s / r["bytes"] if r["bytes"] else None,
        "server_cpu_pct": 100.0 * cpu_s / secs if secs else None,
        "client_cpu_pct": 100.0 * r["client_cpu_s"] / secs if secs else None,
    })
    if not r["bytes"]:
        rec["problems"].append(f"nothing echoed ({r['first_error']})")
    rec["ok"] = not rec["problems"]
    return rec


def failed_record(name, case, problems):
    return {"server": name, "case": case, "ok": False, "problems": list(problems)}


def run_server_cases(servers, name, cases, args, logdir, tag):
    """One HTTPS server: started, checked, then every case of `cases` (("https", conns),
    ("handshake", resume)) in order. {case: record}."""
    probe = {"problems": []}
    proc, log, port = start(servers.https[name], name, tag, args, logdir, probe)
    out = {}
    try:
        if not probe["problems"]:
            try:
                status, body, what = https_get(port, servers.certs["ca"])
                if status != 200 or body != BODY:
                    probe["problems"].append(f"GET /: status {status}, body {body[:60]!r}")
            except (OSError, ValueError, IndexError) as e:
                probe["problems"].append(f"GET / over TLS: {e}")
        for case in cases:
            if probe["problems"]:
                out[case] = failed_record(name, case[0], probe["problems"])
                continue
            if case[0] == "https":
                rec = hb.new_record(name, "https", case[1])
                if args.https_load == "wrk":
                    run_wrk(rec, proc, port, case[1], args)
                else:
                    run_keepalive(rec, proc, port, case[1], args)
            else:
                extra = ["-c", str(args.hs_conns), "--mode", "get"] + \
                        (["--resume"] if case[1] else [])
                r, cpu, problem = run_tls_load(proc, port, extra, args)
                rec = (failed_record(name, "handshake", [problem]) if problem
                       else handshake_record(name, case[1], r, cpu))
                if proc.poll() is not None:
                    rec["problems"].append(f"server died during the run (exit {proc.returncode})")
                    rec["ok"] = False
            out[case] = rec
    finally:
        code = harness.stop(proc)
        log.close()
    for rec in out.values():
        rec["server_exit"] = code
    return out


def run_proxy(servers, name, upstream, args, logdir, tag):
    """One proxy: started, checked with one echo, then the measured TLS (or plain) echo at each
    message size of args.sizes. {size: record}."""
    make, tls = servers.proxies[name]
    probe = {"problems": []}
    proc, log, port = start(lambda port: make(port, upstream), name, tag, args, logdir, probe)
    out = {}
    try:
        if not probe["problems"]:
            try:
                why = echo_check(port, servers.certs["ca"], tls)
            except (OSError, ssl.SSLError) as e:
                why = f"echo check: {e}"
            if why:
                probe["problems"].append(why)
        for size in args.sizes:
            if probe["problems"]:
                out[size] = failed_record(name, f"echo {size} B", probe["problems"])
                continue
            extra = ["-c", str(args.echo_conns), "--mode", "echo", "--bytes", str(size)] + \
                    ([] if tls else ["--plain"])
            r, cpu, problem = run_tls_load(proc, port, extra, args)
            rec = (failed_record(name, f"echo {size} B", [problem]) if problem
                   else echo_record(name, r, cpu))
            rec["case"] = f"echo {size} B"
            if proc.poll() is not None:
                rec["problems"].append(f"proxy died during the run (exit {proc.returncode})")
                rec["ok"] = False
            out[size] = rec
    finally:
        code = harness.stop(proc)
        log.close()
    for rec in out.values():
        rec["server_exit"] = code
    return out


# ---------------------------------------------------------------------------------------------
# Summaries and tables
# ---------------------------------------------------------------------------------------------

HANDSHAKE_ROWS = [
    ("negotiated", "negotiated", "{}"),
    ("handshakes", "handshakes", "{:,.0f}"),
    ("resumed", "resumed_pct", "{:.0f}%"),
    ("errors", "errors", "{:,.0f}"),
    ("handshakes/s", "hs_per_s", "{:,.0f}"),
    ("server CPU/handshake (us)", "cpu_us_per_hs", "{:.1f}"),
    ("handshakes per server CPU-second", "hs_per_cpu_s", "{:,.0f}"),
    ("server CPU busy", "server_cpu_pct", "{:.0f}%"),
    ("client CPU busy", "client_cpu_pct", "{:.0f}%"),
]
ECHO_ROWS = [
    ("negotiated", "negotiated", "{}"),
    ("messages echoed", "messages", "{:,.0f}"),
    ("errors", "errors", "{:,.0f}"),
    ("throughput (MB/s)", "mb_per_s", "{:,.1f}"),
    ("proxy CPU per byte (ns)", "cpu_ns_per_byte", "{:.3f}"),
    ("MB per proxy CPU-second", "mb_per_cpu_s", "{:,.0f}"),
    ("proxy CPU busy", "server_cpu_pct", "{:.0f}%"),
    ("client CPU busy", "client_cpu_pct", "{:.0f}%"),
]


def median_or_text(runs, key):
    """The median of a numeric column, or the first value of a text one."""
    vals = [r.get(key) for r in runs if r.get("ok") and r.get(key) is not None]
    if vals and isinstance(vals[0], str):
        return vals[0]
    return harness.median_of(runs, key)


def summarise(rounds, names, rows, pairs, ratio_keys):
    """rounds: [{name: rec}]; pairs: [(label, a, b)]; ratio_keys: [(ratio name, record key)].
    Medians per server and per-round ratios a/b as spreads."""
    medians = {n: {key: median_or_text([r[n] for r in rounds if n in r], key)
                   for _, key, _ in rows} for n in names}
    ratios = {}
    for label, a, b in pairs:
        if a not in names or b not in names:
            continue
        both = [(r[a], r[b]) for r in rounds if a in r and b in r and r[a]["ok"] and r[b]["ok"]]
        ratios[label] = {k: harness.spread([x[key] / y[key] for x, y in both
                                             if x.get(key) is not None and y.get(key)])
                         for k, key in ratio_keys}
    return medians, ratios


def ratio_table(ratios, columns, pairs_n, where):
    """columns: [(header, ratio key, lower is better, verdict words)]."""
    if not ratios:
        return []
    why = ("a verdict only when the whole spread is on one side of 1.00" if pairs_n >= 3 else
           "no verdicts: fewer than 3 rounds")
    lines = ["", f"Ratios in {where}, median [min-max] over {pairs_n} round(s); {why}:", "",
             "| | " + " | ".join(c[0] for c in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for label, r in ratios.items():
        cells = [f"{harness.fmt_spread(r.get(key))} {hb.verdict(r.get(key), lower, words)}"
                 .strip() for _, key, lower, words in columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def crit(s, threshold, pairs_n, lower_is_better=True):
    """A target read off a ratio's whole spread."""
    if s is None:
        return "no data"
    got = f"{s['median']:.2f}x [{s['min']:.2f}-{s['max']:.2f}]"
    if pairs_n < 3:
        return got + " (fewer than 3 rounds: no verdict)"
    if lower_is_better:
        return f"{got}: {harness.criterion_verdict(s, threshold)}"
    inverted = {"median": 1 / s["median"], "min": 1 / s["max"], "max": 1 / s["min"]}
    v = harness.criterion_verdict(inverted, 1 / threshold)
    return f"{got}: {v}"


HTTPS_PAIRS = [(f"{g}/{o}", g, o) for g in GALAY_HTTPS for o in OTHER_HTTPS]
RAW_PAIRS = ([(f"{g}/{RAW_HS}", g, RAW_HS) for g in GALAY_HTTPS + ("nginx",)]
             + [(f"{RAW_HS}/go", RAW_HS, "go")])
AB_PAIRS = [(f"{g}/{b}", g, b) for g, b in zip(GALAY_HTTPS, GALAY_BASE)]
ECHO_PAIRS = ([(f"{g}/{RAW_TLS_PROXY}", g, RAW_TLS_PROXY) for g in GALAY_TLS_PROXY]
              + [(f"{t}/{p}", t, p) for t, p in zip(GALAY_TLS_PROXY, GALAY_TCP_PROXY)])


def https_lines(entry, pairs_n):
    load = ("wrk -t1 (its handshakes in the measured run)" if entry["load"] == "wrk" else
            "tls_load --mode keepalive (the handshakes in the warm-up)")
    rows = ([("negotiated", "negotiated", "{}")] if entry["load"] != "wrk" else []) + hb.ROWS
    lines = hb.table_lines(f"HTTPS keep-alive GET / (13-byte body), {entry['connections']} "
                           f"connections, {load} (medians of {pairs_n} round(s))",
                           entry["servers"], entry["medians"], rows)
    lines += hb.ratio_lines(entry["ratios"], pairs_n)
    checks = []
    for g in GALAY_HTTPS:
        c = []
        r = entry["ratios"].get(f"{g}/nginx")
        if r:
            c.append(f"CPU/request vs nginx <= 1.00: {crit(r['cpu_per_req'], 1.0, pairs_n)}")
        r = entry["ratios"].get(f"{g}/go")
        if r:
            c.append(f"CPU/request vs Go <= 0.60: {crit(r['cpu_per_req'], 0.6, pairs_n)}")
        errs = entry["medians"].get(g, {}).get("error_pct")
        if c:
            c.append(f"errors {'none' if not errs else f'{errs:.2f}%'}")
            checks.append(f"- {g}: " + "; ".join(c))
    if checks:
        lines += ["", "The issue's targets (medians; provisional on a shared machine):"] + checks
    return lines


def handshake_lines(entry, pairs_n):
    what = "with resumption (session tickets)" if entry["resume"] else "full handshakes"
    lines = hb.table_lines(f"New TLS 1.3 connections, {what}, {entry['connections']} in "
                           f"flight, tls_load (medians of {pairs_n} round(s))",
                           entry["servers"], entry["medians"], HANDSHAKE_ROWS)
    lines += ratio_table(entry["ratios"],
                         [("handshakes per server CPU-second", "per_cpu", False,
                           ("more", "fewer")),
                          ("server CPU per handshake (lower is better)", "cpu", True,
                           ("less CPU", "more CPU"))],
                         pairs_n, "the same round (galay / other)")
    checks = []
    for g in GALAY_HTTPS:
        c = [f"vs {o} >= 1.00: {crit(entry['ratios'][f'{g}/{o}']['per_cpu'], 1.0, pairs_n, False)}"
             for o in OTHER_HTTPS if f"{g}/{o}" in entry["ratios"]]
        if c:
            checks.append(f"- {g}, handshakes per server CPU-second " + "; ".join(c))
    if checks:
        lines += ["", "The issue's targets:"] + checks
    return lines


def echo_lines(entry, pairs_n):
    lines = hb.table_lines(f"TLS echo through a TLS-terminating proxy to a plain echo upstream, "
                           f"{entry['connections']} connections, {entry['bytes']:,}-byte "
                           f"messages, tls_load (medians of {pairs_n} round(s))",
                           entry["servers"], entry["medians"], ECHO_ROWS)
    lines += ratio_table(entry["ratios"],
                         [("bytes per proxy CPU-second", "per_cpu", False, ("more", "fewer")),
                          ("proxy CPU per byte (lower is better)", "cpu", True,
                           ("less CPU", "more CPU"))],
                         pairs_n, "the same round (TLS proxy / raw OpenSSL proxy: the "
                                  "floor; TLS proxy / the same proxy without TLS: the cost of "
                                  "encryption)")
    checks = []
    for g in GALAY_TLS_PROXY:
        r = entry["ratios"].get(f"{g}/{RAW_TLS_PROXY}")
        if r:
            checks.append(f"- {g}: CPU per byte vs {RAW_TLS_PROXY} <= 1.10: "
                          f"{crit(r['cpu'], 1.1, pairs_n)}")
    if checks:
        lines += ["", "The issue's target:"] + checks
    return lines


def report_lines(result):
    lines = [f"- {m}" for m in result["missing"]]
    if lines:
        lines.append("")
    n = result["config"]["pairs"]
    for entry in result["https"]:
        lines += https_lines(entry, n) + [""]
    for entry in result["handshake"]:
        lines += handshake_lines(entry, n) + [""]
    for entry in result["echo"]:
        lines += echo_lines(entry, n) + [""]
    for f in result["failures"]:
        lines.append(f"- FAILED: {f}")
    return lines


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------

def account(rec, rnd, pairs_n, result, log, galay):
    rec["round"] = rnd + 1
    case = rec.get("case") or f"https c={rec.get('connections')}"
    case = {"full": "new, full", "resumed": "new, resumed"}.get(case, case)
    what = f"  {case:14} round {rnd + 1}/{pairs_n} {rec['server']:26}"
    if not rec["ok"]:
        log(f"{what} FAILED: {'; '.join(rec['problems'])}")
    elif "rps" in rec:
        log(f"{what} {rec['rps']:>9,.0f} req/s  cpu/req {rec['cpu_us_per_req'] or 0:.2f} us  "
            f"p99 {rec['p99_ms'] or 0:.2f} ms  errors {rec['errors']}")
    elif "hs_per_cpu_s" in rec:
        log(f"{what} {rec['hs_per_s'] or 0:>9,.0f} hs/s  {rec['hs_per_cpu_s'] or 0:,.0f} per "
            f"CPU-s  resumed {rec['resumed_pct'] or 0:.0f}%  errors {rec['errors']}")
    else:
        log(f"{what} {rec['mb_per_s'] or 0:>9,.1f} MB/s  {rec['mb_per_cpu_s'] or 0:,.0f} MB per "
            f"CPU-s  errors {rec['errors']}")
    if rec["server"] in galay and (not rec["ok"] or rec.get("errors")):
        result["failures"].append(
            f"{rec['server']} {case}: "
            + ("; ".join(rec["problems"]) or f"{rec['errors']} errors "
                                               f"{rec.get('error_detail')} "
                                               f"{rec.get('first_error', '')}".strip()))


def rotated(names, rnd):
    k = rnd % len(names) if names else 0
    return names[k:] + names[:k]


def measure_https_handshake(servers, parts, args, logdir, result, log):
    names = [n for n in GALAY_HTTPS + GALAY_BASE + OTHER_HTTPS + (RAW_HS,)
             if n in servers.https and (n != RAW_HS or "handshake" in parts) and (args.only is None or n in args.only)]
    cases = []
    if "https" in parts:
        if args.https_load == "wrk" and not shutil.which("wrk"):
            result["missing"].append("wrk: not installed (apt-get install wrk): HTTPS "
                                     "keep-alive skipped")
        else:
            cases += [("https", c) for c in args.conns]
    if "handshake" in parts:
        cases += [("handshake", False), ("handshake", True)]
    if not names or not cases:
        return
    rounds = {c: [] for c in cases}
    for rnd in range(args.pairs):
        per = {c: {} for c in cases}
        for name in rotated(names, rnd):
            args.seq += 1
            mine = [c for c in cases if name != RAW_HS or c[0] == "handshake"]
            recs = run_server_cases(servers, name, mine, args, logdir, f"{args.seq:03d}")
            for c, rec in recs.items():
                per[c][name] = rec
                account(rec, rnd, args.pairs, result, log, GALAY_HTTPS + GALAY_BASE)
        for c in cases:
            rounds[c].append(per[c])
    for c in cases:
        if c[0] == "https":
            medians, ratios = hb.summarise(rounds[c], [n for n in names if n != RAW_HS])
            ratios = {k: v for k, v in ratios.items() if k in {p[0] for p in HTTPS_PAIRS}}
            for n in medians:
                medians[n]["negotiated"] = median_or_text([r[n] for r in rounds[c]],
                                                          "negotiated")
            result["https"].append({"connections": c[1], "load": args.https_load,
                                    "servers": list(medians), "medians": medians, "ratios": ratios,
                                    "runs": rounds[c]})
        else:
            medians, ratios = summarise(rounds[c], names, HANDSHAKE_ROWS,
                                        HTTPS_PAIRS + RAW_PAIRS + AB_PAIRS,
                                        [("per_cpu", "hs_per_cpu_s"),
                                         ("cpu", "cpu_us_per_hs")])
            result["handshake"].append({"resume": c[1], "connections": args.hs_conns,
                                        "servers": names, "medians": medians, "ratios": ratios,
                                        "runs": rounds[c]})


def measure_echo(servers, args, logdir, result, log):
    names = [n for n in GALAY_TLS_PROXY + GALAY_TCP_PROXY + (RAW_TLS_PROXY,)
             if n in servers.proxies and (args.only is None or n in args.only)]
    if not names:
        return
    raw = os.path.join(args.bin, "raw_epoll")
    if not os.access(raw, os.X_OK):
        result["missing"].append(f"raw_epoll: {raw} not built: no echo upstream, TLS echo "
                                 "skipped")
        return
    up_port = harness.free_port()
    up_log = open(os.path.join(logdir, "upstream.log"), "w")
    upstream = children.popen(["taskset", "-c", str(args.client_cpu), raw, str(up_port)],
                              stdout=up_log, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, preexec_fn=harness.raise_nofile)
    try:
        if not harness.wait_accepting(upstream, up_port, 10.0):
            result["failures"].append(f"the echo upstream raw_epoll did not start; log "
                                      f"{up_log.name}")
            return
        rounds = {size: [] for size in args.sizes}
        for rnd in range(args.pairs):
            per = {size: {} for size in args.sizes}
            for name in rotated(names, rnd):
                args.seq += 1
                recs = run_proxy(servers, name, f"127.0.0.1:{up_port}", args, logdir,
                                 f"{args.seq:03d}")
                for size, rec in recs.items():
                    per[size][name] = rec
                    account(rec, rnd, args.pairs, result, log, GALAY_TLS_PROXY + GALAY_TCP_PROXY)
            for size in args.sizes:
                rounds[size].append(per[size])
        for size in args.sizes:
            medians, ratios = summarise(rounds[size], names, ECHO_ROWS, ECHO_PAIRS,
                                        [("per_cpu", "mb_per_cpu_s"), ("cpu", "cpu_ns_per_byte")])
            result["echo"].append({"connections": args.echo_conns, "bytes": size,
                                   "servers": names, "medians": medians, "ratios": ratios,
                                   "runs": rounds[size]})
    finally:
        harness.stop(upstream)
        up_log.close()


def measure(args, parts, log=note):
    """Runs the parts; returns the result dict (progress through `log`)."""
    result = {"config": {"parts": list(parts), "connections": args.conns, "pairs": args.pairs,
                         "warmup": args.warmup, "duration": args.duration,
                         "https_load": args.https_load, "hs_conns": args.hs_conns,
                         "echo_conns": args.echo_conns,
                         "bytes": args.sizes, "bin": args.bin,
                         "baseline_bin": args.baseline_bin,
                         "server_cpu": args.server_cpu, "client_cpu": args.client_cpu,
                         "client_tls": "TLS 1.3, TLS_AES_128_GCM_SHA256, X25519",
                         "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                         "kernel": os.uname().release, "load_average": os.getloadavg()},
              "missing": [], "https": [], "handshake": [], "echo": [], "failures": []}
    for tool, pkg in (("taskset", "util-linux"), ("openssl", "openssl")):
        if not shutil.which(tool):
            result["missing"].append(f"{tool}: not installed (apt-get install {pkg}): nothing "
                                     "measured")
            return result
    if not os.access(os.path.join(args.bin, "tls_load"), os.X_OK):
        result["missing"].append(f"tls_load: {os.path.join(args.bin, 'tls_load')} not built "
                                 "(needs libssl-dev; cmake --build ... --target tls_load): "
                                 "nothing measured")
        return result
    work = tempfile.mkdtemp(prefix="galay-tls-bench-")
    try:
        try:
            certs = make_certificates(work)
        except RuntimeError as e:
            result["failures"].append(f"certificates: {e}")
            return result
        args.client_cnf = os.path.join(work, "client-openssl.cnf")
        with open(args.client_cnf, "w") as f:
            f.write(CLIENT_OPENSSL_CNF)
        args.lua = os.path.join(work, "report.lua")
        with open(args.lua, "w") as f:
            f.write(hb.WRK_LUA)
        logdir = os.path.join(work, "logs")
        os.makedirs(logdir)
        args.seq = 0
        servers = Servers(args.bin, work, certs, parts, args.only, args.baseline_bin)
        result["missing"] += servers.missing
        if {"https", "handshake"} & set(parts):
            measure_https_handshake(servers, parts, args, logdir, result, log)
        if "echo" in parts:
            measure_echo(servers, args, logdir, result, log)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


def settings(bindir, quick, pairs=None):
    """The argument namespace measure() takes, for suite_section and tests."""
    ns = argparse.Namespace(bin=bindir, conns=[100, 1000], pairs=3, duration=5.0, warmup=1.0,
                            https_load="tls_load", hs_conns=100, echo_conns=50,
                            sizes=[16384, 262144], only=None, baseline_bin=None,
                            server_cpu="1", client_cpu="0")
    if quick:
        ns.pairs, ns.duration, ns.warmup, ns.conns, ns.sizes = 1, 1.0, 1.0, [100], [16384]
    if pairs:
        ns.pairs = pairs
    return ns


def suite_section(bindir, out_dir, quick=True, pairs=3):
    """The short form for `make bench` (bench/suite.py): every part, 100 connections, `pairs`
    rounds of 1 s warm-up + 1 s when quick (else the full run). Returns (markdown lines,
    result dict); the result also goes to out_dir/tls.json."""
    args = settings(bindir, quick, pairs)
    result = measure(args, PARTS)
    lines = ["## TLS (bench/studies/tls.py: servers on CPU 1, tls_load on CPU 0; TLS 1.3, "
             "AES-128-GCM, X25519, ECDSA P-256)", ""] + report_lines(result)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "tls.json"), "w") as f:
            json.dump(result, f, indent=1, default=str)
    return lines, result


class Parser(argparse.ArgumentParser):
    def error(self, message):
        """One line on stderr, exit 2."""
        self.exit(2, f"tls.py: {message}\n")


def main():
    ap = Parser(description=__doc__.split("\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--bin", default="build/release/bin")
    ap.add_argument("--parts", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS))
    ap.add_argument("-c", "--connections", default="100,1000",
                    help="HTTPS keep-alive connections, comma-separated")
    ap.add_argument("--pairs", type=int, default=3, help="rounds (every server once per round)")
    ap.add_argument("-d", "--duration", type=float, default=5, help="measured seconds per case")
    ap.add_argument("--warmup", type=float, default=1, help="seconds not counted (0: none)")
    ap.add_argument("--https-load", choices=("tls_load", "wrk"), default="tls_load",
                    help="the HTTPS keep-alive load: tls_load --mode keepalive (default: its "
                         "measured window begins once every connection has done its "
                         "handshake) or wrk -t1 (whose measured run opens its connections, so "
                         "the -c handshakes are in it)")
    ap.add_argument("--hs-conns", type=int, default=100,
                    help="handshake part: connections in flight")
    ap.add_argument("--echo-conns", type=int, default=50, help="echo part: connections")
    ap.add_argument("--bytes", default="16384,262144",
                    help="echo part: message sizes, comma-separated (--quick: 16384)")
    ap.add_argument("--servers", help="only these, comma-separated (e.g. galay-epoll,nginx)")
    ap.add_argument("--quick", action="store_true",
                    help="1 round, 1 s warm-up + 1 s, 100 connections")
    ap.add_argument("--baseline-bin", metavar="DIR",
                    help="another build's bin/: its http_server as galay-B@base (an A/B; "
                         "--parts handshake only)")
    ap.add_argument("--server-cpu", default="1")
    ap.add_argument("--client-cpu", default="0")
    ap.add_argument("--json", action="store_true",
                    help="print one JSON object on stdout (progress goes to stderr)")
    ap.add_argument("--out", help="JSON output file (default bench/results/tls-<time>.json)")
    args = ap.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    for p in parts:
        if p not in PARTS:
            ap.error(f"--parts: unknown part {p!r} ({', '.join(PARTS)})")
    if not parts:
        ap.error("--parts: none given")
    try:
        conns = [int(x) for x in args.connections.split(",") if x]
    except ValueError:
        ap.error(f"-c: expected comma-separated numbers, got {args.connections!r}")
    try:
        sizes = [int(x) for x in args.bytes.split(",") if x]
    except ValueError:
        ap.error(f"--bytes: expected comma-separated numbers, got {args.bytes!r}")
    if args.quick:
        args.pairs, args.warmup, args.duration, conns = 1, 1.0, 1.0, [100]
        if args.bytes == ap.get_default("bytes"):
            sizes = [16384]
    if args.pairs < 1 or args.duration <= 0 or args.warmup < 0 or not conns or min(conns) < 1:
        ap.error("--pairs and -c must be at least 1, -d above 0, --warmup at least 0")
    if args.hs_conns < 1 or args.echo_conns < 1 or not sizes or min(sizes) < 1:
        ap.error("--hs-conns, --echo-conns and --bytes must be at least 1")
    if args.baseline_bin and parts != ["handshake"]:
        ap.error("--baseline-bin: only with --parts handshake")
    known = set(GALAY_HTTPS + GALAY_BASE + OTHER_HTTPS + (RAW_HS,) + GALAY_TLS_PROXY + GALAY_TCP_PROXY + (RAW_TLS_PROXY,))
    args.only = set(args.servers.split(",")) if args.servers else None
    if args.only is not None and not args.only <= known:
        ap.error(f"--servers: unknown {', '.join(sorted(args.only - known))} "
                 f"(known: {', '.join(sorted(known))})")
    args.conns, args.sizes = conns, sizes
    log = (lambda m: print(m, file=sys.stderr, flush=True)) if args.json else note
    log(f"servers on CPU {args.server_cpu}, load on CPU {args.client_cpu}; {args.pairs} "
        f"round(s) of {args.warmup} s warm-up + {args.duration} s; parts {', '.join(parts)}; "
        f"load average {os.getloadavg()[0]:.2f}")
    result = measure(args, parts, log)
    if args.json:
        json.dump(result, sys.stdout, indent=1, default=str)
        print()
    else:
        print()
        print("\n".join(report_lines(result)))
    out = args.out or os.path.join(BENCH, "results", time.strftime("tls-%Y%m%d-%H%M%S.json"))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1, default=str)
    log(f"wrote {out}")
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
