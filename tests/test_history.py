"""`console history`: main's series over sealed rounds, its change points and the range to bisect."""
from __future__ import annotations

import asyncio
import csv
import io
import json
import math

import pytest

from console.cli import main as cli
from console.core.statistics import changepoints as cp
from console.core.provenance.history import series_of
from console.results import store
from console.results.saved import select_sources
from core.receipts import MAIN, make_receipt

STEP_AT = 12


def _seal(out, k: int, level: float, *, kind: str = "round", cpu: str = "Intel Xeon", jitter: float = 0.0) -> str:
    r = make_receipt(main=[m * level * (1 + jitter) for m in MAIN], cand=[m * level * 1.06 for m in MAIN], kind=kind)
    r["round_id"] = f"20261201T{k:06d}Z-{k:06x}"
    r["host"]["cpu_model"] = cpu
    r["builds"]["main"]["source"] = {"git": "/repos/engine", "ref": "main", "commit": f"{k:040x}"}
    return store.seal_into(out, r, sealed_at=f"2026-12-01T{k // 60:02d}:{k % 60:02d}:00Z")


def scored(h) -> tuple:
    """The series of the rounds' scored metric (a round's guards are series of their own)."""
    return tuple(s for s in h.series if s.key.figure == "")


def _stepped(out, n: int = 24) -> None:
    wobble = [0.004, -0.003, 0.002, -0.001, 0.003, -0.004]
    for k in range(n):
        _seal(out, k, 1.0 if k < STEP_AT else 0.92, jitter=wobble[k % len(wobble)])


def test_a_step_down_half_way_is_one_change_point_with_the_range_to_bisect(tmp_path):
    _stepped(tmp_path)
    h = series_of(select_sources([tmp_path]), cp.Rules())
    (s,) = scored(h)
    assert len(s.points) == 24 and s.key.metric == "decode_tok_s" and s.key.runtime == "docker"
    (c,) = s.changes
    assert c.point.at == STEP_AT and c.point.low < -0.08 < c.point.high < 0
    assert c.before.source == f"/repos/engine@{STEP_AT - 1:040x}" and c.after.source == f"/repos/engine@{STEP_AT:040x}"
    geo = math.exp(sum(math.log(m) for m in MAIN) / len(MAIN))
    assert s.points[0].value == pytest.approx(geo * 1.004)     # main's geometric mean, the first round's wobble


def test_another_node_is_another_series_never_a_change_point(tmp_path):
    for k in range(10):
        _seal(tmp_path, k, 1.0, jitter=0.002 * (k % 3))
    for k in range(10, 20):
        _seal(tmp_path, k, 0.7, cpu="AMD EPYC", jitter=0.002 * (k % 3))
    h = series_of(select_sources([tmp_path]), cp.Rules())
    assert len(scored(h)) == 2 and all(not s.changes for s in h.series)
    assert {len(s.points) for s in h.series} == {10}


def test_bisection_steps_are_left_out_and_counted(tmp_path):
    for k in range(6):
        _seal(tmp_path, k, 1.0)
    for k in range(6, 9):
        _seal(tmp_path, k, 0.5, kind="bisect")
    h = series_of(select_sources([tmp_path]), cp.Rules())
    assert len(h.series[0].points) == 6
    assert h.left_out == {"bisect round(s) (their main is not the node's main)": 3}


def test_the_command_writes_every_format_and_the_page(tmp_path, capsys):
    _stepped(tmp_path / "r")
    site = tmp_path / "site"
    assert cli(["history", str(tmp_path / "r"), "--html", str(site)]) == 0
    out = capsys.readouterr().out
    assert "Change points" in out and "-8.0%" in out.replace("-7.9%", "-8.0%") and f"written: {site}/index.html" in out
    html = (site / "index.html").read_text()
    assert "<svg" in html and "console bisect --good /repos/engine@" in html
    assert cli(["history", str(tmp_path / "r"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["at"] for c in doc["changes"]] == [STEP_AT] * 2 and len(doc["points"]) == 48    # the scored metric, its guard
    assert cli(["history", str(tmp_path / "r"), "--format", "csv", "--table", "series"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(row["rounds"], row["changes"]) for row in rows] == [("24", "1")] * 2
    assert cli(["history", str(tmp_path / "r"), "--format", "md", "--min-segment", "13"]) == 0
    assert "(none)" in capsys.readouterr().out       # 13 a side cannot split 24 rounds


def test_bad_arguments_are_said(tmp_path, capsys):
    assert cli(["history", str(tmp_path / "missing")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert cli(["history", str(tmp_path), "--alpha", "0"]) == 2
    assert "alpha must be in (0, 1)" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli(["history", str(tmp_path / "empty")]) == 2
    assert "holds no ledger.jsonl" in capsys.readouterr().err


def test_the_terminal_view_shows_the_change_and_the_command_to_bisect(tmp_path):
    from textual.widgets import Static
    from console.tui.history import HistoryApp
    _stepped(tmp_path)
    h = series_of(select_sources([tmp_path]), cp.Rules())

    async def run() -> str:
        app = HistoryApp(h, cp.Rules())
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.pause()
            return str(app.query_one("#changes", Static).render())
    text = asyncio.run(run())
    assert f"round {STEP_AT}: -8" in text and "console bisect --good /repos/engine@" in text


def test_a_change_between_directory_trees_names_no_command_to_bisect(tmp_path):
    for k in range(16):
        r = make_receipt(main=[m * (1.0 if k < 8 else 0.9) * (1 + 0.002 * (k % 3)) for m in MAIN], cand=MAIN)
        r["round_id"] = f"20261201T{k:06d}Z-{k:06x}"
        store.seal_into(tmp_path, r, sealed_at=f"2026-12-01T00:{k:02d}:00Z")
    (s,) = scored(series_of(select_sources([tmp_path]), cp.Rules()))
    (c,) = s.changes
    assert c.point.at == 8 and c.bisect_command is None and c.before.source.startswith("/src/main (tree ")


def test_segments_hold_the_level_between_change_points(tmp_path):
    _stepped(tmp_path)
    (s,) = scored(series_of(select_sources([tmp_path]), cp.Rules()))
    first, second = s.segments
    assert (first.start, first.end, second.start, second.end) == (0, STEP_AT, STEP_AT, 24)
    assert first.low < first.mean < first.high and second.high < first.low
    assert second.mean / first.mean == pytest.approx(0.92, abs=0.005)


def _seal_as(out, k: int, level: float, runtime: str = "docker", **run) -> None:
    """A round as sealed now: the runtime and the [run] and [image] it used (its experiment identity)."""
    r = make_receipt(main=[m * level * (1 + 0.002 * (k % 3)) for m in MAIN], cand=MAIN)
    r["round_id"] = f"20261201T{k:06d}Z-{k:06x}"
    r["profile"]["run"] = {"cpus": 4.0, "memory": "1g", **run}
    r["profile"]["image"] = {"base": "bench-console/base:bookworm", "compiler": "gcc 12.2.0"}
    r["runtime"]["kind"] = runtime
    store.seal_into(out, r, sealed_at=f"2026-12-01T00:{k:02d}:00Z")


def test_another_runtime_or_an_edited_profile_starts_a_series_that_says_what_changed(tmp_path):
    for k in range(8):
        _seal_as(tmp_path, k, 1.0)
    for k in range(8, 16):
        _seal_as(tmp_path, k, 0.8, runtime="local")
    for k in range(16, 24):
        _seal_as(tmp_path, k, 0.6, runtime="local", cpus=2.0)
    h = series_of(select_sources([tmp_path]), cp.Rules())
    assert len(scored(h)) == 3 and all(not s.changes and len(s.points) == 8 for s in h.series)
    since = {s.points[0].round_id[-2:]: s.since for s in scored(h)}
    assert since["00"] == "" and since["08"] == "runtime docker not local"
    assert since["10"].startswith("profile's measured sections") and "(run.cpus 4.0 not 2.0)" in since["10"]
    assert len({s.key.identity for s in h.series}) == 3


def test_rounds_sealed_before_identities_are_one_series_and_the_next_is_another(tmp_path):
    _stepped(tmp_path, 8)                                   # sealed as before identities
    for k in range(8, 16):
        _seal_as(tmp_path, k, 1.0)
    old, new = sorted(scored(series_of(select_sources([tmp_path]), cp.Rules())), key=lambda s: s.points[0].sealed_at)
    assert len(old.points) == len(new.points) == 8 and new.since == "sealed under an older experiment identity"
