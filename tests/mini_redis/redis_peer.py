"""What the mini_redis tests share: starting mini_redis and Debian's redis-server on free loopback
ports (and stopping them), a RESP request encoder, and a reader that gives each reply as its exact
bytes (so that two servers' replies compare byte for byte)."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile

BACKENDS = ("io_uring", "epoll")


def required_backends():
    """The backends that must run (CI sets GALAY_REQUIRE_BACKENDS=io_uring,epoll): a SKIP of one
    of them is a failure."""
    return {b for b in os.environ.get("GALAY_REQUIRE_BACKENDS", "").split(",") if b}


def encode(*args):
    """One request: an array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    """A client connection that reads replies as raw bytes."""

    def __init__(self, port, timeout=30):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise EOFError("the server closed the connection")
        self.buf += chunk

    def _line(self, at):
        while True:
            end = self.buf.find(b"\r\n", at)
            if end >= 0:
                return end
            self._fill()

    def _reply_end(self, at):
        end = self._line(at)
        kind, n = self.buf[at:at + 1], self.buf[at + 1:end]
        at = end + 2
        if kind == b"$" and int(n) >= 0:
            while len(self.buf) < at + int(n) + 2:
                self._fill()
            return at + int(n) + 2
        if kind == b"*" and int(n) > 0:
            for _ in range(int(n)):
                at = self._reply_end(at)
        return at

    def reply(self):
        """The next reply's bytes."""
        if not self.buf:
            self._fill()
        end = self._reply_end(0)
        r, self.buf = self.buf[:end], self.buf[end:]
        return r

    def call(self, *args):
        self.send(encode(*args))
        return self.reply()

    def closed(self):
        """True when the server has closed the connection (after the replies already read)."""
        try:
            while not self.buf:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    return True
                self.buf += chunk
        except ConnectionResetError:
            return True
        return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server process owned by the test: started here, stopped by stop() (or `with`)."""

    def __init__(self, argv, port, proc, tmp=None):
        self.argv, self.port, self.proc, self.tmp = argv, port, proc, tmp

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Stop it with `sig`; gives (exit code, what it wrote on stderr)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise AssertionError(f"{self.argv[0]} did not stop within {timeout} s of {sig}")
        finally:
            if self.tmp:
                shutil.rmtree(self.tmp, ignore_errors=True)
        return self.proc.returncode, err


def start_mini_redis(binary, backend, workers=1, extra=()):
    """mini_redis on a free port; None when `backend` cannot run on this machine."""
    argv = [binary, "--port", "0", "--backend", backend, "--workers", str(workers), *extra]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if not line.startswith("mini_redis: listening on 127.0.0.1:"):
        _, err = proc.communicate(timeout=30)
        if proc.returncode == 1 and backend not in required_backends():
            print(f"SKIP {backend}: mini_redis cannot start on it: {err.strip()}")
            return None
        raise AssertionError(f"mini_redis --backend {backend} did not start: {line!r} {err!r}")
    assert f", {backend})" in line, f"asked for {backend}, got: {line}"
    port = int(line.split("127.0.0.1:")[1].split()[0])
    return Server(argv, port, proc)


def start_redis_server():
    """Debian's redis-server, nothing saved, on a free port; None when it is not installed."""
    exe = shutil.which("redis-server")
    if exe is None:
        return None
    for _ in range(5):  # another process may take the free port before redis-server binds it
        port = free_port()
        tmp = tempfile.mkdtemp(prefix="mini_redis_peer_")
        argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                "no", "--dir", tmp, "--daemonize", "no", "--protected-mode", "no"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True)
        for line in proc.stdout:
            if "Ready to accept connections" in line:
                return Server(argv, port, proc, tmp)
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    raise AssertionError("redis-server did not start on a free port five times")
