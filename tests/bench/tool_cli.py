"""What the bench/ tools' tests share: running a tool, and checking that bad flags are exit 2
with one line on stderr saying what is wrong."""
import subprocess
import sys


def run(tool, *args, timeout=120):
    return subprocess.run([sys.executable, tool, *args], capture_output=True, text=True,
                          timeout=timeout)


def expect_exit_2(tool, args, *words):
    """`tool args` exits 2, prints nothing on stdout, and its stderr has one of `words`."""
    r = run(tool, *args)
    assert r.returncode == 2, (args, r.returncode, r.stdout, r.stderr)
    assert r.stdout == "", (args, r.stdout)
    assert any(w in r.stderr for w in words), (args, r.stderr)
