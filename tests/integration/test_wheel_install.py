"""The console as a user installs it: a built wheel in a fresh venv, run outside the checkout.

Everything it needs (profiles, the demo engine and candidates, the Dockerfile) must come from the
wheel; results must land under the working directory, never inside the installed package.
"""
from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from browser import inked, screenshot

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
OTHER_NODE = ROOT / "tests" / "data" / "receipts-v1" / "receipt.json"   # a demo round sealed elsewhere


def _tree(folder: Path) -> set[str]:
    """Files of the installed package, less the bytecode Python writes beside modules."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def installed(tmp_path_factory, base_image):
    top = tmp_path_factory.mktemp("wheel")
    wheels, venv, work = top / "wheels", top / "venv", top / "work"
    work.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
                   check=True, cwd=top)
    wheel, = wheels.glob("bench_console-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], check=True, cwd=top)
    site = next((venv / "lib").glob("python3*/site-packages")) / "console"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    env.pop("GITHUB_ACTIONS", None)
    env.pop("GITHUB_STEP_SUMMARY", None)

    def console(*args: str, check: int | None = 0) -> subprocess.CompletedProcess:
        run = subprocess.run(["console", *args], cwd=work, env=env, capture_output=True, text=True, timeout=1800)
        if check is not None:
            assert run.returncode == check, f"console {' '.join(args)} exited {run.returncode}:\n" \
                                            f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
        return run

    before = _tree(site)
    demo = console("demo", "--headless", "--candidate", "fast")
    return console, work, site, before, demo


def test_the_installed_console_runs_from_its_own_files(installed):
    console, work, site, before, demo = installed
    assert str(ROOT) not in console("--version").stdout
    assert console("--version").stdout.split()[-1] == "0.1.0"
    shipped = console("profiles").stdout
    assert "demo" in shipped and "llama-cpp" in shipped and str(site) in shipped
    assert "complete" in console("completion", "bash").stdout
    # the round itself found its profile, engine, candidate and Dockerfile in the wheel
    assert "ACCEPTED" in demo.stdout, demo.stdout[-2000:]


def test_results_go_to_the_working_directory_and_nothing_into_the_package(installed):
    console, work, site, before, demo = installed
    results = work / "results" / "demo"
    assert (results / "receipt.json").is_file() and (results / "summary.md").is_file()
    assert _tree(site) == before, f"the round wrote into the installed package: {_tree(site) ^ before}"
    assert console("ledger", "verify", str(results)).returncode == 0


def test_the_installed_console_reads_back_what_it_sealed(installed):
    console, work, site, before, demo = installed
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
