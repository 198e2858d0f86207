"""The console as a user installs it: a built wheel in a fresh venv, run outside the checkout.

Everything it needs (profiles, the demo engine and candidates, the Dockerfile) must come from the
wheel; results must land under the working directory, never inside the installed package.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from browser import inked, screenshot

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
OTHER_NODE = ROOT / "tests" / "data" / "receipts-v1" / "receipt.json"   # a demo round sealed elsewhere


@pytest.fixture(scope="module")
def installed(installed_demo):
    """The installed console, its package's files before the round, and the round's receipt: the
    demo round that tests/e2e's terminal test watched (one round serves both)."""
    inst, before, screen = installed_demo
    assert screen.exit_code == "0", "the installed console's demo round did not end well:\n" + screen.text
    return inst.console, inst.work, inst.site, before, inst


def test_the_installed_console_runs_from_its_own_files(installed):
    console, work, site, before, inst = installed
    assert str(ROOT) not in console("--version").stdout
    assert console("--version").stdout.split()[-1] == "0.1.0"
    shipped = console("profiles").stdout
    assert "demo" in shipped and "llama-cpp" in shipped and str(site) in shipped
    assert "complete" in console("completion", "bash").stdout
    # the round itself found its profile, engine, candidate and Dockerfile in the wheel
    verdict = json.loads(console("verdict", str(work / "results" / "demo" / "receipt.json"), "--json").stdout)
    assert verdict["outcome"] == "accepted", verdict


def test_results_go_to_the_working_directory_and_nothing_into_the_package(installed):
    console, work, site, before, inst = installed
    results = work / "results" / "demo"
    assert (results / "receipt.json").is_file() and (results / "summary.md").is_file()
    assert inst.tree() == before, f"the round wrote into the installed package: {inst.tree() ^ before}"
    assert console("ledger", "verify", str(results)).returncode == 0


def test_the_installed_console_reads_back_what_it_sealed(installed):
    console, work, site, before, inst = installed
    receipt = work / "results" / "demo" / "receipt.json"
    verdict = json.loads(console("verdict", str(receipt), "--json").stdout)
    assert verdict["file"]["status"] == "sealed" and verdict["outcome"] == "accepted"

    # two receipts from two nodes: compared, and the second named as not comparable with the reason
    both = json.loads(console("compare", str(receipt), str(OTHER_NODE), "--format", "json").stdout)
    first, other = both["rounds"]
    assert first["comparable"] and not other["comparable"] and "differs" in other["why_not"]
    rows = list(csv.DictReader(io.StringIO(console("compare", str(receipt), str(OTHER_NODE),
                                                   "--format", "csv").stdout)))
    assert {r["build"] for r in rows} == {"main", "candidate"} and all(r["median"] for r in rows)
    ours = [r for r in rows if r["source"] == first["source"] and r["build"] == "candidate"]
    assert ours and all(float(r["paired_low"]) <= float(r["paired_gain"]) <= float(r["paired_high"])
                        for r in ours)

    page, shot = work / "report.html", work / "report.png"
    console("report", str(receipt), "--out", str(page))
    screenshot(page, shot)
    share, colours = inked(shot)
    assert share > 0.05 and colours > 200, (share, colours)
