#!/usr/bin/env python3
"""examples/curl_fetch against a real nginx started here (HTTP and HTTPS, a self-signed
certificate made here), on the backend given: 200 URLs over 50 transfers at once, every body's
size and SHA-256 checked, in order; HTTPS verified with --cacert, refused without it; a 404, a
host that does not resolve, and a server that stalls in the middle of a body (a socket server
of this script) are one line each on stderr and exit 1 while the other URLs still succeed; bad
arguments are one line and exit 2. No timing is asserted. argv: curl_fetch's path, the backend.
Exit 77 (SKIP) without nginx or openssl. Run by ctest."""
import hashlib
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "..", "bench", "harness"),
                os.path.join(HERE, "..", "bench")]
import children  # noqa: E402
import harness  # noqa: E402
from foreign_runs import Staller, expect_usage as expect_usage_of  # noqa: E402

PROG, BACKEND = sys.argv[1], sys.argv[2]
NAME = "curl_fetch"


def run(args, timeout=120):
    return children.run([PROG, "--backend", BACKEND] + args, capture_output=True, text=True,
                        timeout=timeout)


def expect_usage(args, words):
    expect_usage_of(NAME, [PROG, "--backend", BACKEND] + args, words)


r = run(["--help"])
assert r.returncode == 0 and "Usage: curl_fetch" in r.stdout and r.stderr == "", r
for args, words in (([], "URL"), (["--parallel", "0", "x"], "--parallel"),
                    (["--timeout", "soon", "x"], "--timeout"), (["--bogus", "x"], "--bogus"),
                    (["x", "--cacert"], "--cacert")):
    expect_usage(args, words)
print(f"curl_fetch_test[{BACKEND}]: help and bad arguments ok")

nginx = harness.nginx_binary()
if not nginx or not shutil.which("openssl"):
    print("SKIP: curl_fetch_test needs nginx and openssl (apt-get install nginx openssl)")
    sys.exit(77)


def start_nginx(prefix, root, cert, key):
    """nginx serving `root` over HTTP and HTTPS on two free ports: (process, http, https)."""
    for _ in range(5):  # a free port may be taken by the time nginx binds it
        port, tls_port = harness.free_port(), harness.free_port()
        if port == tls_port:
            continue
        conf = harness.nginx_static_conf(prefix, f"""server {{ listen 127.0.0.1:{port}; root {root}; }}
  server {{ listen 127.0.0.1:{tls_port} ssl; root {root};
    ssl_certificate {cert}; ssl_certificate_key {key}; }}""")
        p = children.popen([nginx, "-p", prefix, "-c", conf], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        if harness.wait_accepting(p, port, 30) and harness.wait_accepting(p, tls_port, 30):
            return p, port, tls_port
        children.stop(p)
    raise AssertionError("no free ports for nginx after 5 attempts")


def expect_lines(r, urls, digests):
    """stdout: one line per URL in order, `200 SIZE sha256=HEX URL`, with the file's size and
    digest."""
    lines = r.stdout.splitlines()
    assert len(lines) == len(urls), (len(lines), r.stderr[-2000:])
    for line, url in zip(lines, urls):
        size, digest = digests[url.rsplit("/", 1)[1]]
        assert line == f"200 {size} sha256={digest} {url}", (line, url)


tmp = harness.temp_dir("curl-fetch")
os.chmod(tmp, 0o755)
root = os.path.join(tmp, "www")
os.makedirs(root)
digests = {}
for i in range(20):  # 0 bytes to ~300 KB: one read, many reads, nothing
    data = os.urandom(i * i * 797)
    name = f"f{i}.bin"
    with open(os.path.join(root, name), "wb") as f:
        f.write(data)
    digests[name] = (len(data), hashlib.sha256(data).hexdigest())
cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                "-keyout", key, "-out", cert], check=True, capture_output=True)

server, port, tls_port = start_nginx(tmp, root, cert, key)
staller = Staller()
try:
    http = [f"http://127.0.0.1:{port}/f{i % 20}.bin" for i in range(200)]
    r = run(["--parallel", "50"] + http)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    expect_lines(r, http, digests)
    print(f"curl_fetch_test[{BACKEND}]: 200 URLs over 50 transfers ok")

    https = [f"https://127.0.0.1:{tls_port}/f{i % 20}.bin" for i in range(40)]
    r = run(["--parallel", "10", "--cacert", cert] + https)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    expect_lines(r, https, digests)
    r = run(https[:2])  # the system's CAs do not know this certificate
    assert r.returncode == 1 and r.stdout == "", r
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and all(ln.startswith(f"{NAME}: https://") for ln in lines), r
    assert "certificate" in lines[0].lower(), r
    print(f"curl_fetch_test[{BACKEND}]: HTTPS verified with --cacert, refused without ok")

    good = http[:20]
    bad = {f"http://127.0.0.1:{port}/nope": "HTTP status 404",
           "http://no-such-host.invalid/": "Could not resolve host: no-such-host.invalid",
           f"http://127.0.0.1:{staller.port}/": "imed out"}
    r = run(["--timeout", "1"] + list(bad) + good, timeout=60)
    assert r.returncode == 1, r
    expect_lines(r, good, digests)
    errs = r.stderr.splitlines()
    assert len(errs) == len(bad), r.stderr
    for line, (url, words) in zip(errs, bad.items()):
        assert line.startswith(f"{NAME}: {url}: ") and words in line, (line, url)
    print(f"curl_fetch_test[{BACKEND}]: 404, unresolvable host, stalled body ok, others done")
finally:
    staller.close()
    children.stop(server)
