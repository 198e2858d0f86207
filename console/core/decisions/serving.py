"""Serving rules, pure: which block figures a profile may score or guard, how a server's answers
are graded against the reference before timing, and the latency guards over the timed blocks.

A block's figures use the field names of ``vllm bench serve --save-result`` where a field means the
same (``output_throughput``, ``p99_ttft_ms``…), so a receipt's blocks read like the tools people know.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from console.core.statistics import stats
from console.core.records.figures import finite, shown
from console.core.records.rules import LatencyGuard
from console.core.records.served import Completion, ServedCheck, ServedSide  # noqa: F401 - the check's records, re-exported

# What a serving profile may score (bench.metric): each higher is better, as the decision expects.
SCORED = {
    "output_tok_s": "output_throughput",     # output tokens per second over the block
    "stream_tok_s": "stream_tok_s",          # per-stream decode speed: 1 / median TPOT
    "request_s": "request_throughput",       # requests per second over the block
}
# What a latency guard may read from each block (lower is better).
LATENCIES = {
    "ttft_p50_ms": "median_ttft_ms", "ttft_p99_ms": "p99_ttft_ms",
    "itl_p50_ms": "median_itl_ms", "itl_p99_ms": "p99_itl_ms",
    "tpot_p50_ms": "median_tpot_ms", "e2el_p99_ms": "p99_e2el_ms",
}

# Goodput targets a profile may set (server.slo), in ms, as vLLM's --goodput names them.
SLO_KEYS = ("ttft_ms", "tpot_ms", "e2el_ms")


# --- the server check, before timing -------------------------------------------------

def side_problems(side: ServedSide | None, min_match: float, repeat_ratio: float) -> list[str]:
    """Why a server's answers cannot stand: it was not checked, it stopped early while reporting
    success, too few completions start with the reference's token, or it answered a repeated prompt
    early. Only the first token is graded: after a near-tie flips one token the two continuations
    no longer share a context, so later tokens say nothing more about the server (how far each
    agreed is recorded and shown, ``agreed``)."""
    if side is None:
        return ["the server was not checked"]
    if side.error:
        return [side.error]
    out = [f"completion at position {c.position}: {c.error}" for c in side.completions if c.error]
    short = [c for c in side.completions if not c.error and len(c.tokens) < side.asked]
    if short:
        c = short[0]
        out.append(f"stopped early: {len(c.tokens)} of {side.asked} tokens at position {c.position} "
                   f"({len(short)} of {len(side.completions)} completions short), reported as complete")
    graded = [c for c in side.completions if not c.error]
    if graded and not short:
        agree = sum(c.diverged_at() != 0 for c in graded)
        if agree < min_match * len(graded):
            first = next(c for c in graded if c.diverged_at() == 0)
            out.append(f"{agree} of {len(graded)} greedy completions start with the reference's token (at least "
                       f"{min_match:.0%} needed); the first that does not is at position {first.position}")
    if side.probe_error:
        out.append(f"the cache probe's request failed: {side.probe_error}")
    elif (cache := cache_problem(side.probe_ttft_s, repeat_ratio)) is not None:
        out.append(cache)
    return out


# a server that spends this many times main's CPU before it is ready, and at least READY_EXTRA_S
# CPU seconds more, did work main did not do: said with both figures (readiness is never timed)
READY_RATIO = 2.0
READY_EXTRA_S = 5.0


def ready_work(main: ServedSide | None, cand: ServedSide | None) -> str | None:
    """A warning when the candidate's server worked much longer than main's before it was ready."""
    m, c = (getattr(x, "ready_cpu_s", None) for x in (main, cand))
    if m is None or c is None or cand is main:
        return None
    if c < READY_RATIO * m or c - m < READY_EXTRA_S:
        return None
    return (f"the candidate's server spent {c:.1f} CPU seconds before it was ready ({cand.ready_s:.1f} s wall), "
            f"main's {m:.1f} ({main.ready_s:.1f} s): work done before readiness is never timed, and the timed "
            "workload is drawn only once both servers are ready")


def agreed(side: ServedSide) -> tuple[int, int]:
    """(tokens before the first difference, tokens asked) summed over the completions."""
    ok = [c for c in side.completions if not c.error]
    return sum(len(c.reference) if c.diverged_at() is None else c.diverged_at() for c in ok), side.asked * len(ok)


def cache_problem(ttft_s: Sequence[float], ratio: float) -> str | None:
    """A prompt answered again much sooner than the first time was answered from a cache (the
    requests ask for none): a server that does this would look fast on any repeated work."""
    if bad := [x for x in ttft_s if not finite(x) or x < 0]:
        return (f"the cache probe's times to first token are not all finite numbers ({shown(bad[0])} among "
                f"{len(ttft_s)}): whether it answered from a cache cannot be told")
    if len(ttft_s) < 2 or not ttft_s[0] > 0:
        return None
    first, again = ttft_s[0], stats.median(list(ttft_s[1:]))
    if again >= ratio * first:
        return None
    return (f"answered a repeated prompt from a cache: time to first token {first * 1e3:.0f} ms the first time, "
            f"{again * 1e3:.0f} ms (median) on {len(ttft_s) - 1} repeats, under {ratio:.0%} of the first; the "
            "requests ask for no prompt cache")


# --- latency guards over the timed blocks ---------------------------------------------

def latency_rows(pairs: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], guards: Sequence[LatencyGuard],
                 level: float) -> dict[str, dict[str, Any]]:
    """Per guard: the candidate's latency over main's in the same pair (geometric mean, one-sided
    bounds at ``level``), and whether it rose decidedly more than allowed (``breach``) or might
    have (``uncertain``). ``pairs`` are (main's block figures, the candidate's)."""
    out: dict[str, dict[str, Any]] = {}
    for g in guards:
        k = LATENCIES[g.metric]
        ratios = [float(c[k]) / float(m[k]) for m, c in pairs
                  if _positive(m.get(k)) and _positive(c.get(k))]
        row: dict[str, Any] = {"metric": g.metric, "max_rise": g.max_rise, "pairs": len(ratios),
                               "allowed": 1 + g.max_rise, "ratio": None, "lower": None, "upper": None,
                               "status": "unmeasured"}
        # None is a latency with no samples (a gap); anything else must be a positive finite number,
        # or the candidate's block carries a figure no guard can read: that is the candidate's.
        unreadable = [(i, c[k]) for i, (_, c) in enumerate(pairs) if c.get(k) is not None and not _positive(c[k])]
        if unreadable:
            row.update(status="unreadable", unreadable=[{"pair": i, "value": shown(v)} for i, v in unreadable])
        elif len(ratios) >= 2:
            lower = stats.geometric_bound(ratios, level, "lower")
            upper = stats.geometric_bound(ratios, level, "upper")
            row.update(ratio=math.exp(stats.mean([math.log(r) for r in ratios])), lower=lower, upper=upper,
                       status="breach" if lower > row["allowed"] else
                       "uncertain" if upper > row["allowed"] else "pass")
        out[g.metric] = row
    return out


def _positive(v: Any) -> bool:
    return finite(v) and v > 0
