"""tests/leftovers.py, the check `make test` and each CI phase run under: a command that leaves
nothing passes with its own exit status; one that leaves an orphan (a daemon that left its
session), a listening TCP port, a bound Unix socket or a temporary file fails, naming each, and
everything it names is ended and removed afterwards (kept with --keep); a process outside the run
is counted only when it carries the run's name or lives in the run's directory. Bad flags: one
line, exit 2. Run by ctest."""
import os
import re
import signal
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "leftovers.py")
sys.path[:0] = [os.path.join(HERE, ".."), os.path.join(HERE, "..", "..", "bench", "harness")]
import children  # noqa: E402  (wait_gone)
import leftovers  # noqa: E402

# Leaves a daemon (double fork, new session) holding a TCP listener and a Unix socket in $TMPDIR,
# and a directory in $TMPDIR; prints the daemon's pid, its port and the run's name.
LEAVER = r"""
import os, signal, socket, sys
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)  # (a daemon: not holding its starter's output)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
        u = socket.socket(socket.AF_UNIX); u.bind(os.path.join(os.environ["TMPDIR"], "sock"))
        u.listen()
        os.write(w, f"{os.getpid()} {s.getsockname()[1]}".encode())
        os.close(w)
        while True:
            signal.pause()
    os._exit(0)
os.close(w)
print(os.read(r, 100).decode(), os.environ["GALAY_RUN"], flush=True)
os.mkdir(os.path.join(os.environ["TMPDIR"], "galay-left"))
"""


def check(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True,
                          timeout=120)


class Leftovers(unittest.TestCase):
    def test_a_clean_command_passes_with_its_own_status(self):
        r = check("--", "sh", "-c", "mkdir $TMPDIR/x && rmdir $TMPDIR/x; echo $GALAY_RUN")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"galay-run-\w+\n$")
        self.assertIn("left no process, port or temporary file behind", r.stderr)
        run_dir = os.path.join(tempfile.gettempdir(), r.stdout.split(":")[-1].strip())
        self.assertFalse(os.path.exists(run_dir))
        self.assertEqual(check("--", "sh", "-c", "exit 3").returncode, 3)
        self.assertEqual(check("--", "sh", "-c", "kill -TERM $$").returncode,
                         128 + signal.SIGTERM)

    def test_what_is_left_is_named_then_ended_and_removed(self):
        r = check("--grace", "0.5", "--", sys.executable, "-c", LEAVER)
        self.assertEqual(r.returncode, 1, r.stderr)
        pid, port, run = r.stdout.split()
        run_dir = os.path.join(tempfile.gettempdir(), run.split(":")[-1])
        self.assertIn("left 3 thing(s) behind:", r.stderr)
        self.assertRegex(r.stderr, rf"process {pid} \(parent \d+\): {re.escape(sys.executable)} "
                         r"-c .*\[started by the run \(below it\)\]; holds "
                         rf"tcp 127\.0\.0\.1:{port}, unix {re.escape(run_dir)}/sock\n")
        self.assertIn(f"temporary directory {run_dir}/galay-left\n", r.stderr)
        self.assertIn(f"temporary file {run_dir}/sock\n", r.stderr)
        self.assertTrue(children.wait_gone(int(pid), 10))
        self.assertFalse(os.path.exists(run_dir))

    def test_keep_leaves_them_for_a_look(self):
        r = check("--keep", "--grace", "0", "--", sys.executable, "-c", LEAVER)
        pid, _, run = r.stdout.split()
        run_dir = os.path.join(tempfile.gettempdir(), run.split(":")[-1])
        try:
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(f"kept as found (--keep); the run's directory is {run_dir}", r.stderr)
            self.assertFalse(children.wait_gone(int(pid), 0))
            self.assertTrue(os.path.isdir(os.path.join(run_dir, "galay-left")))
        finally:
            os.kill(int(pid), signal.SIGKILL)
            subprocess.run(["rm", "-rf", run_dir])

    def test_outside_the_run_only_its_name_or_its_directory_counts(self):
        with tempfile.TemporaryDirectory(prefix="galay-leftovers-test-") as d:
            env = dict(os.environ, GALAY_RUN="outer:galay-run-mine")
            named = subprocess.Popen(["sleep", "1000"], env=env)
            inside = subprocess.Popen(["sleep", "1001"], cwd=d)
            other = subprocess.Popen(["sleep", "1002"],
                                     env=dict(os.environ, GALAY_RUN="galay-run-other"))
            try:
                why = lambda p: leftovers.in_run(p.pid, "galay-run-mine", d)  # noqa: E731
                self.assertEqual(why(named), "GALAY_RUN names this run")
                self.assertEqual(why(inside), "its working directory is in the run's directory")
                self.assertIsNone(why(other))
            finally:
                for p in (named, inside, other):
                    p.kill()
                    p.wait()

    def test_bad_flags(self):
        for args, says in ((["--frob"], "--frob: unknown option"), ([], "no COMMAND to run"),
                           (["--"], "no COMMAND to run"), (["--grace"], "--grace: needs a value"),
                           (["--grace", "x", "--", "true"], "--grace: 'x' is not a number")):
            r = check(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertRegex(r.stderr, rf"^leftovers\.py: error: {re.escape(says)}.* "
                             r"\(see --help\)\n$")
        r = check("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("leftovers.py [--keep]", r.stdout)
        r = check("--", "/nonexistent/program")
        self.assertEqual(r.returncode, 127)
        self.assertIn("/nonexistent/program: No such file or directory", r.stderr)


if __name__ == "__main__":
    unittest.main()
