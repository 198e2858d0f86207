"""Figures over a block of streamed requests, named as ``vllm bench serve --save-result`` names
them where they mean the same, so results read side by side with vLLM's own.

Only requests that came back whole (``RequestRecord.ok``) count in the latencies and throughputs;
the others are counted as ``failed`` and listed by ``failures``. Rates divide by the block's
duration (first send to last end). A latency with no samples is None, never 0, so an empty
block cannot pass a latency guard.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from console.core.decisions.serving import SLO_KEYS
from console.serving.client import Block, RequestRecord


def _latency(name: str, seconds: Sequence[float]) -> dict[str, float | None]:
    """mean, median, std (population, as vLLM), p90 and p99 (linear) of one latency, in ms."""
    keys = [f"{s}_{name}_ms" for s in ("mean", "median", "std", "p90", "p99")]
    if not seconds:
        return dict.fromkeys(keys)
    ms = np.asarray(seconds, dtype=float) * 1000.0
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    return dict(zip(keys, (float(ms.mean()), float(p50), float(ms.std()), float(p90), float(p99))))


def _rate(count: float, duration: float) -> float:
    return count / duration if duration > 0 else 0.0


def summarize_block(block: Block) -> dict[str, Any]:
    """The block's figures: counts, throughputs, the four latencies, and per-request lists."""
    records = block.records
    ok = [r for r in records if r.ok]
    inputs = sum(r.input_tokens for r in ok)
    outputs = sum(r.output_tokens for r in ok)
    tpots = [r.tpot_s for r in ok if r.tpot_s is not None]
    out: dict[str, Any] = {
        "duration": block.duration_s,
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "total_input_tokens": inputs,
        "total_output_tokens": outputs,
        "request_throughput": _rate(len(ok), block.duration_s),
        "output_throughput": _rate(outputs, block.duration_s),
        "total_token_throughput": _rate(inputs + outputs, block.duration_s),
    }
    out |= _latency("ttft", [r.ttft_s for r in ok if r.ttft_s is not None])
    out |= _latency("tpot", tpots)
    out |= _latency("itl", [g for r in ok for g in r.itl_s])
    out |= _latency("e2el", [r.e2e_s for r in ok if r.e2e_s is not None])
    # tokens per second one stream sees: what "per-user tokens/s" means
    median_tpot = float(np.median(tpots)) if tpots else 0.0
    out["stream_tok_s"] = 1.0 / median_tpot if median_tpot > 0 else None
    out |= {"input_lens": [r.input_tokens for r in records],
            "output_lens": [r.output_tokens for r in records],
            "ttfts": [r.ttft_s for r in records],
            "itls": [r.itl_s for r in records],
            "errors": [r.error for r in records]}
    if any(r.conversation is not None for r in records):
        out["turns"] = by_turn(records)
    return out


def by_turn(records: Sequence[RequestRecord]) -> list[dict[str, Any]]:
    """A conversation block's figures per turn index (1 first): its whole requests, their TTFT
    (median and p99, in ms) and how much of their prompts the server says came from its cache:
    ``cached_tokens`` and ``cache_hit_rate`` (of ``prompt_tokens``) over the whole requests whose
    server said, None when none did. The first turns' shares are the shared prefixes' hits; the
    later turns' are their histories'."""
    out = []
    for turn in sorted({r.turn for r in records}):
        ok = [r for r in records if r.turn == turn and r.ok]
        ttft = _latency("ttft", [r.ttft_s for r in ok if r.ttft_s is not None])
        said = [r for r in ok if r.cached_tokens is not None]
        cached, prompt = sum(r.cached_tokens for r in said), sum(r.input_tokens for r in said)
        out.append({"turn": turn, "completed": len(ok), "median_ttft_ms": ttft["median_ttft_ms"],
                    "p99_ttft_ms": ttft["p99_ttft_ms"],
                    "cached_tokens": cached if said else None, "prompt_tokens": prompt if said else None,
                    "cache_hit_rate": cached / prompt if said and prompt > 0 else None})
    return out


def _meets(rec: RequestRecord, slo: Mapping[str, float]) -> bool:
    # a one-token answer has no time per output token: it meets any tpot target (as in vLLM)
    seen = {"ttft_ms": rec.ttft_s, "tpot_ms": rec.tpot_s or 0.0, "e2el_ms": rec.e2e_s}
    return all(seen[k] is not None and seen[k] * 1000.0 <= target for k, target in slo.items())


def goodput(block: Block, slo: Mapping[str, float]) -> float:
    """Requests per second that came back whole and met every target in ``slo`` (milliseconds,
    keys ``ttft_ms``, ``tpot_ms``, ``e2el_ms``), as vLLM's ``--goodput``."""
    unknown = sorted(set(slo) - set(SLO_KEYS))
    if unknown:
        raise ValueError(f"unknown SLO key(s) {', '.join(unknown)} (expected {', '.join(SLO_KEYS)})")
    good = sum(1 for r in block.records if r.ok and _meets(r, slo))
    return _rate(good, block.duration_s)


def failures(block: Block) -> list[str]:
    """One line per request that did not come back whole."""
    return [f"request #{r.index}: {r.error or 'failed'}" for r in block.records if not r.ok]
