#!/usr/bin/env python3
"""The differential test of mini_redis: the same seeded stream of random pipelined requests goes
to Debian's redis-server (started here: nothing saved, a free port) and to mini_redis (--workers 1
and --workers 2, on each backend), and every reply must be the same bytes.

The generator covers every command mini_redis has, in any letter case, with wrong arities, bad
integers, overflows, every SET/EXPIRE option, binary keys and values (NUL, CR LF, 0xff, the empty
key), and now and then an inline request (quotes, escapes, blanks) among the arrays. Nothing depends on time: a deadline is either far in the future (EX/PX/EXPIRE of days, which
no run outlasts) or already past (EXPIRE with zero or a negative time, which deletes the key at
once). What legitimately differs, and how each is compared instead:
  - TTL and PTTL of a key with a deadline count down while the test runs: a positive reply must be
    positive on both sides and within 10 s (TTL) or 10,000 ms (PTTL) of the other's.
  - INFO describes the server (version, pid, counters): both replies must be bulk strings that
    start with "# Server".
  - COMMAND (and COMMAND COUNT, DOCS, INFO): redis-server has 240 commands with their flags,
    mini_redis its own: not sent.
  - CONFIG GET: each server's own configuration: only parameters set the same on both are asked
    (save, appendonly, maxclients); port differs, so it is not.
  - The error for an unknown command quotes the arguments: identical, so compared.
Usage: test_diff.py MINI_REDIS [--rounds N] [--seed S]
"""
import argparse
import random
import shutil
import sys

from redis_peer import BACKENDS, Conn, encode, start_mini_redis, start_redis_server

KEYS = [b"k1", b"k2", b"k3", b"key:a", b"key:b", b"n1", b"n2", b"bin\x00key", b"cr\r\nlf",
        b"\xff\xfe", b"", b"sp ace", b"*2\r\n$3", b"$-1"]
VALUES = [b"v", b"", b"0", b"1", b"-1", b"42", b"007", b"+1", b" 1", b"1.5",
          b"9223372036854775806", b"9223372036854775807", b"-9223372036854775808",
          b"9223372036854775808", b"\x00\r\n\x00", b"x" * 300, b"abc\r\ndef"]
INTS = [b"0", b"1", b"-1", b"5", b"-7", b"100", b"9223372036854775807", b"-9223372036854775808",
        b"9223372036854775808", b"abc", b"", b"1 ", b"01", b"-0", b"+3"]
FAR = 86400 * 30  # seconds: far beyond any run


def case(rng, name):
    """The command name in a random letter case."""
    return bytes(c ^ 0x20 if rng.random() < 0.3 and chr(c).isalpha() else c for c in name.encode())


def key(rng):
    return rng.choice(KEYS)


def expire_time(rng, ms):
    r = rng.random()
    if r < 0.15:
        return rng.choice([b"0", b"-1", b"-100"])  # past: deletes the key
    if r < 0.25:  # not integers, overflows, past: never a deadline a few ms away
        return rng.choice([i for i in INTS if i not in (b"1", b"5", b"100", b"+3")])
    base = FAR * (1000 if ms else 1)
    return str(base + rng.randrange(base)).encode()


def set_args(rng):
    args = [case(rng, "set"), key(rng), rng.choice(VALUES)]
    opts = []
    if rng.random() < 0.3:
        opts.append(rng.choice([b"NX", b"xx", b"nx", b"XX"]))
    if rng.random() < 0.3:
        unit = rng.choice([b"EX", b"px", b"ex", b"PX"])
        if rng.random() < 0.1:
            opts += [unit, rng.choice([b"0", b"-5", b"abc", b"9223372036854775807"])]
        else:
            opts += [unit, str(FAR * (1000 if unit.lower() == b"px" else 1)).encode()]
    if rng.random() < 0.05:
        opts.append(rng.choice([b"KEEPTTL_NOT", b"EX", b"NX"]))  # syntax errors
    if rng.random() < 0.2:
        rng.shuffle(opts)
    return args + opts


def request(rng):
    """One random request (a list of arguments) and the name it is compared under."""
    r = rng.randrange(100)
    if r < 12:
        return set_args(rng)
    if r < 22:
        return [case(rng, "get"), key(rng)]
    if r < 27:
        return [case(rng, rng.choice(["incr", "decr"])), key(rng)]
    if r < 31:
        return [case(rng, "incrby"), key(rng), rng.choice(INTS)]
    if r < 37:
        return [case(rng, rng.choice(["del", "exists"]))] + [key(rng) for _ in range(rng.randint(1, 6))]
    if r < 43:
        return [case(rng, "mget")] + [key(rng) for _ in range(rng.randint(1, 8))]
    if r < 49:
        pairs = []
        for _ in range(rng.randint(1, 5)):
            pairs += [key(rng), rng.choice(VALUES)]
        return [case(rng, "mset")] + pairs
    if r < 56:
        ms = rng.random() < 0.5
        args = [case(rng, "pexpire" if ms else "expire"), key(rng), expire_time(rng, ms)]
        if rng.random() < 0.3:
            args.append(rng.choice([b"NX", b"xx", b"GT", b"lt", b"bogus"]))
        if rng.random() < 0.05:
            args.append(rng.choice([b"XX", b"GT", b"LT"]))
        return args
    if r < 63:
        return [case(rng, rng.choice(["ttl", "pttl"])), key(rng)]
    if r < 66:
        return [case(rng, "persist"), key(rng)]
    if r < 69:
        return [case(rng, "dbsize")]
    if r < 70:
        return [case(rng, "flushall")] + ([rng.choice([b"ASYNC", b"sync", b"bad"])] if rng.random() < 0.3 else [])
    if r < 74:
        return [case(rng, "ping")] + [rng.choice(VALUES) for _ in range(rng.choice([0, 0, 1, 1, 2]))]
    if r < 77:
        return [case(rng, "echo"), rng.choice(VALUES)]
    if r < 79:
        return [case(rng, "config"), b"GET", rng.choice([b"save", b"appendonly", b"maxclients", b"MAXCLIENTS", b"nosuch"])]
    if r < 80:
        return [case(rng, "info")]
    if r < 85:
        # Wrong arities of commands with a fixed or minimum count.
        name = rng.choice(["get", "set", "incr", "incrby", "echo", "ttl", "mset", "del", "expire",
                           "persist", "dbsize", "mget"])
        n = {"get": [0, 2], "set": [0, 1], "incr": [0, 2], "incrby": [1, 3], "echo": [0, 2],
             "ttl": [0, 3], "mset": [0, 1, 3], "del": [0], "expire": [0, 1], "persist": [0, 2],
             "dbsize": [1, 2], "mget": [0]}[name]
        return [case(rng, name)] + [key(rng) for _ in range(rng.choice(n))]
    if r < 88:
        return [rng.choice([b"nosuch", b"GETX", b"x\x00y", b"hello world"])] + \
            [rng.choice(VALUES[:6]) for _ in range(rng.randint(0, 3))]
    if r < 90:
        return [case(rng, "config"), rng.choice([b"bogus", b"RESETX"]), b"x", b"y"]  # not CONFIG SET: not in mini_redis
    # A key that surely has a value, then ops on it: more hits than the key pool gives alone.
    return [case(rng, "set"), key(rng), rng.choice(INTS[:6])]


INLINE = [b'SET "a b" "c\\td"', b"SET 'it s' 1", b"GET \"a b\"", b'ECHO "\\x41\\x4a\\xzz\\n"',
          b"ECHO 'don\\'t'", b'MSET "" empty "k1" \'v v\'', b"  PING   ", b'ECHO ""',
          b'GET "bin\\x00key"', b"EXISTS a\tb  'a b'", b"mget k1 \"k2\" 'k3'", b"",
          b'ECHO "a\\"b"', b"ECHO 'a\\b'", b'SET "cr\\r\\nlf" "\\x00"']


def inline_request(rng):
    """An inline request (what a person types into nc): quotes, escapes, blanks."""
    return rng.choice(INLINE) + rng.choice([b"\r\n", b"\n"])


def same(name, a, b):
    """Whether the replies of two servers agree (byte for byte, but for the documented cases)."""
    if a == b:
        return True
    if name in (b"ttl", b"pttl") and a.startswith(b":") and b.startswith(b":"):
        x, y = int(a[1:-2]), int(b[1:-2])
        return x > 0 and y > 0 and abs(x - y) <= (10 if name == b"ttl" else 10000)
    if name == b"info":
        return a.startswith(b"$") and b.startswith(b"$") and b"# Server" in a[:30] and b"# Server" in b[:30]
    return False


def run(binary, backend, workers, seed, rounds):
    mini = start_mini_redis(binary, backend, workers)
    if mini is None:
        return None
    with mini, start_redis_server() as redis:
        a, b = Conn(redis.port), Conn(mini.port)
        rng = random.Random(seed)
        sent = 0
        for batch in range(rounds):
            reqs = [request(rng) for _ in range(rng.choice([1, 2, 16, 64]))]
            wires = [encode(*r) for r in reqs]
            if rng.random() < 0.2:  # an inline request among them (an empty line gets no reply)
                line = inline_request(rng)
                at = rng.randrange(len(reqs) + 1)
                wires.insert(at, line)
                if line.strip():
                    reqs.insert(at, [line.split()[0] if line.split() else b"", line])
            wire = b"".join(wires)
            # The pipeline in one write, or cut at random places (what TCP may do).
            cuts = sorted(rng.sample(range(1, len(wire)), min(3, len(wire) - 1))) if rng.random() < 0.3 else []
            for conn in (a, b):
                at = 0
                for c in cuts + [len(wire)]:
                    conn.send(wire[at:c])
                    at = c
            for r in reqs:
                x, y = a.reply(), b.reply()
                name = r[0].lower()
                if not same(name, x, y):
                    raise AssertionError(
                        f"mismatch (backend {backend}, workers {workers}, seed {seed}, batch "
                        f"{batch}) on {r!r}:\n  redis-server: {x!r}\n  mini_redis:   {y!r}")
                sent += 1
            # The whole keyspace after each pipeline: a write that went wrong with the same reply
            # shows here, next to the requests that made it.
            for conn in (a, b):
                conn.send(encode(b"MGET", *KEYS) + encode(b"DBSIZE"))
            for what in ("MGET of every key", "DBSIZE"):
                x, y = a.reply(), b.reply()
                if x != y:
                    raise AssertionError(
                        f"state differs after (backend {backend}, workers {workers}, seed {seed}, "
                        f"batch {batch}): {what}:\n  redis-server: {x!r}\n  mini_redis:   {y!r}\n"
                        f"  the pipeline: {reqs!r}")
        # QUIT: +OK, then both close.
        assert a.call(b"QUIT") == b.call(b"quit") == b"+OK\r\n"
        assert a.closed() and b.closed()
        code, err = mini.stop()
        assert code == 0, f"mini_redis exit {code}: {err}"
    return sent


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mini_redis")
    ap.add_argument("--rounds", type=int, default=150, help="pipelines per server (default 150)")
    ap.add_argument("--seed", type=int, default=47)
    o = ap.parse_args()
    if shutil.which("redis-server") is None:
        print("SKIP: redis-server is not installed (Debian's redis-server package)")
        return 77
    ran = 0
    for backend in BACKENDS:
        for workers in (1, 2):
            n = run(o.mini_redis, backend, workers, o.seed + workers, o.rounds)
            if n is not None:
                print(f"mini_redis_diff: {backend} --workers {workers}: {n} requests, 0 mismatches")
                ran += 1
    return 0 if ran else 77


if __name__ == "__main__":
    sys.exit(main())
