"""``--save-result DIR`` of ``console blocks``: each build's timed requests of a serving round as a
result file that reads like ``vllm bench serve --save-result`` (docs/SERVING.md, "Exports"); of a
serving matrix round, one file per cell and build, each at its cell's load.

Only the blocks the gate counted enter a build's result: a suspect or failed block is never pooled.
"""
from __future__ import annotations

import json
from typing import Any

from ...core.records.matrix import Cell
from ...core.records.receipt import Receipt
from .base import BUILD, Exporter


def vllm_result(r: Receipt, build: str, receipt_id: str = "", cell: Cell | None = None) -> dict[str, Any]:
    """One build's counted timed blocks (of ``cell``, in a matrix round) pooled into one run, with the
    field names of ``vllm bench serve --save-result`` where a field means the same; ``bench_console``
    says what the run was and how it was decided."""
    # loaded when a result is written: the CLI reads this registry at every start, for --format's choices
    from ...core.decisions import counting
    from ...serving import metrics
    from ...serving.client import Block, RequestRecord
    c = counting.counted(r, r.rules)
    blocks = c.valid.get((build, cell.phase if cell else "timed"), [])
    server = r.profile.server
    load = {"concurrency": server.get("concurrency", 0), "rate": server.get("rate") or 0.0, **dict(cell.args if cell else ())}
    records = [RequestRecord.from_dict(q) for rep in blocks for q in (rep.reported or {}).get("requests", [])]
    pooled = Block(records=records, duration_s=sum(float((rep.reported or {}).get("duration", 0.0)) for rep in blocks),
                   started_at="", concurrency=int(load["concurrency"]))
    fig = metrics.summarize_block(pooled)
    slo = dict(server.get("slo") or {})
    rate = float(load["rate"])
    return {
        "date": r.started_at, "backend": "openai", "endpoint_type": "openai",
        "label": f"{r.profile.name}:{build}",
        "model_id": ",".join(m.get("name", "") for m in (r.inputs.model if r.inputs else [])) or r.profile.name,
        "num_prompts": len(records), "request_rate": rate if rate > 0 else "inf", "burstiness": 1.0,
        "max_concurrency": int(load["concurrency"]),
        **{k: v2 for k, v2 in fig.items() if k != "stream_tok_s"},
        "request_goodput": metrics.goodput(pooled, slo) if slo else None,
        "generated_texts": [], "bench_console": {
            "receipt_id": receipt_id, "round_id": r.round_id, "build": build, "blocks": len(blocks),
            **({"cell": cell.key} if cell else {}),
            "outcome": r.verdict.outcome.value if r.verdict else None, "tier": r.verdict.tier if r.verdict else None,
            "metric": r.profile.bench.get("metric"),
            "stream_tok_s": fig.get("stream_tok_s"), "slo_ms": slo,
            "note": "pooled over the build's counted timed blocks; duration is their sum; generated texts are "
                    "not kept (the server check compared tokens before timing)"}}


def render(r: Receipt, build: str, receipt_id: str = "", cell: Cell | None = None) -> str:
    return json.dumps(vllm_result(r, build, receipt_id, cell), indent=2) + "\n"


def cell_stem(cell: Cell) -> str:
    """A cell's key as a file name's part: ``concurrency=4,rate=2`` is ``concurrency-4_rate-2``."""
    return cell.key.replace("=", "-").replace(",", "_")


EXPORTER = Exporter("vllm", ".json", BUILD, render, stem="{round_id}-{build}")
CELL_STEM = "{round_id}-{cell}-{build}"
