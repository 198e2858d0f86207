"""How good are the gate's decisions? Simulated rounds through the round's own decision path.

    python benchmarks/decision_quality.py [--runs N] [--seed S] [--quick] [RECEIPT_DIR ...]

Each simulated round is a real ``console.round.Round`` whose runtime is replaced by a noise
model: the runner's own loop (``Speed.timed_pairs``: ``speed.progress`` after every pair, the
settle budget, the stop) asks for pairs, a fake ``run`` answers each scheduled rep with a
self-consistent simulated ``Rep``, and ``gate.decide`` gives the verdict, step-change check
included. Reruns are real too: each round is sealed into a real ledger (``Round.seal_verdict``)
and the next round of the same experiment finds it through ``Round._earlier_rounds`` and
``Speed.plan`` (``reruns.look_back``), as ``console run`` does.

Noise models, on the pair scale (x = log candidate/main), at the node's fitted pair SD (the
pooled within-round SD of the recorded receipts' log ratios) and at 3 %, a quiet node:

- ``gauss``: iid Gaussian; ``t3``: iid Student t with 3 df, scaled to the same SD;
- ``ar1``: AR(1)-correlated pairs (ρ 0.3), stationary SD the same;
- ``dips``: Gaussian pairs, and each rep of either build loses U(5 %, 25 %) of its rate with
  chance 0.04 (a neighbour's burst; at a 3 % base the pairs' SD is about 1.8x their MAD);
- ``step``: iid Gaussian, and main 5 % slower from the middle of the pair budget on.

The rates are stated for every model (the step's false accept is read against the gain before
the step). Printed per true gain: the outcomes, tier accuracy and the
pairs the round ran; then the false accept over up to three pooled reruns; then whether a
regression decided `slower` beside a step change stops its rerun with exit 1; then the pairs to
a decision with no budget against Wald's SPRT with the noise known (simulated at the same
rates and gains: the best any design can do); then each claim check's false-refusal rate on
honest simulated and recorded rounds and its catch rate on an inflated candidate (the demo's
``inflate``: 2.5x its real rate). The last line is one JSON object.
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

from console.core.decisions import claims, counting, gate, legacy
from console.core.statistics import sequential as S  # noqa: E402
from console.core.records.parity import DepthFigures  # noqa: E402
from console.core.records.receipt import SCHEMA, Build, ParityRecord, ParitySide, Pins, Receipt, Rep, plain  # noqa: E402
from console.core.records.verdict import BANDS, VerdictRecord  # noqa: E402
from console.profile import load_profile  # noqa: E402
from console.round.plan import RoundConfig  # noqa: E402
from console.round.schedule import schedule_head, schedule_tail
from console.round.runner import Round  # noqa: E402

SOURCES = (ROOT / "tests" / "data" / "receipts-v1" / "receipts", ROOT / "benchmarks" / "data" / "receipts")
REAL_ENGINE = ROOT / "benchmarks" / "data" / "receipts-llama"     # honest real-engine rounds, for the claim checks
TAIL_DF = 3
GAINS = (-0.10, -0.035, 0.0, 0.02, 0.035, 0.05, 0.10, 0.20)
SPRT_GAINS = (-0.10, -0.035, 0.0, 0.035, 0.05, 0.10, 0.20)     # the indifference zone (0, 2 %] has no SPRT
MODELS = ("gauss", "t3", "dips", "ar1", "step")
DIP_CHANCE, DIP_RANGE = 0.04, (0.05, 0.25)
QUIET_SD = 0.03
RHO = 0.3
STEP = 0.05
LEVEL = 100.0               # main's rate (tok/s); the simulated runs are self-consistent around it
OVERHEAD_S = 0.4            # a rep's fixed cost outside the engine's own timing


# --- the noise --------------------------------------------------------------------------

def fitted_pair_sd(paths: list[Path]) -> tuple[float, int]:
    """The pooled within-round SD of log(candidate/main) over recorded rounds (the gate's pairs)."""
    rounds = []
    for p in paths:
        try:
            r = Receipt.from_dict(json.loads(p.read_text()))
        except Exception:
            continue
        if r.kind == "round":
            rounds.append(counting.log_ratios(counting.counted(r, r.rules)))
    found = S.pair_noise(rounds)
    if found is None:
        raise SystemExit("no recorded rounds with two or more pairs: give a directory of sealed receipts")
    return found.sd, found.df


def pair_draws(rng: np.random.Generator, model: str, sd: float, gain: float, n: int,
               step_at: int) -> tuple[np.ndarray, np.ndarray]:
    """(main, candidate) log levels of n pairs whose log ratios follow ``model``."""
    if model == "t3":
        e = rng.standard_t(3, n) * sd / math.sqrt(3.0)
    elif model == "ar1":
        z = rng.normal(0.0, sd, n)
        e = np.empty(n)
        e[0] = z[0]
        for k in range(1, n):
            e[k] = RHO * e[k - 1] + math.sqrt(1 - RHO * RHO) * z[k]
    else:
        e = rng.normal(0.0, sd, n)
    main = rng.normal(0.0, sd / 2, n)
    if model == "step":
        main[step_at:] += math.log1p(-STEP)
    cand = main + math.log1p(gain) + e
    if model == "dips":             # each rep of each build may dip, independently of the other's
        main, cand = main + _dips(rng, n), cand + _dips(rng, n)
    return main, cand


def _dips(rng: np.random.Generator, n: int) -> np.ndarray:
    """Log losses of n reps: U(DIP_RANGE) of the rate with chance DIP_CHANCE each."""
    hit = rng.random(n) < DIP_CHANCE
    return np.where(hit, np.log1p(-rng.uniform(*DIP_RANGE, n)), 0.0)


# --- one simulated round through the runner ------------------------------------------------

def _rep(item: Any, value: float) -> Rep:
    """A run the claim checks accept: the engine's elapsed is tokens / value, the wall clock adds
    a fixed cost, and a seeked cache is resident."""
    elapsed = item.tokens / value
    return Rep(build=item.build, phase=item.phase, index=item.index, position=item.position, depth=item.depth,
               tokens=item.tokens, context=item.context, status="ok", exit_code=0,
               wall_s=OVERHEAD_S + elapsed, value=value,
               reported={"metric": "decode_tok_s", "value": value, "tokens": item.tokens, "elapsed_s": elapsed,
                         "depth": item.depth, "context": item.context, "shortcut": "seek"},
               peak_mem_bytes=item.depth * 4096 + 8 * 2**20)


def _parity(p: Any) -> ParityRecord:
    same = [DepthFigures(d, 1.0, 0.0, 3.1, math.log(p.parity.vocab)) for d in p.parity.depths]
    return ParityRecord(reference={"depths": list(p.parity.depths)}, main=ParitySide(depths=same),
                        candidate=ParitySide(depths=list(same)))


class Tree:
    """What ``Round._earlier_rounds`` reads of a source snapshot: its tree hash."""
    def __init__(self, sha: str):
        self.record = {"tree_sha256": sha}


def rerun_stopped(profile: Any, out: Path, trees: dict[str, str], rnd: Round | None = None) -> int | None:
    """The exit code a round of ``trees`` ends with at once when the ledger in ``out`` already
    decided the experiment (``Round._earlier_rounds``, as ``console run`` reads it); None: it measures."""
    rnd = rnd or Round(RoundConfig(profile=profile, main=None, candidate=None, out_dir=out))
    if rnd._earlier_rounds({b: Tree(t) for b, t in trees.items()}) is None:
        return None
    return int(rnd.exit_code)


def simulate_round(profile: Any, out: Path, draws: tuple[np.ndarray, np.ndarray], trees: dict[str, str],
                   seal: bool = False) -> tuple[str, Receipt | None]:
    """One round of ``profile`` whose timed pair k measures ``draws[·][k]``: the runner's loop
    decides when to stop; returns (outcome, receipt), or ("decided-before", None) when the
    ledger in ``out`` already decided the experiment."""
    rnd = Round(RoundConfig(profile=profile, main=None, candidate=None, out_dir=out))
    if seal and rerun_stopped(profile, out, trees, rnd) is not None:
        return "decided-before", None
    receipt = Receipt(round_id=f"sim-{time.monotonic_ns()}", kind="round", started_at="2026-12-04T00:00:00Z",
                      profile=profile.record(), lock=Pins(), parity=_parity(profile),
                      builds={b: Build(source={"path": "sim"}, tree_sha256=t) for b, t in trees.items()})
    main, cand = draws

    def run(items: list[Any]) -> None:
        for item in items:
            k = item.index if item.phase == "timed" else item.index % len(main)
            log = main[k] if item.build == "main" else cand[k]
            receipt.reps.append(_rep(item, LEVEL * math.exp(log)))

    speed = rnd.speed_stage()
    speed.plan(receipt)
    head = schedule_head(profile)
    run(head)
    pairs = speed.timed_pairs(receipt, run, len(head), {})
    run(schedule_tail(profile, len(head) + 2 * pairs))
    if seal:
        rnd.seal_verdict(receipt)
        return receipt.verdict.outcome.value, receipt
    receipt.verdict = VerdictRecord.of(gate.decide(receipt, profile.gate))
    return receipt.verdict.outcome.value, receipt


# --- the tables -------------------------------------------------------------------------------

def tier_right(tier: str, span: tuple[str, ...] | None, gain: float, bands: Any) -> bool:
    """The truth's band is at or above the tier and inside the span reported with it."""
    truth = S.band(gain, bands)
    top = span[-1] if span else tier
    return BANDS.index(tier) <= BANDS.index(truth) <= BANDS.index(top)


def rate_table(rng: np.random.Generator, profile: Any, model: str, sd: float, runs: int, work: Path) -> dict:
    rules, budget = profile.gate, profile.gate.max_pairs
    trees = {"main": "m" * 64, "candidate": "c" * 64}
    print(f"\n{model} pairs, SD {sd:.1%}" + (f", main {STEP:.0%} slower from pair {budget // 2}" if model == "step"
                                           else f", ρ {RHO}" if model == "ar1" else "") + f"; {runs} rounds per gain")
    print(f"{'true gain':>9} | {'accepted':>8} {'none':>6} {'slower':>6} {'undecided':>9} {'infra':>6} | "
          f"{'tier ok':>7} | {'pairs':>5} {'p95':>4}")
    out: dict[str, Any] = {}
    for gain in GAINS:
        counts: dict[str, int] = {}
        right, pairs = 0, []
        for _ in range(runs):
            outcome, r = simulate_round(profile, work, pair_draws(rng, model, sd, gain, budget, budget // 2), trees)
            counts[outcome] = counts.get(outcome, 0) + 1
            pairs.append(len(counting.log_ratios(counting.counted(r, rules))))
            if outcome == "accepted":
                right += tier_right(r.verdict.tier, r.verdict.tier_span, gain, rules.bands)
        share = {k: counts.get(k, 0) / runs for k in ("accepted", "none", "slower", "undecided", "infra")}
        acc = counts.get("accepted", 0)
        out[f"{gain:+.3f}"] = {**share, "tier_ok": right / acc if acc else None,
                               "pairs": float(np.mean(pairs)), "p95_pairs": float(np.percentile(pairs, 95))}
        tier = f"{right / acc:7.1%}" if acc else f"{'-':>7}"
        print(f"{gain:+9.1%} | {share['accepted']:8.1%} {share['none']:6.1%} {share['slower']:6.1%} "
              f"{share['undecided']:9.1%} {share['infra']:6.1%} | {tier} | {np.mean(pairs):5.1f} "
              f"{np.percentile(pairs, 95):4.0f}")
    return out


def reruns_table(rng: np.random.Generator, profile: Any, sd: float, runs: int, work: Path) -> float:
    """A candidate exactly at the bar, rerun while undecided, up to three rounds, each sealed
    into one real ledger: how often is it ever accepted?"""
    budget, hits = profile.gate.max_pairs, 0
    for i in range(runs):
        out = work / f"ledger-{i}"
        trees = {"main": "m" * 64, "candidate": f"{i:064x}"}
        for _ in range(3):
            draws = pair_draws(rng, "gauss", sd, profile.gate.significance, budget, budget)
            outcome, _r = simulate_round(profile, out, draws, trees, seal=True)
            if outcome == "accepted":
                hits += 1
            if outcome != "undecided":
                break
    print(f"\nfalse accept at the bar ({profile.gate.significance:.0%}) over up to 3 reruns pooled through a real "
          f"ledger, SD {sd:.1%}: {hits / runs:.2%} of {runs}")
    return hits / runs


def stepped_regression_table(rng: np.random.Generator, profile: Any, sd: float, runs: int, work: Path) -> dict:
    """A regression decided `slower` while the node steps mid-round (the step check leaves the
    outcome standing with a `step-change` warning; the pairs never pool), sealed, then rerun on the
    same ledger: the rerun must stop at once with `slower`'s exit code, never measure it into a pass."""
    budget, before, after, at = profile.gate.max_pairs, -1.3 * sd, -5 * sd, 6
    seen = unstopped = 0
    for i in range(runs):
        out, trees = work / f"stepped-{i}", {"main": "m" * 64, "candidate": f"{i:064x}"}
        main, cand = pair_draws(rng, "gauss", sd, before, budget, budget)
        cand[at:] += math.log1p(after) - math.log1p(before)
        outcome, r = simulate_round(profile, out, (main, cand), trees, seal=True)
        if outcome == "slower" and any(w.code == "step-change" for w in r.verdict.warnings):
            seen += 1
            unstopped += rerun_stopped(profile, out, trees) != 1
    print(f"\nreruns of a regression decided `slower` with a step-change warning ({before:+.1%}, then {after:+.1%} "
          f"from pair {at}), SD {sd:.1%}: {seen} of {runs} rounds so decided; reruns not stopped with exit 1: "
          f"{unstopped}")
    return {"rounds": seen, "rerun_not_failed": unstopped / seen if seen else None}


# --- against Wald's SPRT ---------------------------------------------------------------------

def sprt_pairs(rng: np.random.Generator, gain: float, sd: float, d: S.Design, runs: int) -> float:
    """Expected pairs of Wald's SPRT with σ known, deciding what the console decides at ``gain``
    at the same rates: accept against the bar, slower against zero, none against ±min_gain."""
    theta = math.log1p(gain)
    if gain >= d.min_gain:
        tests = [(math.log1p(d.significance), d.false_accept, d.miss)]
    elif gain <= -d.min_gain:
        tests = [(0.0, d.false_slower, d.miss)]
    else:                           # none: both worthwhile sizes excluded
        tests = [(math.log1p(d.min_gain), d.miss, d.miss), (math.log1p(-d.min_gain), d.miss, d.miss)]
    n_max = 20_000
    x = rng.normal(theta, sd, (runs, 64))
    stops = np.full(runs, n_max)
    for i in range(runs):
        xs, k, done = x[i], 0, [False] * len(tests)
        llr = [0.0] * len(tests)
        while not all(done) and k < n_max:
            if k >= len(xs):
                xs = np.concatenate([xs, rng.normal(theta, sd, 256)])
            for j, (t0, a, b) in enumerate(tests):
                if not done[j]:
                    llr[j] += ((xs[k] - t0) ** 2 - (xs[k] - theta) ** 2) / (2 * sd * sd)
                    if llr[j] >= math.log((1 - b) / a) or llr[j] <= math.log(b / (1 - a)):
                        done[j] = True
            k += 1
        stops[i] = k
    return float(stops.mean())


def console_pairs(rng: np.random.Generator, gain: float, sd: float, d: S.Design, bands: Any, runs: int) -> float:
    """Expected pairs until the console's sequence decides (``sequential.trajectory``, the function the
    runner's stopping rule and the verdict read), with no pair budget."""
    total = 0
    for _ in range(runs):
        n, found = 256, None
        while found is None:
            xs = rng.normal(math.log1p(gain), sd, n)
            steps = S.trajectory([list(xs)], d, S.Basis(LEVEL), bands)
            found = next((s.pairs for s in steps if s.decided), None)
            n *= 4
            if n > 20_000:
                found = n
        total += found
    return total / runs


def sprt_table(rng: np.random.Generator, profile: Any, sd: float, runs: int) -> dict:
    d = S.Design.of(profile.gate)
    print(f"\npairs to a decision with no budget, Gaussian pairs SD {sd:.1%}: the console against Wald's SPRT "
          "with σ known (same rates)")
    print(f"{'true gain':>9} | {'console':>7} {'SPRT':>6} {'ratio':>5}")
    out = {}
    for gain in SPRT_GAINS:
        ours = console_pairs(rng, gain, sd, d, profile.gate.bands, runs)
        best = sprt_pairs(rng, gain, sd, d, runs)
        out[f"{gain:+.3f}"] = {"console": ours, "sprt": best, "ratio": ours / best}
        print(f"{gain:+9.1%} | {ours:7.1f} {best:6.1f} {ours / best:5.2f}")
    total = sum(v["console"] for v in out.values()) / sum(v["sprt"] for v in out.values())
    print(f"{'all':>9} | {'':7} {'':6} {total:5.2f}   (summed over the gains)")
    return out


def headline(tables: dict, reruns3: float, sprt: dict, profile: Any) -> dict:
    g = profile.gate
    base = [tables[m] for m in ("gauss", "t3") if m in tables] or list(tables.values())
    at = lambda t, gain: t[f"{gain:+.3f}"]  # noqa: E731
    tiers = [at(t, x)["tier_ok"] for t in base for x in (0.05, 0.10, 0.20) if at(t, x)["tier_ok"] is not None]
    return {"false_accept": max(at(t, x)["accepted"] for t in base for x in (0.0, g.significance)),
            "false_accept_reruns3": reruns3,
            "false_slower": max(at(t, x)["slower"] for t in base for x in (0.0, 0.02, 0.035)),
            "miss_at_min_gain": max(at(t, g.min_gain)["none"] + at(t, g.min_gain)["slower"] for t in base),
            "slower_power_at_min_gain": min(at(t, -g.min_gain)["slower"] for t in base),
            "tier_accuracy": min(tiers) if tiers else None,
            "expected_pairs": {k: v["pairs"] for k, v in base[0].items()},
            "ar1_false_accept": (max(at(tables["ar1"], x)["accepted"] for x in (0.0, g.significance))
                                 if "ar1" in tables else None),
            "pairs_vs_sprt": max(v["ratio"] for v in sprt.values()),
            "pairs_vs_sprt_total": sum(v["console"] for v in sprt.values()) / sum(v["sprt"] for v in sprt.values()),
            "pairs_vs_sprt_by_gain": {k: v["ratio"] for k, v in sprt.items()}}


def noise_block(rng, profile, sd: float, runs: int, work: Path, models=MODELS) -> dict:
    tables = {m: rate_table(rng, profile, m, sd, runs, work) for m in models}
    reruns3 = reruns_table(rng, profile, sd, max(runs // 2, 50), work)
    stepped = stepped_regression_table(rng, profile, sd, max(runs // 4, 25), work)
    sprt = sprt_table(rng, profile, sd, max(runs // 2, 50))
    return {"sd": sd, **headline(tables, reruns3, sprt, profile), "stepped_slower_reruns": stepped, "tables": tables}


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
        c = counting.counted(replace(r, schema=SCHEMA), r.rules)
        if r.kind not in ("round", "noise") or not c.valid.get(("main", "timed")):
            continue
        cand = r.builds.get("candidate")
        honest = ["main"] + (["candidate"] if "inflate" not in json.dumps(plain(cand.source) if cand else {}) else [])
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
    ap.add_argument("--runs", type=int, default=400, help="rounds per gain and noise model")
    ap.add_argument("--seed", type=int, default=20261204)
    ap.add_argument("--profile", type=Path, default=ROOT / "profiles" / "demo.toml")
    ap.add_argument("--quick", action="store_true", help="100 rounds per cell, the fitted noise only")
    ap.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS), help="noise models to run")
    ap.add_argument("--sequence", choices=("huber", "t-mixture"), default=None,
                    help="the decision's sequence (default: the profile's): t-mixture is the rule before the robust one")
    ap.add_argument("--noise", choices=("fitted", "quiet", "both"), default=None,
                    help="which pair SD: the recorded receipts' fitted SD, 3 %%, or both (default: both; --quick: fitted)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    loaded = load_profile(args.profile)
    # the guards are a separate rule: the simulated rounds measure the speed decision alone
    gate_rules = replace(loaded.gate, guards=(), **({"sequence": args.sequence} if args.sequence else {}))
    profile = replace(loaded, gate=gate_rules)
    paths = sorted(p for d in (args.dirs or SOURCES) if d.exists() for p in d.glob("*.json"))
    sd, df = fitted_pair_sd(paths)
    g = profile.gate
    print(f"profile {profile.name}: α {g.false_accept:.0%} false accept above {g.significance:.0%}, "
          f"{g.false_slower:.0%} false slower, β {g.miss:.0%} at ±{g.min_gain:.1%}, {g.min_pairs}–{g.max_pairs} "
          f"pairs, settle {g.settle_pairs}, step check at {g.step_level:.0%}, {g.sequence} sequence; "
          f"fitted pair SD {sd:.1%} "
          f"({df} df, {len(paths)} receipts)")
    runs = 100 if args.quick else args.runs
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="decision-quality-") as tmp:
        models = tuple(args.models)
        noise = args.noise or ("fitted" if args.quick else "both")
        result: dict[str, Any] = {}
        if noise in ("fitted", "both"):
            result["fitted"] = noise_block(rng, profile, sd, runs, Path(tmp) / "fitted", models)
        if noise in ("quiet", "both"):
            result["quiet"] = noise_block(rng, profile, QUIET_SD, runs, Path(tmp) / "quiet", models)
        fitted_model = {"main_sd": sd / math.sqrt(2)}
        result["claims"] = claims_table(rng, fitted_model, loaded.gate, runs,
                                        paths + sorted(REAL_ENGINE.glob("*.json")))
    head = {k: v for k, v in result.get("fitted", {}).items() if k != "tables"}
    print(f"\n{time.monotonic() - started:.0f} s")
    print(json.dumps({**head, "quiet": {k: v for k, v in result.get("quiet", {}).items() if k != "tables"},
                      "claims": result["claims"], "runs": runs, "fitted_sd": sd}, sort_keys=True, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
