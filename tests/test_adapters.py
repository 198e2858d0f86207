"""llama-bench's report read as strictly as the protocol line (console.engine.adapters)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.engine.adapters import ADAPTERS, parse_llama_bench

SAMPLE = (Path(__file__).parent / "data" / "llama-bench" / "pp512.jsonl").read_bytes()


def parse(data: bytes, metric: str = "prefill_tok_s", tokens: int = 512, depth: int = 512):
    return parse_llama_bench(data, metric=metric, tokens=tokens, depth=depth, context="doc")


def obj() -> dict:
    return json.loads(SAMPLE)


def test_a_jsonl_report_becomes_a_protocol_result():
    r = parse(b"load: some log line\n" + SAMPLE + b"llama_perf: more log\n")
    assert r.ok, r.refusals
    assert r.result == {"metric": "prefill_tok_s", "value": 208.99, "tokens": 512, "elapsed_s": 2.45,
                        "depth": 512, "context": "doc", "shortcut": "none"}


def test_a_json_array_report_is_read_too():
    r = parse(json.dumps([obj()], indent=2).encode())
    assert r.ok, r.refusals


@pytest.mark.parametrize("change, refusal", [
    ({"n_prompt": 256}, "n_prompt 256 != expected 512"),
    ({"n_depth": 0}, "n_depth 0 != expected 512"),
    ({"n_gen": 128}, "mixes prefill and decode"),
    ({"avg_ts": float("nan")}, "avg_ts"),
    ({"avg_ts": -1.0}, "avg_ts"),
    ({"avg_ns": 0}, "avg_ns"),
    ({"samples_ts": []}, "samples_ts"),
    ({"samples_ts": [1.0, "fast"]}, "samples_ts"),
    ({"n_prompt": True}, "n_prompt"),
    ({"avg_ts": 400.0}, "disagrees with n/avg_ns"),
])
def test_anything_else_is_refused_with_its_reason(change, refusal):
    o = {**obj(), **change}
    r = parse(json.dumps(o).encode())
    assert not r.ok and r.result is None
    assert any(refusal in x for x in r.refusals), r.refusals


def test_two_results_or_none_are_refused():
    assert "2 llama-bench results" in parse(SAMPLE + SAMPLE).refusals[0]
    assert "0 llama-bench results" in parse(b"just logs\n").refusals[0]


def test_a_metric_llama_bench_does_not_report_is_refused():
    assert "not one llama-bench reports" in parse(SAMPLE, metric="tok_per_watt").refusals[0]


def test_decode_is_read_from_n_gen():
    o = {**obj(), "n_prompt": 0, "n_gen": 64, "n_depth": 256, "avg_ns": 2_461_538_461, "avg_ts": 26.0}
    r = parse(json.dumps(o).encode(), metric="decode_tok_s", tokens=64, depth=256)
    assert r.ok, r.refusals
    assert r.result["value"] == 26.0 and r.result["tokens"] == 64


def test_a_broken_result_line_is_refused_not_skipped():
    r = parse(b'{"n_prompt": 512, "avg_ts": \n')
    assert not r.ok and "not valid JSON" in r.refusals[0]


def test_every_adapter_is_selectable_by_name():
    assert set(ADAPTERS) == {"bench_result", "llama-bench"}
    # each record is keyed by its own name and says whether its bench writes logits
    assert all(name == a.name for name, a in ADAPTERS.items())
    assert (ADAPTERS["bench_result"].writes_logits, ADAPTERS["llama-bench"].writes_logits) == (True, False)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_never_raises_on_any_bytes(data):
    r = parse(data)
    assert r.ok == (r.result is not None)
