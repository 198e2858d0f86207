"""What a timed block leaves behind: its figures in the rep the receipt seals (every request's
timings, the work's hash, the scored value), and its served tokens in the round's work directory,
where the grading reads them back only if their bytes are the ones the rep sealed."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ...core.decisions.serving import SCORED
from ...serving import client
from ...serving import workload as wl
from ..schedule import Item

SERVED_DIR = "served"


def block_value(fig: dict, metric: str) -> float | None:
    """The block's scored figure (the rep's value), or None when it has none worth timing."""
    v = fig.get(SCORED[metric])
    return float(v) if isinstance(v, (int, float)) and v > 0 else None


def receipt_figures(fig: dict, blk: client.Block, sha: str, starts: int) -> dict:
    """What the receipt keeps of a block: its figures, every request's timings, its work's hash."""
    scalars = {k: v for k, v in fig.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
    turns = {"turns": fig["turns"]} if "turns" in fig else {}      # a conversation block's, per turn
    return {**scalars, **turns, "tokens": int(fig["total_output_tokens"]), "elapsed_s": float(fig["duration"]),
            "workload_sha256": sha, "server_starts": starts,
            "requests": [_compact(r.to_dict()) for r in blk.records]}


def _compact(d: dict) -> dict:
    return {k: ([round(x, 6) for x in v] if k == "token_s" else round(v, 6) if isinstance(v, float) else v)
            for k, v in d.items() if k not in ("text", "token_ids", "prompt_ids")}   # the ids: the work directory's


def _file(work: Path, build: str, phase: str, index: int, attempt: int) -> Path:
    return work / SERVED_DIR / f"{build}-{phase}-{index}-{attempt}.json"


def keep_served(work: Path, item: Item, attempt: int, reqs: list[wl.Request], blk: client.Block) -> str:
    """Write a block's prompts, served ids and streamed text where the grading reads them; the
    file's sha256. Each prompt is the one its request was sent with: a conversation turn's is its
    whole history (earlier prompts and the ids served to them) and its new part, as the client built
    it, so its served tokens are graded with everything the server was asked to read."""
    asked = {r.index: r.prompt for r in reqs}
    rows = [{"request": r.index, "ok": r.ok, "served": r.token_ids, "text": r.text, "prompt": _sent(r, asked)}
            for r in blk.records]
    data = json.dumps({"build": item.build, "phase": item.phase, "block": item.index, "attempt": attempt,
                       "requests": rows}, separators=(",", ":")).encode()
    path = _file(work, item.build, item.phase, item.index, attempt)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def _sent(rec: client.RequestRecord, asked: dict[int, tuple[int, ...] | str]) -> list[int] | None:
    """The ids ``rec`` was sent with; None for a text prompt (a workload file's has no ids to replay,
    and it is not graded) or a turn never sent."""
    if rec.prompt_ids:
        return list(rec.prompt_ids)
    if rec.conversation is not None:
        return None
    prompt = asked.get(rec.index)
    return list(prompt) if isinstance(prompt, tuple) else None


def kept_rows(work: Path, rep) -> list[dict] | None:
    """A block's kept responses, or None when its file is missing or is not the one its rep sealed."""
    path = _file(work, rep.build, rep.phase, rep.index, rep.attempt)
    sha = (rep.reported or {}).get("served_sha256")
    if not sha or not path.exists():
        return None
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != sha:
        return None
    return json.loads(data)["requests"]
