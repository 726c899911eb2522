#!/usr/bin/env python3
"""Keeps a fuzz corpus small: from the inputs in SRC (already afl-cmin'ed),
copies to DST the fewest (at most N) that keep the most AFL tuples, picked
greedily, smaller files first on ties; inputs over 8 KiB are left out.

Usage: pick_corpus.py SRC DST N -- TARGET_BINARY
"""
import os
import shutil
import subprocess
import sys


def main():
    src, dst, n, sep, binary = sys.argv[1:6]
    assert sep == "--", __doc__
    maps = dst + ".maps"
    shutil.rmtree(maps, ignore_errors=True)
    subprocess.run(["afl-showmap", "-i", src, "-o", maps, "-m", "none", "-t", "5000", "-q", "--", binary],
                   env=dict(os.environ, AFL_QUIET="1"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    size = lambda f: os.path.getsize(os.path.join(src, f))
    cover = {}
    for f in os.listdir(maps):
        if size(f) <= 8192:
            with open(os.path.join(maps, f)) as m:
                cover[f] = {line.split(":")[0] for line in m if line.strip()}
    total = set().union(*cover.values()) if cover else set()
    got, picked = set(), []
    while cover and len(picked) < int(n):
        best = max(cover, key=lambda f: (len(cover[f] - got), -size(f)))
        if not cover[best] - got:
            break
        picked.append(best)
        got |= cover.pop(best)
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    for f in picked:
        shutil.copy(os.path.join(src, f), os.path.join(dst, f))
    shutil.rmtree(maps, ignore_errors=True)
    share = 100 * len(got) / len(total) if total else 100
    print(f"{len(picked)} inputs keep {len(got)} of {len(total)} tuples ({share:.1f}%)")


if __name__ == "__main__":
    main()
