"""bench/harness/children.py: a script that starts a child and grandchildren (one in the child's
process group, one in a session of its own under a parent that ignores SIGTERM) leaves none of
them alive when it ends normally, on an exception, on SIGINT, SIGTERM or SIGHUP, or on SIGINT
followed at once by SIGTERM (which must not cut its clean-up short); run() kills its command's
group on a timeout and what the command left behind; stop() escalates to SIGKILL. This test is a
child subreaper, so an orphan of the script comes back to it and is seen. Run by ctest."""
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
HARNESS = os.path.join(BENCH, "harness")
sys.path.insert(0, HARNESS)
import children  # noqa: E402

PR_SET_CHILD_SUBREAPER = 36
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

# Ignores SIGTERM (only SIGKILL ends it) and starts a grandchild in a session of its own, out of
# every group the script knows.
ESCAPER = textwrap.dedent("""
    import signal, subprocess, sys
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    q = subprocess.Popen(["sleep", "1002"], start_new_session=True)
    print(q.pid, flush=True)
    while True:
        signal.pause()
""")

# Started outside children.popen in a group of its own; on SIGTERM it forks a child (which stays
# in its group and says its pid on stdout) and exits: the child is orphaned as it is made.
FORKER = textwrap.dedent("""
    import os, signal, sys, time
    def on_term(signum, frame):
        if os.fork() == 0:
            print(os.getpid(), flush=True)
            while True:
                signal.pause()
        os._exit(0)
    signal.signal(signal.SIGTERM, on_term)
    print("ready", flush=True)
    while True:
        signal.pause()
""")

# argv[1]: how it ends. Prints the pids it made, waits for a line on stdin, prints "ready", then
# waits on stdin (or ends).
SCRIPT = textwrap.dedent(f"""
    import subprocess, sys
    sys.path.insert(0, {HARNESS!r})
    import children
    children.GRACE = 0.5
    how = sys.argv[1]
    sh = children.popen(["sh", "-c", "sleep 1000 & echo $!; exec sleep 1001"],
                        stdout=subprocess.PIPE, text=True)
    esc = children.popen([sys.executable, "-c", {ESCAPER!r}], stdout=subprocess.PIPE, text=True)
    print(sh.pid, sh.stdout.readline().strip(), esc.pid, esc.stdout.readline().strip(),
          flush=True)
    sys.stdin.readline()  # the test has seen them alive: only now may the script end
    if how == "forker":
        fork = subprocess.Popen([sys.executable, "-c", {FORKER!r}], stdout=sys.stdout,
                                process_group=0)
    try:
        if how == "run":  # the signal comes while run() waits, no pipe: in Popen.wait()
            children.run(["sh", "-c", "echo ready; exec sleep 1000"])
        print("ready", flush=True)
        if how == "exception":
            raise RuntimeError("boom")
        if how not in ("exit", "run"):
            sys.stdin.readline()
    finally:
        if how == "twice":
            print("cleaning", flush=True)
            sys.stdin.readline()  # the test sends SIGTERM now, then closes stdin
            print("cleaned", flush=True)
""")


def alive(pid):
    """Running (not a zombie, which this subreaper reaps)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    if state == "Z":
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return False
    return True


def go_on(p):
    """Lets the script past the point where it printed its pids (it waits there, so that it
    cannot end, and stop its children, before the test has looked at them)."""
    p.stdin.write("\n")
    p.stdin.flush()


def live_descendants():
    return [p for p in children.descendants(os.getpid()) if alive(p)]


class ScriptEnds(unittest.TestCase):
    def run_script(self, how, sig=None):
        p = subprocess.Popen([sys.executable, "-c", SCRIPT, how], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pids = [int(x) for x in p.stdout.readline().split()]
        self.assertEqual(len(pids), 4, p.stderr.read() if p.poll() is not None else pids)
        self.assertTrue(all(alive(x) for x in pids), pids)
        go_on(p)
        self.assertEqual(p.stdout.readline(), "ready\n")
        if sig is not None:
            p.send_signal(sig)
        out, err = p.communicate(timeout=60)
        for x in pids:
            self.assertTrue(children.wait_gone(x, 10), f"{how}: pid {x} outlived the script")
        self.assertEqual(live_descendants(), [], how)
        return p.returncode, out, err

    def test_normal_exit(self):
        rc, _, err = self.run_script("exit")
        self.assertEqual(rc, 0, err)

    def test_exception(self):
        rc, _, err = self.run_script("exception")
        self.assertEqual(rc, 1, err)
        self.assertIn("RuntimeError: boom", err)

    def test_sigint(self):
        rc, _, err = self.run_script("wait", signal.SIGINT)
        self.assertEqual(rc, -signal.SIGINT, err)
        self.assertIn("KeyboardInterrupt", err)

    def test_sigterm(self):
        rc, _, err = self.run_script("wait", signal.SIGTERM)
        self.assertEqual(rc, 128 + signal.SIGTERM, err)

    def test_sigint_while_run_waits(self):
        rc, _, err = self.run_script("run", signal.SIGINT)
        self.assertEqual(rc, -signal.SIGINT, err)

    def test_a_process_forked_as_its_parent_is_stopped_is_stopped_too(self):
        p = subprocess.Popen([sys.executable, "-c", SCRIPT, "forker"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        p.stdout.readline()  # the script's pids
        go_on(p)
        self.assertEqual(p.stdout.readline(), "ready\n")  # the forker's
        self.assertEqual(p.stdout.readline(), "ready\n")  # the script's
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        forked = int(out.split()[0])
        self.assertTrue(children.wait_gone(forked, 10), f"{forked} outlived the script")
        self.assertEqual(live_descendants(), [])

    def test_sighup(self):
        rc, _, err = self.run_script("wait", signal.SIGHUP)
        self.assertEqual(rc, 128 + signal.SIGHUP, err)

    def test_a_second_signal_does_not_cut_the_clean_up_short(self):
        p = subprocess.Popen([sys.executable, "-c", SCRIPT, "twice"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pids = [int(x) for x in p.stdout.readline().split()]
        go_on(p)
        self.assertEqual(p.stdout.readline(), "ready\n")
        p.send_signal(signal.SIGINT)
        self.assertEqual(p.stdout.readline(), "cleaning\n")  # in `finally`, children stopped
        self.assertFalse(any(alive(x) for x in pids), pids)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate("\n", timeout=60)
        self.assertEqual(out, "cleaned\n", err)
        self.assertEqual(p.returncode, -signal.SIGINT, err)
        self.assertEqual(live_descendants(), [])

    def test_a_nested_script_finishes_its_clean_up(self):
        # The inner script's child sleeps through SIGTERM (as nginx does when it comes before its
        # master loop), so the inner script spends its whole grace on it before its clean-up: the
        # outer one, signalled at the same moment, must wait for that clean-up, not kill it.
        work = tempfile.mkdtemp(prefix="galay-nested-")
        mark = os.path.join(work, "mark")
        os.mkdir(mark)
        inner, outer = os.path.join(work, "inner.py"), os.path.join(work, "outer.py")
        with open(inner, "w") as f:
            f.write(textwrap.dedent(f"""
                import os, signal, sys
                sys.path.insert(0, {HARNESS!r})
                import children
                children.GRACE = 0.5
                children.at_exit(lambda: os.rmdir({mark!r}))
                children.popen(["sh", "-c", "trap '' TERM; echo ready; exec sleep 1000"])
                signal.pause()
            """))
        with open(outer, "w") as f:
            f.write(textwrap.dedent(f"""
                import sys
                sys.path.insert(0, {HARNESS!r})
                import children
                children.GRACE = 0.5
                children.run([sys.executable, {inner!r}])
            """))
        try:
            p = subprocess.Popen([sys.executable, outer], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            self.assertEqual(p.stdout.readline(), "ready\n",
                             p.stderr.read() if p.poll() is not None else "")
            p.send_signal(signal.SIGINT)
            _, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, -signal.SIGINT, err)
            self.assertFalse(os.path.exists(mark), "the inner script's clean-up did not run")
            self.assertEqual(live_descendants(), [])
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def test_an_ignored_signal_stays_ignored(self):
        code = (f"import signal, sys; sys.path.insert(0, {HARNESS!r}); import children; "
                "print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN, "
                "signal.getsignal(signal.SIGTERM) == children._on_signal)")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        self.assertEqual(r.stdout, "True True\n", r.stderr)


class Run(unittest.TestCase):
    def test_output_status_and_check(self):
        r = children.run(["sh", "-c", "echo out; echo err >&2; exit 3"], capture_output=True,
                         text=True)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (3, "out\n", "err\n"))
        with self.assertRaises(subprocess.CalledProcessError):
            children.run(["false"], check=True)
        self.assertEqual(children.run(["cat"], input=b"x", capture_output=True).stdout, b"x")

    def test_a_timeout_kills_the_command_and_what_it_started(self):
        t0 = time.monotonic()
        with self.assertRaises(subprocess.TimeoutExpired):
            children.run(["sh", "-c", "sleep 1000 & echo $! > /dev/stderr; sleep 1001"],
                         stderr=subprocess.PIPE, timeout=0.5)
        self.assertLess(time.monotonic() - t0, 30)
        self.assertEqual(live_descendants(), [])

    def test_what_the_command_left_running_is_killed(self):
        r = children.run(["sh", "-c", "sleep 1000 >/dev/null 2>&1 & echo $!"],
                         capture_output=True, text=True)
        self.assertTrue(children.wait_gone(int(r.stdout), 10))
        self.assertEqual(live_descendants(), [])


class Stop(unittest.TestCase):
    def test_sigkill_after_the_deadline_to_the_process_and_its_group(self):
        p = children.popen(["sh", "-c", "trap '' TERM; sleep 1000 & echo $!; wait"],
                           stdout=subprocess.PIPE, text=True)
        bg = int(p.stdout.readline())
        self.assertEqual(children.stop(p, timeout=0.2), -signal.SIGKILL)
        self.assertTrue(children.wait_gone(bg, 10))
        p.stdout.close()
        self.assertEqual(live_descendants(), [])

    def test_what_it_started_outside_its_group_ends_with_it(self):
        p = children.popen([sys.executable, "-c", ESCAPER.replace(
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)", "")], stdout=subprocess.PIPE,
            text=True)
        q = int(p.stdout.readline())
        self.assertEqual(children.stop(p), -signal.SIGTERM)
        self.assertTrue(children.wait_gone(q, 10))
        p.stdout.close()
        self.assertEqual(live_descendants(), [])

    def test_a_server_that_exits_on_the_signal_keeps_its_status(self):
        p = children.popen(["sleep", "1000"])
        self.assertEqual(children.stop(p, signal.SIGINT), -signal.SIGINT)
        self.assertEqual(children.stop(p), -signal.SIGINT)  # again: nothing to do

    def test_stop_all_runs_the_at_stop_functions_first(self):
        p = children.popen(["sleep", "1000"])
        seen = []
        children.at_stop(lambda: seen.append(p.poll()))
        children.stop_all(grace=1)
        self.assertEqual(seen, [None])  # the child was still running when the hook ran
        self.assertEqual(p.returncode, -signal.SIGTERM)


if __name__ == "__main__":
    unittest.main()
