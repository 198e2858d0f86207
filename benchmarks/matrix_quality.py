"""How good are a matrix round's decisions? Simulated matrix rounds through the round's own loop.

    python benchmarks/matrix_quality.py [--runs N] [--seed S] [--sd 0.03] [--cells 4 8]

Each simulated round is a real ``console.round.Round`` of a matrix profile (demo-matrix.toml with
its cells replaced by 4 or 8 depths): the matrix kind's loop (``round.cells.CellPairs``: every
open cell each pair, in rotating order, ``core.decisions.cells.matrix_progress`` after each pair, decided cells
dropped) asks for reps, a fake ``run`` answers each with a simulated rep of that cell (the claim
checks accept it), and ``gate.decide`` gives the verdict (benchmarks/decision_quality.py's rep
maker, so the claims are the same).

Printed per scenario: the round's outcomes, the family-wise false accept (any cell accepted when
every cell's true gain is ``significance``: the bar), the per-cell miss (a cell decided ``none`` or
``slower``) when every cell's true gain is ``min_gain``, and the pairs each cell ran; then the pairs
per cell against one cell decided alone (the 1-cell scenarios: a matrix of one cell, decided at the
profile's own rates through the same loop). Noise: iid Gaussian, or AR(1) ρ 0.3 within each
cell's pairs (the node's state carries from pair to pair), with a shared per-pair component across
cells (the cells of one pair share the node). The last line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from decision_quality import LEVEL, _parity, _rep  # noqa: E402

from console.core.decisions import gate  # noqa: E402
from console.core.records.matrix import Cell, MatrixSpec  # noqa: E402
from console.core.records.receipt import Build, Pins, Receipt  # noqa: E402
from console.core.records.verdict import VerdictRecord  # noqa: E402
from console.profile import load_profile  # noqa: E402
from console.round.cells import CellPairs  # noqa: E402
from console.round.plan import RoundConfig  # noqa: E402
from console.round.schedule import schedule_head
from console.round.runner import Round  # noqa: E402

RHO = 0.3
SHARED = 0.5        # share of a pair's noise variance common to every cell of the pair


def profile_with(cells: int) -> Any:
    """demo-matrix with ``cells`` scored cells (depths … 3584, 4096; the home cell is 4096): one cell
    is a one-cell round at the profile's own rates, through the same loop."""
    p = load_profile(ROOT / "profiles" / "demo-matrix.toml")
    depths = [4096 - 512 * i for i in range(cells)][::-1]
    made = tuple(Cell(key=f"depth={d}", axes=(("depth", str(d)),), depth=d, tokens=p.bench.tokens,
                      metric=p.bench.metric) for d in depths)
    return replace(p, matrix=MatrixSpec(axes=("depth",), cells=made, home="depth=4096"),
                   gate=replace(p.gate, max_minutes=0.0))


def draws(rng: np.random.Generator, cells: int, pairs: int, sd: float, gain: float, rho: float) -> np.ndarray:
    """log(candidate / main) noise per (cell, pair): AR(1) with ``rho`` along each cell's pairs, a
    share ``SHARED`` of its variance common to the cells of the same pair; stationary SD ``sd``."""
    def ar(shape: tuple[int, ...]) -> np.ndarray:
        z = rng.normal(0.0, 1.0, shape)
        e = np.empty(shape)
        e[..., 0] = z[..., 0]
        for k in range(1, shape[-1]):
            e[..., k] = rho * e[..., k - 1] + math.sqrt(1 - rho * rho) * z[..., k]
        return e
    common, own = ar((pairs,)), ar((cells, pairs))
    noise = sd * (math.sqrt(SHARED) * common[None, :] + math.sqrt(1 - SHARED) * own)
    return math.log1p(gain) + noise


def simulate(profile: Any, out: Path, x: np.ndarray, rng: np.random.Generator) -> tuple[str, Receipt]:
    """One matrix round whose cell i, pair k measures log ratio x[i, k]: the matrix loop decides
    when each cell stops; returns (outcome, receipt)."""
    rnd = Round(RoundConfig(profile=profile, main=None, candidate=None, out_dir=out))
    receipt = Receipt(round_id=f"sim-{time.monotonic_ns()}", kind="matrix", started_at="2026-12-06T00:00:00Z",
                      profile=profile.record(), lock=Pins(), parity=_parity(profile),
                      builds={"main": Build(source={"path": "sim"}, tree_sha256="m" * 64),
                              "candidate": Build(source={"path": "sim"}, tree_sha256="c" * 64)})
    index = {c.phase: i for i, c in enumerate(profile.matrix.cells)}
    main_level = rng.normal(0.0, 0.01, x.shape)

    def run(items: list[Any]) -> None:
        for item in items:
            i = index.get(item.phase, len(index) - 1)      # warm-ups and short runs: the home cell's shape
            k = item.index % x.shape[1]
            log = main_level[i, k] + (x[i, k] if item.build == "candidate" and item.phase in index else 0.0)
            receipt.reps.append(_rep(item, LEVEL * math.exp(log)))

    stage = rnd.speed_stage()      # a matrix round's: its pairs are round.cells.CellPairs's loop
    assert isinstance(stage.timed_pairs.__self__, CellPairs)
    head = schedule_head(profile)
    run(head)
    stage.timed_pairs(receipt, run, len(head), {})
    receipt.verdict = VerdictRecord.of(gate.decide(receipt, profile.gate))
    return receipt.verdict.outcome.value, receipt


def scenario(rng, cells: int, gain: float, rho: float, sd: float, runs: int, work: Path) -> dict[str, Any]:
    profile = profile_with(cells)
    g = profile.gate
    budget = g.max_pairs
    outcomes: dict[str, int] = {}
    any_accept = miss = cell_count = 0
    pairs = []
    for _ in range(runs):
        x = draws(rng, cells, budget, sd, gain, rho)
        outcome, r = simulate(profile, work, x, rng)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        rows = (r.verdict.speed.get("matrix") or {}).get("cells") or []
        any_accept += any(c["state"] == "accepted" for c in rows)
        miss += sum(c["state"] in ("none", "slower") for c in rows)
        cell_count += len(rows)
        pairs += [int(c["pairs"]) for c in rows]
    res = {"cells": cells, "gain": gain, "rho": rho, "sd": sd, "runs": runs,
           "outcomes": {k: v / runs for k, v in sorted(outcomes.items())},
           "any_cell_accepted": any_accept / runs, "cell_miss": miss / max(cell_count, 1),
           "pairs_per_cell": float(np.mean(pairs)), "false_accept_per_cell": g.false_accept / cells}
    shown = " ".join(f"{k} {v:.1%}" for k, v in res["outcomes"].items())
    print(f"{cells} cells, true gain {gain:+.1%} in every cell, ρ {rho}: {shown} | any cell accepted "
          f"{res['any_cell_accepted']:.2%} | cell none or slower {res['cell_miss']:.2%} | pairs per cell "
          f"{res['pairs_per_cell']:.1f}", flush=True)
    return res


def _one(job: tuple[int, int, float, float, float, int]) -> dict[str, Any]:
    seed, cells, gain, rho, sd, runs = job
    with tempfile.TemporaryDirectory(prefix="matrix-quality-") as tmp:
        return scenario(np.random.default_rng(seed), cells, gain, rho, sd, runs, Path(tmp))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=800, help="rounds per false-accept scenario (the bar: 2 %%); "
                                                          "half that at min_gain, a quarter at 6 and 10 %%")
    ap.add_argument("--seed", type=int, default=20261206)
    ap.add_argument("--sd", type=float, default=0.03, help="pair noise (log SD) of every cell")
    ap.add_argument("--cells", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--jobs", type=int, default=1, help="scenarios run at once (processes)")
    args = ap.parse_args()
    base = load_profile(ROOT / "profiles" / "demo-matrix.toml").gate
    print(f"α {base.false_accept:.0%} false accept for the family (split over the cells), β {base.miss:.0%} per "
          f"cell at ±{base.min_gain:.1%}, significance {base.significance:.0%}, {base.max_pairs} pairs at most; "
          f"pair SD {args.sd:.1%}", flush=True)
    started = time.monotonic()
    plan = [(base.significance, 0.0, args.runs), (base.min_gain, 0.0, args.runs // 2),
            (base.significance, RHO, args.runs), (base.min_gain, RHO, args.runs // 2),
            (0.06, 0.0, args.runs // 4), (0.10, 0.0, args.runs // 4)]
    jobs = [(args.seed + i, cells, gain, rho, args.sd, runs)
            for i, (cells, (gain, rho, runs)) in enumerate((c, x) for c in args.cells for x in plan)]
    if args.jobs > 1:
        from multiprocessing import Pool
        with Pool(args.jobs) as pool:
            results = pool.map(_one, jobs, chunksize=1)
    else:
        results = [_one(j) for j in jobs]
    print("\npairs per cell against one cell decided alone (the 1-cell rows: the profile's own rates)")
    alone = {(r["gain"], r["rho"]): r["pairs_per_cell"] for r in results if r["cells"] == 1}
    for r in results:
        if r["cells"] > 1 and (r["gain"], r["rho"]) in alone:
            print(f"  {r['cells']} cells at {r['gain']:+.1%}, ρ {r['rho']}: {r['pairs_per_cell']:.1f} pairs per cell, "
                  f"{r['pairs_per_cell'] / alone[(r['gain'], r['rho'])]:.2f}x one cell alone")
    print(f"\n{time.monotonic() - started:.0f} s")
    print(json.dumps({"scenarios": results}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
