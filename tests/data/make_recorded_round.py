"""Write tests/data/recorded_round.jsonl: a realistic round with fixed timestamps.

It stands in for a journal of a real round until one is recorded. Every value is
fixed (no randomness, no clock), so the TUI snapshots built from it are stable.

    .venv/bin/python tests/data/make_recorded_round.py
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from console import events as ev  # noqa: E402
from console.core.statistics import sequential as S  # noqa: E402
from console.core.records.rules import Bands  # noqa: E402
from console.core.records.verdict import json_safe  # noqa: E402

DESIGN = S.Design()
PREVIEW = S.preview(0.012, DESIGN, 0.05)

T0 = 1796229000.0  # 2026-12-02T16:30:00Z
DEPTHS = [4, 128, 256, 512, 1024, 2048, 4096]
ROUND_ID = "20261202T163000Z-1a2b3c"


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self, dt: float = 0.0) -> float:
        self.t = round(self.t + dt, 3)
        return self.t


def build_lines(build: str) -> list[str]:
    srcs = ["tensor.c", "matmul.c", "attention.c", "kv_cache.c", "rope.c", "softmax.c",
            "sampler.c", "tokenizer.c", "model.c", "bench.c", "logits.c", "main.c"]
    flags = "-O3 -march=x86-64-v3 -fno-fast-math" + (" -DFUSED_QK=1" if build == "candidate" else "")
    lines = [
        "#1 [internal] load build definition from Dockerfile",
        "#2 [internal] load .dockerignore",
        "#3 [internal] load metadata for bench-console/base:bookworm-gcc12",
        "#4 [1/5] FROM bench-console/base:bookworm-gcc12@sha256:9c1e0d2b7a44",
        "#5 [internal] load build context",
        f"#5 transferring context: {'184.2kB' if build == 'main' else '186.9kB'} done",
        "#6 [2/5] COPY engine/ /src/engine",
        "#7 [3/5] RUN gcc --version",
        "#7 0.211 gcc (Debian 12.2.0-14+deb12u1) 12.2.0",
        "#7 0.212 Copyright (C) 2022 Free Software Foundation, Inc.",
        "#8 [4/5] RUN make -C /src/engine -j2",
        "#8 0.104 make: Entering directory '/src/engine'",
    ]
    for i, src in enumerate(srcs):
        obj = src.replace(".c", ".o")
        lines.append(f"#8 {0.3 + i * 0.61:.3f} cc {flags} -Iinclude -c src/{src} -o build/{obj}")
        if src == "attention.c":
            lines.append(f"#8 {0.5 + i * 0.61:.3f} src/attention.c:211:17: warning: unused "
                         "variable 'scale_inv' [-Wunused-variable]")
            lines.append(f"#8 {0.5 + i * 0.61:.3f}   211 |     const float scale_inv = 1.0f / scale;")
        if src == "matmul.c":
            lines.append(f"#8 {0.5 + i * 0.61:.3f} src/matmul.c: tiling 64x64, AVX2 kernels")
    lines += [
        "#8 8.117 cc -O3 -o build/engine build/*.o -lm -lpthread",
        "#8 8.402 make: Leaving directory '/src/engine'",
        "#8 DONE 8.4s",
        "#9 [5/5] RUN /src/engine/build/engine --self-test",
        "#9 0.043 self-test: tokenizer round-trip ok (2048 ids)",
        "#9 0.118 self-test: matmul vs naive max abs err 3.1e-07",
        "#9 0.201 self-test: attention causal mask ok",
        "#9 0.233 self-test: kv cache seek ok (depth 4096)",
        "#9 DONE 0.3s",
        "#10 exporting to image",
        "#10 exporting layers 0.2s done",
    ]
    while len(lines) < 50:
        lines.append(f"#10 writing layer sha256:{(len(lines) * 7919) % 99991:05d}a3f1 done")
    digest = "3f2a9c1b77e0d4a5" if build == "main" else "b81e44c0a9d27f13"
    lines.append(f"#10 writing image sha256:{digest}c0ffee done")
    lines.append(f"#10 naming to bench-console/{build}:{ROUND_ID} done")
    return lines


def rep_record(build: str, phase: str, index: int, position: int, value: float, wall: float,
               tokens: int, suspect: list[str] | None = None) -> dict:
    elapsed = round(tokens / value, 4)
    return {
        "build": build, "phase": phase, "index": index, "position": position, "attempt": 0,
        "depth": 4096, "tokens": tokens, "context": "seek", "status": "ok", "exit_code": 0,
        "wall_s": wall, "value": value,
        "reported": {"metric": "decode_tok_s", "value": value, "tokens": tokens,
                     "elapsed_s": elapsed, "depth": 4096, "context": "seek", "shortcut": "seek"},
        "refusals": [], "peak_mem_bytes": 41943040 + (2097152 if build == "candidate" else 0),
        "log_tail": [f"engine: decode {tokens} tokens at depth 4096 (seek)",
                     f"engine: prefill skipped by seek; kv zero-filled to 4096",
                     f"RESULT metric=decode_tok_s value={value} tokens={tokens} "
                     f"elapsed_s={elapsed} depth=4096 context=seek shortcut=seek"],
        "telemetry": {"sm_clock_mhz_min": 1965, "sm_clock_mhz_max": 1980, "temp_c_max": 63},
        "suspect": list(suspect or []),
    }


# A B B A … order; values drift a little so the plot shows something real.
MAIN_TIMED = [209.8, 211.2, 210.4, 208.9, 210.9, 209.5, 210.7, 210.1]
CAND_TIMED = [227.9, 229.1, 228.4, 226.7, 228.8, 227.3, 228.9, 228.0]
SHORT_REPS = 4


def make_events() -> list[ev.Event]:
    c = Clock()
    out: list[ev.Event] = []
    add = out.append
    host = {"cpu_model": "AMD EPYC 7763 64-Core Processor", "cores": 2,
            "kernel": "6.1.0-27-amd64", "docker": "20.10.24",
            "gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-4f1c2d9e",
                      "driver": "550.127.05", "memory_mib": 81559}]}
    plan = {"depths": DEPTHS, "order": "ABBA", "tokens": 192, "short_tokens": 48,
            "reps": {"warmup": 1, "short": SHORT_REPS, "timed": len(MAIN_TIMED)},
            "guards": ["decode_ctx128"],
            "parity": {"depths": DEPTHS, "top1_min": 0.99, "kl_max": 1e-3}}
    add(ev.RoundStarted(round_id=ROUND_ID, profile="demo",
                        profile_sha256="5d41402abc4b2a76b9719d911017c592ae1f0d3c7e8b9a1f00ddba11",
                        runtime="docker", host=host, plan=plan, at=c()))
    add(ev.PhaseStarted(phase="preflight", at=c(0.1)))

    def nvml(sm: int, temp: int, build: str | None = None, index: int | None = None) -> None:
        add(ev.TelemetrySample(source="nvml", values={"sm_clock_mhz": sm, "mem_clock_mhz": 2619,
                                                       "temp_c": temp, "power_w": 312.4,
                                                       "util_pct": 97 if build else 0},
                               build=build, index=index, at=c(0.05)))

    add(ev.TelemetrySample(source="host", values={"cpu_mhz": 2450, "load1": 0.31,
                                                  "mem_available_bytes": 6_291_456_000},
                           at=c(0.2)))
    nvml(1980, 41)
    add(ev.Notice(level="info", code="preflight-ok",
                  message="docker 20.10.24, no network in containers, 1 GPU visible", at=c(0.1)))
    add(ev.Notice(level="warn", code="governor",
                  message="CPU frequency governor is 'schedutil', not 'performance'; "
                          "host-side timing may drift", at=c(0.05)))
    add(ev.PhaseStarted(phase="build", at=c(0.2)))
    build_secs = {"main": 41.2, "candidate": 43.6}
    for build in ("main", "candidate"):
        src = {"git": "https://git.internal/engine.git",
               "commit": "a1b2c3d4e5f6" if build == "main" else "f6e5d4c3b2a1"}
        add(ev.BuildStarted(build=build, source=src, at=c(0.1)))
        lines = build_lines(build)
        step = round(build_secs[build] / len(lines), 3)
        for i, line in enumerate(lines):
            add(ev.BuildLog(build=build, line=line, at=c(step)))
            if i % 15 == 14:
                nvml(1980, 42)
        add(ev.BuildDone(build=build,
                         image_id="sha256:" + ("3f2a9c1b77e0d4a5" if build == "main"
                                               else "b81e44c0a9d27f13") + "c0ffee" * 7,
                         base_image_id="sha256:9c1e0d2b7a44" + "ab" * 26,
                         compiler="gcc (Debian 12.2.0-14+deb12u1) 12.2.0",
                         seconds=build_secs[build], at=c(0.3)))
    add(ev.PhaseStarted(phase="parity", at=c(0.2)))
    grades = {
        "main": [(1.0, 2.1e-7, 7.55), (1.0, 1.2e-6, 3.1), (1.0, 1.4e-6, 2.9), (1.0, 2.0e-6, 2.7),
                 (1.0, 3.1e-6, 2.6), (0.998, 5.2e-6, 2.5), (0.996, 8.8e-6, 2.4)],
        "candidate": [(1.0, 2.4e-7, 7.55), (1.0, 1.9e-6, 3.1), (1.0, 2.6e-6, 2.9),
                      (0.998, 4.1e-6, 2.7), (0.998, 6.0e-6, 2.6), (0.996, 1.1e-5, 2.5),
                      (0.992, 2.3e-5, 2.4)],
    }
    for build in ("main", "candidate"):
        for depth, (top1, kl, ent) in zip(DEPTHS, grades[build]):
            uncheck = depth == 4
            add(ev.DepthGraded(build=build, depth=depth, top1=top1, kl=kl, ref_entropy=ent,
                               status="uncheckable" if uncheck else "pass",
                               reasons=["reference near-uniform (entropy 7.55 of 7.62 nats)"]
                               if uncheck else [], at=c(0.4)))
        add(ev.ParityDone(build=build, ok=True, worst_depth=4096, at=c(0.05)))
    for build in ("main", "candidate"):
        add(ev.ScoredPathChecked(build=build, depth=4096, top1=1.0 if build == "main" else 0.998,
                                 kl=9.1e-6 if build == "main" else 2.2e-5, ok=True, at=c(0.6)))
    add(ev.PhaseStarted(phase="warm", at=c(0.2)))
    pos = 0

    def rep(build: str, phase: str, index: int, value: float, wall: float, tokens: int,
            suspect: list[str] | None = None, sm: int = 1980) -> None:
        nonlocal pos
        add(ev.RepStarted(build=build, index=index, position=pos, phase=phase, at=c(0.1)))
        nvml(sm, 58 + pos % 5, build, index)
        add(ev.RepDone(rep=rep_record(build, phase, index, pos, value, wall, tokens, suspect),
                       at=c(wall)))
        pos += 1

    order = ["main", "candidate", "candidate", "main"]
    rep("main", "warmup", 0, 203.1, 1.34, 192)
    rep("candidate", "warmup", 0, 221.7, 1.27, 192)
    short_i = {"main": 0, "candidate": 0}
    for k in range(2 * SHORT_REPS):  # short runs: same engine, fewer tokens (the differential check)
        build = order[k % 4]
        v = 207.5 if build == "main" else 225.2
        rep(build, "short", short_i[build], v + short_i[build] * 0.8, round(0.52 + 0.01 * (k % 3), 2), 48)
        short_i[build] += 1
    add(ev.PhaseStarted(phase="reps", at=c(0.1)))
    add(ev.PlanReady(preview=PREVIEW.to_dict(), sentence=PREVIEW.sentence(), at=c(0.05)))
    timed_i = {"main": 0, "candidate": 0}
    logs: list[float] = []
    for k in range(2 * len(MAIN_TIMED)):
        build = order[k % 4]
        i = timed_i[build]
        value = (MAIN_TIMED if build == "main" else CAND_TIMED)[i]
        suspect = ["sm-clock-dip"] if (build == "main" and i == 3) else None
        rep(build, "timed", i, value, round(192 / value + 0.41, 2), 192, suspect,
            sm=1905 if suspect else 1980)
        timed_i[build] = i + 1
        if k % 2 == 1:      # a pair is complete: the round looks (the suspect rep's pair is dropped)
            if i != 3:
                logs.append(math.log(CAND_TIMED[i] / MAIN_TIMED[i]))
            d = S.decide_pairs([logs], DESIGN, S.Basis(MAIN_TIMED[0]), Bands())
            add(ev.DecisionStep.of(json_safe(d.to_dict()), at=c(0.01)))
            if d.done:      # decided and settled: the round stops adding pairs
                break
    for build in ("main", "candidate"):
        rep(build, "guard:decode_ctx128", 0, 412.3 if build == "main" else 409.8, 0.88, 192)
    add(ev.Notice(level="info", code="guards-ok",
                  message="guard decode_ctx128: candidate within 0.6% of main", at=c(0.1)))
    add(ev.PhaseStarted(phase="verdict", at=c(0.1)))
    add(ev.VerdictReady(verdict=ACCEPTED_VERDICT, at=c(0.2)))
    add(ev.RoundEnded(status="complete", exit_code=0,
                      receipt_path=f"results/{ROUND_ID}/receipt.json", at=c(0.3)))
    return out


ACCEPTED_VERDICT = {
    "outcome": "accepted", "tier": "m", "exit_code": 0,
    "reasons": [
        {"code": "parity-ok", "message": "parity holds at every depth; worst depth 4096 "
                                         "(top-1 0.992, KL 2.3e-05)"},
        {"code": "significant", "message": "candidate +8.5% over main, interval "
                                           "[+7.6%, +9.4%] at the 1% level clears 2%"},
        {"code": "tier", "message": "basis 8.5% of frontier 210.4 falls in band m "
                                    "(6% <= m < 10%)"},
    ],
    "warnings": [
        {"code": "uncheckable-depth", "message": "depth 4: reference near-uniform; parity "
                                                 "there cannot detect wiring faults"},
        {"code": "suspect-rep", "message": "main timed #3 ran at a lower SM clock (1905 MHz)"},
    ],
    "tier_span": None,
    "speed": {"gain": 0.0852, "interval": [0.0761, 0.0938], "frontier": 210.4,
              "frontier_source": "lock", "basis": 0.0852, "basis_kind": "frontier",
              "anchor": 0.0, "band": "m", "main_median": 210.4, "candidate_median": 228.4},
}


def main() -> None:
    path = Path(__file__).with_name("recorded_round.jsonl")
    with path.open("w", encoding="utf-8") as f:
        for e in make_events():
            f.write(json.dumps(e.to_dict(), sort_keys=True) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
