"""A sweep's figures (core.sweep), its page, and a serving round's exports (reports.serving)."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from console.core.records.receipt import Receipt
from console.core.decisions.sweep import Level, estimate, level_figures, parse_levels
from console.reports.export.vllm import vllm_result
from console.reports.serving import block_table
from console.reports.sweep_html import render_sweep

from core.receipts import make_receipt

# the keys `vllm bench serve --save-result` writes that mean the same here
VLLM_KEYS = {"date", "backend", "model_id", "num_prompts", "request_rate", "burstiness", "max_concurrency",
             "duration", "completed", "total_input_tokens", "total_output_tokens", "request_throughput",
             "request_goodput", "output_throughput", "total_token_throughput", "input_lens", "output_lens",
             "ttfts", "itls", "generated_texts", "errors",
             *(f"{s}_{m}_ms" for s in ("mean", "median", "std", "p99") for m in ("ttft", "tpot", "itl", "e2el"))}


def test_levels_are_parsed_with_the_bad_item_named():
    assert parse_levels("1,2,8", None, 4) == [Level(1), Level(2), Level(8)]
    assert parse_levels(None, "0.5,2", 4) == [Level(4, 0.5), Level(4, 2.0)]
    assert [lv.name for lv in parse_levels(None, "0.5,2", 4)] == ["r0.5", "r2"]
    for conc, rate, said in (("1,x", None, "'x' is not a whole number"), ("0", None, "must be positive"),
                             ("2,2", None, "listed twice"), (None, None, "either"), ("1", "1", "either")):
        with pytest.raises(ValueError, match=said):
            parse_levels(conc, rate, 4)


@given(st.lists(st.floats(0.1, 1e4), min_size=2, max_size=12))
def test_an_estimate_is_a_positive_interval_around_the_geometric_mean(values):
    e = estimate(values)
    gm = math.exp(sum(math.log(v) for v in values) / len(values))
    assert e.n == len(values) and math.isclose(e.mean, gm, rel_tol=1e-9)
    if e.low is not None:
        assert 0 < e.low <= e.mean * (1 + 1e-9) and e.high >= e.mean * (1 - 1e-9)


def test_one_block_has_no_interval_and_none_has_no_figure():
    assert estimate([3.0]).low is None and estimate([3.0]).mean == pytest.approx(3.0)
    assert estimate([]).mean is None and estimate([None, 0.0]).n == 0


def test_a_level_pairs_the_blocks_for_the_candidates_gain():
    pairs = [({"output_throughput": 100.0, "median_ttft_ms": 50.0}, {"output_throughput": 110.0 + k,
                                                                     "median_ttft_ms": 45.0}) for k in range(4)]
    f = level_figures(Level(4), pairs)
    assert f.builds["candidate"]["median_ttft_ms"].mean == pytest.approx(45.0)
    assert 0.10 < f.gain.mean < 0.13 and f.gain.low < f.gain.mean < f.gain.high and f.gain.n == 4
    assert f.to_dict()["level"] == {"concurrency": 4, "rate": 0.0, "name": "c4"}


def test_the_sweep_page_draws_every_level_and_says_what_it_does_not_decide():
    pairs = [({"output_throughput": 20.0 * c, "median_tpot_ms": 10.0 * c, "median_ttft_ms": 100.0},
              {"output_throughput": 22.0 * c + k, "median_tpot_ms": 9.0 * c, "median_ttft_ms": 90.0})
             for c in (1, 2) for k in range(3)]
    levels = [level_figures(Level(1), pairs[:3]).to_dict(), level_figures(Level(2), pairs[3:]).to_dict()]
    page = render_sweep({"round_id": "r1", "levels": levels, "slo_ms": {"ttft_ms": 200},
                         "server_slots": 2, "receipt": {"profile": {"name": "llama-server"}}, "refused": []})
    assert page.count("<svg") == 1 and "decides nothing" in page and "ttft_ms ≤ 200" in page
    assert page.count("<tr><td>c1</td>") == 2 and "paired by block: +" in page


def _serving_receipt() -> dict:
    """A sealed-shape serving receipt: blocks as reps, each with its figures and its requests."""
    d = make_receipt()
    d["profile"]["bench"] = {"mode": "serve", "metric": "output_tok_s"}
    d["profile"]["server"] = {"concurrency": 2, "rate": 0.0, "slo": {"ttft_ms": 150.0}}
    d["inputs"] = {"model": [{"name": "m.gguf"}]}
    d["reps"] = [r for r in d["reps"] if r["phase"] in ("warmup", "timed")]
    for r in d["reps"]:
        ttft = 0.1 if r["build"] == "main" else 0.2
        reqs = [{"index": i, "input_tokens": 8, "max_tokens": 4, "sent_s": 0.0, "first_token_s": ttft,
                 "token_s": [ttft, ttft + 0.01, ttft + 0.02, ttft + 0.03], "output_tokens": 4, "chunks": 4,
                 "status": 200, "error": "", "finish_reason": "length", "end_s": ttft + 0.03} for i in range(2)]
        r.update(context="serve", depth=0, peak_mem_bytes=None)
        r["reported"] = {"tokens": r["tokens"], "elapsed_s": r["reported"]["elapsed_s"], "duration": 1.0,
                         "output_throughput": r["value"], "p99_ttft_ms": ttft * 1e3, "requests": reqs}
    return d


def test_the_blocks_table_lists_every_block_and_which_counted():
    t = block_table(Receipt.from_dict(_serving_receipt()))
    timed = [row for row in t.rows if row["phase"] == "timed"]
    assert len(timed) == 16 and all(row["counted"] for row in timed)
    assert not any(row["counted"] for row in t.rows if row["phase"] == "warmup")
    assert timed[0]["p99_ttft_ms"] in (100.0, 200.0)


def test_a_builds_result_has_vllms_field_names_pooled_over_its_counted_blocks():
    doc = vllm_result(Receipt.from_dict(_serving_receipt()), "candidate", "abc")
    assert VLLM_KEYS <= set(doc)
    assert (doc["num_prompts"], doc["completed"], doc["duration"], doc["total_output_tokens"]) == (16, 16, 8.0, 64)
    assert doc["median_ttft_ms"] == pytest.approx(200.0) and doc["max_concurrency"] == 2
    assert doc["request_rate"] == "inf" and doc["model_id"] == "m.gguf"
    assert doc["request_goodput"] == 0.0        # every TTFT (200 ms) misses the 150 ms target
    assert vllm_result(Receipt.from_dict(_serving_receipt()), "main")["request_goodput"] == pytest.approx(16 / 8.0)
    assert doc["bench_console"]["receipt_id"] == "abc" and doc["bench_console"]["blocks"] == 8


def test_the_exporters_write_a_receipts_reports_and_a_sweeps_page_and_say_so(tmp_path, monkeypatch):
    # what `console run` / `console sweep` and the queue's worker leave beside a finished round's record
    from console.core.decisions import gate
    from console.core.records.rules import GateRules
    from console.reports.export import export, export_notice
    from console.reports.export.junit import junit_xml
    from console.reports.export.summary import markdown_summary
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    r = make_receipt()
    r["verdict"] = gate.decide(Receipt.from_dict(r), GateRules()).to_dict()
    sealed = Receipt.from_dict(r)       # what the round hands over: its sealed receipt, as it read it
    assert export(sealed, tmp_path) == [tmp_path / "junit.xml", tmp_path / "summary.md"]
    assert (tmp_path / "junit.xml").read_text() == junit_xml(sealed, sealed.verdict)
    assert (tmp_path / "summary.md").read_text() == markdown_summary(sealed, sealed.verdict)
    sweep = {"kind": "sweep", "round_id": "r1", "levels": [], "slo_ms": {}, "server_slots": 1,
             "receipt": {"profile": {"name": "p"}}, "refused": []}
    page = tmp_path / "sweeps" / "r1.html"
    said = export_notice(sweep, tmp_path)
    assert said.level == "info" and str(page) in said.message and "junit" not in said.message
    assert page.read_text() == render_sweep(sweep)
    other = tmp_path / "other"
    other.mkdir()
    (other / "sweeps").write_text("a file where the folder goes")     # a failed write is said, not raised
    said = export_notice(sweep, other)
    assert said.level == "error" and "reports were not written" in said.message
