import pytest
from hypothesis import given, settings, strategies as st

from console.serving.client import Block, RequestRecord
from console.core.decisions.serving import LATENCIES, SCORED as METRICS
from console.serving.metrics import failures, goodput, summarize_block


def _record(index: int, sent: float, ttft: float, gaps: list[float], *, input_tokens: int = 10,
            max_tokens: int | None = None, error: str = "", status: int = 200) -> RequestRecord:
    times = [sent + ttft]
    for g in gaps:
        times.append(times[-1] + g)
    n = len(times)
    return RequestRecord(index=index, input_tokens=input_tokens, max_tokens=max_tokens or n, sent_s=sent,
                         first_token_s=times[0], token_s=times, output_tokens=n, chunks=n, status=status,
                         error=error, finish_reason="length", end_s=times[-1], text="x" * n)


def test_figures_of_a_small_block_exactly():
    a = _record(0, 0.0, 0.1, [0.02, 0.02, 0.02])          # 4 tokens, ends at 0.16
    b = _record(1, 0.05, 0.2, [0.04], input_tokens=30)      # 2 tokens, ends at 0.29
    bad = _record(2, 0.1, 0.05, [], max_tokens=8, error="stopped early: 1 of 8 tokens")
    s = summarize_block(Block([a, b, bad], duration_s=0.5, started_at="t", concurrency=3))
    assert (s["completed"], s["failed"]) == (2, 1)
    assert (s["total_input_tokens"], s["total_output_tokens"]) == (40, 6)
    assert s["request_throughput"] == pytest.approx(4.0)
    assert s["output_throughput"] == pytest.approx(12.0)
    assert s["total_token_throughput"] == pytest.approx(92.0)
    assert s["mean_ttft_ms"] == pytest.approx(150.0) and s["median_ttft_ms"] == pytest.approx(150.0)
    assert s["std_ttft_ms"] == pytest.approx(50.0)                       # population, as vLLM
    assert s["p99_ttft_ms"] == pytest.approx(199.0)                      # linear between 100 and 200
    assert s["mean_tpot_ms"] == pytest.approx(30.0)                      # (20 + 40) / 2
    assert s["median_itl_ms"] == pytest.approx(20.0) and s["p99_itl_ms"] == pytest.approx(39.4)  # 20, 20, 20, 40
    assert s["mean_e2el_ms"] == pytest.approx((160.0 + 240.0) / 2)
    assert s["stream_tok_s"] == pytest.approx(1 / 0.030)
    assert s["input_lens"] == [10, 30, 10] and s["output_lens"] == [4, 2, 1]
    assert s["ttfts"] == pytest.approx([0.1, 0.2, 0.05])
    assert s["itls"][0] == pytest.approx([0.02] * 3) and s["itls"][2] == []
    assert s["errors"] == ["", "", "stopped early: 1 of 8 tokens"]
    assert failures(Block([a, b, bad], 0.5, "t", 3)) == ["request #2: stopped early: 1 of 8 tokens"]


def test_every_scored_and_guarded_metric_names_a_summary_key():
    s = summarize_block(Block([_record(0, 0.0, 0.1, [0.01, 0.01])], 0.2, "t", 1))
    assert set(METRICS.values()) <= set(s) and set(LATENCIES.values()) <= set(s)
    assert all(s[k] is not None for k in (*METRICS.values(), *LATENCIES.values()))


def test_a_block_with_nothing_whole_has_no_latencies_and_no_rate():
    bad = _record(0, 0.0, 0.1, [0.01], max_tokens=5, error="stopped early: 2 of 5 tokens")
    refused = RequestRecord(index=1, input_tokens=3, max_tokens=4, status=500, error="HTTP 500: boom")
    s = summarize_block(Block([bad, refused], 0.3, "t", 2))
    assert s["completed"] == 0 and s["failed"] == 2 and s["output_throughput"] == 0.0
    assert s["p99_ttft_ms"] is None and s["median_tpot_ms"] is None and s["stream_tok_s"] is None
    assert s["ttfts"] == [pytest.approx(0.1), None]
    assert summarize_block(Block([], 0.0, "t", 1))["request_throughput"] == 0.0
    assert failures(Block([bad, refused], 0.3, "t", 2)) == [
        "request #0: stopped early: 2 of 5 tokens", "request #1: HTTP 500: boom"]


def test_goodput_counts_only_whole_requests_within_every_target():
    fast = _record(0, 0.0, 0.05, [0.01, 0.01])
    slow_first = _record(1, 0.0, 0.5, [0.01, 0.01])
    slow_steps = _record(2, 0.0, 0.05, [0.2, 0.2])
    one_token = _record(3, 0.0, 0.05, [])
    broken = _record(4, 0.0, 0.01, [0.001], max_tokens=9, error="stopped early: 2 of 9 tokens")
    block = Block([fast, slow_first, slow_steps, one_token, broken], 2.0, "t", 5)
    assert goodput(block, {"ttft_ms": 100}) == pytest.approx(3 / 2.0)
    assert goodput(block, {"ttft_ms": 100, "tpot_ms": 50}) == pytest.approx(2 / 2.0)
    assert goodput(block, {"e2el_ms": 70}) == pytest.approx(2 / 2.0)   # fast (70 ms, inclusive), one_token
    assert goodput(block, {}) == pytest.approx(4 / 2.0)
    with pytest.raises(ValueError, match="unknown SLO key"):
        goodput(block, {"itl_ms": 5})


_gaps = st.lists(st.floats(0.0005, 0.2), max_size=12)
_records = st.lists(st.tuples(st.floats(0, 1), st.floats(0.001, 1), _gaps, st.integers(1, 500), st.booleans()),
                    min_size=1, max_size=20)


def _block(rows) -> Block:
    recs = [_record(i, sent, ttft, gaps, input_tokens=inp,
                    error="" if whole else "stopped early", max_tokens=None if whole else 99)
            for i, (sent, ttft, gaps, inp, whole) in enumerate(rows)]
    end = max(r.end_s for r in recs)
    return Block(recs, duration_s=end - min(r.sent_s for r in recs), started_at="t", concurrency=4)


@settings(max_examples=80, deadline=None)
@given(rows=_records, slo=st.fixed_dictionaries({}, optional={"ttft_ms": st.floats(0, 2000),
                                                              "tpot_ms": st.floats(0, 300),
                                                              "e2el_ms": st.floats(0, 5000)}))
def test_properties_of_any_block(rows, slo):
    block = _block(rows)
    s = summarize_block(block)
    for name in ("ttft", "tpot", "itl", "e2el"):
        if s[f"median_{name}_ms"] is not None:
            assert s[f"median_{name}_ms"] <= s[f"p90_{name}_ms"] + 1e-9 <= s[f"p99_{name}_ms"] + 2e-9
    ok = [r for r in block.records if r.ok]
    assert s["output_throughput"] == pytest.approx(sum(r.output_tokens for r in ok) / block.duration_s)
    assert s["request_throughput"] == pytest.approx(len(ok) / block.duration_s)
    assert s["completed"] + s["failed"] == len(rows)
    assert goodput(block, slo) <= s["request_throughput"] + 1e-12
