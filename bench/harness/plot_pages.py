#!/usr/bin/env python3
"""Renders the plot data of the benchmark pages, docs/benchmarks/data/<study>.json, into
docs/benchmarks/img/<name>.png, each with its spread drawn: min-max whiskers over the rounds.

    python3 bench/harness/plot_pages.py [--data docs/benchmarks/data] [--img docs/benchmarks/img]
                                [FILE.json ...]

A data file:

    {"study": "echo",                      the page: docs/benchmarks/<study>.md
     "source": "command and machine",
     "plots": [{"name": "echo_cpu_per_request",        -> <img>/<name>.png
                "title": "...", "x_label": "...", "y_label": "...",
                "x": [1, 10, 100],          numbers: lines; strings: grouped bars
                "log_x": false,             optional (lines only); "log_y" too
                "series": [{"label": "galay io_uring",
                            "median": [...], "min": [...], "max": [...]}, ...],
                "reference": 1.0}]}         optional: a horizontal line (a ratio of 1.00)

min and max may be null, or hold nulls, where only a median was measured: no whisker there.
The same drawing function (draw) makes the plots of the `make bench` report (bench/suite.py).
Exits 1 when a file is not of this form or matplotlib is missing (Debian: python3-matplotlib).
"""
import argparse
import glob
import json
import numbers
import os
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class PlotError(ValueError):
    """A plot that does not follow the schema: the message says which field and why."""


def _numbers_or_none(values, n, what):
    if values is None:
        return [None] * n
    if not isinstance(values, list) or len(values) != n:
        raise PlotError(f"{what}: a list of {n} numbers (or null) expected")
    for v in values:
        if v is not None and not isinstance(v, numbers.Real):
            raise PlotError(f"{what}: {v!r} is not a number")
    return values


def check(plot):
    """The plot's fields, checked: raises PlotError naming the first field that is wrong."""
    name = plot.get("name") if isinstance(plot, dict) else None
    if not isinstance(name, str) or not name or "/" in name:
        raise PlotError(f"plot {name!r}: 'name' must be a file name without '/'")
    x = plot.get("x")
    if not isinstance(x, list) or not x:
        raise PlotError(f"plot {name}: 'x' must be a non-empty list")
    if not (all(isinstance(v, str) for v in x)
            or all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in x)):
        raise PlotError(f"plot {name}: 'x' must be all numbers or all strings")
    series = plot.get("series")
    if not isinstance(series, list) or not series:
        raise PlotError(f"plot {name}: 'series' must be a non-empty list")
    for i, s in enumerate(series):
        label = s.get("label") if isinstance(s, dict) else None
        if not isinstance(label, str):
            raise PlotError(f"plot {name}: series {i} has no 'label'")
        what = f"plot {name}, series {label!r}"
        if s.get("median") is None:
            raise PlotError(f"{what}: 'median' is missing")
        for key in ("median", "min", "max"):
            _numbers_or_none(s.get(key), len(x), f"{what}, '{key}'")
    ref = plot.get("reference")
    if ref is not None and not isinstance(ref, numbers.Real):
        raise PlotError(f"plot {name}: 'reference' must be a number")
    return plot


def _whiskers(s):
    """yerr for errorbar: distances from the median down to min and up to max (0 where a bound
    or the median is missing)."""
    med = s["median"]
    n = len(med)
    lo, hi = s.get("min") or [None] * n, s.get("max") or [None] * n
    down = [m - a if m is not None and a is not None else 0.0 for m, a in zip(med, lo)]
    up = [b - m if m is not None and b is not None else 0.0 for m, b in zip(med, hi)]
    return [max(0.0, d) for d in down], [max(0.0, u) for u in up]


def _draw_whiskers(ax, xs, s, color):
    """min-max whiskers at the points that have both bounds and a median; none elsewhere."""
    med = s["median"]
    n = len(med)
    lo, hi = s.get("min") or [None] * n, s.get("max") or [None] * n
    keep = [i for i in range(n) if None not in (med[i], lo[i], hi[i])]
    if not keep:
        return
    down, up = _whiskers(s)
    ax.errorbar([xs[i] for i in keep], [med[i] for i in keep],
                yerr=[[down[i] for i in keep], [up[i] for i in keep]], fmt="none",
                ecolor="black" if color is None else color, elinewidth=1, capsize=3)


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def have_matplotlib():
    return _pyplot() is not None


def draw(plot, path):
    """Draws one plot (the schema above) into the PNG at `path`. Returns the path, or None when
    matplotlib is not installed; raises PlotError for a plot that does not follow the schema."""
    check(plot)
    plt = _pyplot()
    if plt is None:
        return None
    x, series = plot["x"], plot["series"]
    named = any(isinstance(v, str) for v in x)
    # Named bars get about an inch and a quarter each, so their wrapped names stay apart.
    fig, ax = plt.subplots(figsize=(max(7, 1.25 * len(x)) if named else 7, 4.4))
    try:
        nan = float("nan")
        if isinstance(x[0], str):
            width = 0.8 / len(series)
            for i, s in enumerate(series):
                pos = [k - 0.4 + width * (i + 0.5) for k in range(len(x))]
                ys = [nan if v is None else v for v in s["median"]]
                ax.bar(pos, ys, width, label=s["label"])
                _draw_whiskers(ax, pos, s, None)
            ax.set_xticks(range(len(x)))
            # Named bars: long names wrap onto a few short lines instead of running together.
            ax.set_xticklabels([textwrap.fill(str(v), 14) for v in x], fontsize=8)
            ax.margins(y=0.15)  # room for the legend above the bars
        else:
            markers = "osD^v<>ph*"
            for i, s in enumerate(series):
                ys = [nan if v is None else v for v in s["median"]]
                (line,) = ax.plot(x, ys, marker=markers[i % len(markers)], label=s["label"])
                _draw_whiskers(ax, x, s, line.get_color())
            if plot.get("log_x"):
                ax.set_xscale("log")
                ax.set_xticks(x)
                ax.set_xticklabels([f"{v:g}" for v in x])
        if plot.get("log_y"):
            from matplotlib.ticker import FuncFormatter
            ax.set_yscale("log")
            plain = FuncFormatter(lambda v, _: f"{v:g}")  # 60, not 6x10^1
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
        elif ax.get_ylim()[0] > 0:
            ax.set_ylim(bottom=0)
        if plot.get("reference") is not None:
            ax.axhline(plot["reference"], color="grey", linestyle="--", linewidth=1)
        # Long titles wrap instead of running off the figure.
        ax.set_title("\n".join(textwrap.wrap(plot.get("title", plot["name"]), 70)), fontsize=11)
        ax.set_xlabel(plot.get("x_label", ""))
        ax.set_ylabel(plot.get("y_label", ""))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
        ax.text(1.0, -0.16, "whiskers: min-max over the rounds", transform=ax.transAxes,
                ha="right", va="top", fontsize="x-small", color="grey")
        fig.tight_layout()
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)
    return path


def render_file(data_path, img_dir):
    """Every plot of one data file into img_dir; returns the paths written."""
    try:
        with open(data_path) as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise PlotError(f"{data_path}: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("plots"), list):
        raise PlotError(f"{data_path}: no 'plots' list")
    out = []
    for plot in data["plots"]:
        try:
            path = draw(plot, os.path.join(img_dir, f"{plot.get('name')}.png"))
        except PlotError as e:
            raise PlotError(f"{data_path}: {e}") from None
        if path:
            out.append(path)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--data", default=os.path.join(ROOT, "docs", "benchmarks", "data"),
                    help="directory of the <study>.json files (default: %(default)s)")
    ap.add_argument("--img", default=os.path.join(ROOT, "docs", "benchmarks", "img"),
                    help="directory the PNGs go to (default: %(default)s)")
    ap.add_argument("files", nargs="*", help="data files (default: every --data/*.json)")
    args = ap.parse_args(argv)
    if not have_matplotlib():
        print("plot_pages.py: matplotlib is not installed (Debian: apt-get install "
              "python3-matplotlib; `make deps` installs it)", file=sys.stderr)
        return 1
    files = args.files or sorted(glob.glob(os.path.join(args.data, "*.json")))
    if not files:
        print(f"plot_pages.py: no data files in {args.data}", file=sys.stderr)
        return 1
    failed = 0
    for path in files:
        try:
            for png in render_file(path, args.img):
                print(png)
        except PlotError as e:
            print(f"plot_pages.py: {e}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
