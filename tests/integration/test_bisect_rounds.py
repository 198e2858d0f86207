"""`console bisect` on a real git repository of the demo engine, every step a real round on the real
daemon: the ends decided apart, a commit that does not build skipped, one that changes a comment
judged like the good end, the slow commit found; a second bisection reads every step's decision and builds nothing;
`console run --git-bisect` tells `git bisect run` what an item is; `console history` leaves the
steps out of main's series."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import main as cli

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, list[str]]:
    """The demo engine's short story: 0 good, 1 does not build, 2 mends it (a comment more than 0),
    3 the demo's `slower` change (about 45 % slower at depth 4096)."""
    where = tmp_path_factory.mktemp("bisect") / "engine"
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "fixtures" / "demo_repo.py"), str(where),
                          "--story", "short"], check=True, capture_output=True, text=True).stdout
    return where, [line.split()[1] for line in out.splitlines()]


def test_the_slow_commit_is_found_the_broken_one_skipped_and_a_second_run_builds_nothing(
        repo, tmp_path, base_image, capsys):
    where, shas = repo
    out = tmp_path / "results"
    args = ["bisect", "--profile", "demo", f"{where}@{shas[0]}..{shas[-1]}", "--headless", "--out", str(out),
            "--format", "json"]
    code = cli(args)
    text = capsys.readouterr().out
    (record,) = sorted((out / "bisect").glob("*.json"))
    doc = json.loads(record.read_text())
    assert code == 0 and doc["result"] == "found" and doc["first_bad"] == 3, doc["sentence"]
    steps = doc["steps"]
    # the ends; item 1 (nearest the middle) does not build: skipped; item 2 is like good; 3 is the bad end
    assert [(s["role"], s["item"], s["outcome"]) for s in steps] == [
        ("endpoints", 3, "slower"), ("probe", 1, "build-failed"), ("probe", 2, "none")]
    assert steps[1]["mark"] == "skip" and "error" in steps[1]["note"] and steps[2]["mark"] == "good"
    found = steps[0]
    assert found["high"] < 0 and "it is the bad end itself" in doc["sentence"]
    assert sum(s["rate"] for s in steps) <= doc["error_rate"] + 1e-12
    assert record.with_suffix(".html").is_file() and "first slower item: 3" in text
    # every measured step is a sealed round of kind bisect in the ledger, and re-derives
    sealed = [s["receipt"] for s in steps if s["receipt"]]
    assert len(sealed) == len(steps) - 1
    for rid in sealed:
        assert json.loads((out / "receipts" / f"{rid}.json").read_text())["kind"] == "bisect"
    assert cli(["verdict", str(out / "receipts" / f"{found['receipt']}.json"), "--json"]) == 1
    capsys.readouterr()
    assert cli(["ledger", "verify", str(out)]) == 0
    capsys.readouterr()

    # again: every step is read from the ledger; nothing is built or measured
    assert cli(args) == 0
    again_text = capsys.readouterr().out
    again = json.loads(sorted((out / "bisect").glob("*.json"))[-1].read_text())
    assert again["first_bad"] == 3 and "build candidate" not in again_text and "build main" not in again_text
    assert all("decided by the earlier step" in s["note"] for s in again["steps"] if s["outcome"] != "build-failed")
    assert "not built again" in again["steps"][1]["note"]

    # git bisect run's view of two items: the slow one is bad (read from the ledger), a note is good
    base = ["run", "--profile", "demo", "--main", f"{where}@{shas[0]}", "--headless", "--out", str(out),
            "--git-bisect"]
    assert cli(base + ["--candidate", f"{where}@{shas[3]}"]) == 1
    assert "git bisect: bad (slower" in capsys.readouterr().out
    assert cli(base + ["--candidate", f"{where}@{shas[1]}"]) == 125
    assert "git bisect: skip (build-failed" in capsys.readouterr().out

    # main's history leaves a bisection's steps out (their main is an old commit)
    assert cli(["history", str(out)]) == 2
    assert "bisect round(s) (their main is not the node's main)" in capsys.readouterr().err
