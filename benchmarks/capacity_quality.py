"""How good is a capacity search? Simulated searches through the sweep's own functions.

    python benchmarks/capacity_quality.py [--searches N] [--seed S] [--blocks B] [--requests R]

Each simulated server is a queue whose capacity is known: ``slots`` requests served at once, the rest
waiting in the server's own queue (first in, first out), every request a prefill and then its tokens,
each token slower the more slots are busy. Requests arrive as the sweep's rate levels send them
(Poisson, every request sent at its due time). A block's records go through the console's own path:
``serving.metrics.summarize_block`` and the receipt's figures (``round.serving.record``), the sweep's
goodput (``round.kinds.sweep.with_goodput``), then ``core.decisions.capacity.run``: the stepper, each
level's calls and the saturation guard, the brackets and the change, exactly as ``console sweep
--capacity`` calls them.

The true capacity of a simulated build is the highest rate at which the geometric mean over blocks
of the block's p99 TTFT (the figure the level call bounds) is under the target, found by bisection
over many simulated blocks with common random numbers. Printed: the guard's flag rate by load
(offered over served), then per scenario how often each build's true capacity lies in its interval,
the change decided, the levels measured. The last line is one JSON object.
"""
from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import sys
import time
from functools import lru_cache
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from console.core.decisions import capacity as cap  # noqa: E402
from console.round.kinds.sweep import with_goodput  # noqa: E402
from console.round.serving.record import receipt_figures  # noqa: E402
from console.serving import metrics  # noqa: E402
from console.serving.client import Block, RequestRecord  # noqa: E402

SLO = {"ttft_ms": 1500.0, "tpot_ms": 400.0}


@dataclass(frozen=True)
class Server:
    slots: int = 4
    prefill_s: float = 0.2          # one request's prompt, alone
    token_s: float = 0.05           # one output token, alone
    crowding: float = 0.3           # each other busy slot slows a token (and a prefill) by this share
    tokens: int = 16
    block_sd: float = 0.05          # the node's state from block to block (log scale)

    def saturates_at(self) -> float:
        """Requests per second it serves with every slot busy: past it the queue grows without bound."""
        slow = 1 + self.crowding * (self.slots - 1)
        return self.slots / (slow * (self.prefill_s + (self.tokens - 1) * self.token_s))


def block_records(srv: Server, rate: float, n: int, rng: random.Random) -> list[RequestRecord]:
    """One block at ``rate``: its requests as the load client records them (times from the block's start)."""
    node = rng.lognormvariate(0.0, srv.block_sd)
    free: list[float] = []          # when each busy slot frees
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(rate)
        while free and free[0] <= t:
            heapq.heappop(free)
        start = t if len(free) < srv.slots else heapq.heappop(free)
        slow = (1 + srv.crowding * sum(1 for e in free if e > start)) * node
        first = start + srv.prefill_s * slow * rng.lognormvariate(0.0, 0.2)
        gap = srv.token_s * slow * rng.lognormvariate(0.0, 0.1)
        tokens = [first + k * gap for k in range(srv.tokens)]
        heapq.heappush(free, tokens[-1])
        out.append(RequestRecord(index=i, input_tokens=64, max_tokens=srv.tokens, sent_s=t, due_s=t,
                                 first_token_s=first, token_s=tokens, output_tokens=srv.tokens,
                                 chunks=srv.tokens, status=200, finish_reason="length", end_s=tokens[-1]))
    return out


def block_figures(records: list[RequestRecord]) -> dict:
    """What the receipt keeps of a block and the sweep reads: the console's own figures."""
    ends = [r.end_s for r in records if r.end_s is not None]
    blk = Block(records, max(ends) - min(r.sent_s for r in records), "", len(records))
    return with_goodput(receipt_figures(metrics.summarize_block(blk), blk, "", 0), SLO)


def measure(main: Server, cand: Server, n: int, blocks: int, rng: random.Random):
    """A level's pairs of blocks, main's and the candidate's (each block its own draw, as on a node)."""
    def at(level: float):
        return [(block_figures(block_records(main, level, n, rng)), block_figures(block_records(cand, level, n, rng)))
                for _ in range(blocks)]
    return at


@lru_cache(maxsize=None)
def true_capacity(srv: Server, n: int, draws: int = 300, seed: int = 99) -> float:
    """The rate at which the mean log of the block's p99 TTFT meets the target (bisection on the rate,
    the same blocks' random numbers at every rate so the curve is smooth)."""
    target = math.log(SLO["ttft_ms"])

    def mean_log_p99(rate: float) -> float:
        logs = []
        for k in range(draws):
            recs = block_records(srv, rate, n, random.Random(seed * 100003 + k))
            ttfts = sorted((r.first_token_s - r.sent_s) * 1e3 for r in recs)
            logs.append(math.log(_p99(ttfts)))
        return sum(logs) / len(logs)

    lo, hi = 0.05 * srv.saturates_at(), 1.5 * srv.saturates_at()
    for _ in range(20):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if mean_log_p99(mid) < target else (lo, mid)
    return math.sqrt(lo * hi)


def _p99(sorted_ms: list[float]) -> float:
    pos = 0.99 * (len(sorted_ms) - 1)       # linear, as numpy's percentile
    i = int(pos)
    return sorted_ms[i] + (sorted_ms[min(i + 1, len(sorted_ms) - 1)] - sorted_ms[i]) * (pos - i)


def guard_table(srv: Server, n: int, rng: random.Random, per: int = 200) -> dict[str, float]:
    """Share of blocks the saturation guard marks, by offered load over what the server can serve."""
    out = {}
    for load in (0.3, 0.5, 0.7, 0.9, 1.0, 1.2, 1.5, 2.0, 3.0):
        flags = [cap.saturation([r.to_dict() for r in block_records(srv, load * srv.saturates_at(), n, rng)])
                 for _ in range(per)]
        out[f"{load:g}"] = sum(f.saturated for f in flags) / per
    return out


def scenario(name: str, main: Server, cand: Server, args, rng: random.Random) -> dict:
    truth = {"main": true_capacity(main, args.requests), "candidate": true_capacity(cand, args.requests)}
    search = cap.Search(args.low, args.high, budget=args.budget, resolution=args.resolution, alpha=args.alpha)
    covered = {b: 0 for b in truth}
    changes = {cap.HIGHER: 0, cap.LOWER: 0, cap.UNDECIDED: 0}
    levels, ratios = 0, {b: [] for b in truth}
    for _ in range(args.searches):
        result = cap.run(search, SLO, measure(main, cand, args.requests, args.blocks, rng))
        levels += len(result.levels)
        for b, br in result.brackets().items():
            low = br.low if br.low is not None else 0.0
            high = br.high if br.high is not None else math.inf
            covered[b] += low <= truth[b] < high
            ratios[b].append(br.ratio)
        changes[result.change().direction] += 1
    n = args.searches
    return {"scenario": name, "true_capacity": {b: round(v, 3) for b, v in truth.items()},
            "saturates_at": {"main": round(main.saturates_at(), 3), "candidate": round(cand.saturates_at(), 3)},
            "covered": {b: covered[b] / n for b in truth}, "changes": {k: v / n for k, v in changes.items()},
            "levels_mean": levels / n,
            "bracket_ratio_median": {b: _median(r) for b, r in ratios.items()}}


def _median(xs: list[float]) -> float | str:
    m = sorted(xs)[len(xs) // 2]
    return round(m, 3) if math.isfinite(m) else "open"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--searches", type=int, default=100, help="simulated searches per scenario")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--blocks", type=int, default=4, help="pairs of blocks per level (the sweep's --blocks)")
    ap.add_argument("--requests", type=int, default=32, help="requests per block")
    ap.add_argument("--low", type=float, default=0.5)
    ap.add_argument("--high", type=float, default=8.0)
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--resolution", type=float, default=1.25)
    ap.add_argument("--alpha", type=float, default=0.05)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    base = Server()
    guard = guard_table(base, args.requests, rng)
    print(f"saturation guard, {args.requests} requests per block, {base.slots} slots: share of blocks marked by "
          "offered / served rate: " + ", ".join(f"{k}: {v:.0%}" for k, v in guard.items()))
    results = [scenario("same capacity", base, base, args, rng),
               scenario("candidate 30% faster", base, replace(base, prefill_s=0.7 * base.prefill_s,
                                                               token_s=0.7 * base.token_s), args, rng)]
    for r in results:
        print(f"{r['scenario']}: true capacity main {r['true_capacity']['main']}, candidate "
              f"{r['true_capacity']['candidate']} req/s (saturating at {r['saturates_at']['main']}, "
              f"{r['saturates_at']['candidate']}); in its interval: main {r['covered']['main']:.1%}, candidate "
              f"{r['covered']['candidate']:.1%}; decided higher {r['changes']['higher']:.1%}, lower "
              f"{r['changes']['lower']:.1%}, undecided {r['changes']['undecided']:.1%} (alpha {args.alpha:g}); "
              f"{r['levels_mean']:.1f} levels on average; median bracket ratio {r['bracket_ratio_median']}")
    print(json.dumps({"args": vars(args), "guard": guard, "scenarios": results,
                      "seconds": round(time.perf_counter() - t0, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
