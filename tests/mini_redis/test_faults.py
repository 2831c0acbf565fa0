#!/usr/bin/env python3
"""mini_redis under bad input and faults, on each backend, and with the real clients:
  - protocol errors (garbage, a 1 GB bulk length, over-long lines, a wrong type byte): the same
    error reply as redis-server's, byte for byte, then the connection closes; the 1 GB length is
    refused from its length line alone, before any of the body is sent;
  - a request sent one byte at a time: the right reply, and the parser's work stays linear (the
    bytes it scanned, from INFO's parser_bytes_scanned, at most twice the bytes sent);
  - a client that never reads its replies: the server stops reading from it with a bounded
    output (INFO's client_recent_max_output_buffer) and a bounded RSS, and serves the others;
  - --max-connections: the client past the limit gets Redis's error and is closed;
  - SIGTERM while redis-benchmark sends MSETs of keys on both shards 64 at a time (--workers 2):
    a clean exit 0 with the drain's summary;
  - redis-cli and redis-benchmark (Debian's) against it: answers right, no error replies.
Usage: test_faults.py MINI_REDIS. Exit 77 (skip) without redis-server, redis-cli and
redis-benchmark.
"""
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading

from redis_peer import BACKENDS, Conn, encode, start_mini_redis, start_redis_server

# Each: (what, bytes sent). Both servers answer an error and close; nothing of a body follows.
BAD = [
    ("garbage multibulk count", b"*abc\r\n"),
    ("negative bulk length", b"*1\r\n$-5\r\n"),
    ("a bulk length that is not a number", b"*1\r\n$x1\r\n"),
    ("a 1 GB bulk string (only its length line is sent)", b"*2\r\n$3\r\nSET\r\n$1073741824\r\n"),
    ("a 512 MiB + 1 bulk string", b"*2\r\n$3\r\nSET\r\n$536870913\r\n"),
    ("an argument that is not a bulk string", b"*1\r\n+PING\r\n"),
    ("a multibulk count line over 64 KiB, unterminated", b"*" + b"1" * 70000),
    ("an inline request over 64 KiB, unterminated", b"PING " + b"x" * 70000),
    ("a bulk length line over 64 KiB, unterminated", b"*1\r\n$" + b"1" * 70000),
    ("unbalanced double quotes in an inline request", b'SET "a b\r\n'),
    ("unbalanced single quotes in an inline request", b"SET 'a b\r\n"),
    ("a closing quote followed by more", b'SET "a"b c\r\n'),
    ("an escape at the end of a quoted argument", b'ECHO "abc\\\r\n'),
]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def info(conn):
    text = conn.call(b"INFO").split(b"\r\n", 1)[1].decode()
    return {k: v for k, _, v in (line.partition(":") for line in text.splitlines()) if v}


def protocol_errors(port, redis_port):
    for what, data in BAD:
        replies = []
        for p in (redis_port, port):
            c = Conn(p)
            c.send(data)
            r = c.reply()
            assert c.closed(), f"{what}: the server at {p} kept the connection open"
            c.close()
            replies.append(r)
        assert replies[0] == replies[1], \
            f"{what}:\n  redis-server: {replies[0]!r}\n  mini_redis:   {replies[1]!r}"
        assert replies[1].startswith(b"-ERR Protocol error"), (what, replies[1])


def one_byte_at_a_time(port):
    probe = Conn(port)
    before = int(info(probe)["parser_bytes_scanned"])
    c = Conn(port)
    c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    value = bytes(range(256)) * 40  # 10,240 bytes, NUL and CR LF among them
    inline = b"ECHO " + b"y" * 30000 + b"\r\n"  # a line searched for its end as it grows
    wire = encode(b"SET", b"bin\x00\r\nkey", value) + encode(b"GET", b"bin\x00\r\nkey") + inline
    for i in range(len(wire)):
        c.send(wire[i:i + 1])
    assert c.reply() == b"+OK\r\n"
    assert c.reply() == b"$%d\r\n%s\r\n" % (len(value), value)
    assert c.reply() == b"$30000\r\n" + b"y" * 30000 + b"\r\n"
    # INFO's own request is scanned too (after `before` was read): a few dozen bytes.
    scanned = int(info(probe)["parser_bytes_scanned"]) - before
    assert scanned <= 2 * len(wire) + 200, \
        f"{len(wire)} bytes sent one at a time, {scanned} scanned: the parser rescans"
    c.close()
    probe.close()


def never_reads(mini, flush_at=64 * 1024):
    port, pid = mini.port, mini.proc.pid
    other = Conn(port)
    big = b"v" * 65536
    assert other.call(b"SET", b"big", big) == b"+OK\r\n"
    rss_before = rss_kib(pid)
    # 6,000 GETs of 64 KiB: 384 MiB of replies if the server read them all.
    hog = socket.create_connection(("127.0.0.1", port))
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    hog.setblocking(False)
    wire, sent, stalled = encode(b"GET", b"big") * 6000, 0, False
    while sent < len(wire):
        try:
            sent += hog.send(wire[sent:sent + 65536])
        except BlockingIOError:
            # The server has stopped reading (its replies wait for us): a bounded wait for room.
            _, w, _ = select.select([], [hog], [], 2.0)
            if not w:
                stalled = True
                break
    # The others are served meanwhile, on the same worker.
    assert other.call(b"PING") == b"+PONG\r\n"
    assert other.call(b"GET", b"big") == b"$65536\r\n" + big + b"\r\n"
    held = int(info(other)["client_recent_max_output_buffer"])
    assert held <= flush_at + len(big) + 64, f"a connection held {held} bytes of replies"
    grew = rss_kib(pid) - rss_before
    assert grew < 64 * 1024, f"RSS grew by {grew} KiB for a client that never reads"
    hog.close()
    assert other.call(b"PING") == b"+PONG\r\n"
    other.close()
    return stalled


def max_connections(binary, backend):
    mini = start_mini_redis(binary, backend, 1, ["--max-connections", "2"])
    with mini:
        a, b = Conn(mini.port), Conn(mini.port)
        assert a.call(b"PING") == b.call(b"PING") == b"+PONG\r\n"
        c = Conn(mini.port)
        assert c.reply() == b"-ERR max number of clients reached\r\n"
        assert c.closed()
        a.close()
        # a's slot comes back once the server has seen it close: b asks until it has.
        for _ in range(1000):
            if info(b)["connected_clients"] == "1":
                break
        d = Conn(mini.port)
        assert d.call(b"PING") == b"+PONG\r\n"
        code, err = mini.stop()
        assert code == 0 and "1 refused" in err, (code, err)


def sigterm_during_mset(binary, backend):
    mini = start_mini_redis(binary, backend, 2)
    with mini:
        bench = subprocess.Popen(
            ["redis-benchmark", "-p", str(mini.port), "-c", "8", "-n", "100000000", "-P", "64",
             "-r", "100000", "-t", "mset", "-q"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            probe = Conn(mini.port)
            # Until the MSETs are flowing: INFO counts the commands run.
            for _ in range(100000):
                if int(info(probe)["total_commands_processed"]) > 2000:
                    break
            else:
                raise AssertionError("redis-benchmark's MSETs never arrived")
            code, err = mini.stop(signal.SIGTERM)
        finally:
            bench.kill()
            bench.wait()
        assert code == 0, f"mini_redis exit {code} on SIGTERM under load: {err}"
        assert "mini_redis: SIGTERM:" in err and "commands on" in err, err


def real_clients(binary, backend):
    mini = start_mini_redis(binary, backend, 2)
    with mini:
        cli = ["redis-cli", "-p", str(mini.port)]
        run = lambda *a, i=None: subprocess.run(cli + list(a), input=i, capture_output=True,
                                                text=True, timeout=60).stdout
        assert run("SET", "greeting", "hello world") == "OK\n"
        assert run("GET", "greeting") == "hello world\n"
        assert run("MSET", "a", "1", "b", "2", "c", "3") == "OK\n"
        assert run("MGET", "a", "b", "c", "nosuch") == "1\n2\n3\n\n"
        assert run("INCRBY", "a", "41") == "42\n"
        assert run("SET", "t", "x", "EX", "1000") == "OK\n"
        assert run("TTL", "t") == "1000\n"
        assert run("DBSIZE") == "5\n"
        assert run("--pipe", i="SET p1 v1\r\nSET p2 v2\r\n").count("errors: 0, replies: 2") == 1
        bench = subprocess.run(
            ["redis-benchmark", "-p", str(mini.port), "-q", "-n", "20000", "-c", "20", "-P", "8",
             "-r", "1000", "-t", "ping,set,get,incr,mset"],
            capture_output=True, text=True, timeout=300)
        out = bench.stdout + bench.stderr
        assert bench.returncode == 0 and "error" not in out.lower(), out
        for test in ("PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "MSET (10 keys)"):
            assert f"{test}: " in out, f"no {test} in redis-benchmark's output: {out}"
        code, err = mini.stop()
        assert code == 0, err


def main():
    for tool in ("redis-server", "redis-cli", "redis-benchmark"):
        if shutil.which(tool) is None:
            print(f"SKIP: {tool} is not installed (Debian's redis-server and redis-tools)")
            return 77
    binary = sys.argv[1]
    ran = 0
    with start_redis_server() as redis:
        for backend in BACKENDS:
            mini = start_mini_redis(binary, backend, 1)
            if mini is None:
                continue
            with mini:
                protocol_errors(mini.port, redis.port)
                print(f"mini_redis_faults: {backend}: {len(BAD)} protocol errors as redis-server's")
                one_byte_at_a_time(mini.port)
                print(f"mini_redis_faults: {backend}: one byte at a time, linear")
                stalled = never_reads(mini)
                print(f"mini_redis_faults: {backend}: a client that never reads: bounded "
                      f"({'it stalled' if stalled else 'every request fit in the socket buffers'}),"
                      f" the others served")
                code, err = mini.stop()
                assert code == 0, f"exit {code}: {err}"
            max_connections(binary, backend)
            print(f"mini_redis_faults: {backend}: --max-connections")
            sigterm_during_mset(binary, backend)
            print(f"mini_redis_faults: {backend}: SIGTERM during MSET -P 64 over two shards")
            real_clients(binary, backend)
            print(f"mini_redis_faults: {backend}: redis-cli and redis-benchmark")
            ran += 1
    return 0 if ran else 77


if __name__ == "__main__":
    sys.exit(main())
