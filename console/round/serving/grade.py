"""The served tokens of a serving round, graded after the blocks.

Every block's requests were written to the round's work directory as they were answered
(``record.keep_served``: each request's prompt ids, the ids the server streamed and the text it
streamed); the block's rep carries the file's sha256. Once the timed blocks are done and the servers
stopped, every response of each build's counted timed blocks is graded (or, where the profile says
so, a sample drawn with a seed made only then): teacher-forced through the harness's ``grade``
command on main's build, the reference's own release when the reference was captured from main's
source. At each served token: the reference's argmax and how far below it the served token is. A
response the console cannot grade (no ids, an id outside the vocabulary, ids that are not the text
streamed) is recorded as such and counts against its build. The ruling is the gate's
(``core.decisions.served_tokens``); this module only gathers, runs and records.

Cost: a pair's two blocks answer the same prompts, so each prompt's answers are graded side by side
(the harness decodes a repeated prompt once) and a response served alike by both builds is graded
once; the harness runs on every core, the servers being stopped.
"""
from __future__ import annotations

import os
import random
import secrets
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ... import events as ev
from ...core.decisions import counting, served_tokens
from ...core.records.receipt import BUILDS, Receipt
from ...core.records.served import GradedRequest, ServedGrade
from ...engine import protocol
from ...runtime.base import INPUTS_ROOT, OUT_ROOT
from ..schedule import fill
from ..reps import Bench
from .record import kept_rows

REQUESTS_FILE = "served-requests.txt"


@dataclass
class Pool:
    """Each build's responses in its counted timed blocks: those that can be graded (with the text
    they streamed, checked against their ids after the harness) and why the others cannot."""
    counted: dict[str, int] = field(default_factory=lambda: {b: 0 for b in BUILDS})
    gradable: dict[str, list[GradedRequest]] = field(default_factory=lambda: {b: [] for b in BUILDS})
    texts: dict[tuple, str] = field(default_factory=dict)       # a response's key -> the text it streamed
    ungradable: dict[str, list[str]] = field(default_factory=lambda: {b: [] for b in BUILDS})
    mismatched: dict[str, int] = field(default_factory=lambda: {b: 0 for b in BUILDS})   # ids not the text


def _pool(work: Path, receipt: Receipt, rules, vocab: int) -> Pool:
    """Every response of the counted timed blocks, read from block files whose bytes are the ones
    their reps sealed."""
    out = Pool()
    c = counting.counted(receipt, rules)
    # a matrix of loads: every cell's counted blocks; a sweep: every level's
    reps = {b: counting.measured_blocks(receipt, c, b) for b in BUILDS}
    for build in BUILDS:
        for rep in reps[build]:
            rows = kept_rows(work, rep)
            out.counted[build] += len(rows) if rows is not None else len((rep.reported or {}).get("requests") or [])
            if rows is None:
                out.ungradable[build].append(f"{block_name(rep.phase)} {rep.index}: its served tokens were not kept")
                continue
            for row in rows:
                where = f"{block_name(rep.phase)} {rep.index} request {row.get('request')}"
                why = _unusable(row, vocab)
                if why:
                    out.ungradable[build].append(f"{where}: {why}")
                    continue
                r = GradedRequest(build=build, phase=rep.phase, block=rep.index, attempt=rep.attempt,
                                  request=int(row["request"]), served=[int(t) for t in row["served"]], best=[],
                                  gap=[], prompt=[int(t) for t in row["prompt"]])
                out.gradable[build].append(r)
                out.texts[key_of(r)] = str(row.get("text", ""))
    return out


def block_name(phase: str) -> str:
    """How a message names a block of ``phase``: "timed block", or a matrix cell's "block [concurrency=1]"."""
    return "timed block" if phase == "timed" else f"block [{phase.removeprefix('cell:').removeprefix('sweep:')}]"


def key_of(r: GradedRequest) -> tuple:
    """Which response ``r`` is: its build, block, attempt and request."""
    return r.build, r.phase, r.block, r.attempt, r.request


def _unusable(row: dict, vocab: int) -> str:
    """Why a response cannot be graded ("" when it can)."""
    if not row.get("ok"):
        return "it failed"
    if not row.get("prompt"):
        return "its prompt was text, not token ids"
    served = row.get("served") or []
    if not served:
        return "its stream carried no token ids"
    if bad := next((t for t in served if not isinstance(t, int) or not 0 <= t < vocab), None):
        return f"it served id {bad}, outside the model's vocabulary of {vocab}"
    return ""


def grade(b: Bench, receipt: Receipt, emit: ev.Emit, same_as_main: bool) -> ServedGrade:
    """Teacher-force and record both builds' served responses (``receipt.parity.server.graded``)."""
    p = b.profile
    spec = p.server.grade
    record = ServedGrade(margin=spec.margin, false_reject=spec.false_reject,
                         basis="reference" if same_as_main else "main", seed=secrets.token_hex(8),
                         agree_min=p.gate.top1_min, gap_max=spec.gap_max, ratchet=spec.ratchet, paired=True)
    pool = _pool(b.work, receipt, p.gate, p.parity.vocab)
    rng = random.Random(record.seed)
    drawn = _sample(pool, spec.requests, rng)
    t0 = time.monotonic()
    texts: dict[tuple, bytes] = {}         # a response's key -> its ids' text, as the harness wrote it
    if drawn:
        record.error = _teacher_force(b, drawn, texts)
    if not record.error:
        drawn = _as_streamed(drawn, pool, texts)
    record.counted = pool.counted
    record.ungradable = {k: v for k, v in pool.ungradable.items() if v}
    record.available = {build: len(pool.gradable[build]) - pool.mismatched[build] for build in BUILDS}
    record.requests = [] if record.error else drawn
    record.seconds = round(time.monotonic() - t0, 3)
    if not record.error:
        emit(ev.Notice(level="info", code="served-tokens", message=said(record)))
    receipt.parity.server.graded = record
    return record


def _sample(pool: Pool, n: int, rng: random.Random) -> list[GradedRequest]:
    """Every gradable response (n = 0), or n requests both builds served, the same ones for both (a
    request of a pair is the same prompt for both builds: ``served_tokens.paired`` compares them)."""
    if not n:
        return [r for build in BUILDS for r in pool.gradable[build]]
    by = {b: {(r.phase, r.block, r.request): r for r in pool.gradable[b]} for b in BUILDS}
    common = sorted(by["main"].keys() & by["candidate"].keys())
    pick = rng.sample(common, min(n, len(common)))
    return [by[b][k] for b in BUILDS for k in pick]


def said(record: ServedGrade) -> str:
    """What the grading found, per build, in one line (the gate's figures:
    ``core.decisions.served_tokens``)."""
    table = served_tokens.rule(record).table
    parts = []
    for build in BUILDS:
        side = table[build]
        agree = "-" if side["agreement"] is None else f"{side['agreement']:.1%}"
        gap = "-" if side["mean_gap"] is None else f"{side['mean_gap']:.3f}"
        parts.append(f"{build} {side['requests']} of {(record.counted or {}).get(build, 0)} responses graded, "
                     f"{agree} of tokens the reference's, mean gap {gap} nats, {side['departed']} departing")
    return (f"served tokens against the {record.basis}'s in {record.seconds:.0f} s: " + "; ".join(parts))


def _as_streamed(drawn: list[GradedRequest], pool: Pool, texts: dict[tuple, bytes]) -> list[GradedRequest]:
    """The graded responses whose ids are the text they streamed; the others become ungradable."""
    kept = []
    for r in drawn:
        streamed, ids_text = pool.texts.get(key_of(r), ""), texts.get(key_of(r), b"")
        if same_text(ids_text, streamed):
            kept.append(r)
            continue
        pool.mismatched[r.build] += 1
        pool.ungradable[r.build].append(
            f"{block_name(r.phase)} {r.block} request {r.request}: its ids are not the text it streamed "
            f"(their text begins {ids_text[:40]!r}, the stream's {streamed.encode()[:40]!r})")
    return kept


def same_text(ids_text: bytes, streamed: str) -> bool:
    """Whether the streamed text is the served ids' text. A server holds back a character whose bytes
    are not all generated yet, so the ids' text may end in one incomplete UTF-8 sequence more."""
    got = streamed.encode("utf-8")
    if ids_text == got:
        return True
    tail = ids_text[len(got):]
    if not ids_text.startswith(got) or not 0 < len(tail) <= 3:
        return False
    try:
        tail.decode("utf-8")
    except UnicodeDecodeError:
        return True         # an incomplete character at the end: not streamed yet, and never will be
    return False


def _teacher_force(b: Bench, drawn: list[GradedRequest], texts: dict[tuple, bytes]) -> str:
    """Run the harness's grade command over ``drawn`` on main's build; fill in each request's
    ``best`` and ``gap`` and (in ``texts``, by ``key_of``) its ids' text; an error message when the yardstick
    failed ("" when it did not). Each distinct (prompt, served) is graded once, the responses to one
    prompt side by side, so the harness decodes that prompt once; the harness runs on every core."""
    p = b.profile
    lines = sorted({(tuple(r.prompt), tuple(r.served)) for r in drawn})
    (b.inputs / REQUESTS_FILE).write_text("".join(
        " ".join(map(str, prompt)) + "\t" + " ".join(map(str, served)) + "\n" for prompt, served in lines))
    out_dir = b.work / "runs" / "served-grade"
    cores = max(1, os.cpu_count() or 1)
    argv = fill(p.server.grade.command, p, requests=f"{INPUTS_ROOT}/{REQUESTS_FILE}", out=OUT_ROOT, threads=str(cores))
    res = b.rt.run(b.builds["main"], argv, src_dir=b.src_dirs["main"], inputs_dir=b.inputs, out_dir=out_dir,
                   run=replace(p.run, cpus=float(cores)), label="served/grade", gpus=b.gpus, models=b.models)
    if res.exit_code != 0:
        return f"the grade command exited {res.killed_reason or res.exit_code}: " + " | ".join(
            protocol.log_tail(res.stderr or res.stdout)[-2:])
    try:
        rows = (out_dir / "graded.txt").read_text().splitlines()
        if len(rows) != len(lines):
            return f"graded.txt holds {len(rows)} lines for {len(lines)} requests"
        by_line = {}
        for (prompt, served), row in zip(lines, rows):
            grades, _, hexed = row.partition("\t")
            cells = [c.split(":") for c in grades.split()]
            if len(cells) != len(served) or any(len(c) != 2 for c in cells):
                return f"graded.txt: a line of {len(cells)} cells for {len(served)} served tokens"
            by_line[(prompt, served)] = ([int(c[0]) for c in cells], [float(c[1]) for c in cells], bytes.fromhex(hexed))
    except (OSError, ValueError) as e:
        return f"graded.txt could not be read: {e}"
    for r in drawn:
        best, gap, texts[key_of(r)] = by_line[(tuple(r.prompt), tuple(r.served))]
        r.best, r.gap = list(best), list(gap)
    return ""
