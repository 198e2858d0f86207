"""The figures of a llama.cpp round, from its sealed receipt and its journal.

    python benchmarks/llama_round.py [RESULTS_DIR]     # default: results/llama-cpp

Prints each phase's wall time (from the journal's event times), the per-depth KL and top-1
of both builds against the reference, the prefill and decode figures of both builds, the
model read, and the engine images' sizes over their base (when Docker still has them).
Nothing here is asserted: it reports what one round on this node measured.
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from console.core.records.receipt import BENCH_PHASES, Receipt  # noqa: E402
from console.reports.words import source_text  # noqa: E402
from console.results.saved import read_receipt_file  # noqa: E402


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "results" / "llama-cpp"
    r = read_receipt_file(out / "receipt.json").receipt
    journal = out / "journal" / f"{r.round_id}.jsonl"
    print(f"round {r.round_id} on {r.host.cpu_model} ({r.host.cores} cores, flags {','.join(r.host.cpu_flags)})")
    if journal.exists():
        phases(journal)
    for b, build in r.builds.items():
        print(f"build {b:9}: {source_text(build.source)}  {build.build_s} s  engine {str(build.engine_sha256)[:12]}")
    print("depth   main KL     main top1  cand KL     cand top1")
    cand = {d.depth: (d.kl, d.top1) for d in (r.parity.candidate.depths if r.parity.candidate else ())}
    for d in r.parity.main.depths if r.parity.main else ():
        kl, top1 = cand.get(d.depth, (float("nan"), float("nan")))
        print(f"{d.depth:5}   {d.kl:.3e}   {d.top1:.3f}      {kl:.3e}   {top1:.3f}")
    for phase in sorted({x.phase for x in r.reps if x.phase in BENCH_PHASES or x.phase.startswith("guard:")}):
        for b in ("main", "candidate"):
            vals = [x.value for x in r.reps if x.build == b and x.phase == phase and x.status == "ok" and x.value]
            metric = next((x.reported["metric"] for x in r.reps if x.phase == phase and x.reported), "?")
            if vals:
                print(f"{phase:22} {b:9} {metric:14} n={len(vals)} median {statistics.median(vals):8.2f} tok/s  "
                      f"[{min(vals):.2f} .. {max(vals):.2f}]")
    if r.inputs is not None and r.inputs.warm:
        w = r.inputs.warm
        print(f"model read before the first rep: {w['bytes'] / 1e6:.0f} MB in {w['seconds']:.2f} s")
    v = r.sealed_verdict()
    print(f"verdict: {v.outcome.value} {v.tier or ''}  " + "; ".join(x.message for x in v.reasons)[:300])
    sizes(r)
    return 0


def phases(journal: Path) -> None:
    events = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    marks = [(e["phase"], e["at"]) for e in events if e.get("kind") == "phase_started"]
    end = events[-1]["at"]
    for (name, t0), nxt in zip(marks, marks[1:] + [("end", end)]):
        print(f"phase {name:10} {nxt[1] - t0:7.1f} s")
    print(f"round total      {end - events[0]['at']:7.1f} s")


def sizes(receipt: Receipt) -> None:
    try:
        import docker
        client = docker.from_env()
        for b, build in receipt.builds.items():
            if not build.image_id:
                continue
            img = client.images.get(build.image_id).attrs["Size"]
            base = client.images.get(build.base_image_id).attrs["Size"]
            print(f"image {b:9}: {img / 1e6:.0f} MB, base {base / 1e6:.0f} MB, the build adds {(img - base) / 1e6:.0f} MB")
    except Exception as e:      # images removed, or no daemon: the sizes are simply not shown
        print(f"image sizes: not available ({type(e).__name__})")


if __name__ == "__main__":
    sys.exit(main())
