"""How often does `console bisect` name the wrong item? Simulated bisections through the real loop.

    python benchmarks/bisect_quality.py [--runs N] [--seed S] [--items N] [--sd SD]

Each simulated bisection is a real ``console.bisect.Bisection`` (the loop `console bisect` runs:
the ends' round, ``core.bisection.next_probe``, the marks, the check against the bad end, the
rate split) whose step runner is the decision benchmark's simulated round: the runner's own
timed loop (``Speed.timed_pairs``, ``core.decisions.speed.progress`` after every pair) answers with Gaussian pairs
at the pair SD given, and ``gate.decide`` re-derives each step's verdict from its receipt, as
``bisect.rounds`` does for a real step. Only the engine is simulated.

Scenarios over ``--items`` items (16, as the demo repository), the change's place drawn at random:

- ``one 10%``: one item makes the metric 10 % slower; right = found, at that item;
- ``one 6%``: the same at 6 %;
- ``two 6%``: two items 6 % slower each; right = not-one-step (found would name one of two);
- ``flat``: nothing changes; right = not-one-step at the ends (found is a false alarm).

Printed per scenario: how often each result came out, the wrong-answer rate (found at another
item, or found where there is nothing to find) against the stated rate, and the rounds and pairs
a bisection took. The last line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import decision_quality as DQ  # noqa: E402
from console.bisect import Bisection, Config  # noqa: E402
from console.bisect.rounds import _figures  # noqa: E402
from console.core.provenance.bisection import Step  # noqa: E402
from console.engine.ranges import Item  # noqa: E402
from console.profile import Source, load_profile  # noqa: E402

SCENARIOS = {"one 10%": (-0.10,), "one 6%": (-0.06,), "two 6%": (-0.06, -0.06), "flat": ()}


class SimulatedSteps:
    """A StepRunner whose rounds run the runner's loop on simulated pairs: item i's level is the
    product of the changes at or before it."""

    def __init__(self, rng: np.random.Generator, sd: float, changes: dict[int, float], work: Path):
        self.rng, self.sd, self.changes, self.work = rng, sd, changes, work
        self.pairs = 0

    def level(self, i: int) -> float:
        return sum(math.log1p(g) for at, g in self.changes.items() if i >= at)

    def __call__(self, profile, main: Item, candidate: Item, title: str) -> Step:
        i, j = int(main.label), int(candidate.label)
        gain = math.expm1(self.level(j) - self.level(i))
        n = profile.gate.max_pairs + 8
        draws = DQ.pair_draws(self.rng, "gauss", self.sd, gain, n, n)
        _, receipt = DQ.simulate_round(profile, self.work, draws, {"main": f"t{i}", "candidate": f"t{j}"})
        base = Step(role="", item=0, against=0, outcome="infra")
        step = _figures(receipt, base, f"sim-{i}-{j}", receipt.round_id, "")
        self.pairs += step.pairs
        return step


def one_bisection(rng, profile, n: int, sd: float, changes: tuple[float, ...], work: Path) -> tuple[str, bool, int, int]:
    """(result, right, rounds, pairs) of one simulated bisection."""
    places = sorted(rng.choice(np.arange(1, n), size=len(changes), replace=False).tolist()) if changes else []
    at = dict(zip(places, changes))
    items = [Item(Source(path=str(work)), str(i)) for i in range(n)]
    steps = SimulatedSteps(rng, sd, at, work)
    rec = Bisection(Config(profile=profile, items=items, out_dir=work, write=False), steps, say=lambda _: None).run()
    if len(changes) == 1:
        right = rec.result == "found" and rec.first_bad == places[0]
    else:
        right = rec.result != "found"
    return rec.result or "?", right, len(rec.steps), steps.pairs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--items", type=int, default=16)
    ap.add_argument("--sd", type=float, default=0.05, help="pair noise, log SD (default 0.05: this 2-core node)")
    ap.add_argument("--error-rate", type=float, default=0.05)
    a = ap.parse_args()
    profile = load_profile(ROOT / "profiles" / "demo.toml")
    rng = np.random.default_rng(a.seed)
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, changes in SCENARIOS.items():
            results: Counter[str] = Counter()
            right = wrong = rounds = pairs = 0
            for k in range(a.runs):
                work = Path(tmp) / f"{name.replace(' ', '-').replace('%', '')}-{k}"
                work.mkdir()
                result, ok, r, p = one_bisection(rng, profile, a.items, a.sd, changes, work)
                results[result] += 1
                right += ok
                wrong += (result == "found") and not ok     # a named item that is not the change
                rounds += r
                pairs += p
            row = {"results": {k2: v / a.runs for k2, v in results.items()}, "right": right / a.runs,
                   "wrong": wrong / a.runs, "rounds": rounds / a.runs, "pairs": pairs / a.runs}
            out[name] = row
            print(f"{name:8s}  {', '.join(f'{k2} {v:.1%}' for k2, v in sorted(row['results'].items()))}; "
                  f"right {row['right']:.1%}, wrong answer {row['wrong']:.1%} (stated <= {a.error_rate:.0%}); "
                  f"{row['rounds']:.1f} rounds, {row['pairs']:.0f} pairs a bisection", flush=True)
    print(json.dumps({"runs": a.runs, "items": a.items, "sd": a.sd, "error_rate": a.error_rate, "scenarios": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
