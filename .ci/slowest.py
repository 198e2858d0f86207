"""The slowest tests of a CI run, read from pytest's JUnit files: `python .ci/slowest.py FILE... [-n 20]`."""
import argparse
import xml.etree.ElementTree as ET
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("files", nargs="*", type=Path)
ap.add_argument("-n", type=int, default=20)
a = ap.parse_args()
cases = []
for f in a.files:
    if f.is_file():
        for c in ET.parse(f).iter("testcase"):
            cases.append((float(c.get("time") or 0), f"{c.get('classname')}::{c.get('name')}"))
cases.sort(reverse=True)
print(f"slowest {min(a.n, len(cases))} of {len(cases)} tests ({sum(t for t, _ in cases) / 60:.1f} min in all):")
for t, name in cases[:a.n]:
    print(f"{t:8.1f} s  {name}")
