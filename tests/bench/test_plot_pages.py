#!/usr/bin/env python3
"""bench/harness/plot_pages.py: renders sample plot data (lines on a log axis with a reference line,
and grouped bars with missing bounds) into non-empty PNGs; refuses data that does not follow the
schema with exit 1 and the field named; the whiskers are min-max around the median. Exits 77
(ctest: skipped) when no python with matplotlib is found."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "bench", "harness", "plot_pages.py")
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "harness"))
import plot_pages  # noqa: E402

# The whiskers: distances below and above the median; none where a bound is missing.
assert plot_pages._whiskers({"median": [2.0, 5.0, 3.0], "min": [1.0, None, 3.0],
                             "max": [2.5, 6.0, None]}) == ([1.0, 0.0, 0.0], [0.5, 1.0, 0.0])
assert plot_pages._whiskers({"median": [2.0], "min": None, "max": None}) == ([0.0], [0.0])


def python_with_matplotlib():
    """This interpreter, or Debian's (where `make deps` installs python3-matplotlib)."""
    for exe in (sys.executable, "/usr/bin/python3"):
        if os.access(exe, os.X_OK) and subprocess.run(
                [exe, "-c", "import matplotlib"], capture_output=True).returncode == 0:
            return exe
    return None


PY = python_with_matplotlib()
if PY is None:
    print("SKIP: matplotlib is not installed for any python here "
          "(Debian: apt-get install python3-matplotlib); plot_pages.py not rendered")
    sys.exit(77)

SAMPLE = {
    "study": "echo",
    "source": "a sample for the test",
    "plots": [
        {"name": "sample_lines", "title": "TCP echo: server CPU per request",
         "x_label": "connections", "y_label": "us per request", "x": [1, 10, 100, 1000],
         "log_x": True,
         "series": [{"label": "galay io_uring", "median": [5.0, 5.5, 6.0, 8.0],
                     "min": [4.5, 5.0, 5.5, 7.0], "max": [5.5, 6.0, 7.0, 9.0]},
                    {"label": "raw liburing", "median": [4.8, 5.2, 5.9, 7.5],
                     "min": None, "max": None}],
         "reference": 6.0},
        {"name": "sample_bars", "title": "HTTP: requests per server core",
         "x_label": "server", "y_label": "req/s per core", "x": ["100 conns", "1000 conns"],
         "series": [{"label": "galay", "median": [120000, 110000], "min": [115000, None],
                     "max": [125000, None]},
                    {"label": "nginx", "median": [118000, None], "min": [117000, None],
                     "max": [119000, None]}]},
    ],
}

with tempfile.TemporaryDirectory() as tmp:
    data, img = os.path.join(tmp, "data"), os.path.join(tmp, "img")
    os.makedirs(data)
    with open(os.path.join(data, "echo.json"), "w") as f:
        json.dump(SAMPLE, f)
    r = subprocess.run([PY, TOOL, "--data", data, "--img", img], capture_output=True, text=True)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    for name in ("sample_lines", "sample_bars"):
        png = os.path.join(img, name + ".png")
        assert os.path.isfile(png), (png, r.stdout, r.stderr)
        with open(png, "rb") as f:
            head = f.read(8)
        assert head == b"\x89PNG\r\n\x1a\n", head
        assert os.path.getsize(png) > 1000, os.path.getsize(png)
        assert png in r.stdout, r.stdout

    # A series whose median has the wrong length, and x mixing numbers and strings: exit 1, the
    # field named, nothing drawn for that file.
    bad = json.loads(json.dumps(SAMPLE))
    bad["plots"][0]["series"][0]["median"] = [1.0]
    with open(os.path.join(data, "bad.json"), "w") as f:
        json.dump(bad, f)
    r = subprocess.run([PY, TOOL, os.path.join(data, "bad.json"), "--img", img],
                       capture_output=True, text=True)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "'median': a list of 4 numbers" in r.stderr, r.stderr
    bad = json.loads(json.dumps(SAMPLE))
    bad["plots"][1]["x"] = [1, "1000 conns"]
    with open(os.path.join(data, "bad.json"), "w") as f:
        json.dump(bad, f)
    r = subprocess.run([PY, TOOL, os.path.join(data, "bad.json"), "--img", img],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "all numbers or all strings" in r.stderr, r.stderr

    # No data at all is an error too, not a silent success.
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    r = subprocess.run([PY, TOOL, "--data", empty, "--img", img], capture_output=True, text=True)
    assert r.returncode == 1 and "no data files" in r.stderr, r.stderr

print("plot_pages: ok")
