#!/usr/bin/env python3
"""Whose CPU a static 1 MiB response costs: where the server's own time goes and who transmits.

    python3 bench/studies/static_profile.py --bin build/release/bin \\
        [--servers galay-sendfile-uring,...]

The load of bench/studies/static_files.py (one file, wrk -t1 -c100 on --client-cpu, the server alone
on --server-cpu), one run per server, each profiled twice while wrk runs:
  1. `perf record -a -g -e cpu-clock` (both CPUs): the server's samples classified by what their
     stacks pass through (sendfile's page-cache part, its skb queueing, its transmission, the
     loopback receive of the transmitted segments into the client's socket; everything else);
     the kernel's TCP counters (/proc/net/snmp and netstat: loss probes, retransmissions) over
     the run; `ss -tmi` on both ends of the connections once mid-run (windows, buffers, unsent
     bytes).
  2. `perf record -a` of the net:net_dev_xmit and syscalls:sys_exit_sendfile64 tracepoints: which
     context transmitted each data skb (the server's or wrk's), the ACKs wrk sent, and what
     each sendfile(2) returned.
Printed per server and per MiB sent. Needs perf (Debian: linux-perf) and permission to profile
the whole machine (root, or kernel.perf_event_paranoid <= 0). One profile per server, no
rounds: the figures explain the ratios bench/studies/static_files.py measures, they do not replace
them. --json prints the figures as one JSON object. Exit 1 when a server fails its check or a run
fails, or --net veth cannot make its namespace; 2 for bad arguments or a missing tool.

--net veth: the server in a network namespace over a veth pair, RPS steering each receiver's
work to its CPU (as bench/studies/static_files.py --net veth). Then the segments cross the veth's
two ends (counted there only, not on lo), the server's ss runs inside the namespace, and a
transmission is also said by the context it ran in when that is neither the server nor wrk:
the softirq of a receive that RPS steered to an idle CPU runs in the idle task ("swapper"),
or in ksoftirqd.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
import static_files  # noqa: E402  (servers, nginx's configuration, the GET check, wrk's output)
from harness import (NetnsError, bench_network, free_port, loadavg, raise_nofile, start_pinned,  # noqa: E402
                     stop)

SERVERS = ["galay-sendfile-uring", "galay-sendfile-epoll", "nginx"]
SERVER_COMMS = ("galay-", "nginx", "http_server")

# A server sample's class: the first whose test matches its stack (leaf to root, kernel symbols).
CLASSES = [
    ("sendfile: loopback receive into the client's socket, and ACKs",
     lambda j: "sendfile" in j and ("tcp_v4_rcv" in j or "net_rx_action" in j)),
    ("sendfile: transmitting (tcp_write_xmit)",
     lambda j: "sendfile" in j and "tcp_write_xmit" in j),
    ("sendfile: queueing pages into skbs (tcp_sendmsg_locked)",
     lambda j: "sendfile" in j and "tcp_sendmsg_locked" in j),
    ("sendfile: page cache -> pipe -> socket", lambda j: "sendfile" in j),
    ("everything else", lambda j: True),
]


def tcp_counters():
    """Every counter of /proc/net/snmp and /proc/net/netstat, as {"TcpExtTCPLossProbes": n}."""
    out = {}
    for path in ("/proc/net/snmp", "/proc/net/netstat"):
        with open(path) as f:
            lines = f.read().splitlines()
        for names, values in zip(lines[::2], lines[1::2]):
            group, *keys = names.split()
            _, *vals = values.split()
            prefix = group.rstrip(":")
            for k, v in zip(keys, vals):
                try:
                    out[prefix + k] = int(v)
                except ValueError:
                    pass
    return out


def ss_figures(port, side, prefix=()):
    """Medians over the connections of one side (the server's: sport; wrk's: dport), `prefix`
    running ss in the server's namespace."""
    r = children.run(list(prefix) + ["ss", "-tmi", "state", "established", f"( {side} = :{port} )"],
                     capture_output=True, text=True)
    text = r.stdout
    fig = {}
    for key in ("cwnd", "snd_wnd", "notsent"):
        vals = [float(x) for x in re.findall(rf"\b{key}:(\d+)", text)]
        fig[key] = statistics.median(vals) if vals else None
        fig[key + "_sockets"] = len(vals)
    rb = [int(m) for m in re.findall(r"skmem:\(r\d+,rb(\d+)", text)]
    fig["rcvbuf"] = statistics.median(rb) if rb else None
    fig["sockets"] = len(rb)
    return fig


def perf_script(data, fields):
    r = children.run(["perf", "script", "-i", data, "-F", fields], capture_output=True,
                     text=True)
    return r.stdout


def is_server(comm):
    return comm.startswith(SERVER_COMMS)


def classify_samples(data):
    counts = {name: 0 for name, _ in CLASSES}
    total = 0
    for block in perf_script(data, "comm,ip,sym").split("\n\n"):
        lines = [l for l in block.strip().split("\n") if l.strip()]
        if not lines or not is_server(lines[0].split()[0]):
            continue
        stack = " ".join(l.split(None, 1)[1] if len(l.split(None, 1)) > 1 else ""
                         for l in lines[1:])
        stack = stack.replace("__x64_sys_sendfile64", "sendfile")
        total += 1
        for name, test in CLASSES:
            if test(stack):
                counts[name] += 1
                break
    return total, counts


def transmissions(data, devs=None):
    """Data skbs and small skbs (ACKs, heads) by context (the server, wrk, any other: idle or
    ksoftirqd), counted on the devices `devs` only (all when None), and the bytes sendfile
    returned."""
    tx = {"server": [0, 0, 0], "client": [0, 0, 0], "other": [0, 0, 0]}  # data skbs, bytes, small
    sent, calls, eagain = 0, 0, 0
    pat = re.compile(r"\s*(\S+)\s+\[\d+\]\s+[\d.]+:\s+(\S+):\s(.*)$")
    for line in perf_script(data, "comm,cpu,time,event,trace").splitlines():
        m = pat.match(line)
        if not m:
            continue
        comm, event, rest = m.groups()
        if event == "net:net_dev_xmit":
            dev = re.search(r"dev=(\S+)", rest)
            if devs is not None and (not dev or dev.group(1) not in devs):
                continue
            who = "server" if is_server(comm) else "client" if comm == "wrk" else "other"
            n = re.search(r"len=(\d+)", rest)
            if who and n:
                length = int(n.group(1))
                if length > 300:
                    tx[who][0] += 1
                    tx[who][1] += length
                else:
                    tx[who][2] += 1
        elif event == "syscalls:sys_exit_sendfile64" and is_server(comm):
            v = int(rest.split()[-1], 16)
            calls += 1
            if v >= 1 << 63:
                eagain += (v - (1 << 64)) == -11
            else:
                sent += v
    return tx, sent, calls, eagain


def profile(args, name, work):
    path = f"/file_{args.size}.bin"
    with open(os.path.join(args.root, path[1:]), "rb") as f:
        expected = f.read()
    rec = {"server": name, "ok": False, "problems": []}
    port = free_port()
    try:
        proc = start_pinned(static_files.server_argv(args, name, port, work), args.server_cpu,
                            None, port, host=args.host, prefix=args.prefix)
    except RuntimeError as e:
        rec["problems"].append(str(e))
        return rec
    try:
        bad = static_files.check_get(args.host, port, path, expected)
        if bad:
            rec["problems"].append(bad)
            return rec
        url = f"http://{args.host}:{port}{path}"
        wrk = ["taskset", "-c", str(args.client_cpu), "wrk", "-t1", f"-c{args.connections}",
               "--timeout", "5s"]
        children.run(wrk + [f"-d{args.warmup}s", url], stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, timeout=args.warmup + 60)
        # 1: the CPU profile, the TCP counters over the whole wrk run and ss mid-run.
        data = os.path.join(work, f"{name}.cpu")
        before = tcp_counters()
        load = children.popen(wrk + [f"-d{args.duration + 1}s", url], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        ss = {}
        snap = threading.Timer(args.duration / 2, lambda: ss.update(
            server=ss_figures(port, "sport", args.prefix), client=ss_figures(port, "dport")))
        snap.start()
        children.run(["perf", "record", "-q", "-a", "-g", "-e", "cpu-clock", "-o", data, "--",
                      "sleep", str(args.duration)], stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
        snap.join()
        out, _ = load.communicate(timeout=args.duration + 60)
        after = tcp_counters()
        w = static_files.parse_wrk(out)
        if not w["requests"] or w["errors"]:
            rec["problems"].append(f"wrk: {w['requests']} requests, {w['error_detail']}")
            return rec
        total, counts = classify_samples(data)
        if total == 0:
            rec["problems"].append("perf recorded no server samples (perf_event_paranoid?)")
            return rec
        # 2: who transmits, and what sendfile returned.
        data = os.path.join(work, f"{name}.tx")
        load = children.popen(wrk + [f"-d{args.duration + 1}s", url],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        children.run(["perf", "record", "-q", "-a", "-e", "net:net_dev_xmit", "-e",
                      "syscalls:sys_exit_sendfile64", "-o", data, "--", "sleep",
                      str(min(args.duration, 2))], stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
        load.wait(timeout=args.duration + 60)
        tx, sent, calls, eagain = transmissions(data, args.devs)
        if proc.poll() is not None:
            rec["problems"].append(f"server exited with status {proc.returncode}")
            return rec
    finally:
        stop(proc)
    mib = sent / (1 << 20)
    data_bytes = tx["server"][1] + tx["client"][1] + tx["other"][1]
    reqs = w["requests"]
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in
             ("TcpExtTCPLossProbes", "TcpRetransSegs", "TcpExtTCPDSACKRecv")}
    rec.update({
        "ok": mib > 0 and data_bytes > 0, "requests": reqs,
        "server_samples": total,
        "server_split": {k: v / total for k, v in counts.items()},
        "sendfile_calls_per_response": calls / max(1.0, mib * (1 << 20) / args.size),
        "sendfile_eagain": eagain,
        "server_data_share": tx["server"][1] / data_bytes if data_bytes else None,
        "client_data_share": tx["client"][1] / data_bytes if data_bytes else None,
        "other_data_share": tx["other"][1] / data_bytes if data_bytes else None,
        "data_skbs_per_mib": (tx["server"][0] + tx["client"][0] + tx["other"][0]) / mib
        if mib else None,
        "client_acks_per_mib": tx["client"][2] / mib if mib else None,
        "loss_probes_per_response": delta["TcpExtTCPLossProbes"] / reqs,
        "retransmits_per_response": delta["TcpRetransSegs"] / reqs,
        "ss": ss,
    })
    if not rec["ok"]:
        rec["problems"].append("no sendfile or no transmission seen by the tracepoints")
    return rec


def fmt(v, spec, scale=1.0):
    return "n/a" if v is None else format(v * scale, spec)


def print_tables(recs, net="loopback"):
    ok = [r for r in recs if r["ok"]]
    if not ok:
        return
    head = "| | " + " | ".join(r["server"] for r in ok) + " |"
    rule = "|---" * (len(ok) + 1) + "|"
    print("Where the server's own samples go:\n")
    print(head)
    print(rule)
    for name, _ in CLASSES:
        print(f"| {name} | " + " | ".join(f"{100 * r['server_split'][name]:.1f}%" for r in ok)
              + " |")
    if net == "veth":
        print("\n(over veth the receive inside sendfile is not wrk's: it is the server's own "
              "receive of wrk's ACKs, steered to its CPU by RPS and run when sendfile enables "
              "softirqs)")
    print("\nPer response / per MiB sent:\n")
    print(head)
    print(rule)
    def ss(r, side, key):
        return r["ss"].get(side, {}).get(key)

    rows = [
        ("sendfile(2) calls per response (EAGAIN)",
         lambda r: f"{r['sendfile_calls_per_response']:.2f} ({r['sendfile_eagain']})"),
        ("data bytes transmitted in the server's context",
         lambda r: fmt(r["server_data_share"], ".1%")),
        ("data bytes transmitted in wrk's context", lambda r: fmt(r["client_data_share"], ".1%")),
        ("data bytes transmitted in another context (idle softirq, ksoftirqd)",
         lambda r: fmt(r["other_data_share"], ".1%")),
        ("data skbs per MiB", lambda r: fmt(r["data_skbs_per_mib"], ".1f")),
        ("ACKs (small skbs) sent by wrk per MiB", lambda r: fmt(r["client_acks_per_mib"], ".1f")),
        ("tail-loss probes per response", lambda r: fmt(r["loss_probes_per_response"], ".2f")),
        ("retransmitted segments per response",
         lambda r: fmt(r["retransmits_per_response"], ".2f")),
        ("wrk's sockets' receive buffer, bytes (median)",
         lambda r: fmt(ss(r, "client", "rcvbuf"), ".0f")),
        ("window seen by the server, bytes (snd_wnd, median)",
         lambda r: fmt(ss(r, "server", "snd_wnd"), ".0f")),
        ("server sockets with unsent bytes / their median",
         lambda r: f"{ss(r, 'server', 'notsent_sockets') or 0} / "
                   + fmt(ss(r, "server", "notsent"), ".0f")),
    ]
    for label, f in rows:
        print(f"| {label} | " + " | ".join(f(r) for r in ok) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/release/bin")
    ap.add_argument("--size", type=int, default=1048576, help="file size, bytes")
    ap.add_argument("-c", "--connections", type=int, default=100)
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("-d", "--duration", type=int, default=3, help="profiled seconds")
    ap.add_argument("--warmup", type=int, default=1, help="seconds of wrk before profiling")
    ap.add_argument("--server-cpu", default="1")
    ap.add_argument("--client-cpu", default="0")
    ap.add_argument("--net", choices=("loopback", "veth"), default="loopback",
                    help="as bench/studies/static_files.py --net")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    servers = args.servers.split(",")
    for s in servers:
        if s not in static_files.SERVERS:
            ap.error(f"unknown server {s!r} (known: {', '.join(static_files.SERVERS)})")
    for tool, pkg in (("perf", "linux-perf"), ("wrk", "wrk"), ("ss", "iproute2")):
        if shutil.which(tool) is None:
            print(f"static_profile.py: {tool} is not installed (apt-get install {pkg})",
                  file=sys.stderr)
            return 2
    args.nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if "nginx" in servers and not os.access(args.nginx, os.X_OK):
        print("static_profile.py: nginx is not installed: skipped", file=sys.stderr)
        servers.remove("nginx")
    raise_nofile()
    work = tempfile.mkdtemp(prefix="galay-static-profile-")
    args.root = os.path.join(work, "www")
    os.makedirs(args.root)
    static_files.make_root(args.root, [args.size])
    report = {"load_start": loadavg(), "size": args.size, "net": args.net, "servers": []}
    try:
        with bench_network(args) as ns:
            args.devs = {ns.host_if, ns.ns_if} if ns else None
            for name in servers:
                rec = profile(args, name, work)
                state = "ok" if rec["ok"] else "FAILED: " + "; ".join(rec["problems"])
                print(f"{name}: {state}", file=sys.stderr, flush=True)
                report["servers"].append(rec)
    except NetnsError as e:
        print(f"static_profile.py: --net veth: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["load_end"] = loadavg()
    print(f"GET {args.size} B at {args.connections} connections over {args.net}; load average "
          f"{report['load_start']:.2f} at the start, {report['load_end']:.2f} at the end\n")
    print_tables(report["servers"], args.net)
    if args.json:
        print(json.dumps(report))
    return 0 if all(r["ok"] for r in report["servers"]) else 1


if __name__ == "__main__":
    sys.exit(main())
