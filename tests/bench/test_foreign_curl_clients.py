#!/usr/bin/env python3
"""curl_multi_loop (curl multi on curl_multi_poll), raw_curl (its socket callbacks on an epoll
loop, when built) and curl_threads (curl_easy_perform per thread)
against a local nginx started here (Python's http.server when there is no nginx): short runs over
two URLs with every body's size checked (JSON: requests counted, errors 0, connections kept
alive and reused); bad flags are one line and exit 2; a wrong size, a 404, a refused port and a
server that stalls in the middle of a body are errors with exit 1, never a hang. No timing is
asserted. argv[1]: the bin directory of this build; then "galay_curl" when it is built (libcurl on
galay's loop, run on each backend with the same checks). Run by ctest."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "harness"))
import harness  # noqa: E402
from foreign_runs import Staller, expect_usage, run  # noqa: E402

BIN = sys.argv[1]
PROGRAMS = [[os.path.join(BIN, "curl_multi_loop")], [os.path.join(BIN, "curl_threads")]]
if os.access(os.path.join(BIN, "raw_curl"), os.X_OK):  # curl multi on a hand-written epoll loop
    PROGRAMS += [[os.path.join(BIN, "raw_curl")]]
if "galay_curl" in sys.argv[2:]:
    # Each backend the run requires (make test-posix: epoll alone), both by default.
    BACKENDS = os.environ.get("GALAY_REQUIRE_BACKENDS", "io_uring,epoll").split(",")
    PROGRAMS += [[os.path.join(BIN, "galay_curl"), "--backend", b] for b in BACKENDS]
FIELDS = {"implementation", "transfers", "urls", "warmup_requests", "requests", "seconds",
          "requests_per_s", "client_cpu_s", "client_cpu_us_per_request", "total_requests",
          "connections_opened", "errors", "first_error"}
BODY = bytes(ord("a") + i % 26 for i in range(1000))


for prog in PROGRAMS:
    name = os.path.basename(prog[0])
    for args, words in (([], "urls is required"), (["x", "--transfers", "0"], "--transfers"),
                        (["x", "--requests", "0"], "--requests"), (["x", "--bogus"], "--bogus"),
                        (["x", "--expect-bytes", "-1"], "--expect-bytes")):
        expect_usage(name, prog + args, words)
    r = run(prog + ["--help"])
    assert r.returncode == 0 and "--transfers" in r.stdout, r
print("test_foreign_curl_clients: bad flags ok")


def start_server(prefix, root):
    """nginx (its files in `prefix`) or http.server serving `root` on a free port: (process,
    port, keeps_alive)."""
    nginx = harness.nginx_binary()
    for _ in range(5):  # a free port may be taken by the time the server binds it
        port = harness.free_port()
        if nginx:
            conf = harness.nginx_static_conf(
                prefix, f"server {{ listen 127.0.0.1:{port}; root {root}; }}")
            argv = [nginx, "-p", prefix, "-c", conf]
        else:
            argv = [sys.executable, "-m", "http.server", "-b", "127.0.0.1", "-d", root, str(port)]
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if harness.wait_accepting(p, port, 30):
            return p, port, nginx is not None
        harness.stop(p)
    raise AssertionError("no free port for the HTTP server after 5 attempts")


def check_run(argv, **want):
    r = run(argv + ["--json"])
    assert r.returncode == 0, (argv, r)
    res = json.loads(r.stdout)
    assert set(res) == FIELDS, set(res) ^ FIELDS
    assert res["errors"] == 0 and res["first_error"] == "", res
    assert res["client_cpu_s"] > 0 and res["client_cpu_us_per_request"] > 0, res
    for k, v in want.items():
        assert res[k] == v, (k, res)
    return res


def expect_errors(argv, errors, words):
    r = run(argv + ["--json"], timeout=60)
    res = json.loads(r.stdout)
    assert r.returncode == 1 and res["errors"] == errors and words in res["first_error"], (argv, r)


with tempfile.TemporaryDirectory() as tmp:
    root = os.path.join(tmp, "www")
    os.makedirs(root)
    os.chmod(tmp, 0o755)
    for name in ("a.txt", "b.txt"):
        with open(os.path.join(root, name), "wb") as f:
            f.write(BODY)
    server, port, keeps_alive = start_server(tmp, root)
    staller = Staller()
    try:
        urls = [f"http://127.0.0.1:{port}/a.txt", f"http://127.0.0.1:{port}/b.txt"]
        for prog in PROGRAMS:
            name = os.path.basename(prog[0])
            res = check_run(prog + urls + ["--transfers", "8", "--requests", "400",
                                              "--warmup-requests", "40", "--expect-bytes", "1000"],
                            implementation=name, transfers=8, urls=2, requests=400,
                            total_requests=440, warmup_requests=40)
            if keeps_alive:  # one connection per transfer, reused for every request after
                assert res["connections_opened"] == 8, res
            # More transfers than requests, no warm-up, any body size.
            check_run(prog + [urls[0], "--transfers", "20", "--requests", "5",
                       "--warmup-requests", "0"], requests=5, total_requests=5)
            short = ["--transfers", "4", "--requests", "20", "--warmup-requests", "0"]
            expect_errors(prog + urls + short + ["--expect-bytes", "999"], 20,
                          "a body of 1000 bytes, expected 999")
            expect_errors(prog + [f"http://127.0.0.1:{port}/nope"] + short, 20, "HTTP status 404")
            expect_errors(prog + ["http://127.0.0.1:1/"] + short, 20, "127.0.0.1")
            expect_errors(prog + [f"http://127.0.0.1:{staller.port}/"] + short +
                          ["--timeout", "0.3"], 20, "imed out")
            r = run(prog + [urls[0], "--requests", "3", "--warmup-requests", "0"])
            assert r.returncode == 0 and r.stdout.startswith(f"{name}: 3 requests in "), r
            print(f"test_foreign_curl_clients: {' '.join([name] + prog[1:])}: runs, wrong size, 404, refused, stalled ok")
    finally:
        staller.close()
        harness.stop(server)
