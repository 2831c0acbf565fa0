#!/usr/bin/env bash
# Smoke test of the hand-written baselines (registered with ctest as baselines_smoke).
#   smoke_test.sh BIN_DIR
# 1. raw_epoll and raw_uring each serve a 1 s raw_client run (50 connections): requests > 0,
#    errors == 0, and the server exits 0 on SIGTERM; raw_uring --bundle too, with 16 KiB messages
#    into 4 KiB buffers, and some of its receives span several buffers; raw_uring --inc too.
#    raw_epoll --threads 2 and raw_uring --threads 2 (a SO_REUSEPORT listener per thread) too, and
#    each thread's loop accepted some of the 50 connections. raw_epoll --idle-spin 50 and
#    raw_uring --idle-spin 50 (poll before waiting) too.
#    raw_unix_echo's server and raw_uring --unix each serve a 1 s raw_unix_echo client run (50
#    connections, every byte verified), exit 0 on SIGTERM and remove their socket file.
# 2. raw_client against a port where nothing listens exits non-zero and says "connect ... refused".
# 3. http_turns against two raw_http servers (20 connections each, turns of 0.2 s): both have
#    requests > 0, errors == 0, a p99 for each of the 5 measured turns and the client's own load
#    (busy fraction in (0, 1], 1-20 ready connections per epoll_wait), a latency at the socket
#    for every request and none above its end-to-end one; against a closed port
#    it exits non-zero naming the target; at --rate, every request due in a turn is answered
#    and measured, exactly ceil(slice x rate) a turn;
#    against a small Python server it frames responses that arrive one byte at a time (0 errors)
#    and counts chunked, non-2xx, Connection: close, doubled and missing responses as errors of
#    their kind.
# Every step is bounded by `timeout`; nothing asserts on timing or throughput.
# Exit 77 (ctest: skipped) when the kernel refuses io_uring, after the epoll part has passed.
# A build without io_uring (GALAY_WITH_URING=OFF) has no raw_uring: only the epoll part runs.
set -euo pipefail

BIN=${1:?usage: smoke_test.sh BIN_DIR}
TMP=$(mktemp -d)
SERVER_PID=
EXTRA_PIDS=()
cleanup() {
    [[ -n $SERVER_PID ]] && kill -KILL "$SERVER_PID" 2>/dev/null || true
    for p in "${EXTRA_PIDS[@]}"; do { kill -KILL "$p" && wait "$p"; } 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# start_server NAME: starts it on an ephemeral port (0) and sets SERVER_PID and PORT.
# Returns 1 if the server died before announcing itself.
start_server() {
    local name=$1
    shift
    # The child truncates its output file only once it runs: without this, the loop below could
    # read the line of an earlier server of the same name.
    rm -f "$TMP/$name.out"
    "$BIN/$name" 0 "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
    SERVER_PID=$!
    for _ in $(seq 100); do
        if grep -qs '^listening on ' "$TMP/$name.out"; then
            PORT=$(sed -n 's/^listening on .*:\([0-9]*\) .*/\1/p' "$TMP/$name.out")
            return 0
        fi
        kill -0 "$SERVER_PID" 2>/dev/null || { SERVER_PID=; return 1; }
        sleep 0.1
    done
    fail "$name did not print its 'listening on' line within 10 s"
}

stop_server() {
    local name=$1 rc=0
    kill -TERM "$SERVER_PID"
    timeout 10 tail --pid="$SERVER_PID" -f /dev/null || fail "$name ignored SIGTERM"
    wait "$SERVER_PID" || rc=$?
    SERVER_PID=
    [[ $rc -eq 0 ]] || fail "$name exited with status $rc after SIGTERM"
}

check_server() {
    local name=$1 rc=0
    shift
    timeout 60 "$BIN/raw_client" -p "$PORT" -c 50 -d 1 "$@" --json >"$TMP/$name.json" \
        2>"$TMP/$name.client.err" || rc=$?
    if [[ $rc -ne 0 ]]; then
        cat "$TMP/$name.client.err" >&2
        fail "raw_client against $name exited with status $rc"
    fi
    python3 - "$TMP/$name.json" "$name" <<'EOF' || fail "raw_client result against $2 is wrong"
import json, sys
r = json.load(open(sys.argv[1]))
ok = r["tool"] == "raw_client" and r["errors"] == 0 and r["requests"] > 0 \
    and r["successful"] == r["requests"]
print(f"{sys.argv[2]}: requests={r['requests']} errors={r['errors']} qps={r['qps']:.0f}")
sys.exit(0 if ok else 1)
EOF
    stop_server "$name"
}

# check_threads NAME: after a --threads 2 run, both loops printed an exit line and each accepted
# some of the connections (the kernel hashes 50 connections over the two listeners: all on one
# has the odds of 49 coin flips).
check_threads() {
    python3 - "$TMP/$1.err" "$1" <<'EOF' || { cat "$TMP/$1.err" >&2; fail "$1 --threads 2: a loop accepted nothing"; }
import re, sys
n = [int(x) for x in re.findall(r"exit: (\d+) accepted", open(sys.argv[1]).read())]
print(f"{sys.argv[2]} --threads 2: accepted per loop {n}")
sys.exit(0 if len(n) == 2 and min(n) > 0 else 1)
EOF
}

start_server raw_epoll || { cat "$TMP/raw_epoll.err" >&2; fail "raw_epoll failed to start"; }
check_server raw_epoll
start_server raw_epoll --threads 2 ||
    { cat "$TMP/raw_epoll.err" >&2; fail "raw_epoll --threads 2 failed to start"; }
check_server raw_epoll
check_threads raw_epoll
start_server raw_epoll --idle-spin 50 ||
    { cat "$TMP/raw_epoll.err" >&2; fail "raw_epoll --idle-spin 50 failed to start"; }
check_server raw_epoll

uring_skipped=0
if [[ ! -e $BIN/raw_uring ]]; then
    echo "raw_uring: not built (GALAY_WITH_URING=OFF), only the epoll baseline is checked"
elif start_server raw_uring; then
    check_server raw_uring
    # Its per-request counters (bench/studies/echo_profile.py reads them): every receive was sent
    # back.
    python3 - "$TMP/raw_uring.err" <<'EOF' || { cat "$TMP/raw_uring.err" >&2; fail "raw_uring: counters wrong"; }
import re, sys
m = re.search(r"(\d+) receives, (\d+) bytes received, (\d+) sends", open(sys.argv[1]).read())
ok = m is not None and int(m[1]) > 0 and int(m[2]) >= int(m[1]) and int(m[3]) >= int(m[1])
print(f"raw_uring: {m[0] if m else 'no counters'}")
sys.exit(0 if ok else 1)
EOF
    # --bundle with 4 KiB buffers and 16 KiB messages, so that receives span several buffers.
    start_server raw_uring --bundle --buf-size 4096 ||
        { cat "$TMP/raw_uring.err" >&2; fail "raw_uring --bundle failed to start"; }
    check_server raw_uring -s 16384
    grep -Eq ', [1-9][0-9]* receives over several buffers' "$TMP/raw_uring.err" ||
        { cat "$TMP/raw_uring.err" >&2; fail "raw_uring --bundle: no receive spanned two buffers"; }
    echo "raw_uring --bundle: $(grep -o '[0-9]* receives over several buffers' "$TMP/raw_uring.err")"
    # --inc: several receives share a buffer (IOU_PBUF_RING_INC); every byte still echoed right.
    start_server raw_uring --inc ||
        { cat "$TMP/raw_uring.err" >&2; fail "raw_uring --inc failed to start"; }
    check_server raw_uring -s 1000 -P 4
    start_server raw_uring --threads 2 ||
        { cat "$TMP/raw_uring.err" >&2; fail "raw_uring --threads 2 failed to start"; }
    check_server raw_uring
    check_threads raw_uring
    start_server raw_uring --idle-spin 50 ||
        { cat "$TMP/raw_uring.err" >&2; fail "raw_uring --idle-spin 50 failed to start"; }
    check_server raw_uring
elif grep -q 'io_uring unavailable' "$TMP/raw_uring.err"; then
    echo "SKIP raw_uring: $(cat "$TMP/raw_uring.err")" >&2
    uring_skipped=1
else
    cat "$TMP/raw_uring.err" >&2
    fail "raw_uring failed to start"
fi

# Unix stream sockets: raw_unix_echo's server and raw_uring --unix each serve 1 s of
# raw_unix_echo's client (50 connections; it verifies every echoed byte and exits non-zero on a
# wrong one), exit 0 on SIGTERM and remove their socket file.
check_unix_server() {
    local name=$1 rc=0
    shift
    local sock=$TMP/$name.sock
    "$@" "$sock" >"$TMP/$name.unix.out" 2>"$TMP/$name.unix.err" &
    SERVER_PID=$!
    for _ in $(seq 100); do
        [[ -S $sock ]] && grep -q '^listening on ' "$TMP/$name.unix.out" && break
        kill -0 "$SERVER_PID" 2>/dev/null ||
            { SERVER_PID=; cat "$TMP/$name.unix.err" >&2; fail "$name (unix) failed to start"; }
        sleep 0.1
    done
    [[ -S $sock ]] || fail "$name (unix) did not create $sock within 10 s"
    timeout 60 "$BIN/raw_unix_echo" client "$sock" -c 50 -d 1 >"$TMP/$name.unix.json" \
        2>"$TMP/$name.unix.client.err" || rc=$?
    [[ $rc -eq 0 ]] ||
        { cat "$TMP/$name.unix.client.err" >&2; fail "raw_unix_echo client against $name: $rc"; }
    python3 - "$TMP/$name.unix.json" "$name" <<'PY' || fail "unix echo result against $name"
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]} (unix): requests={r['requests']} qps={r['qps']:.0f}")
sys.exit(0 if r["requests"] > 0 else 1)
PY
    stop_server "$name (unix)"
    [[ ! -e $sock ]] || fail "$name left its socket file behind"
}
check_unix_server raw_unix_echo "$BIN/raw_unix_echo" server
if [[ -e $BIN/raw_uring && $uring_skipped -eq 0 ]]; then
    check_unix_server raw_uring "$BIN/raw_uring" --unix
fi

# Negative: a port nobody listens on (bound then released; nothing else binds it in between on a
# test machine, and a false "pass" would need a server there that echoes, which cannot happen).
FREE_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
rc=0
timeout 30 "$BIN/raw_client" -p "$FREE_PORT" -c 5 -d 1 >"$TMP/neg.out" 2>"$TMP/neg.err" || rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] || fail "raw_client against a closed port exited with status $rc"
grep -qi 'connect .*refused' "$TMP/neg.err" ||
    { cat "$TMP/neg.err" >&2; fail "no 'connect ... refused' message from raw_client"; }
echo "closed port: raw_client exit status $rc, message: $(grep -i -m1 refused "$TMP/neg.err")"

# --- http_turns ----------------------------------------------------------------------------------
# bg_port FILE PID: the port of the 'listening on ...:PORT' line a background server wrote to FILE.
bg_port() {
    local file=$1 pid=$2
    for _ in $(seq 100); do
        if grep -q '^listening on ' "$file"; then
            sed -n 's/^listening on .*:\([0-9]*\) .*/\1/p' "$file" | head -1
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

"$BIN/raw_http" 0 >"$TMP/http1.out" 2>&1 &
EXTRA_PIDS+=($!)
P1=$(bg_port "$TMP/http1.out" $!) || fail "raw_http (1) did not start: $(cat "$TMP/http1.out")"
"$BIN/raw_http" 0 >"$TMP/http2.out" 2>&1 &
EXTRA_PIDS+=($!)
P2=$(bg_port "$TMP/http2.out" $!) || fail "raw_http (2) did not start: $(cat "$TMP/http2.out")"
rc=0
timeout 60 "$BIN/http_turns" --target one=127.0.0.1:"$P1" --target two=127.0.0.1:"$P2" -c 20 \
    -d 1 --warmup 0.2 --slice 0.2 --json >"$TMP/turns.json" 2>"$TMP/turns.err" || rc=$?
[[ $rc -eq 0 ]] || { cat "$TMP/turns.err" >&2; fail "http_turns against two raw_http exited $rc"; }
python3 - "$TMP/turns.json" <<'PY' || fail "http_turns result against raw_http is wrong"
import json, sys
r = json.load(open(sys.argv[1]))
ok = r["tool"] == "http_turns" and r["conns"] == 20 and r["turns"] == 5 \
    and [t["name"] for t in r["targets"]] == ["one", "two"]
for t in r["targets"]:
    lat = t["latency_us"]
    print(f"http_turns {t['name']}: requests={t['requests']} errors={t['errors']} "
          f"turns={t['turns']} p99={lat['p99']:.0f} us")
    ok = ok and t["requests"] > 0 and t["errors"] == 0 and t["turns"] == 5 \
        and t["responses"] == t["requests"] + t["warmup_requests"] \
        and 0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["max"]
    # each measured turn's own p99, in cycle order, within the run's latencies
    tp = t["turn_p99_us"]
    ok = ok and len(tp) == 5 and all(v is not None and lat["min"] <= v <= lat["max"] for v in tp)
    # the client's own CPU over the turns' wall time, and ready connections per epoll_wait
    print(f"  client busy {t['client_busy']:.2f}, {t['client_events_per_wait']:.1f} ready per wait")
    ok = ok and 0 < t["client_busy"] <= 1.01 and 1 <= t["client_events_per_wait"] <= 20
    # latency at the socket (kernel receive timestamp): one per measured request, each no later
    # than the read that took it, so no quantile above the end-to-end one (<1% histogram error)
    sock = t["socket_latency_us"]
    print(f"  at the socket: {t['socket_latency_count']} of {t['requests']}, "
          f"p50 {sock['p50']:.0f} us, p99 {sock['p99']:.0f} us")
    ok = ok and t["socket_latency_count"] == t["requests"] and 0 < sock["p50"] \
        and sock["p50"] <= lat["p50"] * 1.01 and sock["p99"] <= lat["p99"] * 1.01 \
        and len(t["turn_socket_p99_us"]) == 5
sys.exit(0 if ok else 1)
PY

# Open loop (--rate): every request that fell due in a measured turn is answered and measured,
# exactly ceil(slice x rate) a turn, also when one connection cannot keep up with the rate (then
# the turn runs past its slice until the last due request is answered).
for spec in "2000 20 0.2 1" "100000 1 0.1 0.2"; do
    read -r rate conns slice secs <<<"$spec"
    rc=0
    timeout 60 "$BIN/http_turns" --target one=127.0.0.1:"$P1" --target two=127.0.0.1:"$P2" \
        -c "$conns" -d "$secs" --warmup 0 --slice "$slice" --rate "$rate" --json \
        >"$TMP/rate.json" 2>"$TMP/rate.err" || rc=$?
    [[ $rc -eq 0 ]] || { cat "$TMP/rate.err" >&2; fail "http_turns --rate $rate exited $rc"; }
    python3 - "$TMP/rate.json" "$rate" "$slice" <<'PY' ||
import json, math, sys
r = json.load(open(sys.argv[1]))
rate, slice_s = float(sys.argv[2]), float(sys.argv[3])
due = r["turns"] * math.ceil(slice_s * rate - 1e-9)
ok = r["rate"] == rate
for t in r["targets"]:
    print(f"http_turns --rate {rate:g} -c {r['conns']}, {t['name']}: requests={t['requests']} "
          f"(due {due}) errors={t['errors']} active={t['active_s']:.2f} s "
          f"p99={t['latency_us']['p99']:.0f} us")
    ok = ok and t["errors"] == 0 and t["requests"] == due
    # (the open-loop client polls while requests fall due: its busy fraction means nothing)
    ok = ok and t["client_busy"] is None and t["client_events_per_wait"] >= 1
sys.exit(0 if ok else 1)
PY
        { cat "$TMP/rate.err" >&2; fail "http_turns --rate $rate -c $conns"; }
done

rc=0
timeout 30 "$BIN/http_turns" --target one=127.0.0.1:"$P1" --target nobody=127.0.0.1:"$FREE_PORT" \
    -c 5 -d 1 >"$TMP/turns-neg.out" 2>"$TMP/turns-neg.err" || rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] || fail "http_turns against a closed port exited with status $rc"
grep -q 'target nobody .*refused' "$TMP/turns-neg.err" ||
    { cat "$TMP/turns-neg.err" >&2; fail "no 'target nobody ... refused' message from http_turns"; }
echo "closed port: http_turns exit status $rc, message: $(grep -m1 nobody "$TMP/turns-neg.err")"

# Response framing, against a server that misbehaves on purpose: one port per behaviour.
cat >"$TMP/httpd.py" <<'PY'
import socket, socketserver, sys, threading, time

def answer(extra=b"", status=b"200 OK", length=True, body=b"Hello, World!"):
    head = b"HTTP/1.1 " + status + b"\r\nServer: t\r\n" + extra
    if length:  # (the name in mixed case, blanks around the value)
        head += b"cOnTeNt-LeNgTh:  " + str(len(body)).encode() + b" \r\n"
    return head + b"\r\n" + body

class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        s, mode, data = self.request, self.server.mode, b""
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            while b"\r\n\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    return
                data += chunk
            data = data.split(b"\r\n\r\n", 1)[1]
            a = answer()
            if mode == "split":  # one byte per send, a pause between them
                for i in range(len(a)):
                    s.sendall(a[i:i + 1])
                    time.sleep(0.0003)
            elif mode == "chunked":
                s.sendall(answer(b"Transfer-Encoding: chunked\r\n", length=False,
                                 body=b"d\r\nHello, World!\r\n0\r\n\r\n"))
            elif mode == "status":
                s.sendall(answer(status=b"404 Not Found"))
            elif mode == "close":
                s.sendall(answer(b"Connection: close\r\n"))
                return
            elif mode == "double":
                s.sendall(a + a)
            # "silent": never answers

class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

for mode in sys.argv[1:]:
    srv = Server(("127.0.0.1", 0), Handler)
    srv.mode = mode
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    print(f"listening on 127.0.0.1:{srv.server_address[1]} ({mode})", flush=True)
threading.Event().wait()
PY
python3 "$TMP/httpd.py" split chunked status close double silent >"$TMP/httpd.out" 2>&1 &
EXTRA_PIDS+=($!)
for _ in $(seq 100); do
    [[ $(grep -c '^listening on ' "$TMP/httpd.out") -eq 6 ]] && break
    sleep 0.1
done
[[ $(grep -c '^listening on ' "$TMP/httpd.out") -eq 6 ]] ||
    fail "the test HTTP server did not start: $(cat "$TMP/httpd.out")"
targets=()
while read -r port mode; do
    targets+=(--target "$mode=127.0.0.1:$port")
done < <(sed -n 's/^listening on .*:\([0-9]*\) (\(.*\))$/\1 \2/p' "$TMP/httpd.out")
rc=0
timeout 60 "$BIN/http_turns" "${targets[@]}" -c 2 -d 0.2 --warmup 0 --slice 0.1 --timeout 1 \
    --json >"$TMP/framing.json" 2>"$TMP/framing.err" || rc=$?
[[ $rc -eq 1 ]] ||
    { cat "$TMP/framing.err" >&2; fail "http_turns against the test server exited $rc, not 1"; }
python3 - "$TMP/framing.json" <<'PY' || { cat "$TMP/framing.err" >&2; fail "http_turns framing"; }
import json, sys
r = {t["name"]: t for t in json.load(open(sys.argv[1]))["targets"]}
want = {"chunked": "protocol", "status": "status", "close": "connection_close",
        "double": "protocol", "silent": "timeout"}
s = r["split"]
ok = s["requests"] > 0 and s["errors"] == 0
print(f"http_turns, response sent one byte at a time: requests={s['requests']} "
      f"errors={s['errors']}")
for name, kind in want.items():
    k = r[name]["error_kinds"]
    print(f"http_turns, {name}: {kind} errors {k[kind]}, all errors {r[name]['errors']}, "
          f"requests {r[name]['requests']}")
    ok = ok and k[kind] > 0 and r[name]["requests"] == 0 and r[name]["errors"] == k[kind]
sys.exit(0 if ok else 1)
PY

[[ $uring_skipped -eq 0 ]] || exit 77
echo "PASS"
