"""The decision benchmark drives the round's own path: a few simulated rounds through it."""
import importlib.util
import math
from dataclasses import replace
from pathlib import Path

import numpy as np

from console.profile import load_profile

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("decision_quality", ROOT / "benchmarks" / "decision_quality.py")
dq = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dq)

PROFILE = load_profile(ROOT / "profiles" / "demo.toml")
PROFILE = replace(PROFILE, gate=replace(PROFILE.gate, guards=()))
TREES = {"main": "m" * 64, "candidate": "c" * 64}


def test_a_simulated_regression_goes_through_the_runner_and_is_decided_slower(tmp_path):
    rng = np.random.default_rng(3)
    outcome, r = dq.simulate_round(PROFILE, tmp_path, dq.pair_draws(rng, "gauss", 0.02, -0.10, 32, 16), TREES)
    assert outcome == "slower" and r.sequential.stopped == "decided"
    pairs = len([x for x in r.reps if x.phase == "timed"]) // 2
    assert PROFILE.gate.min_pairs <= pairs < PROFILE.gate.max_pairs


def test_simulated_reruns_seal_into_a_real_ledger_and_a_decided_one_is_not_rerun(tmp_path):
    rng = np.random.default_rng(4)
    draws = dq.pair_draws(rng, "gauss", 0.02, 0.30, 32, 16)
    outcome, r = dq.simulate_round(PROFILE, tmp_path, draws, TREES, seal=True)
    assert outcome == "accepted" and (tmp_path / "ledger.jsonl").exists()
    assert r.sequential.decided_at is not None
    assert dq.simulate_round(PROFILE, tmp_path, draws, TREES, seal=True) == ("decided-before", None)


def test_the_step_model_moves_main_only_after_the_step():
    rng = np.random.default_rng(5)
    main, cand = dq.pair_draws(rng, "step", 0.0, 0.0, 8, 4)
    assert np.allclose(cand - main, 0.0) and np.allclose(main[4:], math.log(0.95))


def test_a_regression_decided_slower_beside_a_step_stops_its_rerun_with_exit_1(tmp_path):
    """Through the runner and a real ledger: the sealed round ends `slower` with a `step-change`
    warning, and the rerun ends at once (``Round._earlier_rounds``) with exit 1, measuring nothing."""
    rng = np.random.default_rng(6)
    main, cand = dq.pair_draws(rng, "gauss", 0.03, -0.04, 32, 32)
    cand[6:] += math.log(0.85) - math.log(0.96)
    outcome, r = dq.simulate_round(PROFILE, tmp_path, (main, cand), TREES, seal=True)
    assert outcome == "slower" and "step-change" in {w.code for w in r.verdict.warnings}
    assert r.sequential.stopped == "decided"
    assert dq.rerun_stopped(PROFILE, tmp_path, TREES) == 1
    assert dq.simulate_round(PROFILE, tmp_path, (main, cand), TREES, seal=True) == ("decided-before", None)


def test_the_stepped_regression_cell_finds_every_rerun_stopped(tmp_path):
    cell = dq.stepped_regression_table(np.random.default_rng(7), PROFILE, 0.03, 6, tmp_path)
    assert cell["rounds"] >= 3 and cell["rerun_not_failed"] == 0.0
