#!/usr/bin/env python3
"""Per-request (or per-connection) work of an echo server: CPU split, io_uring events, symbols.

    python3 bench/studies/echo_profile.py --bin build/release/bin --client-args="-P 16" -c 100 \\
        --server "bench_server {port} --backend io_uring" --server "raw_uring {port}"
    python3 bench/studies/echo_profile.py --churn 20000 -c 50 --json churn.json \\
        --server "bench_latency server -p {port} --backend io_uring" --server "raw_uring {port}"

For each --server (in turn, --rounds times): start it pinned to CPU 0, run bench_client on CPU 1
with no warm-up (so its measured window covers all the traffic), and count on the server, over
that window: user and system CPU (/proc/PID/stat), io_uring_enter calls, SQEs submitted, CQEs
posted, task-work items (perf stat on the io_uring tracepoints), and, with --record, cpu-clock
samples (perf record) split user/kernel with the top symbols. Each count is divided by the
requests the client completed. Receives and bytes per receive come from the server's own exit
line (bench_server's "echoes"/"bytes", raw_uring's "receives"/"bytes received"/"sends").

With --churn N the client is `bench_latency churn -n N` instead (connect, one round trip, close,
N times over -c clients) and every count is per connection, with each system call the server
makes on the way counted by name (accept4, close, io_uring_register, epoll_ctl ...); --opcodes
records io_uring_submit_req instead of counting and gives the SQEs per connection by opcode.

Counts are per request, not per second, so a run that was slowed by other load still counts
right; CPU per request is only comparable between runs of the same rounds (alternate, as here).
Standard library only; needs perf (root, or perf_event_paranoid <= 1).
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
from harness import (free_port, label_of, loadavg, resolve, stop, temp_dir,  # noqa: E402
                     wait_accepting)

EVENTS = {
    "enter": "syscalls:sys_enter_io_uring_enter",
    "sqe": "io_uring:io_uring_submit_req",
    "cqe": "io_uring:io_uring_complete",
    "task_work": "io_uring:io_uring_task_add",
    "poll_arm": "io_uring:io_uring_poll_arm",
    "syscalls": "raw_syscalls:sys_enter",
}
# Churn mode also counts these by name: what a connection's set-up and tear-down cost.
CHURN_EVENTS = {
    "task_work_run": "io_uring:io_uring_task_work_run",
    "local_work_run": "io_uring:io_uring_local_work_run",
    "file_get": "io_uring:io_uring_file_get",
    "async_work": "io_uring:io_uring_queue_async_work",
    "uring_register": "io_uring:io_uring_register",
    **{s: f"syscalls:sys_enter_{s}" for s in (
        "accept4", "close", "shutdown", "io_uring_register", "epoll_ctl", "epoll_wait",
        "epoll_pwait", "epoll_pwait2", "read", "write", "recvfrom", "sendto", "recvmsg",
        "sendmsg", "readv", "writev", "setsockopt", "getsockopt", "fcntl", "ioctl", "futex",
        "getsockname")},
}


def events(args):
    return {**EVENTS, **CHURN_EVENTS} if args.churn else EVENTS


def client_argv(args, port, pid):
    """The load: bench_client for -d seconds, or with --churn `bench_latency churn -n N`."""
    if args.churn:
        return (["taskset", "-c", "1", os.path.join(args.bin, "bench_latency"), "churn", "-h",
                 "127.0.0.1", "-p", str(port), "-c", str(args.connections), "-s", str(args.size),
                 "-n", str(args.churn), "--server-pid", str(pid), "--json"]
                + shlex.split(args.client_args))
    return (["taskset", "-c", "1"] + resolve(args.client, args.bin, port)
            + ["-h", "127.0.0.1", "-p", str(port), "-c", str(args.connections), "-s",
               str(args.size), "-d", str(args.duration), "--warmup", "0", "--json"]
            + shlex.split(args.client_args))


def opcode_counts(data):
    """{opcode name: SQEs} from a perf.data of io_uring:io_uring_submit_req."""
    r = children.run(["perf", "script", "-i", data, "-F", "trace"], capture_output=True,
                     text=True)
    out = {}
    for m in re.finditer(r"opcode (\w+)", r.stdout):
        out[m.group(1)] = out.get(m.group(1), 0) + 1
    return out


def stat_ticks(pid):
    """(utime, stime) of `pid` in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def exit_counts(text):
    """receives, bytes and sends from a server's exit report (None where it gives none)."""
    out = {}
    m = re.search(r"(\d[\d,]*) echoes", text)
    if m:  # bench_server: one echo = one receive delivered and sent back
        out["receives"] = int(m.group(1).replace(",", ""))
        b = re.findall(r"([\d,]+) bytes", text)
        out["bytes"] = sum(int(x.replace(",", "")) for x in b)
    m = re.search(r"(\d+) receives, (\d+) bytes received, (\d+) sends", text)
    if m:  # raw_uring
        out["receives"], out["bytes"], out["sends"] = (int(m.group(i)) for i in (1, 2, 3))
    return out


# Kernel symbols by what they do (first match wins); the rest is "other kernel".
GROUPS = [
    ("io_uring", re.compile(r"^(__)?io_|^io_uring|^tctx_|^__io_uring|^llist_")),
    ("copy", re.compile(r"copy_(to|from)_(iter|user)|^rep_movs|memcpy|^skb_copy|^simple_copy"
                        r"|__check_object_size|__virt_addr_valid|is_vmalloc_addr")),
    ("sched, wake-ups, timers",
     re.compile(r"wake|sched|schedule|__switch_to|finish_task|_raw_spin_unlock_irq|hrtimer|timer"
                r"|read_tsc|ktime|enqueue|dequeue|select_task|ttwu|idle|pick_next|jiffies|msr")),
    ("memory (slab, pages)", re.compile(r"slab|kmem_cache|^kfree|folio|page|kmalloc")),
    ("TCP/IP, sockets, skbs",
     re.compile(r"tcp|inet|^ip_|^__ip|sock|skb|^sk_|^__sk|net_|netif|^__netif|dev_|loopback|bbr"
                r"|napi|process_backlog|^__dev|^lock_sock|^release_sock|^validate_xmit|^nf_"
                r"|^ipv4|^raw_v4|^raw_local|^__inet|^dst|softirq|_bh|eth_type|bpf_skops")),
    ("entry, syscalls", re.compile(r"entry|syscall|^do_sys|^__x64|^__sys|^x64_|^__do_sys")),
    ("perf itself", re.compile(r"^perf_|tracing_")),
]


def group_of(sym):
    for name, rx in GROUPS:
        if rx.search(sym):
            return name
    return "other kernel"


def top_symbols(data, n):
    """(user share, kernel share, {group: share}, [(share, symbol)]) of a perf.data file."""
    r = children.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "sym",
                      "--percent-limit", "0"], capture_output=True, text=True)
    rows = []
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[(.)\]\s+(.*)$", line)
        if m:
            rows.append((float(m.group(1)), m.group(2), m.group(3).strip()))
    kernel = sum(p for p, k, _ in rows if k == "k")
    user = sum(p for p, k, _ in rows if k != "k")
    groups = {"user": user}
    for p, k, s in rows:
        if k == "k":
            g = group_of(s)
            groups[g] = groups.get(g, 0) + p
    return user, kernel, groups, [(p, ("[k] " if k == "k" else "") + s) for p, k, s in rows[:n]]


def run(args, cmd, tmp, seq):
    port = free_port()
    log = open(os.path.join(tmp, f"{seq}.server.log"), "w+")
    server = children.popen(["taskset", "-c", "0"] + resolve(cmd, args.bin, port), stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    rec = {"server": label_of(cmd), "load": loadavg()}
    try:
        if not wait_accepting(server, port, 10):
            sys.exit(f"echo_profile.py: server did not start: {cmd}")
        time.sleep(0.2)
        stat_out = os.path.join(tmp, f"{seq}.stat")
        counter = recorder = None
        data = os.path.join(tmp, f"{seq}.data")
        if args.opcodes:
            recorder = children.popen(["perf", "record", "-q", "-m", "4M", "-e", EVENTS["sqe"],
                                       "-o", data, "-p", str(server.pid)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elif not args.record:  # (tracepoints cost samples of their own: one or the other)
            counter = children.popen(["perf", "stat", "-x,", "-o", stat_out, "-e",
                                      ",".join(events(args).values()), "-p", str(server.pid)],
                                     stderr=subprocess.DEVNULL)
        else:
            recorder = children.popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "4999",
                                       "-o", data, "-p", str(server.pid)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)  # let the counters attach
        t0 = stat_ticks(server.pid)
        cli = children.run(client_argv(args, port, server.pid), stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        t1 = stat_ticks(server.pid)
        for p in (counter, recorder):
            if p:
                p.send_signal(2)
                p.wait(timeout=30)
    finally:
        stop(server)
    log.seek(0)
    rec.update(exit_counts(log.read()))
    result = json.loads([l for l in cli.stdout.splitlines() if l.startswith("{")][-1])
    n = result["connections" if args.churn else "successful"]
    if cli.returncode != 0 or result["errors"] or not n or result.get("leaked_fds"):
        sys.exit(f"echo_profile.py: client failed (exit {cli.returncode}, {result['errors']} "
                 f"errors, {result.get('leaked_fds', 0)} leaked fds)")
    hz = os.sysconf("SC_CLK_TCK")
    rec["requests"] = n
    rec["qps"] = result["conns_per_sec" if args.churn else "qps"]
    rec["user_us"] = (t1[0] - t0[0]) / hz / n * 1e6
    rec["sys_us"] = (t1[1] - t0[1]) / hz / n * 1e6
    names = {v: k for k, v in events(args).items()}
    if args.opcodes:
        rec["opcodes"] = {k: v / n for k, v in opcode_counts(data).items()}
        return rec
    if args.record:
        rec["user_share"], rec["kernel_share"], rec["groups"], rec["top"] = top_symbols(
            data, args.top)
        return rec
    with open(stat_out) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) > 2 and parts[0].isdigit() and parts[2] in names:
                rec[names[parts[2]]] = int(parts[0]) / n
    return rec


def print_samples(rec):
    print("  samples: " + ", ".join(f"{g} {v:.1f}%" for g, v in rec["groups"].items()))
    for p, sym in rec["top"]:
        print(f"    {p:6.2f}%  {sym}")


def print_churn(rec, args):
    print(f"{rec['server']:<45} conn/s {rec['qps']:>9,.0f}  cpu/conn "
          f"{rec['user_us'] + rec['sys_us']:.2f} us (user {rec['user_us']:.2f} sys "
          f"{rec['sys_us']:.2f})  load {rec['load']}")
    if args.record:
        print_samples(rec)
        return
    if args.opcodes:
        print("  SQEs per connection: " + ", ".join(
            f"{k} {v:.3f}" for k, v in sorted(rec["opcodes"].items(), key=lambda kv: -kv[1])))
        return
    skip = {"server", "load", "requests", "qps", "user_us", "sys_us", "receives", "bytes",
            "sends"}
    print("  per connection: " + ", ".join(f"{k} {v:.3f}" for k, v in rec.items()
                                           if k not in skip and v >= 0.0005))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/release/bin")
    ap.add_argument("--server", action="append", required=True, help='e.g. "raw_uring {port}"')
    ap.add_argument("--client", default="bench_client")
    ap.add_argument("--client-args", default="", help='e.g. --client-args="-P 16"')
    ap.add_argument("-c", "--connections", type=int, default=100)
    ap.add_argument("-s", "--size", type=int, default=256)
    ap.add_argument("-d", "--duration", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--record", action="store_true", help="also perf record: user/kernel, symbols")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--churn", type=int, default=0, metavar="N",
                    help="N connections of bench_latency churn (-c clients); counts per connection")
    ap.add_argument("--opcodes", action="store_true",
                    help="record the SQEs instead of counting: SQEs per request (connection) by opcode")
    ap.add_argument("--json", help="write every run's figures to this file")
    args = ap.parse_args()
    if not shutil.which("perf"):
        sys.exit("echo_profile.py: needs perf (Debian package linux-perf)")
    probe = children.run(["perf", "stat", "-x,", "-e", EVENTS["sqe"], "true"],
                         capture_output=True, text=True)
    if probe.returncode != 0 or "not supported" in probe.stderr:
        sys.exit("echo_profile.py: perf cannot read the io_uring tracepoints (run as root, or "
                 "set kernel.perf_event_paranoid to -1): " + probe.stderr.strip()[-200:])

    tmp = temp_dir("echo-profile")
    runs = []
    for r in range(args.rounds):
        for i, cmd in enumerate(args.server):
            rec = run(args, cmd, tmp, f"{r}-{i}")
            runs.append(rec)
            per = lambda k: f"{rec[k]:.4f}" if k in rec else "-"  # noqa: E731
            bpr = rec["bytes"] / rec["receives"] if rec.get("receives") else 0
            if args.churn:
                print_churn(rec, args)
                continue
            print(f"{rec['server']:<45} qps {rec['qps']:>11,.0f}  cpu/req {rec['user_us'] + rec['sys_us']:.3f} us"
                  f" (user {rec['user_us']:.3f} sys {rec['sys_us']:.3f})  load {rec['load']}")
            if args.record:
                print_samples(rec)
                continue
            print(f"  per request: enter {per('enter')} syscalls {per('syscalls')} sqe {per('sqe')}"
                  f" cqe {per('cqe')} task_work {per('task_work')} poll_arm {per('poll_arm')}"
                  f"  receives {rec.get('receives', 0) / rec['requests']:.4f}"
                  f" ({bpr:,.0f} B each)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
