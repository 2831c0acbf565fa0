#!/usr/bin/env python3
"""bench/harness/readme_table.py on a made-up data directory: it writes the table between the
README's markers (a verdict only when the whole spread is on one side of 1.00, no spread where
the data kept none, a link and no figure for a study without data), leaves the rest of the
README alone, --check passes on what it wrote and fails with the difference once a figure
changes; every malformed input (a missing, unreadable or incomplete data file, a study the table
does not list, a README without its markers) is exit 1 with the file and field named; a bad
flag is exit 2 with one line. Run by ctest (readme_table_py); the real README is checked by
readme_results_py."""
import copy
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "bench", "harness", "readme_table.py")
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "harness"))
sys.path.insert(0, HERE)
import readme_table  # noqa: E402
from tool_cli import expect_exit_2, run  # noqa: E402


def made_up_data():
    """{page: data} holding every figure STUDIES names, each 1.5x [1.2-1.8] (more), with the
    first figure of echo below 1.00, the first of churn level, and multicore without a spread."""
    out = {}
    for study in readme_table.STUDIES:
        if not study.figures:
            continue
        plots = {}
        for fig in study.figures:
            plot = plots.setdefault(fig.plot, {"name": fig.plot, "x": [], "series": []})
            if fig.x not in plot["x"]:
                plot["x"].append(fig.x)
            if not any(s["label"] == fig.series for s in plot["series"]):
                plot["series"].append({"label": fig.series})
        for plot in plots.values():
            n = len(plot["x"])
            for s in plot["series"]:
                s.update(median=[1.5] * n, min=[1.2] * n, max=[1.8] * n)
        out[study.page] = {"study": study.page, "source": "made up for the test",
                           "plots": list(plots.values())}

    def series(page, plot, label):
        p = next(p for p in out[page]["plots"] if p["name"] == plot)
        return p, next(s for s in p["series"] if s["label"] == label)

    echo = readme_table.STUDIES[0].figures[0]
    p, s = series("echo", echo.plot, echo.series)
    i = p["x"].index(echo.x)
    s["median"][i], s["min"][i], s["max"][i] = 0.8, 0.79, 0.95
    churn = next(st for st in readme_table.STUDIES if st.page == "churn").figures[0]
    p, s = series("churn", churn.plot, churn.series)
    i = p["x"].index(churn.x)
    s["median"][i], s["min"][i], s["max"][i] = 1.004, 0.97, 1.1
    for plot in out["multicore"]["plots"]:
        for s in plot["series"]:
            s["min"] = s["max"] = None
    return out


README = "# a project\n\n## Results\n\nintro\n\n{begin}\nold table\n{end}\n\n## After\n"


def write_data(directory, data):
    os.makedirs(directory, exist_ok=True)
    for name in os.listdir(directory):
        os.remove(os.path.join(directory, name))
    for page, obj in data.items():
        with open(os.path.join(directory, f"{page}.json"), "w") as f:
            json.dump(obj, f)


def fails(readme, data_dir, *words):
    """--check (and a write) exit 1 naming what is wrong, and change nothing."""
    with open(readme) as f:
        before = f.read()
    for extra in (["--check"], []):
        r = run(TOOL, "--readme", readme, "--data", data_dir, *extra)
        assert r.returncode == 1, (extra, r.returncode, r.stdout, r.stderr)
        assert r.stderr.startswith("readme_table.py: error: "), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        for w in words:
            assert w in r.stderr, (w, r.stderr)
    with open(readme) as f:
        assert f.read() == before


with tempfile.TemporaryDirectory() as tmp:
    data_dir, readme = os.path.join(tmp, "data"), os.path.join(tmp, "README.md")
    good = made_up_data()
    write_data(data_dir, good)
    with open(readme, "w") as f:
        f.write(README.format(begin=readme_table.BEGIN, end=readme_table.END))

    # A stale README: --check says so with the difference and writes nothing.
    r = run(TOOL, "--readme", readme, "--data", data_dir, "--check")
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "-old table" in r.stdout and "stale" in r.stderr, (r.stdout, r.stderr)
    with open(readme) as f:
        assert "old table" in f.read()

    # Written: the rest of the README kept, one row per study in STUDIES' order.
    r = run(TOOL, "--readme", readme, "--data", data_dir)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    with open(readme) as f:
        text = f.read()
    assert text.startswith("# a project\n\n## Results\n\nintro\n\n" + readme_table.BEGIN), text
    assert text.endswith(readme_table.END + "\n\n## After\n"), text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + len(readme_table.STUDIES), rows
    for row, study in zip(rows[1:], readme_table.STUDIES):
        assert row.startswith(f"| {study.name} | "), (row, study)
        assert row.endswith(f"[{study.page}.md](docs/benchmarks/{study.page}.md) |"), row
        if not study.figures:
            assert "| on the page |" in row, row
    echo_row = rows[1]
    assert "io_uring 0.80x [0.79-0.95] less CPU; epoll 1.50x [1.20-1.80] more CPU" in echo_row, \
        echo_row
    churn_row = next(r for r in rows if r.startswith("| Connection churn |"))
    assert "io_uring 1.004x [0.970-1.100] level" in churn_row, churn_row
    multicore_row = next(r for r in rows if r.startswith("| Multi-core |"))
    assert "galay io_uring 1.50x (no spread kept)" in multicore_row, multicore_row
    latency_row = next(r for r in rows if r.startswith("| Latency |"))
    assert "1.50x [1.20-1.80] slower" in latency_row, latency_row  # a time ratio above 1.00

    # Up to date: --check passes; writing again changes nothing.
    r = run(TOOL, "--readme", readme, "--data", data_dir, "--check")
    assert r.returncode == 0 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    r = run(TOOL, "--readme", readme, "--data", data_dir)
    assert r.returncode == 0 and r.stdout == "", (r.returncode, r.stdout, r.stderr)

    # A re-measured figure: --check fails with the row's old and new text.
    changed = copy.deepcopy(good)
    changed["echo"]["plots"][0]["series"][1]["median"] = [1.6]
    write_data(data_dir, changed)
    r = run(TOOL, "--readme", readme, "--data", data_dir, "--check")
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "-| TCP echo |" in r.stdout and "+| TCP echo |" in r.stdout, r.stdout
    write_data(data_dir, good)

    def broken(edit):
        bad = copy.deepcopy(good)
        edit(bad)
        write_data(data_dir, bad)

    def echo_series(d, **values):  # the first echo series, each key set to one value per x
        s = d["echo"]["plots"][0]["series"][0]
        s.update({k: v if v is None or isinstance(v, list) else [v] for k, v in values.items()})

    # Malformed data: each is exit 1, the file and the field named, the README untouched.
    broken(lambda d: d.pop("udp"))
    fails(readme, data_dir, "udp.json: missing", "UDP echo")
    write_data(data_dir, good)
    with open(os.path.join(data_dir, "files.json"), "w") as f:
        f.write('{"study": "files", "plots": [')
    fails(readme, data_dir, "files.json: ")
    broken(lambda d: d["sync"].update(study="echo"))
    fails(readme, data_dir, "sync.json: 'study' is 'echo', expected 'sync'")
    broken(lambda d: d["tls"].update(plots={}))
    fails(readme, data_dir, "tls.json: no 'plots' list")
    broken(lambda d: d["http"]["plots"].pop(0))
    fails(readme, data_dir, "http.json: no plot named 'http_cpu_ratios'")
    broken(lambda d: d["latency"]["plots"][0]["series"].pop(0))
    fails(readme, data_dir, "latency.json: plot 'latency_vs_tokio' has no series 'galay io_uring'")
    broken(lambda d: d["churn"]["plots"][0]["x"].__setitem__(0, "connections per second"))
    fails(readme, data_dir, "churn.json: plot 'churn_ratios' has no x value")
    broken(lambda d: echo_series(d, median="1.0"))
    fails(readme, data_dir, "echo.json: plot", "'median' is '1.0', not a number")
    broken(lambda d: echo_series(d, median=[1.0, 1.0]))
    fails(readme, data_dir, "'median' is not a list as long as 'x'")
    broken(lambda d: echo_series(d, min=2.0))
    fails(readme, data_dir, "median 0.8 is not within [2.0, 0.95]")
    broken(lambda d: echo_series(d, max=None))
    fails(readme, data_dir, "a min without a max")
    broken(lambda d: echo_series(d, median=None, min=None, max=None))
    fails(readme, data_dir, "'median' is not a list as long as 'x'")
    broken(lambda d: d.update(newstudy={"study": "newstudy", "plots": []}))
    fails(readme, data_dir, "newstudy.json: study 'newstudy' is not in STUDIES")
    fails(readme, os.path.join(tmp, "no-such-dir"), "no-such-dir")
    write_data(data_dir, good)

    # A README without its markers, with two, or with them reversed.
    for text in ("# no markers\n",
                 f"{readme_table.BEGIN}\n{readme_table.END}\n{readme_table.BEGIN}\n",
                 f"{readme_table.END}\n{readme_table.BEGIN}\n"):
        with open(readme, "w") as f:
            f.write(text)
        fails(readme, data_dir, "README.md: needs one line")
    r = run(TOOL, "--readme", os.path.join(tmp, "missing.md"), "--data", data_dir)
    assert r.returncode == 1 and "missing.md" in r.stderr, (r.returncode, r.stderr)

# Flags: --help on stdout, exit 0; a bad flag one line, exit 2.
r = run(TOOL, "--help")
assert r.returncode == 0 and "--check" in r.stdout and r.stderr == "", (r.returncode, r.stderr)
expect_exit_2(TOOL, ["--bogus"], "readme_table.py: error: unrecognized arguments: --bogus")
expect_exit_2(TOOL, ["--data"], "readme_table.py: error: argument --data")
for args in (["--bogus"], ["--data"]):
    r = run(TOOL, *args)
    assert len(r.stderr.strip().splitlines()) == 1 and "(see --help)" in r.stderr, r.stderr

print("readme_table: ok")
