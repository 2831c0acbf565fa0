#!/usr/bin/env python3
"""Every local link in the repository's markdown resolves: the file (or directory) exists, and a
#fragment names a heading of the target page (GitHub's anchors). Links to the web are not
fetched. Run by ctest (doc_links_py); `python3 tests/docs/test_links.py [ROOT]` lists every
broken link and exits 1 when there is one."""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# [text](target) and ![alt](target); the target ends at whitespace (a "title" may follow) or ')'.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
HTML_ID = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def markdown_files(root):
    """The markdown files git tracks under root (any .md below root when it is not a checkout)."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "*.md"], capture_output=True,
                             text=True, check=True).stdout.split()
        if out:
            return [os.path.join(root, p) for p in out]
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith((".", "build")) and x != "target"]
        found += [os.path.join(d, f) for f in files if f.endswith(".md")]
    return found


def prose_lines(text):
    """(line number, line) outside fenced code blocks, with inline code spans blanked."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


def slug(heading):
    """GitHub's anchor for a heading: links reduced to their text, lower case, punctuation but
    '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in "-_ ")
    return text.replace(" ", "-")


def anchors(path, cache={}):
    """The anchors a markdown page defines: its headings' slugs (-1, -2 ... for repeats), HTML
    ids and doxygen {#ids}."""
    if path not in cache:
        seen, found = {}, set()
        with open(path, encoding="utf-8") as f:
            text = f.read()
        fenced = False
        for line in text.splitlines():
            if FENCE.match(line):
                fenced = not fenced
                continue
            if fenced:
                continue
            found.update(HTML_ID.findall(line))
            m = HEADING.match(line)
            if not m:
                continue
            title = m.group(2)
            explicit = re.search(r"\{#([\w-]+)\}\s*$", title)
            if explicit:
                found.add(explicit.group(1))
                title = title[:explicit.start()]
            s = slug(title)
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else f"{s}-{n}")
        cache[path] = found
    return cache[path]


def broken_links(root):
    """(file:line, target, why) for every local link that does not resolve; and the count of
    local links checked."""
    bad, checked = [], 0
    for md in sorted(markdown_files(root)):
        with open(md, encoding="utf-8") as f:
            text = f.read()
        for n, line in prose_lines(text):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
                    continue
                checked += 1
                where = f"{os.path.relpath(md, root)}:{n}"
                path, _, fragment = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
                if not os.path.exists(dest):
                    bad.append((where, target, "no such file"))
                elif fragment and dest.endswith(".md") and fragment not in anchors(dest):
                    bad.append((where, target, f"no heading #{fragment} in "
                                               f"{os.path.relpath(dest, root)}"))
    return bad, checked


def self_test():
    """The checker finds what it must: a missing file, a missing anchor, and passes good links
    (a repeated heading, a heading with code and punctuation, a link inside code is ignored)."""
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "docs"))
        with open(os.path.join(d, "docs", "page.md"), "w") as f:
            f.write("# Page\n\n## `make bench`: the suite\n\n## Results\n\n## Results\n")
        with open(os.path.join(d, "README.md"), "w") as f:
            f.write("[ok](docs/page.md) [ok](docs/page.md#make-bench-the-suite) "
                    "[ok](docs/page.md#results-1) [ok](docs/) [web](https://example.org/x)\n"
                    "`[in code](nowhere.md)`\n```\n[in a fence](nowhere.md)\n```\n"
                    "[gone](docs/nothing.md) [bad anchor](docs/page.md#results-2)\n")
        bad, checked = broken_links(d)
        assert checked == 6, checked
        assert [(w, t) for w, t, _ in bad] == [("README.md:6", "docs/nothing.md"),
                                               ("README.md:6", "docs/page.md#results-2")], bad


def main(argv):
    root = os.path.abspath(argv[1]) if len(argv) > 1 else ROOT
    self_test()
    bad, checked = broken_links(root)
    for where, target, why in bad:
        print(f"{where}: {target}: {why}")
    if checked == 0:
        print(f"test_links: no local links found under {root}", file=sys.stderr)
        return 1
    print(f"{checked} local links checked, {len(bad)} broken")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
