#!/usr/bin/python3
"""The default model's training text: the King James Bible from Debian.

Runs Debian's `bible` program (packages bible-kjv and bible-kjv-text; `make
model` installs them with apt-get when run as root) over Genesis 1:1 to
Revelation 22:21, splits the output into chapters and shuffles them with a
fixed seed, so that the held-out tail `smallmind train --val-fraction 0.1`
takes is a random tenth of the chapters rather than the last books.

    make_corpus.py OUT.txt
"""
import random
import subprocess
import sys


def chapters(text):
    lines = text.split("\n")
    out, cur = [], []
    for i, line in enumerate(lines):
        is_header = (line and not line.startswith(" ") and i > 0 and lines[i - 1] == ""
                     and i + 1 < len(lines) and lines[i + 1] == "" and line.split()[-1].isdigit())
        if is_header and cur:
            out.append("\n".join(cur).strip("\n") + "\n")
            cur = []
        cur.append(line)
    if cur:
        out.append("\n".join(cur).strip("\n") + "\n")
    return [c for c in out if c.strip()]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        text = subprocess.run(["bible", "Gen1:1-Rev22:21"], capture_output=True, check=True,
                              env={"PATH": "/usr/bin:/bin", "COLUMNS": "80"}).stdout.decode()
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"make_corpus.py: cannot run Debian's 'bible' ({e}); "
                 "apt-get install bible-kjv bible-kjv-text")
    ch = chapters(text)
    if len(ch) != 1189:
        sys.exit(f"make_corpus.py: found {len(ch)} chapters, expected the Bible's 1189")
    random.Random(2026).shuffle(ch)
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(ch))
    print(f"{sys.argv[1]}: {len(ch)} chapters, {sum(len(c) + 1 for c in ch) - 1} bytes")


if __name__ == "__main__":
    main()
