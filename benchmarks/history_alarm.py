"""Does `console history --fail-on regression` fire when main regressed, and only then?

    python benchmarks/history_alarm.py [--dirs N] [--rounds R] [--seed S] [--jobs J] [--keep DIR]

Results directories are made of sealed rounds: each round is the decision benchmark's simulated
round, run through the round's own loop (``decision_quality.simulate_round``); its main's level
drifts from round to round (log SD 3 %) on top of its reps' noise. A serving directory's rounds are
the same rounds with each timed rep made a serving block (its throughput, TTFT p99 and ITL p99; the
tails drift 3 % a round and 5 % a block) and sealed with ``results.store.seal_into``. Every
directory is then judged by `console history DIR --fail-on regression --format json` itself
(``console.cli.main``), its exit code counted.

Printed: the alarm on a demo directory whose main steps down 8 % half-way and on a serving
directory whose main's TTFT p99 steps up 15 % half-way (each names its series, its size with its
interval and the rounds either side); then the share of flat directory pairs (a demo and a serving
directory judged together: 5 series, one family) on which the alarm fired, with its 95 % Wilson
interval, against the stated alpha. The last line is one JSON object.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

DRIFT = 0.03            # main's round-to-round level, log SD
BLOCK_SD = 0.05         # a serving block's latency tail around its round's, log SD
REP_SD = 0.04


def _profile():
    from console.profile import load_profile
    return load_profile(ROOT / "profiles" / "demo.toml")


def _round(profile, out: Path, rng, k: int, shift: float, seal: bool):
    import decision_quality as DQ
    n = profile.gate.max_pairs + 8
    main, cand = DQ.pair_draws(rng, "gauss", REP_SD, 0.0, n, n)
    level = rng.normal(0.0, DRIFT) + shift
    return DQ.simulate_round(profile, out, (main + level, cand + level),
                             {"main": f"main-{out.name}-{k}", "candidate": f"cand-{out.name}-{k}"}, seal=seal)[1]


def demo_dir(out: Path, rng, rounds: int, step: float = 0.0) -> Path:
    """``rounds`` sealed demo rounds; main ``step`` (a fraction) off from half-way on."""
    profile = _profile()
    for k in range(rounds):
        _round(profile, out, rng, k, math.log1p(step) if k >= rounds // 2 else 0.0, seal=True)
    return out


def serving_dir(out: Path, rng, rounds: int, ttft_step: float = 0.0) -> Path:
    """``rounds`` sealed serving rounds; main's TTFT p99 ``ttft_step`` off from half-way on."""
    from console.results import store
    profile = _profile()
    for k in range(rounds):
        r = _round(profile, out, rng, k, 0.0, seal=False).to_dict()
        ttft = 120.0 * math.exp(rng.normal(0.0, DRIFT) + (math.log1p(ttft_step) if k >= rounds // 2 else 0.0))
        itl = 30.0 * math.exp(rng.normal(0.0, DRIFT))
        r.update(round_id=f"2026120{1 + k // 100}T{k:06d}Z-{k:06x}", verdict=None, summary=None)
        r["profile"].update(name="llama-server", bench={**r["profile"]["bench"], "mode": "serve",
                                                        "metric": "output_tok_s"}, server={"concurrency": 2, "rate": 0.0})
        r["reps"] = [x for x in r["reps"] if x["phase"] in ("warmup", "timed")]     # a serving round's blocks
        for x in r["reps"]:
            x.update(context="serve", depth=0)
            x["reported"] = {**x["reported"], "output_throughput": x["value"],
                             "p99_ttft_ms": ttft * math.exp(rng.normal(0.0, BLOCK_SD)),
                             "p99_itl_ms": itl * math.exp(rng.normal(0.0, BLOCK_SD))}
        store.seal_into(out, {k2: v for k2, v in r.items() if v is not None},
                        sealed_at=f"2026-12-01T{k // 60:02d}:{k % 60:02d}:00Z")
    return out


def judged(*dirs: Path) -> tuple[int, list[dict]]:
    """`console history DIRS --fail-on regression --format json`: its exit code and its alarm rows."""
    from console.cli import main as cli
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = cli(["history", *map(str, dirs), "--fail-on", "regression", "--format", "json"])
    return code, json.loads(buf.getvalue()).get("alarm", [])


def _flat_pair(job: tuple[int, int, str]) -> int:
    seed, rounds, work = job
    rng = np.random.default_rng(seed)
    where = Path(tempfile.mkdtemp(dir=work))
    code, _ = judged(demo_dir(where / "demo", rng, rounds), serving_dir(where / "serve", rng, rounds))
    return code


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def _say_alarm(what: str, code: int, rows: list[dict]) -> None:
    print(f"{what}: exit {code}", flush=True)
    for r in rows:
        print(f"  {'FIRING' if r['firing'] else 'moved'} {r['series']}: {r['finding']} {r['change']:+.1%} "
              f"[{r['low']:+.1%}, {r['high']:+.1%}], {r['before']} rounds before, {r['after']} since "
              f"{r['first_after']} (the last before {r['last_before']})", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dirs", type=int, default=200, help="flat directory pairs to judge")
    ap.add_argument("--rounds", type=int, default=16, help="rounds in each directory")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep", type=Path, help="make the two stepped directories here (kept)")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="history-alarm-"))
    keep = a.keep or work
    rng = np.random.default_rng(a.seed)
    doc: dict = {"rounds": a.rounds, "dirs": a.dirs, "alpha": 0.01}
    code, rows = judged(demo_dir(keep / "demo-stepped", rng, a.rounds, -0.08))
    _say_alarm(f"demo, main 8 % slower from round {a.rounds // 2} ({keep / 'demo-stepped'})", code, rows)
    doc["demo_stepped"] = {"exit": code, "alarm": rows}
    code, rows = judged(serving_dir(keep / "serve-stepped", rng, a.rounds, 0.15))
    _say_alarm(f"serving, main's TTFT p99 15 % higher from round {a.rounds // 2} ({keep / 'serve-stepped'})", code, rows)
    doc["serve_stepped"] = {"exit": code, "alarm": rows}
    jobs = [(a.seed * 100_000 + i, a.rounds, str(work)) for i in range(a.dirs)]
    with ProcessPoolExecutor(a.jobs) as pool:
        codes = list(pool.map(_flat_pair, jobs, chunksize=4))
    fired = sum(c == 1 for c in codes)
    low, high = wilson(fired, len(codes))
    print(f"flat: {fired} of {len(codes)} directory pairs (5 series each, {a.rounds} rounds) raised the alarm: "
          f"{fired / len(codes):.2%} [95 % {low:.2%}, {high:.2%}], stated at most 1 % over the family", flush=True)
    doc["flat"] = {"fired": fired, "judged": len(codes), "rate": fired / len(codes), "wilson95": [low, high],
                   "other_exits": sorted({c for c in codes if c not in (0, 1)})}
    print(json.dumps(doc, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
