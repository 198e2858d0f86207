"""A serving round's blocks as a table (``console blocks``); each build's vLLM-named result file is
an exporter's (``reports.export.vllm``).

A suspect or failed block is listed with its status; only the blocks the gate counted are ``counted``.
"""
from __future__ import annotations

from ..core.decisions import counting
from ..core.records.receipt import Receipt
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
    c = counting.counted(r, r.rules)
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
