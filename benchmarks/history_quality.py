"""How often does `console history` see a change that is not there, and find one that is?

    python benchmarks/history_quality.py [--runs N] [--seed S] [--sd SD] [--ledger DIR]

Series of main's per-round figures are simulated as a round makes them: each round's point is the
geometric mean of main's timed reps (``core.history.point_of``), and rounds differ from each other
by the node's round-to-round drift (log SD ``--sd``, 3 % by default) on top of their reps' noise.
Every series goes through ``core.changepoints.detect`` with `console history`'s default rules.

Printed: the false-alarm rate (any change point in a flat series) at 16, 24 and 48 rounds against
the stated alpha; the detection rate of an 8 % step half-way and how often the change point is
placed exactly there; and, with ``--ledger DIR``, a results directory of 24 sealed rounds made by
the round's own loop and seal (the decision benchmark's simulated rounds, main 8 % slower from
round 12 on), then `console history DIR`'s series and change points read back from its ledger
(``core.history.series_of``, as the command reads it). The last line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from console.core.statistics import changepoints as cp  # noqa: E402

REPS = 16           # main's timed reps in a round (the demo's rounds count 10 to 30)
REP_SD = 0.04       # one rep's log noise around the round's level


def series(rng: np.random.Generator, n: int, sd: float, step: float = 0.0, at: int | None = None) -> list[float]:
    """n rounds' points: each the geometric mean of REPS reps around that round's level."""
    level = rng.normal(0.0, sd, n)
    if at is not None:
        level[at:] += math.log1p(step)
    reps = rng.normal(0.0, REP_SD, (n, REPS))
    return [100.0 * math.exp(level[k] + reps[k].mean()) for k in range(n)]


def rates(rng: np.random.Generator, runs: int, sd: float, rules: cp.Rules) -> dict:
    out: dict = {"false_alarm": {}, "step_8pct": {}}
    for n in (16, 24, 48):
        alarms = sum(bool(cp.detect(series(rng, n, sd), rules)) for _ in range(runs))
        out["false_alarm"][n] = alarms / runs
        found = exact = 0
        for _ in range(runs):
            cps = cp.detect(series(rng, n, sd, -0.08, n // 2), rules)
            found += bool(cps)
            exact += any(c.at == n // 2 for c in cps)
        out["step_8pct"][n] = {"found": found / runs, "at_the_step": exact / runs}
    return out


def make_ledger(out: Path, seed: int, sd: float, rounds: int = 24, at: int = 12) -> None:
    """``rounds`` sealed simulated rounds of the demo profile in ``out``: main 8 % slower from ``at``."""
    import decision_quality as DQ
    from console.profile import load_profile
    profile = load_profile(ROOT / "profiles" / "demo.toml")
    rng = np.random.default_rng(seed)
    n = profile.gate.max_pairs + 8
    for k in range(rounds):
        main, cand = DQ.pair_draws(rng, "gauss", REP_SD, 0.0, n, n)
        shift = rng.normal(0.0, sd) + (math.log1p(-0.08) if k >= at else 0.0)
        DQ.simulate_round(profile, out, (main + shift, cand + shift), {"main": f"main-{k}", "candidate": f"cand-{k}"},
                          seal=True)


def read_back(out: Path, rules: cp.Rules) -> dict:
    from console.core.provenance.history import series_of
    from console.results.saved import select_sources
    h = series_of(select_sources([out]), rules)
    return {"series": len(h.series), "changes": [
        {"at": c.point.at, "change": c.point.change, "low": c.point.low, "high": c.point.high, "p": c.point.p}
        for s in h.series for c in s.changes]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--sd", type=float, default=0.03, help="round-to-round drift of main's level (log SD)")
    ap.add_argument("--ledger", type=Path, help="also write a results directory of sealed rounds here and read it back")
    a = ap.parse_args()
    rules = cp.Rules()
    rng = np.random.default_rng(a.seed)
    got = rates(rng, a.runs, a.sd, rules)
    for n, fa in got["false_alarm"].items():
        st = got["step_8pct"][n]
        print(f"{n:3d} rounds: false alarm {fa:.2%} (stated <= {rules.alpha:.0%}); an 8 % step half-way found "
              f"{st['found']:.1%}, at the step exactly {st['at_the_step']:.1%}", flush=True)
    doc = {"runs": a.runs, "sd": a.sd, "rules": vars(rules) if hasattr(rules, "__dict__") else str(rules), **got}
    if a.ledger:
        make_ledger(a.ledger, a.seed, a.sd)
        doc["ledger"] = read_back(a.ledger, rules)
        for c in doc["ledger"]["changes"]:
            print(f"ledger {a.ledger}: change point at round {c['at']}: {c['change']:+.1%} "
                  f"[{c['low']:+.1%}, {c['high']:+.1%}], p {c['p']:.2g}")
    print(json.dumps(doc, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
