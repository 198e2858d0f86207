"""The server check, before anything is timed: greedy completions through each build's server
against the reference's tokens, and a repeated prompt whose time to first token shows a cache. A
candidate's server that cannot start is recorded as its failure; main's makes the round ``infra``."""
from __future__ import annotations

from ... import events as ev
from ...core.decisions.serving import agreed
from ...core.records import adjudication as adj
from ...core.records.served import Completion, ServedCheck, ServedSide
from ...errors import InfraError
from ...runtime.base import Served
from ...serving import client
from ...serving import workload as wl
from ..adjudicate import generate
from ..reps import Bench
from .servers import ServerDown, Servers


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
        # a short answer is graded as one (``core.decisions.serving``: "stopped early … reported as complete")
        c.tokens, c.error = list(r.token_ids), "" if r.short else r.error
        if not r.error and not r.token_ids:
            try:
                got = client.complete_tokens(served.url, chk.endpoint, servers.doc[:pos], chk.tokens, chk.request,
                                             spec.timeout_s)
                c.tokens = [int(t) for t in got.get(chk.tokens_field) or []]
            except (client.ServerError, TypeError, ValueError) as e:
                c.error = str(e)
        side.completions.append(c)
    if spec.request.get("cache_prompt") is True:
        side.probe_skipped = PROBE_SKIPPED
        return
    _probe(servers, served, side)


# With the prompt cache on (a conversation workload only), a repeated prompt is meant to come back
# sooner: the probe would read that as a cache and refuse every honest server, so it is not run.
# The completions above still go in increasing positions, each prompt extending the one before, so
# each server answers from its cached prefix and is graded against the reference's tokens.
PROBE_SKIPPED = ("the timed requests ask for the prompt cache (a conversation workload), so a repeated prompt is "
                 "meant to be answered sooner: the cache probe was not run; what a cache serves is graded with "
                 "every served token against the reference")


def _probe(servers: Servers, served: Served, side: ServedSide) -> None:
    """The cache probe: a primer first (so the probe's first answer is not the server's first), then
    one prompt from elsewhere in the document, sent again and again, one at a time."""
    spec = servers.spec
    chk = spec.check
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
    """What the check found of one build's server, in the notice's one line."""
    if side.error:
        return f"{build}'s server: {side.error}"
    if side.probe_error:
        return f"{build}'s server: the cache probe's request failed: {side.probe_error}"
    probe = (f"a repeated prompt's time to first token: {', '.join(f'{x * 1e3:.0f}' for x in side.probe_ttft_s)} ms"
             if not side.probe_skipped else "the cache probe was not run (the timed requests ask for the prompt cache)")
    first = sum(c.diverged_at() != 0 and not c.error for c in side.completions)
    same, asked = agreed(side)
    cpu = "" if side.ready_cpu_s is None else f" ({side.ready_cpu_s:.1f} CPU s)"
    return (f"{build}'s server ready in {side.ready_s:.1f} s{cpu}; {first} of {len(side.completions)} greedy "
            f"completions start with the reference's token, {same} of {asked} tokens agree before the first difference; "
            f"{probe}")
