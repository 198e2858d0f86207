"""Realistic receipt dicts (docs/RECEIPT.md) for tests.

``make_receipt`` builds a complete round: warm-up reps, interleaved timed reps
(A B B A …), short reps for the wall-clock differential, guard reps, parity figures
and a lock. Every rep is self-consistent by default: ``wall_s`` is a fixed start-up
overhead plus tokens / value, the reported elapsed time is tokens / value, and a seek
rep's peak memory covers its cache. Tests then break exactly one thing.
"""
from __future__ import annotations

import copy
import math
from dataclasses import asdict
from typing import Any, Iterable, Sequence

from console.core.records.receipt import SCHEMA, Receipt
from console.core.statistics.stats import interleaved_order
from console.profile import GateRules, Guard

DEPTHS = (4, 128, 256, 512, 1024, 2048, 4096)
VOCAB = 2048
ROWS = 4
BENCH = {"command": ["/engine/engine", "bench"], "metric": "decode_tok_s", "depth": 4096, "tokens": 192,
         "short_tokens": 48, "reps": 5, "warmup": 1, "shortcut": "seek", "seek_bytes_per_position": 4096}
OVERHEAD_S = 0.25          # load + teardown: identical for long and short runs, so it cancels
GUARD = Guard(name="decode_ctx128", depth=128, tokens=192, reps=3, max_drop=0.01)


def typed(d: dict[str, Any]) -> Receipt:
    """A receipt document as every reader holds it: read once (the gate takes nothing else)."""
    return Receipt.from_dict(d)


def default_rules(**over: Any) -> GateRules:
    base = dict(guards=(GUARD,))
    base.update(over)
    return GateRules(**base)


def depth_figures(depths: Iterable[int] = DEPTHS, kl: float = 1e-6, top1: float = 1.0,
                  ref_entropy: float = 3.1, vocab: int = VOCAB,
                  at: dict[int, dict[str, float]] | None = None) -> list[dict[str, Any]]:
    """Per-depth figures as the receipt stores them; ``at`` overrides single depths."""
    out = []
    for d in depths:
        row = {"depth": d, "top1": top1, "kl": kl, "ref_entropy": ref_entropy, "max_entropy": math.log(vocab)}
        row.update((at or {}).get(d, {}))
        out.append(row)
    return out


def rep(build: str, phase: str, index: int, position: int, value: float, *, tokens: int = 192,
        depth: int = 4096, shortcut: str = "seek", status: str = "ok", overhead_s: float = OVERHEAD_S,
        peak_mem_bytes: int | None = None, **over: Any) -> dict[str, Any]:
    elapsed = tokens / value
    context = "seek" if shortcut == "seek" else "doc"
    r = {
        "build": build, "phase": phase, "index": index, "position": position, "attempt": 0,
        "depth": depth, "tokens": tokens, "context": context, "status": status,
        "exit_code": 0 if status == "ok" else 1, "wall_s": round(overhead_s + elapsed, 6),
        "value": value if status == "ok" else None,
        "reported": {"metric": "decode_tok_s", "value": value, "tokens": tokens, "elapsed_s": round(elapsed, 6),
                     "depth": depth, "context": context, "shortcut": shortcut},
        "refusals": [], "log_tail": [], "telemetry": {}, "suspect": [],
        "peak_mem_bytes": peak_mem_bytes if peak_mem_bytes is not None else depth * 4096 + 8 * 2**20,
    }
    r.update(over)
    return r


def _interleave(phase: str, main: Sequence[float], cand: Sequence[float], start: int,
                **kw: Any) -> list[dict[str, Any]]:
    """Both builds' reps of one phase in A B B A order; positions count on from ``start``."""
    out, k = [], {"main": 0, "candidate": 0}
    values = {"main": list(main), "candidate": list(cand)}
    for build in interleaved_order(max(len(main), len(cand))):
        i = k[build]
        if i < len(values[build]):
            out.append(rep(build, phase, i, start + len(out), values[build][i], **kw))
            k[build] += 1
    return out


def make_receipt(main: Sequence[float] = (200.0, 201.0, 199.5, 200.5, 200.2, 200.8, 199.2, 200.1),
                 cand: Sequence[float] = (212.0, 213.0, 211.0, 212.5, 212.2, 212.8, 211.4, 212.1), *,
                 short_main: Sequence[float] | None = None, short_cand: Sequence[float] | None = None,
                 guards: dict[str, tuple[Sequence[float], Sequence[float]]] | None = None,
                 lock: dict[str, Any] | None = None, rules: GateRules | None = None,
                 cand_parity: list[dict[str, Any]] | None = None, main_parity: list[dict[str, Any]] | None = None,
                 cand_error: str | None = None, scored_path: dict[str, Any] | None = None,
                 timed_path: dict[str, Any] | None = None, shortcut: str = "seek", kind: str = "round", status: str = "complete",
                 schema: str = SCHEMA, sequential: dict[str, Any] | None = None) -> dict[str, Any]:
    """A complete, consistent round receipt: candidate ~6% faster, clean parity, measured pins."""
    rules = rules or default_rules()
    bench = dict(BENCH, shortcut=shortcut, seek_bytes_per_position=4096 if shortcut == "seek" else 0)
    reps: list[dict[str, Any]] = []
    reps += _interleave("warmup", main[:1], cand[:1], 0, shortcut=shortcut)
    reps += _interleave("timed", main, cand, len(reps), shortcut=shortcut)
    short_main = list(short_main) if short_main is not None else list(main[:3])
    short_cand = list(short_cand) if short_cand is not None else list(cand[:3])
    reps += _interleave("short", short_main, short_cand, len(reps), tokens=bench["short_tokens"],
                        shortcut=shortcut)
    if guards is None:
        guards = {g.name: ([m * 1.3 for m in main[:3]], [c * 1.3 for c in cand[:3]]) for g in rules.guards}
    for g in rules.guards:
        gm, gc = guards.get(g.name, ((), ()))
        reps += _interleave(f"guard:{g.name}", gm, gc, len(reps), tokens=g.tokens, depth=g.depth,
                            shortcut=shortcut)
    if lock is None:
        lock = {"frontier": 199.0, "frontier_slot": "DEMO_CPU-2CORE_DECODE_4096", "anchor": 0.0,
                "guards": {g.name: 255.0 for g in rules.guards}, "noise_spread": 0.01}
    sp = scored_path if scored_path is not None else {
        "main": {"depth": 1024, "top1": 1.0, "kl": 1e-6, "error": None},
        "candidate": {"depth": 1024, "top1": 1.0, "kl": 2e-6, "error": None}}
    tp = timed_path if timed_path is not None else {
        "depth": 4096, "tokens": 192, "basis": "main", "main_rep": 0, "error": None,
        "candidate": [{"index": i, "attempt": 0, "kl": 0.0, "top1": 1.0, "error": None} for i in range(len(cand))]}
    rules_dict = asdict(rules)
    return {
        "schema": schema, "kind": kind, "round_id": "20261202T163000Z-1a2b3c",
        "started_at": "2026-12-02T16:30:00Z", "ended_at": "2026-12-02T16:34:10Z", "status": status,
        "profile": {"name": "demo", "path": "/work/main/profiles/demo.toml", "sha256": "0" * 64,
                    "rules": rules_dict, "bench": bench,
                    "parity": {"depths": list(DEPTHS), "rows": ROWS, "vocab": VOCAB,
                               "scored_path_depth": 1024, "scored_path_tokens": 32},
                    "node": "cpu-2core"},
        "runtime": {"kind": "docker", "isolation": ["no network"], "lacks": []},
        "host": {"cpu_model": "Intel Xeon", "cores": 2, "kernel": "6.1", "docker": "20.10.24", "gpus": []},
        "preflight": {},
        "builds": {b: {"source": {"path": f"/src/{b}"}, "tree_sha256": "1" * 64, "image_id": "sha256:" + "2" * 64,
                       "base_image_id": "sha256:" + "3" * 64, "compiler": "gcc (Debian 12.2.0-14+deb12u1) 12.2.0",
                       "build_s": 4.1} for b in ("main", "candidate")},
        "parity": {
            "reference": {"sha256": "4" * 64, "document_sha256": "5" * 64, "depths": list(DEPTHS),
                          "rows": ROWS, "vocab": VOCAB},
            "main": {"error": None, "logits_sha256": "6" * 64,
                     "depths": main_parity if main_parity is not None else depth_figures()},
            "candidate": {"error": cand_error, "logits_sha256": "7" * 64,
                          "depths": [] if cand_error else
                          (cand_parity if cand_parity is not None else depth_figures(kl=2e-6))},
            "scored_path": sp,
            "timed_path": tp,
        },
        "reps": reps,
        "lock": lock,
        "summary": {},
        **({"sequential": sequential} if sequential is not None else {}),
    }


def timed(receipt: dict[str, Any], build: str) -> list[dict[str, Any]]:
    """The timed reps of one build, in schedule order (mutable views into the receipt)."""
    return [r for r in receipt["reps"] if r["build"] == build and r["phase"] == "timed"]


def variant(receipt: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(receipt)


# --- one real receipt per outcome the gate can produce --------------------------------------

MAIN = (200.0, 201.0, 199.5, 200.5, 200.2, 200.8, 199.2, 200.1)


def _scaled(values, k):
    return tuple(v * k for v in values)


def _infra() -> dict[str, Any]:
    r = make_receipt(status="infra")
    r["diagnosis"] = "GPU fell off the bus during rep 3"
    return r


# A candidate about 3 % faster than MAIN with pair noise too wide for 8 pairs to decide.
NOISY_CAND = (212.0, 190.0, 230.0, 196.0, 215.0, 185.0, 228.0, 204.0)

# One real receipt per outcome, each breaking one thing of a sound round.
OUTCOME_RECEIPTS = {
    "accepted": lambda: make_receipt(),
    "none": lambda: make_receipt(cand=_scaled(MAIN, 1.005)),
    "slower": lambda: make_receipt(cand=_scaled(MAIN, 0.8), short_cand=_scaled(MAIN[:3], 0.8),
                                   guards={"decode_ctx128": (_scaled(MAIN[:3], 1.3), _scaled(MAIN[:3], 1.3))}),
    "undecided": lambda: make_receipt(cand=NOISY_CAND),
    "noise": lambda: make_receipt(cand=(200.4, 199.8, 200.9, 200.1, 199.7, 200.6, 199.5, 200.3), kind="noise"),
    "rejected": lambda: make_receipt(cand_parity=depth_figures(kl=2e-6, at={2048: {"top1": 0.5}})),
    "infra": _infra,
    "implausible": lambda: make_receipt(
        cand=_scaled(MAIN, 5.5), short_cand=_scaled(MAIN[:3], 5.5),
        guards={"decode_ctx128": (_scaled(MAIN[:3], 1.3), _scaled(MAIN[:3], 7))}),
    "uncheckable": lambda: make_receipt(cand_parity=depth_figures(ref_entropy=math.log(VOCAB))),
}


# --- a matrix round ------------------------------------------------------------------------------

def make_matrix_receipt(cells: dict[int, tuple[Sequence[float], Sequence[float]]], *, home: int = 4096,
                        guarded: Sequence[int] = (), rule: str = "any", rules: GateRules | None = None,
                        lock: dict[str, Any] | None = None) -> dict[str, Any]:
    """A matrix round over depths: ``cells`` maps each cell's depth to (main, candidate) values, run
    A B / B A per pair; the short runs are the home cell's shape. No timed phase: the cells are."""
    rules = rules or default_rules(guards=())
    main, cand = cells[home]
    r = make_receipt(main=main, cand=cand, rules=rules, lock=lock or {"frontier": 0.0, "anchor": 0.0})
    r["kind"] = "matrix"
    reps = [x for x in r["reps"] if x["phase"] != "timed"]
    for depth, (m, c) in cells.items():
        reps += _interleave(f"cell:depth={depth}", m, c, len(reps), depth=depth)
    r["reps"] = reps
    r["profile"]["name"] = "demo-matrix"
    r["profile"]["matrix"] = {
        "axes": ["depth"], "home": f"depth={home}", "rule": rule, "family": "bonferroni",
        "cells": [{"key": f"depth={d}", "axes": [["depth", str(d)]], "depth": d, "tokens": 192,
                   "metric": "decode_tok_s", "args": [], "role": "guarded" if d in guarded else "scored"}
                  for d in cells]}
    return r
