"""The console's own cost: overhead per rep, and a demo round's wall time by phase.

1. Overhead per rep: a no-op engine (exits at once) run through the Docker runtime
   exactly as a rep is (create, start, wait, read logs, remove, with the watchdog
   polling). Everything measured is console + Docker cost, none is engine work.
2. A real demo round (main vs `fast`), its journal split into build / parity / warm /
   reps / verdict by the phase events' timestamps.

Run: .venv/bin/python benchmarks/round_overhead.py [--reps-noop 20] [--skip-round]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from console import events as ev
from console.engine import images, protocol, sources
from console.results import journal  # noqa: E402
from console.paths import DEMO_CANDIDATES, DEMO_MAIN, DEMO_PROFILE  # noqa: E402
from console.profile import load_profile  # noqa: E402
from console.round import Round, RoundConfig  # noqa: E402
from console.runtime.docker import DockerRuntime, connect  # noqa: E402


def overhead_per_rep(n: int) -> None:
    images.bootstrap(connect(), load_profile(DEMO_PROFILE), lambda line: None)
    profile = load_profile(ROOT / "tests" / "fixtures" / "hostile.toml")
    rt = DockerRuntime(round_label="bench-overhead")
    built = rt.build("main", Path(profile.source.path), profile.image, lambda line: None)
    totals, walls = [], []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            inputs = Path(tmp) / "in"
            inputs.mkdir()
            for i in range(n):
                t0 = time.perf_counter()
                res = rt.run(built, ["/engine/engine", "bench", "--depth", "1", "--out", "/out"],
                             src_dir=Path(profile.source.path), inputs_dir=inputs, out_dir=Path(tmp) / f"o{i}",
                             run=profile.run, label=f"noop{i}")
                protocol.parse_bench_output(res.stdout, metric="decode_tok_s", tokens=10, depth=1, context="doc")
                totals.append(time.perf_counter() - t0)
                walls.append(res.wall_s)
    finally:
        rt.client.images.remove(built.image_id, force=True)
    q = statistics.quantiles(totals, n=20)
    print(f"overhead per rep (no-op engine, {n} reps): median {statistics.median(totals) * 1000:.0f} ms "
          f"(p95 {q[-1] * 1000:.0f} ms) from create to remove; of which start->exit as timed "
          f"{statistics.median(walls) * 1000:.0f} ms")


def round_split() -> None:
    profile = load_profile(DEMO_PROFILE)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        cfg = RoundConfig(profile=profile, main=sources.parse_spec(str(DEMO_MAIN)),
                          candidate=("patch", str(DEMO_CANDIDATES / "fast.patch")), out_dir=out)
        t0 = time.monotonic()
        evs = list(Round(cfg).events())
        total = time.monotonic() - t0
        marks = [(e.phase, e.at) for e in evs if isinstance(e, ev.PhaseStarted)]
        end = evs[-1].at
        spans: dict[str, float] = {}
        for (name, at), nxt in zip(marks, marks[1:] + [("end", end)]):
            spans[name] = spans.get(name, 0.0) + (nxt[1] - at)
        reps = [e.rep for e in evs if isinstance(e, ev.RepDone)]
        v = [e for e in evs if isinstance(e, ev.VerdictReady)][-1].verdict
    parts = ", ".join(f"{k} {v:.1f} s" for k, v in spans.items())
    print(f"demo round (main vs fast, {profile.bench.reps} reps): total {total:.1f} s: {parts}; "
          f"{len(reps)} runs; verdict {v['outcome']} {v.get('tier') or ''}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps-noop", type=int, default=20)
    ap.add_argument("--skip-round", action="store_true")
    a = ap.parse_args()
    overhead_per_rep(a.reps_noop)
    if not a.skip_round:
        round_split()
