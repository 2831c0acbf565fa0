#!/usr/bin/env python3
"""bench/studies/static_files.py --net veth against this build's http_server (argv[1]: its bin
directory): a tiny run prints the per-CPU softirq columns and says whose CPU each is, its JSON
has every figure; the namespace and every process the tool started (the server inside the
namespace, wrk) are gone after the run, after Ctrl-C and after SIGTERM (this test is their
subreaper, so an orphan would come back to it and be seen), and one left by a run that died is
deleted by the next, with the processes in it; without CAP_NET_ADMIN the tool says so in one
line and exits 1. Without `ip` or CAP_NET_ADMIN here: SKIP (exit 77), said loudly."""
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "bench", "studies", "static_files.py")
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "harness"))
import children  # noqa: E402  (descendants, wait_gone)
BIN = sys.argv[1]
CAP_NET_ADMIN, CAP_SYS_ADMIN = 12, 21  # ip netns add needs both (a mount and a namespace)


def capable():
    with open("/proc/self/status") as f:
        eff = int(re.search(r"^CapEff:\s*([0-9a-f]+)", f.read(), re.M).group(1), 16)
    return all(eff >> c & 1 for c in (CAP_NET_ADMIN, CAP_SYS_ADMIN))


if shutil.which("ip") is None or not capable():
    print("test_static_veth: SKIP: needs `ip` (iproute2) and CAP_NET_ADMIN + CAP_SYS_ADMIN "
          "to make a network namespace and a veth pair")
    sys.exit(77)


def namespaces():
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return {line.split()[0] for line in r.stdout.splitlines() if line.strip()}


def left_behind():
    """The processes below this one still running (the tool's orphans come back here)."""
    out = []
    for p in children.descendants(os.getpid()):
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            out.append(f"{p}: {argv}")
        except OSError:
            pass
    return out


def veth_links():
    r = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True)
    return {m for m in re.findall(r"^\d+: (gkv[^:@]+)", r.stdout, re.M)}


PR_SET_CHILD_SUBREAPER = 36
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
backend = "io_uring" if "io_uring" in os.environ.get("GALAY_REQUIRE_BACKENDS", "") else "epoll"
servers = [f"galay-sendfile-{'uring' if backend == 'io_uring' else 'epoll'}"]
have_nginx = os.access(shutil.which("nginx") or "/usr/sbin/nginx", os.X_OK)
if have_nginx:
    servers.append("nginx")
base = [sys.executable, TOOL, "--bin", BIN, "--net", "veth", "--sizes", "65536", "-c", "4",
        "--rounds", "1", "-d", "1", "--warmup", "0", "--servers", ",".join(servers),
        "--refs", "nginx"]

# A namespace left by a run that died (its pid gone) is deleted by the next run, and a process
# still running inside it is ended.
dead = subprocess.Popen(["true"])
dead.wait()
stale = f"gkv{dead.pid}-00"
subprocess.run(["ip", "netns", "add", stale], check=True)
inside = subprocess.Popen(["ip", "netns", "exec", stale, "sleep", "1000"])
before_ns, before_links = namespaces(), veth_links()

r = subprocess.run(base + ["--json"], capture_output=True, text=True, timeout=120)
assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
assert stale not in namespaces(), "a dead run's namespace was not swept"
assert inside.wait(timeout=30) == -signal.SIGTERM, inside.returncode
assert left_behind() == [], left_behind()
assert namespaces() == before_ns - {stale}, (namespaces(), before_ns)
assert veth_links() == before_links, (veth_links(), before_links)
m = re.search(r"^net: veth, server in namespace (gkv\d+-[0-9a-f]{2}) at (10\.213\.[\d.]+), "
              r"wrk at (10\.213\.[\d.]+)$", r.stderr, re.M)
assert m, r.stderr
assert re.search(r"^net: veth .*softirq S = CPU 1's irq\+softirq \(the server receiving "
                 r"requests and ACKs\), softirq C = CPU 0's \(wrk receiving the responses\)$",
                 r.stdout, re.M), r.stdout
header = re.search(r"^  server +CPU us/req +softirq S +srv\+S +MB/s +client us +softirq C +"
                   r"tasks us +total us +machine us$", r.stdout, re.M)
assert header, r.stdout
for name in servers:
    row = re.search(rf"^  {name} +((?:[\d.]+ +){{8}}[\d.]+)$", r.stdout, re.M)
    assert row, (name, r.stdout)
report = json.loads([line for line in r.stdout.splitlines() if line.startswith("{")][-1])
assert report["net"] == "veth" and report["server_cpu"] == "1", report
(sc,) = report["scenarios"]
for name in servers:
    rec = sc["rounds"][0][name]
    assert rec["ok"] and rec["errors"] == 0 and rec["requests"] > 0, rec
    for key in ("softirq_server_cpu_us_per_req", "softirq_client_cpu_us_per_req"):
        assert rec[key] >= 0, (key, rec)
    # The total is the tasks and both CPUs' softirq, each counted once.
    total = rec["tasks_us_per_req"] + rec["softirq_server_cpu_us_per_req"] + \
        rec["softirq_client_cpu_us_per_req"]
    assert abs(rec["total_us_per_req"] - total) < 1e-6 * total, rec
    assert rec["tasks_us_per_req"] >= (rec["cpu_us_per_req"] + rec["client_us_per_req"]) * \
        (1 - 1e-9), rec
    srv = rec["cpu_us_per_req"] + rec["softirq_server_cpu_us_per_req"]
    assert abs(rec["server_softirq_us_per_req"] - srv) < 1e-6 * srv, rec
if have_nginx:
    assert "server_softirq_per_req" in sc["ratios"][f"{servers[0]}/nginx"], sc["ratios"]

# Ctrl-C and SIGTERM in the middle of a run: the namespace and its veth pair are torn down.
for sig in (signal.SIGINT, signal.SIGTERM):
    p = subprocess.Popen(base[:base.index("-d")] + ["-d", "30", "--servers", servers[0]],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    m = re.match(r"net: veth, server in namespace (gkv\d+-[0-9a-f]{2}) ", line)
    assert m, line
    assert m.group(1) in namespaces()
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode != 0, (sig, out, err)
    assert m.group(1) not in namespaces(), (sig, namespaces())
    assert veth_links() == before_links, (sig, veth_links())
    assert left_behind() == [], (sig, left_behind())

# Without CAP_NET_ADMIN / CAP_SYS_ADMIN: one line saying why, exit 1, nothing left behind.
r = subprocess.run(["setpriv", "--bounding-set", "-net_admin,-sys_admin", "--inh-caps",
                    "-net_admin,-sys_admin"] + base, capture_output=True, text=True, timeout=60)
assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
assert re.search(r"^static_files\.py: --net veth: ip netns add: .*Operation not permitted.* "
                 r"\(needs root or CAP_NET_ADMIN\)$", r.stderr.strip(), re.M), r.stderr
assert namespaces() == before_ns - {stale} and veth_links() == before_links
print("test_static_veth: ok")
