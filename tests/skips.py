#!/usr/bin/env python3
"""Prints how many tests a ctest run passed, failed and skipped, and why each skipped.

    python3 tests/skips.py RESULTS.xml

RESULTS.xml is ctest's --output-junit file. A skipped GoogleTest test prints its reason on a line
starting "SKIP:" (the suite's convention, e.g. "SKIP: splice: Linux-only, not in the POSIX
profile"); the reasons are counted, most frequent first, so that a run in a build that leaves
features out (make test-posix) says exactly what it did not test. Exit status: 1 when a test
failed, 0 otherwise; bad usage or an unreadable file: one line and exit 2.
"""
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter


def reason_of(case):
    """The test's "SKIP: ..." line, or the skip message ctest recorded."""
    out = case.findtext("system-out") or ""
    if case.get("status") == "disabled":
        return "disabled in every build (the test's DISABLED property)"
    m = re.search(r"SKIP: ?([^\n]*)", out)
    if m:
        return m.group(1).strip()
    sk = case.find("skipped")
    if sk is not None and sk.get("message"):
        return sk.get("message").strip()
    return "(no reason printed)"


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        if len(argv) == 2 and argv[1] in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        print("skips.py: error: expected one argument, ctest's --output-junit file (see --help)",
              file=sys.stderr)
        return 2
    try:
        root = ET.parse(argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"skips.py: error: {argv[1]}: {e} (see --help)", file=sys.stderr)
        return 2
    passed, failed, skipped = 0, [], Counter()
    for case in root.iter("testcase"):
        status = case.get("status", "")
        if case.find("failure") is not None or case.find("error") is not None or status == "fail":
            failed.append(case.get("name"))
        elif case.find("skipped") is not None or status in ("notrun", "skipped", "disabled"):
            skipped[reason_of(case)] += 1
        else:
            passed += 1
    total = passed + len(failed) + sum(skipped.values())
    print(f"{total} tests: {passed} passed, {len(failed)} failed, "
          f"{sum(skipped.values())} skipped")
    for reason, n in skipped.most_common():
        print(f"  {n:5d} skipped: {reason}")
    for name in failed:
        print(f"  failed: {name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
