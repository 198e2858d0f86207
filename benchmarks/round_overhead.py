"""The console's own cost: overhead per rep, and a round's wall time by phase as builds are reused.

1. Overhead per rep: a no-op engine (exits at once) run through the Docker runtime
   exactly as a rep is (create, start, wait, read logs, remove, with the watchdog
   polling). Everything measured is console + Docker cost, none is engine work.
2. Real rounds through Round's own loop, each split into build / parity / warm / reps /
   verdict by the phase events' timestamps: cold (nothing reused, --rebuild), with main's
   image reused by its build key, with main reused and a patch built incrementally (the
   compiler cache), and with both reused. The demo (main vs `fast`) always; llama.cpp on
   Gemma 3 270M with --llama (patches over main that parity rejects: the round is its
   builds and parity, which is what reuse changes).

Run: .venv/bin/python benchmarks/round_overhead.py [--reps-noop 20] [--skip-round] [--llama] [--pairs 4]
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
from console.paths import DEMO_CANDIDATES, DEMO_MAIN, DEMO_PROFILE  # noqa: E402
from console.profile import load_profile  # noqa: E402
from console.round import Round, RoundConfig  # noqa: E402
from console.runtime.docker import DockerRuntime, connect, remove_engine_images  # noqa: E402


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


def _round(profile, main, candidate, out: Path, reps: int, rebuild: bool = False) -> tuple[float, dict, dict]:
    """One real round through Round's own loop: (wall seconds, seconds per phase, receipt)."""
    from console.results import lockfile
    cfg = RoundConfig(profile=profile, main=main, candidate=candidate, out_dir=out, reps=reps, rebuild=rebuild,
                      lock_path=lockfile.ensure(out / "reference.lock", profile))
    rnd = Round(cfg)
    t0 = time.monotonic()
    evs = list(rnd.events())
    total = time.monotonic() - t0
    marks = [(e.phase, e.at) for e in evs if isinstance(e, ev.PhaseStarted)]
    spans: dict[str, float] = {}
    for (name, at), nxt in zip(marks, marks[1:] + [("end", evs[-1].at)]):
        spans[name] = spans.get(name, 0.0) + (nxt[1] - at)
    if rnd.receipt is None:
        raise SystemExit(f"the round sealed nothing: {[e.to_dict() for e in evs if isinstance(e, ev.Notice)]}")
    return total, spans, rnd.receipt


def _forget(key: str) -> None:
    """Remove this node's images of one build key, so that the next round builds it."""
    client = connect()
    for img in client.images.list(filters={"label": f"bench-console.key={key}"}):
        client.images.remove(img.id, force=True)


def _clear_compiler_cache(profile) -> None:
    """Empty this node's compiler cache store for the profile's base and compiler."""
    import shutil
    from console.runtime import compiler_cache
    if profile.image.compiler_cache != "none":
        store = compiler_cache.store_for(connect().images.get(profile.image.base).id, profile.image.compiler)
        shutil.rmtree(store)


def builds_reused(name: str, profile, main, candidate, reps: int, other=None) -> None:
    """A round's wall time (a) cold: nothing reused (--rebuild, the compiler cache emptied);
    (b) main's image reused, the candidate built whole (its image forgotten, the cache emptied);
    (c) main's image reused and ``other``, another patch over main, built with the compiler cache
    the rounds before filled (only its patched files compile); (d) both reused (a rerun)."""
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        _clear_compiler_cache(profile)
        t, spans, r = _round(profile, main, candidate, Path(tmp) / "a", reps, rebuild=True)
        rows.append(("(a) cold: both built, no compiler cache", t, spans, r))
        _forget(r["builds"]["candidate"]["key"])
        _clear_compiler_cache(profile)
        rows.append(("(b) main reused, candidate built whole", *_round(profile, main, candidate, Path(tmp) / "b", reps)))
        rows.append(("(d) both reused (a rerun)", *_round(profile, main, candidate, Path(tmp) / "d", reps)))
        if other is not None:
            remove_engine_images(connect(), keep_key=r["builds"]["main"]["key"])   # the next candidate is built
            rows.append(("(c) main reused, another patch built incrementally",
                         *_round(profile, main, other, Path(tmp) / "c", reps)))
    for label, t, spans, r in rows:
        parts = ", ".join(f"{k} {v:.0f} s" for k, v in spans.items())
        print(f"{name}: {label}: {t:.0f} s ({_how(r)}; {parts}; {r['verdict']['outcome']})")
    if other is None:
        print(f"{name}: (c) a patch built incrementally: not applicable: the profile has no compiler cache")


def _how(receipt: dict) -> str:
    said = []
    for b in ("main", "candidate"):
        build = receipt["builds"][b]
        cache = build.get("compiler_cache")
        said.append(f"{b} reused" if build.get("reused_from") else f"{b} built in {build['build_s']:.0f} s"
                    + (f", ccache {cache['hits']}/{cache['hits'] + cache['misses']} hits" if cache else ""))
    return ", ".join(said)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps-noop", type=int, default=20)
    ap.add_argument("--skip-round", action="store_true")
    ap.add_argument("--skip-demo", action="store_true")
    ap.add_argument("--llama", action="store_true", help="also the llama.cpp profile: patches over main "
                    "(drift-past-768, then skip-layers for the incremental build), each rejected at parity (~12 min)")
    ap.add_argument("--pairs", type=int, default=4, help="timed pairs at most per round")
    a = ap.parse_args()
    overhead_per_rep(a.reps_noop)
    if not a.skip_round and not a.skip_demo:
        builds_reused("demo (main vs fast)", load_profile(DEMO_PROFILE), sources.parse_spec(str(DEMO_MAIN)),
                      ("patch", str(DEMO_CANDIDATES / "fast.patch")), a.pairs)
    if a.llama:
        from console.paths import LLAMA_PROFILE
        from console.paths import LLAMA_CANDIDATES
        llama = load_profile(LLAMA_PROFILE)
        builds_reused("llama.cpp (0.3.16 vs a patch)", llama, llama.source,
                      ("patch", str(LLAMA_CANDIDATES / "drift-past-768.patch")), a.pairs,
                      other=("patch", str(LLAMA_CANDIDATES / "skip-layers.patch")))
