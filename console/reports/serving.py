"""A serving round's blocks as tables, and each build's timed requests as a result file that reads
like ``vllm bench serve --save-result`` (docs/SERVING.md, "Exports").

Only the blocks the gate counted enter a build's result: a suspect or failed block is listed in
the blocks table with its status, never pooled into a figure.
"""
from __future__ import annotations

from typing import Any

from ..core import gate
from ..core.receipt import BUILDS, Receipt
from ..serving import metrics
from ..serving.client import Block, RequestRecord
from .tables import Column, Table

BLOCK_COLUMNS = (
    Column("build", "main | candidate"),
    Column("phase", "warmup | timed"),
    Column("index", "the block's pair (the k-th block of each build forms pair k)"),
    Column("attempt", "0, or the retry after a suspect block"),
    Column("status", "ok | suspect (failed requests or the node moved; retried, never counted) | refused"),
    Column("counted", "whether the gate counted it"),
    Column("completed", "requests that came back whole"),
    Column("failed", "requests that did not (an error, a timeout, fewer tokens than asked)"),
    Column("duration", "seconds from the first send to the last token"),
    Column("output_throughput", "output tokens per second over the block"),
    Column("request_throughput", "requests per second over the block"),
    Column("median_ttft_ms", "time to first token, median, ms"),
    Column("p99_ttft_ms", "time to first token, 99th percentile, ms"),
    Column("median_tpot_ms", "time per output token after the first, median over requests, ms"),
    Column("median_itl_ms", "gap between successive tokens, median, ms"),
    Column("p99_itl_ms", "gap between successive tokens, 99th percentile, ms"),
    Column("stream_tok_s", "tokens per second one stream sees (1 / median TPOT)"),
    Column("workload_sha256", "sha256 of the block's requests: equal for both builds of a pair", lambda x: str(x)[:12]),
)


def block_table(r: Receipt) -> Table:
    """Every block of the round, in schedule order, with its figures and whether it counted."""
    c = gate.counted(r, r.rules)
    counted = {id(x) for reps in c.valid.values() for x in reps}
    rows = []
    for rep in sorted(r.reps, key=lambda x: x.schedule_key):
        if rep.context != "serve":
            continue
        fig = rep.reported or {}
        rows.append({"build": rep.build, "phase": rep.phase, "index": rep.index, "attempt": rep.attempt,
                     "status": rep.status, "counted": id(rep) in counted,
                     **{col.key: fig.get(col.key) for col in BLOCK_COLUMNS[6:]}})
    return Table("blocks", "Blocks (each a rep: one build's server under one block of requests)", BLOCK_COLUMNS, rows)


def vllm_result(r: Receipt, build: str, receipt_id: str = "") -> dict[str, Any]:
    """One build's counted timed blocks pooled into one run, with the field names of
    ``vllm bench serve --save-result`` where a field means the same; ``bench_console`` says what
    the run was and how it was decided."""
    c = gate.counted(r, r.rules)
    blocks = c.valid.get((build, "timed"), [])
    records = [RequestRecord.from_dict(q) for rep in blocks for q in (rep.reported or {}).get("requests", [])]
    pooled = Block(records=records, duration_s=sum(float((rep.reported or {}).get("duration", 0.0)) for rep in blocks),
                   started_at="", concurrency=int(r.profile.server.get("concurrency", 0)))
    fig = metrics.summarize_block(pooled)
    server = r.profile.server
    slo = dict(server.get("slo") or {})
    rate = float(server.get("rate") or 0.0)
    return {
        "date": r.started_at, "backend": "openai", "endpoint_type": "openai",
        "label": f"{r.profile.name}:{build}",
        "model_id": ",".join(m.get("name", "") for m in (r.inputs.model if r.inputs else [])) or r.profile.name,
        "num_prompts": len(records), "request_rate": rate if rate > 0 else "inf", "burstiness": 1.0,
        "max_concurrency": server.get("concurrency"),
        **{k: v2 for k, v2 in fig.items() if k != "stream_tok_s"},
        "request_goodput": metrics.goodput(pooled, slo) if slo else None,
        "generated_texts": [], "bench_console": {
            "receipt_id": receipt_id, "round_id": r.round_id, "build": build, "blocks": len(blocks),
            "outcome": r.verdict.outcome.value if r.verdict else None, "tier": r.verdict.tier if r.verdict else None,
            "metric": r.profile.bench.get("metric"),
            "stream_tok_s": fig.get("stream_tok_s"), "slo_ms": slo,
            "note": "pooled over the build's counted timed blocks; duration is their sum; generated texts are "
                    "not kept (the server check compared tokens before timing)"}}


def vllm_results(r: Receipt, receipt_id: str = "") -> dict[str, dict[str, Any]]:
    return {b: vllm_result(r, b, receipt_id) for b in BUILDS}
