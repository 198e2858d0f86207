"""One timed block through a build's server, judged like a rep: its figures, its telemetry, and the
status that keeps a block from counting when it should not. A block with a failed request is never
timed as fast: it is retried like a suspect rep while the retry budget lasts, then the round is
``infra`` with the failures named. A server that dies under load, or whose figures contradict what
it served, fails its build's block (the candidate's rejects it, main's is ``infra``)."""
from __future__ import annotations

import time
from pathlib import Path

from ...core.records.receipt import Rep
from ...runtime.base import RunResult
from ...serving import client, metrics
from ...serving import workload as wl
from ..schedule import Item
from ..reps import Bench
from .record import block_value, keep_served, receipt_figures
from .servers import Servers, tail


def run_block(b: Bench, servers: Servers, item: Item, attempt: int, out_dir: Path) -> tuple[Rep, RunResult]:
    """One block through ``item.build``'s server, judged like a rep: its figures, its telemetry."""
    p, spec = b.profile, servers.spec
    served = servers.get(item.build)
    load = servers.load_of(item.args)      # a matrix cell's load, else the round's (or a sweep level's)
    reqs = servers.requests(item.phase, item.index, load)
    cpu0 = served.cpu_s()
    monitor = b.tele.monitor(0.1, own_pids=served.pids)
    t0 = time.monotonic()
    try:
        # every timed token is graded after the blocks: a response that withholds its ids is misreported
        blk = client.drive(served.url, spec.endpoint, reqs, fields=spec.request,
                           concurrency=load.concurrency, timeout_s=spec.timeout_s, ids=True)
    finally:
        telemetry = monitor.stop()
    wall = time.monotonic() - t0
    cpu1 = served.cpu_s()
    fig = metrics.summarize_block(blk)
    failed = metrics.failures(blk)
    alive = served.alive()
    served_sha = keep_served(b.work, item, attempt, reqs, blk)
    rep = Rep(build=item.build, phase=item.phase, index=item.index, position=item.position, attempt=attempt,
              depth=0, tokens=int(fig["total_output_tokens"]), context="serve", status="ok",
              exit_code=0 if alive else None, wall_s=round(wall, 6),
              value=block_value(fig, p.bench.metric) if not failed else None,
              reported={**receipt_figures(fig, blk, wl.workload_sha256(reqs), servers.starts.get(item.build, 0)),
                        "served_sha256": served_sha},
              refusals=[], peak_mem_bytes=None, log_tail=[] if alive else tail(served.logs()).split(" | "))
    res = RunResult(exit_code=rep.exit_code, wall_s=wall, stdout=b"", stderr=b"",
                    cpu_s=(cpu1 - cpu0) if cpu0 is not None and cpu1 is not None else None, telemetry=telemetry)
    if not alive:
        # the build's server died under load: its failure (the candidate's rejects it, main's is infra)
        servers.live.pop(item.build, None)
        servers.dead.add(item.build)
        rep.status = "failed"
        rep.refusals = [f"the server exited during the block ({len(failed)} of {len(reqs)} requests failed)"]
    elif lied := [f"request #{r.index}: {r.error}" for r in blk.records if r.misreported]:
        # its own figures contradict what it served: the server's doing, not the node's (the
        # candidate's rejects it, main's is infra), and never retried into a block that counts
        rep.status = "failed"
        rep.refusals = [f"the server misreported its work on {len(lied)} of {len(reqs)} requests ({lied[0]})"]
    elif failed:
        # never timed as fast: the block is retried like a suspect rep, then the round is infra
        rep.status = "suspect"
        rep.suspect = [f"{len(failed)} of {len(reqs)} requests failed ({failed[0]}"
                       + (", …" if len(failed) > 1 else "") + ")"]
    return rep, res
