"""What grading every served token costs, and what it found, read from sealed serving rounds.

A serving round grades every response of its counted timed blocks after the last block, outside the
clock (``console.round.serving.grade``); its receipt records how long that took, how many responses
were counted and graded, and each build's agreement with the reference, mean gap and departures.
This prints those figures beside the round's own wall time, so the cost is stated as a share of
the round that paid it, for rounds that really ran (nothing here is simulated).

Run: .venv/bin/python benchmarks/served_grading.py RECEIPT.json [RECEIPT.json ...]
     .venv/bin/python benchmarks/served_grading.py results/llama-server      # every receipt under it
"""
from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from console.core.decisions import gate  # noqa: E402
from console.core.records.receipt import Receipt  # noqa: E402
from console.results.store import read_json  # noqa: E402


def _receipts(args: list[str]) -> list[Path]:
    out: list[Path] = []
    for a in args:
        p = Path(a)
        out.extend(sorted(p.rglob("receipts/*.json")) if p.is_dir() else [p])
    return out


def _wall_s(r: Receipt) -> float | None:
    if not r.started_at or not r.ended_at:
        return None
    return (datetime.fromisoformat(r.ended_at) - datetime.fromisoformat(r.started_at)).total_seconds()


def _side(table: dict, build: str) -> str:
    s = table.get(build) or {}
    agree = "-" if s.get("agreement") is None else f"{s['agreement']:.1%}"
    gap = "-" if s.get("mean_gap") is None else f"{s['mean_gap']:.4f}"
    return (f"{build:9} graded {s.get('requests', 0):4} of {(table.get('counted') or {}).get(build, '?'):>4} counted, "
            f"{s.get('tokens', 0):5} tokens: agreement {agree}, mean gap {gap} nats, departed {s.get('departed', 0)}, "
            f"near-ties {s.get('near_ties', 0)}, largest gap {s.get('largest_gap', 0):.2f}")


def report(path: Path) -> str | None:
    _, doc = read_json(path, "a receipt", "Give a sealed round's receipts/<round>.json.")
    r = Receipt.from_dict(doc)
    server = r.parity.server
    if server is None or server.graded is None:
        return None
    verdict = gate.decide(r, r.rules)           # re-derived from the receipt, never taken as recorded
    table = (verdict.parity.get("server") or {}).get("graded") or {}
    wall = _wall_s(r)
    cost = server.graded.seconds
    share = f"{cost / wall:.1%} of the round's {wall:.0f} s" if cost is not None and wall else "round wall unknown"
    lines = [f"{path.name[:12]}  {verdict.outcome}: grading {cost or 0:.1f} s, {share}; "
             f"{sum(len(v) for v in server.graded.ungradable.values())} ungradable",
             "  " + _side(table, "main"), "  " + _side(table, "candidate")]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    paths = _receipts(argv)
    if not paths:
        print(__doc__.strip().splitlines()[-2].strip(), file=sys.stderr)
        return 2
    shown = [x for x in (report(p) for p in paths) if x]
    print("\n".join(shown) if shown else "no serving round with graded served tokens among them")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
