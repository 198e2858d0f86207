"""Main watched: every figure a series (serving latencies per block, matrix cells, guards), the alarm
`console history --fail-on` raises at a family-wise rate, and `--bisect`'s culprits."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from console.bisect import Bisection, Config
from console.bisect.hunt import run_hunts
from console.cli import main as cli
from console.engine.ranges import Item
from console.core.provenance import watched
from console.core.provenance.alarm import alarm_of
from console.core.provenance.culprits import hunts
from console.core.provenance.history import series_of
from console.core.records.receipt import Receipt
from console.core.statistics import changepoints as cp
from console.results import store
from console.results.saved import select_sources
from core.receipts import MAIN, make_matrix_receipt, make_receipt

ROOT = Path(__file__).resolve().parents[1]
WOBBLE = [0.004, -0.003, 0.002, -0.001, 0.003, -0.004]


def _stamp(r: dict, k: int, commit: str = "", repo: str = "/repos/engine") -> dict:
    r["round_id"] = f"20261201T{k:06d}Z-{k:06x}"
    r["builds"]["main"]["source"] = {"git": repo, "ref": "main", "commit": commit or f"{k:040x}"}
    r["profile"]["path"] = str(ROOT / "profiles" / "demo.toml")
    return r


def _sealed(out: Path, r: dict, k: int) -> str:
    return store.seal_into(out, r, sealed_at=f"2026-12-01T{k // 60:02d}:{k % 60:02d}:00Z")


def serving(k: int, throughput: float = 1.0, ttft: float = 1.0, itl: float = 1.0) -> dict:
    """A serving round: its blocks as reps, each with the throughput and the latency tails it measured."""
    w = 1 + WOBBLE[k % len(WOBBLE)]
    r = make_receipt(main=[m * throughput * w for m in MAIN], cand=[m * throughput * w * 1.01 for m in MAIN])
    r["profile"]["name"] = "llama-server"
    r["profile"]["bench"] = {"mode": "serve", "metric": "output_tok_s"}
    r["profile"]["server"] = {"concurrency": 2, "rate": 0.0}
    r["reps"] = [x for x in r["reps"] if x["phase"] in ("warmup", "timed")]
    for i, x in enumerate(r["reps"]):
        x.update(context="serve", depth=0, peak_mem_bytes=None)
        jitter = 1 + 0.01 * ((i * 7 + k) % 5 - 2)
        x["reported"] = {"tokens": x["tokens"], "elapsed_s": x["reported"]["elapsed_s"], "duration": 1.0,
                         "output_throughput": x["value"], "p99_ttft_ms": 120.0 * ttft * w * jitter,
                         "p99_itl_ms": 30.0 * itl * w * jitter}
    return _stamp(r, k)


def _serving_dir(out: Path, n: int = 16, ttft_step: float = 1.0) -> None:
    for k in range(n):
        _sealed(out, serving(k, ttft=1.0 if k < n // 2 else ttft_step), k)


def _demo_dir(out: Path, n: int = 16, step: float = 1.0, repo: str = "/repos/engine", commits=None) -> None:
    for k in range(n):
        level = (1.0 if k < n // 2 else step) * (1 + WOBBLE[k % len(WOBBLE)])
        r = make_receipt(main=[m * level for m in MAIN], cand=[m * level * 1.06 for m in MAIN])
        _sealed(out, _stamp(r, k, commits[k] if commits else "", repo), k)


# --- every figure a series --------------------------------------------------------------------------

def test_a_serving_round_gives_its_throughput_and_each_latency_tail_a_series(tmp_path):
    _sealed(tmp_path, serving(0), 0)
    (src,) = select_sources([tmp_path])
    got = {(x.figure, x.metric): x for x in watched.readings(src.receipt)}
    assert set(got) == {("", "output_tok_s"), ("ttft_p99_ms", "ttft_p99_ms"), ("itl_p99_ms", "itl_p99_ms")}
    assert len(got[("ttft_p99_ms", "ttft_p99_ms")].values) == len(MAIN)        # one per counted timed block
    assert got[("ttft_p99_ms", "ttft_p99_ms")].lower_is_better and not got[("", "output_tok_s")].lower_is_better


def test_a_matrix_round_gives_each_cell_a_series_and_a_round_its_guards(tmp_path):
    m = make_matrix_receipt({1024: (MAIN, MAIN), 4096: ([x * 0.5 for x in MAIN], MAIN)})
    _sealed(tmp_path, _stamp(m, 0), 0)
    _sealed(tmp_path, _stamp(make_receipt(), 1), 1)
    h = series_of(select_sources([tmp_path]), cp.Rules())
    figures = sorted(s.key.figure for s in h.series)
    assert figures == ["", "cell[depth=1024]", "cell[depth=4096]", "guard[decode_ctx128]"]
    cell = next(s for s in h.series if s.key.figure == "cell[depth=4096]")
    assert cell.key.depth == 4096 and cell.points[0].value == pytest.approx(0.5 * np.exp(np.mean(np.log(MAIN))))
    assert h.series_alpha == pytest.approx(0.01 / 4)     # four series: alpha over the family


# --- the alarm ---------------------------------------------------------------------------------------

def test_ttft_p99_stepping_up_is_a_regression_named_with_its_size_and_rounds(tmp_path):
    _serving_dir(tmp_path, ttft_step=1.2)
    a = alarm_of(series_of(select_sources([tmp_path]), cp.Rules()))
    (f,) = a.firing
    assert f.series.key.figure == "ttft_p99_ms" and f.regression and f.word == "regression"
    assert f.low < 0.2 < f.high and f.low > 0.1 and (f.before, f.after) == (8, 8)
    assert f.change.before.round_id.endswith("000007") and f.change.after.round_id.endswith("000008")
    assert "ttft_p99_ms" in f.sentence() and "+20." in f.sentence() or "+19." in f.sentence()


def test_a_step_the_good_way_fires_only_on_change_and_a_superseded_series_is_not_watched(tmp_path):
    _serving_dir(tmp_path, ttft_step=0.8)            # TTFT p99 fell: better
    h = series_of(select_sources([tmp_path]), cp.Rules())
    assert not alarm_of(h, "regression").fired
    (f,) = alarm_of(h, "change").firing
    assert f.word == "improvement"
    for k in range(16, 24):                          # the same node and profile under another runtime
        r = serving(k)
        r["runtime"]["kind"] = "local"
        _sealed(tmp_path, r, k)
    a = alarm_of(series_of(select_sources([tmp_path]), cp.Rules()), "change")
    assert a.superseded == 3 and not a.fired and len(a.watched) == 3


def test_the_command_exits_1_naming_each_regression_in_text_json_and_annotations(tmp_path, capsys):
    _demo_dir(tmp_path / "demo", step=0.92)
    _serving_dir(tmp_path / "serve", ttft_step=1.2)
    assert cli(["history", str(tmp_path / "demo"), "--fail-on", "regression"]) == 1
    out = capsys.readouterr().out
    assert "ALARM demo decode_tok_s @ depth 4096: regression -8." in out and "alarm: 2 regressions" in out
    assert cli(["history", str(tmp_path / "serve"), "--fail-on", "regression", "--format", "json"]) == 1
    (row,) = json.loads(capsys.readouterr().out)["alarm"]
    assert row["series"].startswith("llama-server ttft_p99_ms") and row["firing"] and 0.1 < row["low"] < row["change"]
    assert cli(["history", str(tmp_path / "serve"), "--fail-on", "regression", "--format", "github"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("::error title=regression%3A llama-server ttft_p99_ms @ depth 0::")
    assert "%25" in lines[0] and lines[-1].startswith("::notice title=console history::alarm: 1 regression")
    assert cli(["history", str(tmp_path / "serve"), "--format", "github"]) == 0     # said, never failed


def test_flat_directories_exit_0_and_say_the_family_rate(tmp_path, capsys):
    _demo_dir(tmp_path / "demo")
    _serving_dir(tmp_path / "serve")
    assert cli(["history", str(tmp_path / "demo"), str(tmp_path / "serve"), "--fail-on", "regression"]) == 0
    out = capsys.readouterr().out
    assert "no alarm: no regression in the newest segment of 5 watched series" in out
    assert "each at 0.002 (alpha 0.01 over the family, Bonferroni)" in out


# --- the culprits ------------------------------------------------------------------------------------

def test_only_ordered_sources_and_figures_bisect_decides_are_planned_once_each(tmp_path):
    _demo_dir(tmp_path, step=0.92)
    h = series_of(select_sources([tmp_path]), cp.Rules())
    profiles = {rid: (r.profile.path, r.profile.sha256) for rid, r in store.ledger_receipts(tmp_path).items()}
    plans, skipped = hunts(h, profiles)
    (plan,) = [p for p in plans if p.metric == "decode_tok_s"]      # the scored series and its guard: one range
    assert len(plan.changes) == 2 and plan.good.endswith(f"{7:040x}") and plan.bad.endswith(f"{8:040x}")
    assert not skipped
    (tmp_path / "s").mkdir()
    _serving_dir(tmp_path / "s", ttft_step=1.2)
    h = series_of(select_sources([tmp_path / "s"]), cp.Rules())
    plans, skipped = hunts(h, {})
    assert not plans and "not a figure `console bisect` decides" in skipped[0].why


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_change_point_between_commits_is_bisected_to_its_culprit(tmp_path):
    """The range history hands over is resolved in the repository and bisected by the real loop;
    its steps are the bisection benchmark's simulated rounds (item 6 of 3..12 is commit 9, slower)."""
    sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
    import demo_repo
    shas = demo_repo.make(tmp_path / "repo", "one", 16)
    commits = [shas[3]] * 8 + [shas[12]] * 8
    _demo_dir(tmp_path / "out", step=0.9, repo=str(tmp_path / "repo"), commits=commits)
    h = series_of(select_sources([tmp_path / "out"]), cp.Rules())
    profiles = {rid: (r.profile.path, r.profile.sha256) for rid, r in store.ledger_receipts(tmp_path / "out").items()}
    plans, _ = hunts(h, profiles)
    steps = _load("bisect_quality").SimulatedSteps(np.random.default_rng(1), 0.03, {6: -0.10}, tmp_path / "out")
    said: list[str] = []

    def one(profile, items, out, runtime):
        assert out == tmp_path / "out" and runtime == "docker" and len(items) == 10
        at = {it.label: str(i) for i, it in enumerate(items)}       # the simulation knows items by place

        def step(p, main, cand, title):
            return steps(p, Item(main.source, at[main.label]), Item(cand.source, at[cand.label]), title)
        return Bisection(Config(profile, items, out), step, say=said.append).run()
    (found,) = run_hunts(plans, lambda rid: tmp_path / "out", one, said.append)
    assert found.result == "found" and found.culprit.startswith(shas[9][:7]), found.sentence
    assert found.steps >= 3 and found.record.endswith(".json") and Path(found.record).is_file()
    assert said[0].startswith(f"bisecting /") and "demo decode_tok_s @ depth 4096" in said[0]


def test_bisect_says_why_a_change_point_is_not_bisected(tmp_path, capsys):
    _serving_dir(tmp_path, ttft_step=1.2)
    assert cli(["history", str(tmp_path), "--bisect", "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["culprits"]
    assert row["result"] == "not run" and "not a figure `console bisect` decides" in row["why"]


def test_a_receipt_read_back_keeps_its_figures(tmp_path):
    rid = _sealed(tmp_path, serving(0, ttft=1.5), 0)
    r = store.ledger_receipts(tmp_path)[rid]
    assert isinstance(r, Receipt) and r.profile.serves


def test_annotations_escape_what_github_reads_and_name_each_culprit(tmp_path):
    from console.core.provenance.culprits import Culprit, Hunt
    from console.reports.history import annotations
    _demo_dir(tmp_path, step=0.92)
    h = series_of(select_sources([tmp_path]), cp.Rules())
    plan = Hunt("/r@a", "/r@b", "p.toml", "", "decode_tok_s", "docker", "", ())
    text = annotations(alarm_of(h), [Culprit(plan, "found", "8b3cbc4 attention: 10 %, slower", 5, 5, 6.4)])
    errors = [x for x in text.splitlines() if x.startswith("::error")]
    assert len(errors) == 2 and all("\n" not in x and "%25" in x for x in errors)
    (line,) = [x for x in text.splitlines() if "culprit" in x]
    assert line == ("::notice title=culprit%3A decode_tok_s::found: 8b3cbc4 attention: 10 %25, slower "
                    "(/r@a .. /r@b; 5 steps, 6.4 min)")
