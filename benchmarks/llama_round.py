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


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "results" / "llama-cpp"
    receipt = json.loads((out / "receipt.json").read_text())
    journal = out / "journal" / f"{receipt['round_id']}.jsonl"
    print(f"round {receipt['round_id']} on {receipt['host'].get('cpu_model')} "
          f"({receipt['host'].get('cores')} cores, flags {','.join(receipt['host'].get('cpu_flags', []))})")
    if journal.exists():
        phases(journal)
    for b, build in receipt["builds"].items():
        src = build["source"]
        print(f"build {b:9}: {src.get('pypi') or src.get('patch') or src.get('path')}  "
              f"{build.get('build_s')} s  engine {str(build.get('engine_sha256'))[:12]}")
    par = receipt["parity"]
    print("depth   main KL     main top1  cand KL     cand top1")
    cand = {d["depth"]: d for d in (par.get("candidate") or {}).get("depths", [])}
    for d in (par.get("main") or {}).get("depths", []):
        c = cand.get(d["depth"], {})
        print(f"{d['depth']:5}   {d['kl']:.3e}   {d['top1']:.3f}      {c.get('kl', float('nan')):.3e}   "
              f"{c.get('top1', float('nan')):.3f}")
    for phase in sorted({r["phase"] for r in receipt["reps"] if r["phase"] in ("timed", "short")
                         or r["phase"].startswith("guard:")}):
        for b in ("main", "candidate"):
            vals = [r["value"] for r in receipt["reps"] if r["build"] == b and r["phase"] == phase
                    and r["status"] == "ok" and r["value"]]
            metric = next((r["reported"]["metric"] for r in receipt["reps"] if r["phase"] == phase
                           and r.get("reported")), "?")
            if vals:
                print(f"{phase:22} {b:9} {metric:14} n={len(vals)} median {statistics.median(vals):8.2f} tok/s  "
                      f"[{min(vals):.2f} .. {max(vals):.2f}]")
    inputs = receipt.get("inputs") or {}
    if inputs.get("warm"):
        w = inputs["warm"]
        print(f"model read before the first rep: {w['bytes'] / 1e6:.0f} MB in {w['seconds']:.2f} s")
    v = receipt.get("verdict") or {}
    print(f"verdict: {v.get('outcome')} {v.get('tier') or ''}  "
          + "; ".join(r["message"] for r in v.get("reasons", []))[:300])
    sizes(receipt)
    return 0


def phases(journal: Path) -> None:
    events = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    marks = [(e["phase"], e["at"]) for e in events if e.get("kind") == "phase_started"]
    end = events[-1]["at"]
    for (name, t0), nxt in zip(marks, marks[1:] + [("end", end)]):
        print(f"phase {name:10} {nxt[1] - t0:7.1f} s")
    print(f"round total      {end - events[0]['at']:7.1f} s")


def sizes(receipt: dict) -> None:
    try:
        import docker
        client = docker.from_env()
        for b, build in receipt["builds"].items():
            if not build.get("image_id"):
                continue
            img = client.images.get(build["image_id"]).attrs["Size"]
            base = client.images.get(build["base_image_id"]).attrs["Size"]
            print(f"image {b:9}: {img / 1e6:.0f} MB, base {base / 1e6:.0f} MB, the build adds {(img - base) / 1e6:.0f} MB")
    except Exception as e:      # images removed, or no daemon: the sizes are simply not shown
        print(f"image sizes: not available ({type(e).__name__})")


if __name__ == "__main__":
    sys.exit(main())
