"""bench/harness/harness.py: the spread and verdict every study is judged by, on ratios small enough
to check by hand, and the port, server and CPU helpers against a real server process on loopback.
Run by ctest."""
import contextlib
import io
import os
import signal
import socket
import subprocess
import sys
import unittest

# bench/harness (the shared modules) and bench/studies, as every study puts them on the path.
BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import harness  # noqa: E402

# A loopback server that accepts and burns a little CPU per connection; SIGTERM ends it at once
# unless told to ignore it (then only SIGKILL does).
SERVER = r"""
import signal, socket, sys
port, ignore_term = int(sys.argv[1]), sys.argv[2] == "1"
if ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(16)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    sum(i * i for i in range(200000))
    c.close()
"""


def start_server(port, ignore_term=False):
    p = subprocess.Popen([sys.executable, "-c", SERVER, str(port), "1" if ignore_term else "0"],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "listening"
    return p


class Spreads(unittest.TestCase):
    def test_spread_drops_missing_values_and_keeps_the_rest(self):
        s = harness.spread([0.90, None, 0.95, 0.97])
        self.assertEqual((s["median"], s["min"], s["max"]), (0.95, 0.90, 0.97))
        self.assertEqual(s["values"], [0.90, 0.95, 0.97])
        self.assertIsNone(harness.spread([None]))
        self.assertEqual(harness.median_min_max([3.0, 1.0, 2.0, 10.0]), (2.5, 1.0, 10.0))
        self.assertIsNone(harness.median_min_max([]))

    def test_fmt_spread(self):
        self.assertEqual(harness.fmt_spread(harness.spread([0.90, 0.95, 0.97])),
                         "0.950x [0.900-0.970]")
        self.assertEqual(harness.fmt_spread(None), "n/a")

    def test_iqr_is_min_max_below_four_values(self):
        self.assertEqual(harness.iqr([1.0, 3.0, 2.0]), (1.0, 3.0))
        self.assertEqual(harness.iqr([1.0, 2.0, 3.0, 4.0, 5.0]), (2.0, 4.0))

    def test_median_of_counts_only_runs_that_are_ok(self):
        runs = [{"ok": True, "qps": 10}, {"ok": False, "qps": 1000}, {"ok": True, "qps": 30},
                {"ok": True}]
        self.assertEqual(harness.median_of(runs, "qps"), 20)
        self.assertIsNone(harness.median_of([{"ok": False, "qps": 1}], "qps"))


class Verdicts(unittest.TestCase):
    def test_a_verdict_only_when_the_whole_spread_is_on_one_side(self):
        s = harness.spread([0.90, 0.95, 0.97])
        self.assertEqual(harness.verdict(s), "faster")
        self.assertEqual(harness.verdict(s, lower_is_better=False), "slower")
        self.assertEqual(harness.verdict(harness.spread([1.01, 1.2])), "slower")
        self.assertEqual(harness.verdict(harness.spread([0.9, 1.1])), "level within noise")
        self.assertEqual(harness.verdict(harness.spread([1.0, 1.1])), "level within noise")
        self.assertEqual(harness.verdict(None), "no data")
        self.assertEqual(harness.verdict(harness.spread([0.5])), "one round: no verdict")

    def test_own_words_for_each_side_and_for_level(self):
        s = harness.spread([0.8, 0.9])
        self.assertEqual(harness.verdict(s, words=("less CPU", "more CPU")), "less CPU")
        self.assertEqual(harness.verdict(harness.spread([0.9, 1.1]), level="level"), "level")

    def test_criterion_thresholds(self):
        self.assertEqual(harness.criterion_verdict(harness.spread([0.80, 0.85]), 0.90), "met")
        self.assertEqual(harness.criterion_verdict(harness.spread([0.95, 1.0]), 0.90), "not met")
        self.assertTrue(harness.criterion_verdict(harness.spread([0.85, 0.95]), 0.90)
                        .startswith("undecided"))


class Rounds(unittest.TestCase):
    def test_every_name_runs_once_per_round_rotated_when_asked(self):
        calls = []

        def run(name, rnd):
            calls.append((rnd, name))
            return {"ok": name != "b" or rnd != 1, "problems": ["b broke"], "x": rnd + 1}

        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rounds, failed = harness.run_rounds(["a", "b", "c"], 3, run,
                                                lambda n, r, rec: f"{r}:{n}", rotate=True)
        self.assertEqual(calls, [(0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "c"), (1, "a"),
                                 (2, "c"), (2, "a"), (2, "b")])
        self.assertTrue(failed)
        self.assertEqual([sorted(r) for r in rounds], [["a", "b", "c"]] * 3)
        self.assertIn("1:b  FAILED: b broke", err.getvalue())
        self.assertIn("0:a  ok", err.getvalue())
        with contextlib.redirect_stderr(io.StringIO()):
            _, failed = harness.run_rounds(["a", "c"], 2, run, lambda n, r, rec: n)
        self.assertFalse(failed)
        self.assertEqual(calls[-4:], [(0, "a"), (0, "c"), (1, "a"), (1, "c")])

    def test_round_ratio_is_taken_within_each_round_over_runs_that_are_ok(self):
        rounds = [{"a": {"ok": True, "cpu": 2.0}, "b": {"ok": True, "cpu": 4.0}},
                  {"a": {"ok": True, "cpu": 3.0}, "b": {"ok": True, "cpu": 3.0}},
                  {"a": {"ok": False, "cpu": 9.0}, "b": {"ok": True, "cpu": 1.0}},
                  {"a": {"ok": True}, "b": {"ok": True, "cpu": 1.0}}]
        s = harness.round_ratio(rounds, "a", "b", "cpu")
        self.assertEqual(s["values"], [0.5, 1.0])
        self.assertEqual((s["median"], s["min"], s["max"]), (0.75, 0.5, 1.0))
        self.assertIsNone(harness.round_ratio(rounds[2:], "a", "b", "cpu"))


class Servers(unittest.TestCase):
    def test_resolve_fills_the_port_and_finds_the_binary_in_bindir(self):
        bindir = os.path.dirname(sys.executable)
        name = os.path.basename(sys.executable)
        self.assertEqual(harness.resolve(f"{name} -p {{port}} --x 'a b'", bindir, 4321),
                         [sys.executable, "-p", "4321", "--x", "a b"])
        self.assertEqual(harness.resolve("no-such-tool {port}", bindir, 1),
                         ["no-such-tool", "1"])
        self.assertEqual(harness.label_of("raw_uring  {port} --no-fixed"), "raw_uring --no-fixed")

    def test_free_port_is_bindable_and_below_the_ephemeral_range(self):
        port = harness.free_port()
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
        if low > 10001:
            self.assertLess(port, low)
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))

    def test_a_server_is_waited_for_measured_and_stopped(self):
        port = harness.free_port()
        p = start_server(port)
        try:
            self.assertTrue(harness.wait_accepting(p, port, 10.0))
            for _ in range(3):
                with socket.create_connection(("127.0.0.1", port)) as c:
                    c.recv(1)  # the server closes it after its work
            self.assertIn(p.pid, harness.tree_pids(p.pid))
            self.assertGreater(harness.tree_cpu_s(p.pid), 0.0)
            self.assertIsNotNone(harness.proc_cpu_s(p.pid))
            self.assertGreater(harness.proc_status(p.pid, "VmRSS"), 0)
        finally:
            self.assertEqual(harness.stop(p), -signal.SIGTERM)
        self.assertIsNone(harness.proc_cpu_s(p.pid))
        self.assertFalse(harness.wait_accepting(p, port, 1.0))  # it died: no wait

    def test_a_server_that_ignores_sigterm_is_killed(self):
        port = harness.free_port()
        p = start_server(port, ignore_term=True)
        self.assertEqual(harness.stop(p, timeout=0.5), -signal.SIGKILL)

    def test_start_pinned_returns_a_server_that_accepts_on_its_cpu(self):
        port = harness.free_port()
        p = harness.start_pinned([sys.executable, "-c", SERVER, str(port), "0"], 0, None, port,
                                 env={"GALAY_TEST_MARK": "1"})
        try:
            with open(f"/proc/{p.pid}/status") as f:
                allowed = [l.split()[1] for l in f if l.startswith("Cpus_allowed_list:")]
            self.assertEqual(allowed, ["0"])
            with open(f"/proc/{p.pid}/environ", "rb") as f:
                self.assertIn(b"GALAY_TEST_MARK=1", f.read().split(b"\0"))
        finally:
            harness.stop(p)

    def test_start_pinned_says_why_a_server_did_not_accept(self):
        port = harness.free_port()
        cmd = [sys.executable, "-c", "import sys; sys.exit('no such root: /nowhere')"]
        with self.assertRaises(RuntimeError) as e:
            harness.start_pinned(cmd, 0, None, port, timeout=5)
        self.assertIn(f"did not accept on port {port}", str(e.exception))
        self.assertIn("no such root: /nowhere", str(e.exception))

    def test_machine_and_cpu_busy_time_count_up(self):
        whole, cpu0 = harness.cpu_busy_s(), harness.cpu_busy_s({"0"})
        self.assertGreater(whole, 0.0)
        self.assertGreaterEqual(whole, cpu0)
        before = harness.children_cpu_s()
        subprocess.run([sys.executable, "-c", "sum(i * i for i in range(300000))"], check=True)
        self.assertGreater(harness.children_cpu_s(), before)
        self.assertGreaterEqual(harness.loadavg(), 0.0)

    def test_irq_time_of_a_cpu_list_is_the_sum_of_its_cpus(self):
        # /proc/stat moves between reads: the list's figure lies between its parts' sums read
        # before and after it.
        before = harness.cpu_irq_s(0) + harness.cpu_irq_s(1)
        both = harness.cpu_irq_s("0-1")
        after = harness.cpu_irq_s(0) + harness.cpu_irq_s(1)
        self.assertLessEqual(before, both + 1e-6)  # the same ticks, divided in another order
        self.assertLessEqual(both, after + 1e-6)
        self.assertGreaterEqual(harness.cpu_irq_s("0,1") + 1e-6, both)
        with self.assertRaises(ValueError) as e:
            harness.cpu_irq_s("0,4096")
        self.assertIn("no cpu4096 in /proc/stat", str(e.exception))
        self.assertIn(harness.irq_time_accounted(), (True, False, None))

    def test_start_pinned_runs_the_server_under_a_prefix_that_execs(self):
        port = harness.free_port()
        p = harness.start_pinned([sys.executable, "-c", SERVER, str(port), "0"], 0, None, port,
                                 prefix=["env", "GALAY_TEST_PREFIX=1"])
        try:
            with open(f"/proc/{p.pid}/environ", "rb") as f:
                self.assertIn(b"GALAY_TEST_PREFIX=1", f.read().split(b"\0"))
            with open(f"/proc/{p.pid}/comm") as f:
                self.assertTrue(f.read().startswith("python"))
        finally:
            harness.stop(p)


class GoBuild(unittest.TestCase):
    def test_a_go_control_builds_or_says_why_not(self):
        import shutil
        import tempfile
        src = os.path.join(BENCH, "control", "go_http")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "missing_pkg")
            path, why = harness.go_build(src, out, "./no_such_package")
            self.assertIsNone(path)
            self.assertTrue(why == "no Go toolchain on PATH" or "failed" in why, why)
            if shutil.which("go") is None:
                self.skipTest("no Go toolchain: only the message was checked")
            version = subprocess.run(["go", "env", "GOVERSION"], capture_output=True,
                                     text=True).stdout.strip()
            minor = version.removeprefix("go1.").split(".")[0]
            if not minor.isdigit() or int(minor) < 21:
                self.skipTest(f"{version} is older than the controls' go.mod asks (1.21)")
            path, why = harness.go_build(src, os.path.join(d, "go_http"))
            self.assertEqual(path, os.path.join(d, "go_http"), why)
            self.assertTrue(os.access(path, os.X_OK))


if __name__ == "__main__":
    unittest.main()
