#!/usr/bin/env python3
"""Static-file benchmark: GET of one file at 100 connections, galay's http_server against nginx.

    python3 bench/studies/static_files.py --bin build/release/bin --sizes 65536,1048576 -c 100 \\
        --rounds 5

Servers, each alone on --server-cpu (taskset), loaded by wrk (one thread) on --client-cpu:
  galay-sendfile-uring  http_server --root DIR --backend io_uring    (sendfile, the default)
  galay-sendfile-epoll  http_server --root DIR --backend epoll
  galay-copy-uring      http_server ... --file-send copy    (read into the write buffer, send)
  nginx                 Debian's nginx, one worker, `sendfile on` (nginx's default is off)

Every round runs every server once, in an order rotated from round to round; each run is a fresh
server on a fresh port, checked with one real GET (status and every byte of the body) before
the load, then --warmup seconds of wrk, then -d seconds measured. Per run: requests/s, MB/s of
file bodies, and server CPU per request (the server's process tree's time on a CPU over the
measured wrk, /proc/PID/task/*/schedstat); and, because on loopback one response's TCP work is
done partly in the server's context and partly in the client's, the whole: server + wrk
(getrusage) + the ksoftirqd threads ("total"), next to /proc/stat's busy time of the two CPUs
("machine", which also counts any other process). Ratios are galay / nginx taken within a
round, quoted as median [min-max] over the rounds with a verdict (faster/slower only when the
whole spread is on one side of 1.00); --refs names the servers the others are compared with,
--galay NAME=COMMAND adds a variant (an A/B of a flag or an environment). Any wrk error
(socket errors, non-2xx answers), a server that dies or fails the check: said loudly, and the
exit status is 1. --json prints one JSON object; --out writes it.

--net veth runs each server in a network namespace of its own, joined to this one by a veth pair
(harness.veth_netns): wrk connects to the namespace's address, and RPS steers each side's
receive processing to the receiver's CPU (the server's receive to --server-cpu, wrk's to
--client-cpu), as a NIC's interrupt and softirq would run on the receiver's CPU, where on
loopback the receiver's work runs in the sender's context. That work runs in softirq, charged
to whatever task runs on that CPU or to none when it was idle; so per CPU the irq + softirq
time of /proc/stat is a column of its own ("softirq S" on the server's CPU, "softirq C" on the
client's), and "total" adds both to the server's, wrk's and ksoftirqd's time. Where the kernel
does not take interrupt time out of tasks' time (no CONFIG_IRQ_TIME_ACCOUNTING, said in the
output) softirq run inside a task is counted twice, so "total" is an upper bound and "tasks"
(server + wrk + ksoftirqd) a lower bound. Without `ip` or CAP_NET_ADMIN: one line, exit 1.
"""
import argparse
import http.client
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
from harness import (NetnsError, bench_network, children_cpu_s, cpu_busy_s, cpu_irq_s,  # noqa: E402
                     fmt_spread, free_port, irq_time_accounted, loadavg, raise_nofile, resolve,
                     round_ratio, run_rounds, start_pinned, stop, task_cpu_s, tree_cpu_s,
                     verdict)

GALAY = {
    "galay-sendfile-uring": "http_server {port} --root {root} --backend io_uring",
    "galay-sendfile-epoll": "http_server {port} --root {root} --backend epoll",
    "galay-copy-uring": "http_server {port} --root {root} --backend io_uring --file-send copy",
}
SERVERS = list(GALAY) + ["nginx"]


def nginx_conf(prefix, port, root):
    user = f"user {pwd.getpwuid(os.geteuid()).pw_name};" if os.geteuid() == 0 else ""
    return f"""{user}
daemon off;
master_process on;
worker_processes 1;
error_log stderr warn;
pid {prefix}/nginx.pid;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    sendfile on;
    default_type application/octet-stream;
    keepalive_requests 100000000;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    server {{
        listen {port} backlog=4096;
        location / {{ root {root}; }}
    }}
}}
"""


def server_argv(args, name, port, work):
    if name == "nginx":
        prefix = tempfile.mkdtemp(prefix="nginx-", dir=work)
        conf = os.path.join(prefix, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_conf(prefix, port, args.root))
        return [args.nginx, "-p", prefix, "-c", conf]
    return resolve(GALAY[name].replace("{root}", args.root), args.bin, port)


def check_get(host, port, path, expected):
    """One GET: None when the answer is 200 with exactly the file's bytes, else what is wrong."""
    try:
        c = http.client.HTTPConnection(host, port, timeout=10)
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        c.close()
    except (OSError, http.client.HTTPException) as e:
        return f"GET {path}: {e}"
    if r.status != 200 or body != expected:
        return f"GET {path}: status {r.status}, {len(body)} bytes (want 200, {len(expected)})"
    return None


def parse_wrk(text):
    """requests, seconds and errors from wrk's standard output."""
    out = {"requests": None, "seconds": None, "errors": 0, "error_detail": ""}
    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)", text)
    if m:
        scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(3)]
        out["requests"], out["seconds"] = int(m.group(1)), float(m.group(2)) * scale
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        out["errors"] += sum(int(x) for x in m.groups())
        out["error_detail"] += m.group(0) + " "
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m:
        out["errors"] += int(m.group(1))
        out["error_detail"] += m.group(0)
    return out


def ksoftirqd_pids():
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/comm") as f:
                    if f.read().startswith("ksoftirqd/"):
                        pids.append(int(d))
            except OSError:
                pass
    return pids


def ksoftirqd_cpu_s(pids):
    return sum(task_cpu_s(p) or 0.0 for p in pids)


def run_one(args, name, size, conns, work):
    path = f"/file_{size}.bin"
    with open(os.path.join(args.root, path[1:]), "rb") as f:
        expected = f.read()
    port = free_port()
    rec = {"server": name, "size": size, "connections": conns, "ok": False, "problems": []}
    try:
        proc = start_pinned(server_argv(args, name, port, work), args.server_cpu, None, port,
                            host=args.host, prefix=args.prefix)
    except RuntimeError as e:
        rec["problems"].append(str(e))
        return rec
    try:
        bad = check_get(args.host, port, path, expected)
        if bad:
            rec["problems"].append(bad)
            return rec
        url = f"http://{args.host}:{port}{path}"
        wrk = ["taskset", "-c", str(args.client_cpu), "wrk", "-t1", f"-c{conns}", "--timeout",
               "5s"]
        if args.warmup > 0:
            children.run(wrk + [f"-d{args.warmup}s", url], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, timeout=args.warmup + 60)
        ksoft = ksoftirqd_pids()
        cpu0, cli0, ks0 = tree_cpu_s(proc.pid), children_cpu_s(), ksoftirqd_cpu_s(ksoft)
        cpus = {str(args.server_cpu), str(args.client_cpu)}
        mach0 = cpu_busy_s(cpus)
        sirq0 = (cpu_irq_s(args.server_cpu), cpu_irq_s(args.client_cpu))
        cp = children.run(wrk + [f"-d{args.duration}s", url], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=args.duration + 60)
        mach = cpu_busy_s(cpus) - mach0
        sirq_s = cpu_irq_s(args.server_cpu) - sirq0[0]
        sirq_c = cpu_irq_s(args.client_cpu) - sirq0[1]
        cpu = tree_cpu_s(proc.pid) - cpu0
        cli = children_cpu_s() - cli0
        ks = ksoftirqd_cpu_s(ksoft) - ks0
        w = parse_wrk(cp.stdout)
        if cp.returncode != 0 or not w["requests"]:
            rec["problems"].append(f"wrk exit {cp.returncode}: {cp.stderr.strip()[-300:]}")
            return rec
        if w["errors"]:
            rec["problems"].append(f"wrk: {w['error_detail'].strip()}")
        if proc.poll() is not None:
            rec["problems"].append(f"server exited with status {proc.returncode}")
        rec["requests"] = w["requests"]
        rec["rps"] = w["requests"] / w["seconds"]
        rec["mb_s"] = rec["rps"] * size / 1e6
        rec["cpu_us_per_req"] = 1e6 * cpu / w["requests"]
        # The work of one response is shared: on loopback the receiver's TCP processing runs in
        # whichever context sends, and segments held back are sent from the context that takes
        # the ACK. So also: the client's CPU (wrk, getrusage), the softirq threads', and their
        # sum with the server's ("tasks"); the irq + softirq time of each CPU, which on veth
        # with RPS is the receiver's TCP work and may have run on an idle CPU, charged to no
        # task; "total" adds both; "machine" is /proc/stat's busy time of the two CPUs (other
        # processes included, so only a check on the sum).
        n = w["requests"]
        rec["client_us_per_req"] = 1e6 * cli / n
        rec["ksoftirqd_us_per_req"] = 1e6 * ks / n
        rec["softirq_server_cpu_us_per_req"] = 1e6 * sirq_s / n
        rec["softirq_client_cpu_us_per_req"] = 1e6 * sirq_c / n
        rec["server_softirq_us_per_req"] = 1e6 * (cpu + sirq_s) / n
        rec["tasks_us_per_req"] = 1e6 * (cpu + cli + ks) / n
        rec["total_us_per_req"] = 1e6 * (cpu + cli + ks + sirq_s + sirq_c) / n
        rec["machine_us_per_req"] = 1e6 * mach / w["requests"]
        rec["errors"] = w["errors"]
        rec["ok"] = not rec["problems"]
        return rec
    finally:
        stop(proc)


def make_root(root, sizes):
    for size in sizes:
        p = os.path.join(root, f"file_{size}.bin")
        with open(p, "wb") as f:
            f.write(bytes((i * 131 + 7) % 251 for i in range(size)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/release/bin")
    ap.add_argument("--sizes", default="65536,1048576", help="file sizes, bytes")
    ap.add_argument("-c", "--connections", default="100")
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--galay", action="append", default=[], metavar="NAME=COMMAND",
                    help="another server to measure, e.g. 'lowat=http_server {port} --root "
                    "{root} --backend io_uring' (repeatable; add NAME to --servers)")
    ap.add_argument("--refs", default="nginx,galay-copy-uring",
                    help="servers every other one is compared with (ratios within a round)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-d", "--duration", type=int, default=4, help="measured seconds per run")
    ap.add_argument("--warmup", type=int, default=1, help="seconds of wrk before measuring")
    ap.add_argument("--server-cpu", default="1")
    ap.add_argument("--client-cpu", default="0")
    ap.add_argument("--net", choices=("loopback", "veth"), default="loopback",
                    help="loopback, or the server in a network namespace reached over a veth "
                    "pair with RPS steering each side's receive to the receiver's CPU")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args()
    raise_nofile()
    for spec in args.galay:
        name, sep, cmd = spec.partition("=")
        if not sep or not name or not cmd:
            sys.exit(f"static_files.py: --galay wants NAME=COMMAND, got {spec!r}")
        GALAY[name] = cmd
        SERVERS.insert(len(SERVERS) - 1, name)
    servers = args.servers.split(",")
    for s in servers:
        if s not in SERVERS:
            sys.exit(f"static_files.py: unknown server {s!r} (known: {', '.join(SERVERS)})")
    if shutil.which("wrk") is None:
        sys.exit("static_files.py: wrk is not installed (apt-get install wrk)")
    args.nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if "nginx" in servers and not os.access(args.nginx, os.X_OK):
        print("static_files.py: nginx is not installed (apt-get install nginx-light): skipped",
              file=sys.stderr)
        servers.remove("nginx")
    if not os.access(resolve("http_server", args.bin, 0)[0], os.X_OK):
        sys.exit(f"static_files.py: no http_server in {args.bin} (build it: make release)")
    sizes = [int(s) for s in args.sizes.split(",")]
    work = tempfile.mkdtemp(prefix="galay-static-")
    args.root = os.path.join(work, "www")
    os.makedirs(args.root)
    make_root(args.root, sizes)
    failed = False
    report = {"load_start": loadavg(), "net": args.net, "server_cpu": args.server_cpu,
              "client_cpu": args.client_cpu, "irq_time_accounting": irq_time_accounted(),
              "scenarios": []}
    try:
        with bench_network(args) as ns:
            if ns:
                print(f"net: veth, server in namespace {ns.name} at {ns.ns_addr}, wrk at "
                      f"{ns.host_addr}", file=sys.stderr, flush=True)
            failed = run_scenarios(args, servers, sizes, work, report)
    except NetnsError as e:
        print(f"static_files.py: --net veth: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["load_end"] = loadavg()
    print_table(report)
    if args.json:
        print(json.dumps(report))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 1 if failed else 0


def run_scenarios(args, servers, sizes, work, report):
    failed = False
    for size in sizes:
        for conns in [int(c) for c in args.connections.split(",")]:
            rounds, bad = run_rounds(
                servers, args.rounds, lambda name, rnd: run_one(args, name, size, conns, work),
                lambda name, rnd, rec: (
                    f"size={size} c={conns} round {rnd + 1}/{args.rounds} {name:<21}"
                    f"{rec.get('rps', 0):9.0f} req/s {rec.get('mb_s', 0):8.1f} MB/s "
                    f"{rec.get('cpu_us_per_req') or 0:8.1f} us CPU/req "
                    f"(client {rec.get('client_us_per_req') or 0:.1f}, ksoftirqd "
                    f"{rec.get('ksoftirqd_us_per_req') or 0:.1f}, softirq S "
                    f"{rec.get('softirq_server_cpu_us_per_req') or 0:.1f} C "
                    f"{rec.get('softirq_client_cpu_us_per_req') or 0:.1f}, total "
                    f"{rec.get('total_us_per_req') or 0:.1f}, machine "
                    f"{rec.get('machine_us_per_req') or 0:.1f})"), rotate=True)
            failed |= bad
            report["scenarios"].append(summarise(size, conns, servers, rounds,
                                                 args.refs.split(",")))
    return failed


def summarise(size, conns, servers, rounds, refs):
    sc = {"size": size, "connections": conns, "rounds": rounds, "ratios": {}, "medians": {}}
    for name in servers:
        def med(key):
            vals = sorted(r[name][key] for r in rounds if r[name]["ok"])
            return vals[len(vals) // 2] if vals else None
        sc["medians"][name] = {k: med(k) for k in (
            "cpu_us_per_req", "softirq_server_cpu_us_per_req", "server_softirq_us_per_req",
            "mb_s", "client_us_per_req", "softirq_client_cpu_us_per_req", "tasks_us_per_req",
            "total_us_per_req", "machine_us_per_req")}
        for ref in refs:
            if ref not in servers or ref == name or name in refs[:refs.index(ref)]:
                continue
            sc["ratios"][f"{name}/{ref}"] = {
                "cpu_per_req": round_ratio(rounds, name, ref, "cpu_us_per_req"),
                "server_softirq_per_req": round_ratio(rounds, name, ref,
                                                      "server_softirq_us_per_req"),
                "tasks_per_req": round_ratio(rounds, name, ref, "tasks_us_per_req"),
                "client_per_req": round_ratio(rounds, name, ref, "client_us_per_req"),
                "total_per_req": round_ratio(rounds, name, ref, "total_us_per_req"),
                "mb_s": round_ratio(rounds, name, ref, "mb_s"),
            }
    return sc


def print_table(report):
    print(f"load average: {report['load_start']:.2f} at the start, {report['load_end']:.2f} "
          f"at the end")
    srv, cli = report["server_cpu"], report["client_cpu"]
    if report["net"] == "veth":
        print(f"net: veth (server in a network namespace, RPS steering each receiver's work to "
              f"its CPU): softirq S = CPU {srv}'s irq+softirq (the server receiving requests "
              f"and ACKs), softirq C = CPU {cli}'s (wrk receiving the responses)")
    else:
        print(f"net: loopback (the receiver's TCP work runs in the sender's context): "
              f"softirq S = CPU {srv}'s irq+softirq (the server's CPU), softirq C = CPU {cli}'s "
              f"(wrk's CPU)")
    if report["irq_time_accounting"] is not True:
        print("  this kernel does not take irq time out of tasks' time (no "
              "CONFIG_IRQ_TIME_ACCOUNTING): softirq run while a task was on the CPU is in that "
              "task's time too, so 'total' (tasks + softirq S + C) is an upper bound and "
              "'tasks' (server + wrk + ksoftirqd) a lower bound")
    cols = [("CPU us/req", "cpu_us_per_req", ".1f"),
            ("softirq S", "softirq_server_cpu_us_per_req", ".1f"),
            ("srv+S", "server_softirq_us_per_req", ".1f"), ("MB/s", "mb_s", ".0f"),
            ("client us", "client_us_per_req", ".1f"),
            ("softirq C", "softirq_client_cpu_us_per_req", ".1f"),
            ("tasks us", "tasks_us_per_req", ".1f"), ("total us", "total_us_per_req", ".1f"),
            ("machine us", "machine_us_per_req", ".1f")]
    for sc in report["scenarios"]:
        print(f"\nGET {sc['size']} B file, {sc['connections']} connections "
              f"({len(sc['rounds'])} rounds)")
        print(f"  {'server':<22}" + "".join(f"{h:>11}" for h, _, _ in cols))
        for name, m in sc["medians"].items():
            print(f"  {name:<22}" + "".join(
                f"{format(m[k], fmt) if m.get(k) is not None else 'n/a':>11}"
                for _, k, fmt in cols))
        for key, r in sc["ratios"].items():
            print(f"  {key:<38} CPU/req {fmt_spread(r['cpu_per_req'])} "
                  f"({verdict(r['cpu_per_req'])}), server+softirq S/req "
                  f"{fmt_spread(r['server_softirq_per_req'])} "
                  f"({verdict(r['server_softirq_per_req'])}), client CPU/req "
                  f"{fmt_spread(r['client_per_req'])}, tasks/req "
                  f"{fmt_spread(r['tasks_per_req'])}, total CPU/req "
                  f"{fmt_spread(r['total_per_req'])} ({verdict(r['total_per_req'])}), MB/s "
                  f"{fmt_spread(r['mb_s'])} ({verdict(r['mb_s'], lower_is_better=False)})")


if __name__ == "__main__":
    sys.exit(main())
