"""The serving stage: one server per build, checked before timing, then blocks of requests as reps.

A block is the serving round's rep: the same requests (seeded by the block's pair, so both builds
of a pair answer identical work) driven through a build's server by the console's own load client
(``console.serving.client``), at the profile's concurrency or arrival rate. Its figures (TTFT, ITL,
TPOT, throughput; ``core.serving``) go into the rep; its scored metric is the rep's value, so the
pairs, the sequential decision, the tiers and the ledger are the speed round's own.

A server that dies or never becomes ready is its build's failure (the candidate's is rejected
through the server check; main's makes the round ``infra``), said with the tail of its log. A
block with a failed request is never timed as fast: it is retried like a suspect rep while the
retry budget lasts, then the round is ``infra`` with the failures named.
"""
from __future__ import annotations

import hashlib
import secrets
import time
from pathlib import Path

from .. import events as ev
from ..core import adjudication as adj
from ..core.receipt import Rep
from ..core.served import Completion, ServedCheck, ServedSide, WorkloadDraw, commitment_of
from ..core.serving import SCORED, agreed
from ..core.sweep import Level
from ..errors import InfraError, Interrupted, UsageError
from ..runtime.base import RunResult, Served
from ..serving import client, metrics
from ..serving import workload as wl
from .adjudicate import generate
from .plan import DOC_NAME, Item, fill
from .served_grade import keep_served
from .reps import Bench

LOG_LINES = 12


class Servers:
    """The round's servers, one per build, started on demand and stopped at the end."""

    def __init__(self, b: Bench, notice: ev.Notify, slots: int = 0):
        self.b, self.spec, self._notice = b, b.profile.server, notice
        # the load of the next block (a sweep changes it per level), and the server's slots for it
        self.load = Level(self.spec.concurrency, self.spec.rate)
        self.slots = slots or self.spec.concurrency
        self.live: dict[str, Served] = {}
        self.ready_s: dict[str, float] = {}
        self.starts: dict[str, int] = {}
        self.closed = False
        self.dead: set[str] = set()        # builds whose server exited under load
        self.ready_cpu_s: dict[str, float | None] = {}
        self.doc = [int(x) for x in (b.inputs / DOC_NAME).read_text().split()]
        # the timed workload's seed is drawn when the blocks begin (``draw``); the requests that warm a
        # server after its start are untimed, drawn from a seed of their own that is never recorded
        self.seed: str | None = None
        self._warm_seed = secrets.token_hex(16)

    def draw(self) -> WorkloadDraw:
        """Draw the timed workload's seed from the operating system, now that both servers are ready.
        The caller journals its commitment before the first block and records the seed after the last."""
        self.seed = secrets.token_hex(16)
        w = self.spec.workload
        space = wl.prompt_space_log10(len(self.doc), tuple(w.input), w.drawn, len(wl.vocabulary_of(self.doc))) \
            if w.kind == "random" else 0.0
        return WorkloadDraw(seed=self.seed, commitment=commitment_of(self.seed),
                            drawn=w.drawn if w.kind != "file" else 0, space_log10=round(space, 2))

    def start(self, build: str) -> Served:
        """Start ``build``'s server and wait until it answers; InfraError (with its log) if it cannot."""
        if self.closed:
            raise Interrupted("the round was interrupted", "Run it again; its builds are reused by their keys.")
        self.stop(build)
        self._freeze_all_but(build)     # frozen while this one loads and warms up
        p, spec, b = self.b.profile, self.spec, self.b
        n = self.starts[build] = self.starts.get(build, 0) + 1
        host, port = b.rt.serve_address(spec.port)
        argv = fill(spec.command, p, host=host, port=str(port), slots=str(self.slots))
        served = b.rt.serve(b.builds[build], argv, port=port, src_dir=b.src_dirs[build],
                            out_dir=b.work / "servers" / f"{build}-{n}", run=p.run, label=f"{build}/server/{n}",
                            gpus=b.gpus, models=b.models)
        self.live[build] = served
        waited = client.wait_ready(served.url, spec.ready, spec.ready_timeout_s, alive=served.alive)
        if waited is None:
            why = "exited" if not served.alive() else f"did not answer {spec.ready} within {spec.ready_timeout_s:g} s"
            log = tail(served.logs())
            self.stop(build)
            raise ServerDown(build, f"{build}'s server {why}; its log ends: {log}")
        self.ready_s[build] = round(waited, 3)
        cpu = served.cpu_s()
        self.ready_cpu_s[build] = None if cpu is None else round(cpu, 3)
        if spec.warmup:
            self.warm(build, served)
        return served

    def warm(self, build: str, served: Served) -> None:
        """Untimed requests at the load's cap, after every start: the server's first batches are
        not what a block measures."""
        spec = self.spec
        reqs = self.requests("warmup-server", self.starts[build])[:spec.warmup]
        client.drive(served.url, spec.endpoint, reqs, fields=spec.request, concurrency=self.load.concurrency,
                     timeout_s=spec.timeout_s)

    def get(self, build: str) -> Served:
        if build in self.dead:      # a crash is the build's: starting it again would hide it
            raise ServerDown(build, f"{build}'s server exited during an earlier block; it is not started again")
        served = self.live.get(build)
        if served is None or self.spec.restart == "block":
            return self.start(build)
        self._freeze_all_but(build)
        served.resume()
        if not served.alive():
            raise ServerDown(build, f"{build}'s server exited between blocks; its log ends: {tail(served.logs())}")
        return served

    def _freeze_all_but(self, build: str) -> None:
        """Only ``build``'s server may run: an idle one could load it, and its CPU would count as
        the timed server's. A copy of ``live``: Ctrl-C stops servers from another thread."""
        for other, idle in list(self.live.items()):
            if other != build:
                idle.pause()

    def stop(self, build: str) -> None:
        served = self.live.pop(build, None)
        if served is not None:
            served.stop()   # paused or not: the runtime's stop ends it, so nothing stays frozen

    def stop_all(self) -> None:
        """At the round's end or abort: every server stops, and none starts again."""
        self.closed = True
        for build in list(self.live):
            self.stop(build)

    def requests(self, phase: str, index: int) -> list[wl.Request]:
        if phase == "warmup-server":
            return block_requests(self.spec, self.doc, self._warm_seed, phase, index, self.load)
        if self.seed is None:
            raise RuntimeError("a timed block's requests before the round drew its workload's seed")
        return block_requests(self.spec, self.doc, self.seed, phase, index, self.load)


def block_requests(spec, doc: list[int], seed: str, phase: str, index: int, load: Level) -> list[wl.Request]:
    """A block's requests: seeded by the round's drawn seed, the phase and the index, so the two builds
    of a pair answer the same work, no two blocks repeat it, and no server knows it before the blocks
    begin (a file's prompts are its own, and public)."""
    w = spec.workload
    block = int.from_bytes(hashlib.sha256(f"{seed}/{phase}/{index}".encode()).digest()[:8], "big")
    bos = doc[0]        # every prompt starts as the document does (llama.cpp's tokenizer: BOS)
    if w.kind == "random":
        reqs = wl.random_requests(doc, w.requests, tuple(w.input), tuple(w.output), block, bos=bos)
        reqs = wl.mix_drawn(reqs, wl.vocabulary_of(doc), w.drawn, block, keep=1)
    elif w.kind == "shared_prefix":
        reqs = wl.shared_prefix_requests(doc, w.requests, w.prefix, tuple(w.input), tuple(w.output), block,
                                         groups=w.groups, bos=bos)
        reqs = wl.mix_drawn(reqs, wl.vocabulary_of(doc), w.drawn, block, keep=w.prefix)  # the prefix stays shared
    else:
        reqs = wl.file_requests(Path(w.file), w.output[1])
    if load.rate > 0:
        reqs = wl.poisson_arrivals(reqs, load.rate, block)
    return reqs


def check_workload(p) -> None:
    """A workload that cannot be drawn from the document, or a workload file with a bad line, is
    refused before anything is built, naming the key (and the line)."""
    doc = [int(x) for x in Path(p.parity.document).read_text().split()]
    try:
        block_requests(p.server, doc, "check", "timed", 0, Level(p.server.concurrency, p.server.rate))
    except wl.WorkloadError as e:
        raise UsageError(f"{p.path}: key 'server.workload': {e}",
                         "Fix the workload: its lengths must fit the document, and each line of a "
                         "workload file must be a JSON object with a prompt.") from None


class ServerDown(InfraError):
    def __init__(self, build: str, message: str):
        self.build = build
        super().__init__(message, "Read the server's log above: fix the build or the node, then run the round again.")


def tail(log: str) -> str:
    lines = [x for x in log.strip().splitlines() if x.strip()]
    return " | ".join(lines[-LOG_LINES:]) or "(empty)"


# --- the server check ----------------------------------------------------------------

def check(b: Bench, servers: Servers, builds: list[str], emit: ev.Emit,
          check_abort: ev.CheckAbort, same_as_main: bool = True) -> ServedCheck:
    """Greedy completions through each server against the reference's tokens, and a repeated prompt.
    The tokens come from the harness on main's build: the reference's own when the reference was
    captured from main's source, else main's (said, and recorded as the check's basis)."""
    spec = b.profile.server.check
    record = ServedCheck(min_match=spec.min_match, repeat_ratio=spec.repeat_ratio,
                         basis="reference" if same_as_main else "main")
    if not same_as_main:
        emit(ev.Notice(level="warn", code="server-check-basis", message=(
            "the reference was not captured from main's source: the servers' greedy tokens are checked "
            "against main's build through the harness, not against the reference")))
    depths = [d for d in b.profile.parity.depths if not spec.longest or d <= spec.longest] or [spec.longest]
    positions = adj.positions(depths, spec.prompts)
    ref, err = generate(b, "main", "server-reference", [], positions, len(positions), tokens=spec.tokens)
    if ref is None:     # the yardstick failed, not a server: nothing can be graded
        raise InfraError(f"the reference's tokens for the server check could not be generated: {err}",
                         "Check main's build and the profile's [adjudication] command; then run the round again.")
    for build in builds:
        check_abort()
        side = ServedSide(asked=spec.tokens)
        setattr(record, build, side)
        try:
            served = servers.start(build)
        except ServerDown as e:
            if build == "main":
                raise
            side.error = str(e)
            continue
        side.ready_s, side.ready_cpu_s = servers.ready_s.get(build), servers.ready_cpu_s.get(build)
        _answer(servers, served, positions, ref, side)
        emit(ev.Notice(level="info", code="server-check", message=_said(build, side)))
    return record


def _answer(servers: Servers, served: Served, positions: list[int], ref: list[list[int]], side: ServedSide) -> None:
    """The check's completions go the timed blocks' way (their endpoint, streamed, their request
    fields), one at a time; only a timed stream that carries no token ids falls back to the check's
    own token endpoint (``check.endpoint``)."""
    spec = servers.spec
    chk = spec.check
    for pos, want in zip(positions, ref):
        c = Completion(position=pos, tokens=[], reference=list(want))
        req = wl.Request(index=0, prompt=tuple(servers.doc[:pos]), input_tokens=pos, max_tokens=chk.tokens)
        r = client.drive(served.url, spec.endpoint, [req], fields=spec.request, concurrency=1,
                         timeout_s=spec.timeout_s).records[0]
        # a short answer is graded as one (``core.serving``: "stopped early … reported as complete")
        c.tokens, c.error = list(r.token_ids), "" if r.short else r.error
        if not r.error and not r.token_ids:
            try:
                got = client.complete_tokens(served.url, chk.endpoint, servers.doc[:pos], chk.tokens, chk.request,
                                             spec.timeout_s)
                c.tokens = [int(t) for t in got.get(chk.tokens_field) or []]
            except (client.ServerError, TypeError, ValueError) as e:
                c.error = str(e)
        side.completions.append(c)
    # the cache probe: a primer first (so the probe's first answer is not the server's first), then
    # one prompt from elsewhere in the document, sent again and again, one at a time
    start = len(servers.doc) - chk.probe_tokens - 1
    probe = wl.Request(index=0, prompt=tuple([servers.doc[0]] + servers.doc[start:start + chk.probe_tokens - 1]),
                       input_tokens=chk.probe_tokens, max_tokens=2)
    primer = wl.Request(index=0, prompt=tuple(servers.doc[:chk.probe_tokens]), input_tokens=chk.probe_tokens,
                        max_tokens=2)
    for i, req in enumerate([primer] + [probe] * chk.repeats):
        blk = client.drive(served.url, spec.endpoint, [req], fields=spec.request, concurrency=1,
                           timeout_s=spec.timeout_s)
        r = blk.records[0]
        if r.error or r.ttft_s is None:
            side.probe_error = r.error or "no token came back"
            return
        if i:
            side.probe_ttft_s.append(round(r.ttft_s, 6))


def _said(build: str, side: ServedSide) -> str:
    if side.error:
        return f"{build}'s server: {side.error}"
    if side.probe_error:
        return f"{build}'s server: the cache probe's request failed: {side.probe_error}"
    first = sum(c.diverged_at() != 0 and not c.error for c in side.completions)
    same, asked = agreed(side)
    probe = ", ".join(f"{x * 1e3:.0f}" for x in side.probe_ttft_s)
    cpu = "" if side.ready_cpu_s is None else f" ({side.ready_cpu_s:.1f} CPU s)"
    return (f"{build}'s server ready in {side.ready_s:.1f} s{cpu}; {first} of {len(side.completions)} greedy "
            f"completions start with the reference's token, {same} of {asked} tokens agree before the first difference; "
            f"a repeated prompt's time to first token: {probe} ms")


# --- blocks ------------------------------------------------------------------------------

def run_block(b: Bench, servers: Servers, item: Item, attempt: int, out_dir: Path) -> tuple[Rep, RunResult]:
    """One block through ``item.build``'s server, judged like a rep: its figures, its telemetry."""
    p, spec = b.profile, servers.spec
    served = servers.get(item.build)
    reqs = servers.requests(item.phase, item.index)
    cpu0 = served.cpu_s()
    monitor = b.tele.monitor(0.1, own_pids=served.pids)
    t0 = time.monotonic()
    try:
        # every timed token is graded after the blocks: a response that withholds its ids is misreported
        blk = client.drive(served.url, spec.endpoint, reqs, fields=spec.request,
                           concurrency=servers.load.concurrency, timeout_s=spec.timeout_s, ids=True)
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
              value=_value(fig, p.bench.metric) if not failed else None,
              reported={**_reported(fig, blk, wl.workload_sha256(reqs), servers.starts.get(item.build, 0)),
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


def _value(fig: dict, metric: str) -> float | None:
    v = fig.get(SCORED[metric])
    return float(v) if isinstance(v, (int, float)) and v > 0 else None


def _reported(fig: dict, blk: client.Block, sha: str, starts: int) -> dict:
    """What the receipt keeps of a block: its figures, every request's timings, its work's hash."""
    scalars = {k: v for k, v in fig.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
    return {**scalars, "tokens": int(fig["total_output_tokens"]), "elapsed_s": float(fig["duration"]),
            "workload_sha256": sha, "server_starts": starts,
            "requests": [_compact(r.to_dict()) for r in blk.records]}


def _compact(d: dict) -> dict:
    return {k: ([round(x, 6) for x in v] if k == "token_s" else round(v, 6) if isinstance(v, float) else v)
            for k, v in d.items() if k not in ("text", "token_ids")}   # the ids: the work directory's

