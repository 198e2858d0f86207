"""Readers of a bench run's stdout, one per output format a profile may select.

``bench_result`` is the console's own protocol line (``protocol.parse_bench_output``);
``llama-bench`` reads llama.cpp's ``llama-bench -o json|jsonl`` report. Both are as
strict: exactly one result, finite positive figures, the tokens and depth the console
asked for, and a refusal naming anything else. Both return a ``protocol.BenchParse``
whose result has the protocol's keys, so the gate never sees which format it came from.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable

from ..profile.spec import ADAPTER_NAMES, BENCH_RESULT, LLAMA_BENCH
from . import protocol
from .protocol import BenchParse

# llama-bench reports one test per object: n_prompt > 0 and n_gen == 0 is prefill,
# n_gen > 0 and n_prompt == 0 is decode.
_LLAMA_METRICS = {"prefill_tok_s": "n_prompt", "decode_tok_s": "n_gen"}


def parse_llama_bench(stdout: bytes, *, metric: str, tokens: int, depth: int, context: str,
                      max_bytes: int = protocol.DEFAULT_MAX_BYTES) -> BenchParse:
    """Read ``llama-bench -o json`` (one array) or ``-o jsonl`` (one object per line); never raises."""
    data = bytes(stdout) if not isinstance(stdout, str) else stdout.encode("utf-8", "surrogateescape")
    tail = protocol.log_tail(data)
    if len(data) > max_bytes:
        return BenchParse(None, [f"output is {len(data)} bytes, over the limit of {max_bytes} bytes"], tail)
    if metric not in _LLAMA_METRICS:
        return BenchParse(None, [f"metric {metric!r} is not one llama-bench reports "
                                 f"({', '.join(sorted(_LLAMA_METRICS))})"], tail)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return BenchParse(None, ["llama-bench output is not valid UTF-8"], tail)
    tests, problems = _objects(text)
    if problems:
        return BenchParse(None, problems, tail)
    if len(tests) != 1:
        return BenchParse(None, [f"{len(tests)} llama-bench results; expected exactly one"], tail)
    t = tests[0]
    refusals: list[str] = []

    def integer(k: str) -> int | None:
        v = t.get(k)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            refusals.append(f"llama-bench key '{k}' is {v!r}, not a non-negative integer")
            return None
        return v

    def positive(k: str) -> float | None:
        v = t.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            refusals.append(f"llama-bench key '{k}' is {v!r}, not a finite number > 0")
            return None
        return float(v)

    n_prompt, n_gen, n_depth = integer("n_prompt"), integer("n_gen"), integer("n_depth")
    avg_ts, avg_ns = positive("avg_ts"), positive("avg_ns")
    samples = t.get("samples_ts")
    if not isinstance(samples, list) or not samples or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0 for x in samples):
        refusals.append("llama-bench key 'samples_ts' is not a non-empty list of finite numbers > 0")
    if refusals:
        return BenchParse(None, refusals, tail)
    counted, other = (n_prompt, n_gen) if metric == "prefill_tok_s" else (n_gen, n_prompt)
    if other != 0:
        refusals.append(f"the result mixes prefill and decode (n_prompt {n_prompt}, n_gen {n_gen}); "
                        f"expected a pure {metric} test")
    if counted != tokens:
        refusals.append(f"{_LLAMA_METRICS[metric]} {counted} != expected {tokens}")
    if n_depth != depth:
        refusals.append(f"n_depth {n_depth} != expected {depth}")
    elapsed = avg_ns / 1e9
    if tokens / elapsed and abs(avg_ts - tokens / elapsed) > protocol.RATE_TOLERANCE * 5 * (tokens / elapsed):
        # avg_ts is the mean of per-sample rates, avg_ns of per-sample times: they differ by the
        # samples' spread, so the tolerance is wider than the protocol line's
        refusals.append(f"avg_ts {avg_ts:.6g} disagrees with n/avg_ns {tokens / elapsed:.6g} by more than "
                        f"{protocol.RATE_TOLERANCE * 5:.0%}")
    if refusals:
        return BenchParse(None, refusals, tail)
    result = {"metric": metric, "value": avg_ts, "tokens": tokens, "elapsed_s": elapsed, "depth": depth,
              "context": context, "shortcut": "none"}
    return BenchParse(result, [], tail)


def _objects(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The report's test objects, from either JSON (an array) or JSONL; log lines around are allowed."""
    dec = json.JSONDecoder(parse_constant=lambda name: float("nan"))
    stripped = text.strip()
    try:
        doc = dec.decode(stripped) if stripped.startswith("[") else None
    except ValueError:
        doc = None
    if doc is not None:
        if not all(isinstance(x, dict) for x in doc):
            return [], ["llama-bench JSON array holds something other than objects"]
        return doc, []
    out: list[dict[str, Any]] = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            continue        # log text
        try:
            obj = dec.decode(line)
        except ValueError as e:
            return [], [f"line {n} starts like a llama-bench result but is not valid JSON ({e})"]
        if isinstance(obj, dict):
            out.append(obj)
    if not out and stripped.startswith("["):
        return [], ["llama-bench JSON output is not valid JSON"]
    return out, []


@dataclass(frozen=True)
class Adapter:
    """One output format a profile may select (``bench.adapter``): how its stdout is read, and
    whether the run also writes ``{out}/bench_logits.npy`` (the scored-path and timed-path checks
    need it: the console's protocol asks for it, llama-bench has no such output)."""
    name: str
    parse: Callable[..., BenchParse]
    writes_logits: bool
    description: str


def _registry(*adapters: Adapter) -> dict[str, Adapter]:
    """The adapters by name. The profile, read before the engine loads, validates against
    ``profile.spec.ADAPTER_NAMES``: the registry must hold exactly those names, or a profile
    could select a format nothing reads (refused here, when the engine is imported)."""
    by_name = {a.name: a for a in adapters}
    if tuple(by_name) != ADAPTER_NAMES:
        raise RuntimeError(f"engine adapters {tuple(by_name)} are not the profile's {ADAPTER_NAMES}")
    return by_name


ADAPTERS = _registry(
    Adapter(BENCH_RESULT, protocol.parse_bench_output, writes_logits=True,
            description="the console's own protocol line (docs/PROTOCOL.md)"),
    Adapter(LLAMA_BENCH, parse_llama_bench, writes_logits=False,
            description="llama.cpp's `llama-bench -o json|jsonl` report"),
)
