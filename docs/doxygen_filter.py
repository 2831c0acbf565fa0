#!/usr/bin/env python3
"""Doxygen INPUT_FILTER for the public headers: the comment that opens a header (its purpose and
its example) becomes the header's file documentation. The header keeps plain `//` comments, so
that tests/extract_example.cmake finds the example as it is, and the filter keeps every line where
it is, so that doxygen's line numbers are the header's."""
import re
import sys

with open(sys.argv[1], encoding="utf-8") as f:
    lines = f.read().split("\n")

opening = 0
while opening < len(lines) and lines[opening].startswith("//") and not lines[opening].startswith("///"):
    opening += 1
if opening > 0:
    # "// galay/x/y.hpp: what it is" -> "/// What it is"
    lines[0] = re.sub(r"^// galay/[\w/]+\.hpp: (\w)", lambda m: "/// " + m.group(1).upper(), lines[0])
    for i in range(opening):
        if not lines[i].startswith("///"):
            lines[i] = "/" + lines[i]
    lines[0] += " @file"  # the first line is prose, the last may be code
sys.stdout.write("\n".join(lines))
