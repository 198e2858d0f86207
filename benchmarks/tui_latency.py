"""How quickly the console shows what arrives, and what it costs to sit watching.

1. Latency: 10,000 events (mostly rep, build-log and telemetry events) are replayed
   as fast as possible into the app (headless). For every event, the time from the
   worker receiving it to the end of the screen refresh that shows it is recorded.
2. Idle CPU: the app watches a round that only ticks (the elapsed clock, telemetry
   at 1 Hz, host figures at 0.5 Hz); process CPU time over a 10 s window, as % of
   one core.

    .venv/bin/python benchmarks/tui_latency.py [--events 10000] [--idle-seconds 10]

Targets: p99 latency < 100 ms, idle CPU < 5 %.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console import events as ev  # noqa: E402
from console.reports.replay import ListSource  # noqa: E402
from console.tui.app import ConsoleApp  # noqa: E402

SIZE = (120, 40)
T0 = 1796229000.0
DEPTHS = [4, 128, 256, 512, 1024, 2048, 4096]


def synthetic_round(n_events: int) -> list[ev.Event]:
    """A round of ``n_events`` events: ~40 % build log, ~30 % telemetry, ~30 % reps."""
    t = T0
    out: list[ev.Event] = [ev.RoundStarted(
        round_id="bench", profile="bench", profile_sha256="0" * 64, runtime="docker",
        host={"cpu_model": "bench CPU", "cores": 2, "gpus": [{"name": "bench GPU"}]},
        plan={"depths": DEPTHS, "parity": {"depths": DEPTHS, "top1_min": 0.99, "kl_max": 1e-3}},
        at=t)]
    n_log = int(n_events * 0.4)
    for build in ("main", "candidate"):
        out.append(ev.BuildStarted(build=build, source={}, at=t))
        for i in range(n_log // 2):
            out.append(ev.BuildLog(build=build, line=f"#8 {i * 0.01:.3f} cc -O3 -c src/f{i}.c",
                                   at=t))
            if i % 4 == 0:
                out.append(ev.TelemetrySample(source="nvml", values={"sm_clock_mhz": 1980,
                                                                      "temp_c": 40 + i % 9},
                                              at=t))
        out.append(ev.BuildDone(build=build, image_id="sha256:" + "ab" * 32,
                                base_image_id="sha256:" + "cd" * 32, compiler="gcc 12.2.0",
                                seconds=40.0, at=t))
    for build in ("main", "candidate"):
        for d in DEPTHS:
            out.append(ev.DepthGraded(build=build, depth=d, top1=1.0, kl=1e-6, ref_entropy=3.0,
                                      status="pass", at=t))
        out.append(ev.ParityDone(build=build, ok=True, worst_depth=4096, at=t))
    pos = 0
    tail = 3
    while len(out) < n_events - tail:
        build = ("main", "candidate", "candidate", "main")[pos % 4]
        out.append(ev.RepStarted(build=build, index=pos // 2, position=pos, phase="timed", at=t))
        out.append(ev.TelemetrySample(source="nvml", values={"sm_clock_mhz": 1980,
                                                              "temp_c": 60 + pos % 5},
                                      build=build, index=pos // 2, at=t))
        value = (210.0 if build == "main" else 228.0) + (pos % 7) * 0.3
        out.append(ev.RepDone(rep={"build": build, "phase": "timed", "index": pos // 2,
                                   "position": pos, "attempt": 0, "status": "ok",
                                   "value": value, "wall_s": 1.3, "suspect": [],
                                   "refusals": [], "log_tail": ["RESULT …"]}, at=t))
        pos += 1
    out = out[: n_events - tail]
    out.append(ev.VerdictReady(verdict={"outcome": "accepted", "tier": "m", "reasons": [],
                                        "warnings": [], "speed": {"gain": 0.08}}, at=t))
    out.append(ev.PhaseStarted(phase="verdict", at=t))
    out.append(ev.RoundEnded(status="complete", exit_code=0, at=t))
    return out


async def measure_latency(n_events: int) -> dict[str, float]:
    events = synthetic_round(n_events)
    latencies: list[float] = []

    def probe(received: list[float]) -> None:
        now = time.perf_counter()
        latencies.extend(now - r for r in received)

    app = ConsoleApp(ListSource(events, speed=0), latency_probe=probe)
    t0 = time.perf_counter()
    async with app.run_test(size=SIZE) as pilot:
        while len(latencies) < len(events):
            await pilot.pause(0.01)
            if time.perf_counter() - t0 > 300:
                raise RuntimeError(f"only {len(latencies)} of {len(events)} events shown")
        wall = time.perf_counter() - t0
        rows = app.dashboard.reps.row_count
    ms = sorted(x * 1000 for x in latencies)
    return {"events": len(events), "reps": rows, "wall_s": wall,
            "median_ms": statistics.median(ms), "p99_ms": ms[int(len(ms) * 0.99) - 1],
            "max_ms": ms[-1]}


class TickingRound:
    """A round that is only being watched: telemetry at normal rates, nothing else."""

    def __init__(self) -> None:
        self._stop = threading.Event()

    def events(self) -> Iterator[ev.Event]:
        yield ev.RoundStarted(round_id="idle", profile="bench", profile_sha256="0" * 64,
                              runtime="docker", host={"cpu_model": "bench CPU", "cores": 2},
                              plan={"depths": DEPTHS}, at=time.time())
        yield ev.PhaseStarted(phase="reps", at=time.time())
        n = 0
        while not self._stop.wait(1.0):
            n += 1
            yield ev.TelemetrySample(source="nvml", values={"sm_clock_mhz": 1980,
                                                             "temp_c": 60 + n % 3})
            if n % 2 == 0:
                yield ev.TelemetrySample(source="host", values={"cpu_mhz": 2450})
        yield ev.RoundEnded(status="incomplete", exit_code=130)

    def abort(self) -> None:
        self._stop.set()


async def measure_idle(seconds: float) -> float:
    app = ConsoleApp(TickingRound())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(1.5)  # settle: mount, first events
        c0, w0 = time.process_time(), time.monotonic()
        await asyncio.sleep(seconds)
        c1, w1 = time.process_time(), time.monotonic()
        await pilot.press("a")
    return 100.0 * (c1 - c0) / (w1 - w0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    args = parser.parse_args()
    lat = asyncio.run(measure_latency(args.events))
    print(f"latency: {lat['events']} events ({lat['reps']} rep rows) shown in "
          f"{lat['wall_s']:.2f} s")
    print(f"  arrival -> on screen: median {lat['median_ms']:.1f} ms, "
          f"p99 {lat['p99_ms']:.1f} ms, max {lat['max_ms']:.1f} ms   (target p99 < 100 ms)")
    idle = asyncio.run(measure_idle(args.idle_seconds))
    print(f"idle watching: {idle:.2f} % of one core over {args.idle_seconds:.0f} s"
          f"   (target < 5 %)")
    ok = lat["p99_ms"] < 100 and idle < 5
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
