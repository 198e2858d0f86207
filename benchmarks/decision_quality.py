"""How good are the gate's decisions? Simulated rounds through the gate's own code.

    python benchmarks/decision_quality.py [--runs N] [--seed S] [RECEIPT_DIR ...]

The noise model is fitted to recorded receipts (default: tests/data/receipts-v1 and
benchmarks/data/receipts, demo rounds on the 2-core node): per-rep log noise of each build, a slow random-walk drift
shared by both builds, heavy tails (Student t, 3 df), the candidate noisier than main.
Rounds are simulated pair by pair in the round's A B B A order and decided by
``console.core.sequential.trajectory`` (the stopping rule and verdict of a round) under
the demo profile's rules; the old fixed 5+5 design is decided side by side by its own
code (``console.core.legacy``), its threshold from a simulated 5-pair noise round.

Printed for true gains 0 / 2 / 5 / 10 / 20 %: the false-accept rate (alone and over up to
three reruns of the same candidate), the miss rate at the profile's smallest gain, how
often the tier is right, and the pairs a decision takes (mean and 95th percentile). Then
each claim check's false-refusal rate on honest simulated rounds and on the recorded ones,
and its catch rate on an inflated candidate (the demo's ``inflate``: 2.5× its real rate).
The last line is one JSON object with the headline figures.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from console.core import claims, legacy, sequential as S  # noqa: E402
from console.core.gate import Counted, counted, log_ratios  # noqa: E402
from console.core.receipt import Pins, Receipt, Rep  # noqa: E402
from console.core.verdict import BANDS  # noqa: E402
from console.profile import load_profile  # noqa: E402

GAINS = (0.0, 0.02, 0.05, 0.10, 0.20)
SOURCES = (ROOT / "tests" / "data" / "receipts-v1" / "receipts", ROOT / "benchmarks" / "data" / "receipts")
REAL_ENGINE = ROOT / "benchmarks" / "data" / "receipts-llama"     # honest real-engine rounds, for the claim checks
TAIL_DF = 3
CAND_NOISIER = 1.3          # used when the receipts cannot separate the two builds' noise
DRIFT_FLOOR = 0.005         # per rep: receipts show level changes of 10-20 % across a round; never model less


# --- the noise model -------------------------------------------------------------------

def fit(paths: list[Path]) -> tuple[dict, list[str]]:
    """Moment estimates from each round's timed reps in schedule order:
    Var(Δ main) = 2σm² + 2δ², Var(Δ cand) = 2σc² + 2δ², Var(pair) = σm² + σc² + δ²."""
    vdm = vdc = vp = 0.0
    ndm = ndc = np_ = 0
    used = []
    for p in paths:
        try:
            r = Receipt.from_dict(json.loads(p.read_text()))
        except Exception:
            continue
        ok = counted(r, r.rules)
        m = [math.log(x.value) for x in sorted(ok.valid.get(("main", "timed"), []), key=lambda x: x.index)]
        c = [math.log(x.value) for x in sorted(ok.valid.get(("candidate", "timed"), []), key=lambda x: x.index)]
        xs = log_ratios(ok)
        if len(xs) < 3 or len(m) < 3 or len(c) < 3:
            continue
        used.append(f"{p.stem[:12]} {r.kind} {r.host.get('cpu_model', '?')} {len(xs)} pairs")
        for arr, kind in ((np.diff(m), "m"), (np.diff(c), "c"), (np.asarray(xs), "p")):
            ss = float(((arr - arr.mean()) ** 2).sum())
            if kind == "m":
                vdm, ndm = vdm + ss, ndm + len(arr) - 1
            elif kind == "c":
                vdc, ndc = vdc + ss, ndc + len(arr) - 1
            else:
                vp, np_ = vp + ss, np_ + len(arr) - 1
    if not used:
        raise SystemExit("no recorded receipts with three or more pairs: give a directory of sealed receipts")
    vdm, vdc, vp = vdm / ndm, vdc / ndc, vp / np_
    drift2 = max((vdm + vdc) / 2 - vp, 0.0)
    sm2, sc2 = vdm / 2 - drift2, vdc / 2 - drift2
    if sm2 <= 0 or sc2 <= 0:     # the moments cannot separate the builds: split the pair noise
        sm2 = max(vp - drift2, 1e-6) / (1 + CAND_NOISIER ** 2)
        sc2 = sm2 * CAND_NOISIER ** 2
    return {"main_sd": math.sqrt(sm2), "cand_sd": math.sqrt(sc2),
            "drift_step": max(math.sqrt(drift2), DRIFT_FLOOR), "drift_fitted": math.sqrt(drift2),
            "pair_sd": math.sqrt(vp), "tail_df": TAIL_DF}, used


def loaded(model: dict, per_rep: float = 0.12) -> dict:
    """The same shape at a loaded node's per-rep noise (≈ 12 % on the 2-core node under load)."""
    k = per_rep / model["main_sd"]
    return {**model, "main_sd": per_rep, "cand_sd": model["cand_sd"] * k, "drift_step": model["drift_step"] * k,
            "drift_fitted": model["drift_fitted"] * k, "pair_sd": model["pair_sd"] * k}


def simulate(rng: np.random.Generator, model: dict, gain: float, pairs: int) -> tuple[np.ndarray, np.ndarray]:
    """Log values of main and candidate timed reps, pair k in A B B A order."""
    n = 2 * pairs
    t = rng.standard_t(model["tail_df"], n) / math.sqrt(model["tail_df"] / (model["tail_df"] - 2))
    drift = np.cumsum(rng.normal(0.0, model["drift_step"], n))
    first = np.arange(pairs) % 2 == 0                 # main first on even pairs
    mi = np.where(first, 2 * np.arange(pairs), 2 * np.arange(pairs) + 1)
    ci = np.where(first, 2 * np.arange(pairs) + 1, 2 * np.arange(pairs))
    main = drift[mi] + model["main_sd"] * t[mi]
    cand = drift[ci] + model["cand_sd"] * t[ci] + math.log1p(gain)
    return main, cand


# --- the two designs ---------------------------------------------------------------------

def sequential_round(rng, model, gain, design, bands, prior=()) -> S.Decision:
    main, cand = simulate(rng, model, gain, design.max_pairs)
    level = float(np.exp(np.median(main))) * 100
    steps = S.trajectory([*prior, list(cand - main)], design, S.Basis(level), bands)
    return next((d for d in steps if d.done), steps[-1])


def _counted(main_logs, cand_logs) -> Counted:
    def reps(build, logs):
        return [Rep(build=build, phase="timed", index=i, position=2 * i + (build == "candidate"),
                    value=float(math.exp(x) * 100), wall_s=1.0) for i, x in enumerate(logs)]
    return Counted({("main", "timed"): reps("main", main_logs), ("candidate", "timed"): reps("candidate", cand_logs)},
                   {"main": [], "candidate": []}, [], {})


def fixed_round(rng, model, gain, rules) -> tuple[str, str | None]:
    """The schema-1 design: 5+5 reps, threshold max(significance, a 5-pair noise round's spread)."""
    nm, nc = simulate(rng, model, 0.0, 5)
    spread = float(np.max(np.abs(np.exp(nc - nm) - 1)))
    main, cand = simulate(rng, model, gain, 5)
    _, not_significant, tier = legacy.decide_speed(_counted(main, cand), Pins(noise_spread=spread), rules, [])
    return ("none", None) if not_significant else ("accepted", tier)


# --- the tables ------------------------------------------------------------------------------

def tier_right(d: S.Decision, gain: float, bands) -> tuple[bool, bool]:
    """(right, exact): right when the truth is at or above the tier's lower edge and inside the
    span the verdict reports; exact when the tier is the truth's own band."""
    truth = S.band(gain, bands)
    top = d.span[1] if d.span else d.tier
    right = BANDS.index(d.tier) <= BANDS.index(truth) <= BANDS.index(top)
    return right, d.tier == truth


def decision_table(rng, model, rules, runs: int, label: str) -> dict:
    design, bands = S.Design.of(rules), rules.bands
    print(f"\n{label}: per-rep log SD main {model['main_sd']:.1%}, candidate {model['cand_sd']:.1%}, random-walk "
          f"drift {model['drift_step']:.1%}/rep (fitted {model['drift_fitted']:.1%}, floor {DRIFT_FLOOR:.1%}), "
          f"t{model['tail_df']} tails; pair SD {model['pair_sd']:.1%} in the receipts")
    print(f"design: α {design.false_accept:.0%} false accept, β {design.miss:.0%} miss at {design.min_gain:.1%}, "
          f"accept above {design.significance:.0%}, {design.min_pairs}–{design.max_pairs} pairs, c² {design.mixture:g}")
    print(f"{'true gain':>9} | {'accepted':>8} {'none':>6} {'slower':>6} {'undecided':>9} | {'tier ok':>7} "
          f"{'exact':>6} | {'pairs':>5} {'p95':>4} | {'5+5 acc':>7} {'5+5 tier':>8}")
    out = {"false_accept": None, "false_accept_reruns3": None, "miss_at_min_gain": None, "min_gain": design.min_gain,
           "tier_accuracy": {}, "expected_pairs": {}, "p95_pairs": {}, "undecided": {},
           "fixed_5x5": {"accepted": {}, "tier_accuracy": {}}}
    for gain in GAINS + ((design.min_gain,) if design.min_gain not in GAINS else ()):
        counts = {"accepted": 0, "none": 0, "slower": 0, "open": 0, "conflict": 0}
        right = exact = 0
        pairs = []
        fixed_acc = fixed_right = 0
        for _ in range(runs):
            d = sequential_round(rng, model, gain, design, bands)
            counts[d.state] += 1
            pairs.append(d.pairs)
            if d.state == "accepted":
                r, e = tier_right(d, gain, bands)
                right, exact = right + r, exact + e
            outcome, tier = fixed_round(rng, model, gain, rules)
            if outcome == "accepted":
                fixed_acc += 1
                fixed_right += tier == S.band(gain, bands)
        acc = counts["accepted"]
        key = f"{gain:.3f}".rstrip("0").rstrip(".")
        out["tier_accuracy"][key] = right / acc if acc else None
        out["expected_pairs"][key] = float(np.mean(pairs))
        out["p95_pairs"][key] = float(np.percentile(pairs, 95))
        out["undecided"][key] = counts["open"] / runs
        out["fixed_5x5"]["accepted"][key] = fixed_acc / runs
        out["fixed_5x5"]["tier_accuracy"][key] = fixed_right / fixed_acc if fixed_acc else None
        if gain == 0.0:
            out["false_accept"] = acc / runs
        if gain == design.min_gain:
            out["miss_at_min_gain"] = (counts["none"] + counts["slower"]) / runs
        tier_txt = f"{right / acc:7.1%} {exact / acc:6.1%}" if acc else f"{'-':>7} {'-':>6}"
        ftier = f"{fixed_right / fixed_acc:8.1%}" if fixed_acc else f"{'-':>8}"
        print(f"{gain:9.1%} | {acc / runs:8.1%} {counts['none'] / runs:6.1%} {counts['slower'] / runs:6.1%} "
              f"{counts['open'] / runs:9.1%} | {tier_txt} | {np.mean(pairs):5.1f} {np.percentile(pairs, 95):4.0f} | "
              f"{fixed_acc / runs:7.1%} {ftier}")
    # reruns: a candidate no faster than main, rerun after anything but acceptance, up to 3 rounds
    reruns = max(runs // 2, 200)
    hits = fixed_hits = 0
    for _ in range(reruns):
        prior: list[list[float]] = []
        for _k in range(3):
            main, cand = simulate(rng, model, 0.0, design.max_pairs)
            steps = S.trajectory([*prior, list(cand - main)], design, S.Basis(100.0), bands)
            d = next((x for x in steps if x.done), steps[-1])
            if d.state == "accepted":
                hits += 1
                break
            prior.append(list(cand - main)[:d.pairs])
        fixed_hits += any(fixed_round(rng, model, 0.0, rules)[0] == "accepted" for _k in range(3))
    out["false_accept_reruns3"] = hits / reruns
    out["fixed_5x5"]["false_accept_reruns3"] = fixed_hits / reruns
    print(f"false accept over up to 3 reruns (pooled): {hits / reruns:.2%} of {reruns}; "
          f"5+5 rerun 3 times: {fixed_hits / reruns:.1%}")
    print("tier ok: the truth is at or above the tier and inside the span reported with it; "
          "exact: the tier is the truth's band (10 % sits on the l edge)")
    return out


# --- claim checks ---------------------------------------------------------------------------------

def claim_round(rng, model, pairs: int, short_reps: int, inflate: float = 1.0, pad_s: float = 0.0):
    """Wall times of one build: start-up, then tokens at its real rate, noisy; the engine
    reports tokens / its own elapsed (inflated by ``inflate``)."""
    rate, start, tokens, short = 120.0, 0.45, 192, 48

    def rep(phase, i, n):
        real = n / rate * math.exp(model["main_sd"] * rng.standard_t(TAIL_DF) / math.sqrt(3))
        wall = start * math.exp(0.05 * rng.standard_normal()) + real + (pad_s if phase == "short" else 0.0)
        return Rep(build="candidate", phase=phase, index=i, position=i, tokens=n, value=n / real * inflate,
                   wall_s=wall)
    return ([rep("timed", i, tokens) for i in range(pairs)], [rep("short", i, short) for i in range(short_reps)])


def claims_table(rng, model, rules, runs: int, recorded: list[Path]) -> dict:
    print(f"\nclaim checks at {rules.claim_false_refusal:.1%} per check (differential margin "
          f"{rules.differential_margin:.0%}, overhead margin {rules.overhead_margin:.0%})")
    out = {}
    for name, kw in (("honest", {}), ("inflate", {"inflate": 2.5}), ("inflate+padded", {"inflate": 2.5, "pad_s": 0.9})):
        diff = over = old = 0
        for _ in range(runs):
            main = claim_round(rng, model, 12, 4)
            cand = claim_round(rng, model, 12, 4, **kw)
            diff += claims.differential(*cand, rules)[1] is not None
            over += claims.overhead_problem(main, cand, rules)[1] is not None
            old += legacy.differential(cand[0][:5], cand[1][:2], rules)[1] is not None
        out[name] = {"differential": diff / runs, "overhead": over / runs, "old_differential": old / runs}
        print(f"  {name:15} differential refuses {diff / runs:7.2%}  overhead {over / runs:7.2%}   "
              f"(schema-1 point check, 5+2 reps: {old / runs:6.2%})")
    refused, seen = [], 0
    for p in recorded:
        try:
            r = Receipt.from_dict(json.loads(p.read_text()))
        except Exception:
            continue
        c = counted(replace(r, schema="bench-console/receipt/2"), r.rules)
        if r.kind not in ("round", "noise") or not c.valid.get(("main", "timed")):
            continue
        honest = ["main"] + (["candidate"] if "inflate" not in json.dumps(r.builds.get("candidate").source
                                                                           if r.builds.get("candidate") else {}) else [])
        for b in honest:
            seen += 1
            if any(x.code == "claim-differential" for x in c.problems[b]):
                refused.append(f"{p.stem[:12]} {b}")
    out["recorded_honest_builds"] = seen
    out["recorded_refused"] = refused
    print(f"  recorded honest builds refused by the differential: {len(refused)} of {seen}"
          + (f" ({', '.join(refused)})" if refused else ""))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=20261203)
    ap.add_argument("--profile", type=Path, default=ROOT / "profiles" / "demo.toml")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    rules = load_profile(args.profile).gate
    paths = sorted(p for d in (args.dirs or SOURCES) if d.exists() for p in d.glob("*.json"))
    model, used = fit(paths)
    print(f"noise model from {len(used)} recorded receipt(s):")
    for u in used:
        print(f"  {u}")
    result = decision_table(rng, model, rules, args.runs, "recorded node")
    heavy = decision_table(rng, loaded(model), rules, max(args.runs // 2, 500), "loaded node (per-rep SD 12 %)")
    result["loaded"] = {k: heavy[k] for k in ("false_accept", "false_accept_reruns3", "miss_at_min_gain",
                                             "tier_accuracy", "expected_pairs")}
    result["claims"] = claims_table(rng, model, rules, args.runs, paths + sorted(REAL_ENGINE.glob("*.json")))
    result["model"] = model
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
