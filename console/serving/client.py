"""Streaming HTTP to an OpenAI-compatible server: a block of requests under a concurrency cap,
every chunk's arrival timed; the readiness probe before it; one plain completion for checks.

httpx is the transport: it is well kept, one library serves both the synchronous probe and the
asynchronous load, its timeouts are set per phase (connect, read, pool), and it iterates a
streamed body by lines, which is all Server-Sent Events need. The OpenAI Python SDK sends its
requests through it too, so a server sees the traffic it sees from that client.

Nothing here raises for a request that went wrong: the record says what happened, and a server
that stops short of the tokens asked for is an error, so it never looks fast.
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

import httpx

from console.clock import utc_now
from console.serving.conversations import by_conversation
from console.serving.workload import Request

ERROR_BODY_BYTES = 300


class ServerError(Exception):
    """A server's answer to a single call could not be used (HTTP status, JSON, timeout)."""

    def __init__(self, message: str):
        self.message = message
        super().__init__(message)


def _opt_float(x: Any) -> float | None:
    return None if x is None else float(x)


@dataclass
class RequestRecord:
    """One request of a block as the client saw it; times in seconds from the block's start."""
    index: int
    input_tokens: int
    max_tokens: int
    sent_s: float = 0.0
    due_s: float = 0.0              # its arrival in the load's schedule (0: a closed loop's, sent when a slot frees)
    first_token_s: float | None = None
    token_s: list[float] = field(default_factory=list)    # each chunk that carried text
    output_tokens: int = 0          # the server's usage.completion_tokens, else text chunks
    chunks: int = 0
    status: int = 0                 # HTTP status; 0 when no response came
    error: str = ""
    finish_reason: str = ""
    end_s: float | None = None
    text: str = ""
    token_ids: list[int] = field(default_factory=list)   # the served ids, where the stream carries them
    prompt_tokens: int | None = None    # the prompt tokens the server says it read
    misreported: bool = False       # its own figures contradict what it sent: the server's fault, never the node's
    short: bool = False             # it answered in full but with fewer tokens than asked
    cached_tokens: int | None = None    # prompt tokens the server says came from its cache (None: it does not say)
    conversation: int | None = None     # a conversation's turn: which conversation, and which turn (1-based)
    turn: int = 0
    prompt_ids: list[int] = field(default_factory=list)  # the prompt's ids as sent (a turn's: its whole history)

    @property
    def ok(self) -> bool:
        return self.status == 200 and not self.error and self.output_tokens == self.max_tokens

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_s is None else self.first_token_s - self.sent_s

    @property
    def e2e_s(self) -> float | None:
        return None if self.end_s is None else self.end_s - self.sent_s

    @property
    def itl_s(self) -> list[float]:
        return [b - a for a, b in zip(self.token_s, self.token_s[1:])]

    @property
    def tpot_s(self) -> float | None:
        if self.output_tokens < 2 or self.first_token_s is None or self.end_s is None:
            return None
        return (self.end_s - self.first_token_s) / (self.output_tokens - 1)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.conversation is None:       # a single-turn request's record is as it always was
            del out["conversation"], out["turn"]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RequestRecord:
        return cls(index=int(d["index"]), input_tokens=int(d.get("input_tokens") or 0),
                   max_tokens=int(d.get("max_tokens") or 0), sent_s=float(d.get("sent_s") or 0.0),
                   due_s=float(d.get("due_s") or 0.0),
                   first_token_s=_opt_float(d.get("first_token_s")),
                   token_s=[float(x) for x in d.get("token_s") or []],
                   output_tokens=int(d.get("output_tokens") or 0), chunks=int(d.get("chunks") or 0),
                   status=int(d.get("status") or 0), error=str(d.get("error") or ""),
                   finish_reason=str(d.get("finish_reason") or ""), end_s=_opt_float(d.get("end_s")),
                   text=str(d.get("text") or ""), token_ids=[int(x) for x in d.get("token_ids") or []],
                   prompt_tokens=None if d.get("prompt_tokens") is None else int(d["prompt_tokens"]),
                   misreported=bool(d.get("misreported")), short=bool(d.get("short")),
                   cached_tokens=None if d.get("cached_tokens") is None else int(d["cached_tokens"]),
                   conversation=None if d.get("conversation") is None else int(d["conversation"]),
                   turn=int(d.get("turn") or 0), prompt_ids=[int(x) for x in d.get("prompt_ids") or []])


@dataclass
class Block:
    """A block's records in request order; ``duration_s`` runs from the first send to the last end."""
    records: list[RequestRecord]
    duration_s: float
    started_at: str
    concurrency: int

    def to_dict(self) -> dict[str, Any]:
        return {"records": [r.to_dict() for r in self.records], "duration_s": self.duration_s,
                "started_at": self.started_at, "concurrency": self.concurrency}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Block:
        return cls(records=[RequestRecord.from_dict(r) for r in d.get("records") or []],
                   duration_s=float(d.get("duration_s") or 0.0), started_at=str(d.get("started_at") or ""),
                   concurrency=int(d.get("concurrency") or 0))


# --- one streamed request --------------------------------------------------------------

def _malformed(data: str) -> str:
    return f"malformed stream chunk: {data[:120]!r}"


def _take_chunk(rec: RequestRecord, data: str, now: float) -> tuple[bool, bool]:
    """Fold one SSE data payload into the record (setting ``error`` when it is unusable):
    (whether it carried the server's own token count, whether it ended the stream). Two shapes:
    OpenAI's (``choices``, ``usage``; the stream ends with ``[DONE]``) and llama-server's native
    ``/completion`` (``content``, the token's id in ``tokens``, a last chunk with ``stop``)."""
    try:
        chunk = json.loads(data)
    except ValueError:
        rec.error = _malformed(data)
        return False, False
    if isinstance(chunk, dict) and "choices" not in chunk and "content" in chunk:
        return _take_native(rec, chunk, now, data)
    if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
        rec.error = (f"server error in stream: {json.dumps(chunk['error'])[:200]}"
                     if isinstance(chunk, dict) and "error" in chunk else _malformed(data))
        return False, False
    choices = chunk["choices"]
    if choices:
        choice = choices[0]
        if not isinstance(choice, dict):
            rec.error = _malformed(data)
            return False, False
        _arrived(rec, str(choice.get("text") or ""), [], now)
        if choice.get("finish_reason"):
            rec.finish_reason = str(choice["finish_reason"])
    usage = chunk.get("usage")
    if isinstance(usage, dict) and _count(usage.get("completion_tokens")):
        rec.output_tokens = usage["completion_tokens"]
        if _count(usage.get("prompt_tokens")):
            rec.prompt_tokens = usage["prompt_tokens"]
        details = usage.get("prompt_tokens_details")        # vLLM's and OpenAI's prefix cache hits
        if isinstance(details, dict) and _count(details.get("cached_tokens")):
            rec.cached_tokens = details["cached_tokens"]
        return True, False
    return False, False


def _take_native(rec: RequestRecord, chunk: dict, now: float, data: str) -> tuple[bool, bool]:
    ids = chunk.get("tokens", [])
    if not isinstance(ids, list) or not all(_count(t) for t in ids) or not isinstance(chunk["content"], str):
        rec.error = _malformed(data)
        return False, False
    _arrived(rec, chunk["content"], ids, now)
    if not chunk.get("stop"):
        return False, False
    rec.finish_reason = str(chunk.get("stop_type") or "stop")
    if _count(chunk.get("tokens_evaluated")):
        rec.prompt_tokens = chunk["tokens_evaluated"]
    rec.cached_tokens = native_cached(chunk)
    if _count(chunk.get("tokens_predicted")):
        rec.output_tokens = chunk["tokens_predicted"]
        return True, True
    return False, True


def native_cached(chunk: Mapping[str, Any]) -> int | None:
    """The prompt tokens llama-server's last ``/completion`` chunk says it took from its cache:
    ``timings.cache_n`` where the server gives it, else the prompt it read (``tokens_evaluated``)
    less the prompt tokens it processed (``timings.prompt_n``), as 0.3.16's server reports them.
    None when it says neither, or figures that cannot be a count of cached prompt tokens."""
    timings = chunk.get("timings")
    if not isinstance(timings, Mapping):
        return None
    if _count(timings.get("cache_n")):
        return timings["cache_n"]
    read, done = chunk.get("tokens_evaluated"), timings.get("prompt_n")
    if _count(read) and _count(done) and done <= read:
        return read - done
    return None


def _count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _arrived(rec: RequestRecord, text: str, ids: list[int], now: float) -> None:
    """A chunk that carried output: one arrival (text, or a token whose text is not complete yet)."""
    if not text and not ids:
        return
    rec.chunks += 1
    rec.token_s.append(now)
    rec.text += text
    rec.token_ids.extend(int(t) for t in ids)
    if rec.first_token_s is None:
        rec.first_token_s = now


async def _read_events(resp: httpx.Response, rec: RequestRecord, t0: float) -> None:
    counted = False         # once the server has said how many tokens, chunks no longer count them
    async for line in resp.aiter_lines():
        if not line.startswith("data:"):
            continue        # blank separators, comments, event names
        data = line[5:].strip()
        if data == "[DONE]":
            return
        said, ended = _take_chunk(rec, data, time.perf_counter() - t0)
        counted = said or counted
        if rec.error or ended:
            return
        if not counted:
            rec.output_tokens = rec.chunks
    rec.error = "stream ended without [DONE]"


async def _head(resp: httpx.Response) -> str:
    body = b""
    async for part in resp.aiter_bytes():
        body += part
        if len(body) >= ERROR_BODY_BYTES:
            break
    return body[:ERROR_BODY_BYTES].decode("utf-8", errors="replace")


def _check_count(rec: RequestRecord, ids: bool = False) -> None:
    """A response's accounting: as many tokens as asked, and where the server says so, the ids it
    streamed and the prompt it read agree with that (a server that reads less of the prompt, or
    generates fewer tokens than it reports, does less work than it is timed for). With ``ids`` the
    endpoint streams every token's id, and a response that withholds them is misreported: the
    console, not the server, decides which responses are graded."""
    if rec.error:
        return
    if rec.output_tokens < rec.max_tokens:
        rec.error, rec.short = f"stopped early: {rec.output_tokens} of {rec.max_tokens} tokens", True
    elif rec.output_tokens > rec.max_tokens:
        rec.error = f"generated {rec.output_tokens} tokens, more than the {rec.max_tokens} asked"
    elif (ids or rec.token_ids) and len(rec.token_ids) != rec.output_tokens:
        rec.error, rec.misreported = (
            f"streamed {len(rec.token_ids)} token ids but reported {rec.output_tokens} tokens" if rec.token_ids else
            f"streamed 0 token ids for {rec.output_tokens} tokens: the endpoint streams each token's id, so a "
            "response without them cannot be graded"), True
    elif rec.prompt_tokens is not None and rec.input_tokens and rec.prompt_tokens != rec.input_tokens:
        rec.error, rec.misreported = f"read {rec.prompt_tokens} prompt tokens of the {rec.input_tokens} sent", True


def _body(req: Request, fields: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    prompt = req.prompt if isinstance(req.prompt, str) else list(req.prompt)
    return {**fields, "prompt": prompt, **extra}


async def stream_one(client: httpx.AsyncClient, url: str, req: Request, fields: Mapping[str, Any],
                     t0: float, timeout_s: float, ids: bool = False) -> RequestRecord:
    """POST one streaming completion (OpenAI ``/v1/completions``) and record every text chunk's
    arrival. Errors are recorded, never raised; ``timeout_s`` bounds the whole request."""
    rec = RequestRecord(index=req.index, input_tokens=req.input_tokens, max_tokens=req.max_tokens, due_s=req.at_s,
                        conversation=req.conversation, turn=req.turn,
                        prompt_ids=[] if isinstance(req.prompt, str) else [int(t) for t in req.prompt])
    body = _body(req, fields, max_tokens=req.max_tokens, stream=True)
    rec.sent_s = time.perf_counter() - t0
    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream("POST", url, json=body) as resp:
                rec.status = resp.status_code
                if resp.status_code != 200:
                    rec.error = f"HTTP {resp.status_code}: {await _head(resp)}"
                else:
                    await _read_events(resp, rec, t0)
    except (TimeoutError, httpx.TimeoutException):
        rec.error = f"timed out after {timeout_s:g} s"
    except (httpx.HTTPError, OSError) as e:
        rec.error = f"{type(e).__name__}: {e}"
    rec.end_s = time.perf_counter() - t0
    _check_count(rec, ids)
    return rec


# --- a block ---------------------------------------------------------------------------

def _url(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + "/" + path.lstrip("/")


async def _arrival(at_s: float, t0: float) -> None:
    wait = at_s - (time.perf_counter() - t0)
    if wait > 0:
        await asyncio.sleep(wait)


def _not_sent(req: Request, why: str) -> RequestRecord:
    return RequestRecord(index=req.index, input_tokens=req.input_tokens, max_tokens=req.max_tokens,
                         conversation=req.conversation, turn=req.turn, error=why)


def _broken(rec: RequestRecord) -> str:
    """Why the turn after ``rec`` cannot be sent ("" when it can): its prompt is built from the
    ids served to ``rec``."""
    if not rec.ok:
        return f"not sent: turn {rec.turn} of conversation {rec.conversation} failed"
    if len(rec.token_ids) != rec.output_tokens:
        return (f"not sent: turn {rec.turn} of conversation {rec.conversation} streamed {len(rec.token_ids)} token "
                f"ids for {rec.output_tokens} tokens, and the next prompt is built from them (a conversation "
                "needs an endpoint that streams each token's id, as llama-server's /completion does)")
    return ""


async def _converse(turns: Sequence[Request], send: Callable, t0: float) -> list[RequestRecord]:
    """One conversation, strictly in order: a turn is sent once the answer to the one before has
    fully arrived, its prompt the history (every earlier prompt and the ids served to it) and its
    new part. A later turn is due when that answer ended (under an arrival rate; a closed loop's
    are all due at 0). After a turn that failed, the rest are recorded as not sent."""
    await _arrival(turns[0].at_s, t0)
    history: tuple[int, ...] = ()
    out: list[RequestRecord] = []
    broken, due = "", turns[0].at_s
    for req in turns:
        if broken:
            out.append(_not_sent(req, broken))
            continue
        prompt = history + tuple(req.prompt)
        rec = await send(replace(req, prompt=prompt, input_tokens=len(prompt)))
        rec.due_s = due
        out.append(rec)
        broken = _broken(rec)
        history = prompt + tuple(rec.token_ids)
        due = (rec.end_s or 0.0) if turns[0].at_s > 0 else 0.0
    return out


async def run_block(base_url: str, endpoint: str, requests: Sequence[Request], *,
                    fields: Mapping[str, Any], concurrency: int, timeout_s: float, ids: bool = False) -> Block:
    """Send ``requests``, at most ``concurrency`` in flight. A request waits for its ``at_s``
    arrival and then for a free slot, so the cap holds for arrival-rate loads too. Conversations'
    turns (``Request.conversation``) go one conversation at a time each, in order, the
    conversations side by side under the same cap (``_converse``). ``ids``: every response must
    stream its tokens' ids (``_check_count``)."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    url = _url(base_url, endpoint)
    # no retries: a retried request would be timed as one; trust_env off: no proxy reads the traffic
    transport = httpx.AsyncHTTPTransport(retries=0, limits=httpx.Limits(
        max_connections=concurrency, max_keepalive_connections=concurrency))
    async with httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(timeout_s),
                                 trust_env=False) as client:
        slots = asyncio.Semaphore(concurrency)
        started_at = utc_now(micro=True)
        t0 = time.perf_counter()

        async def send(req: Request) -> RequestRecord:
            async with slots:
                return await stream_one(client, url, req, fields, t0, timeout_s, ids)

        async def one(req: Request) -> RequestRecord:
            await _arrival(req.at_s, t0)
            return await send(req)

        if any(r.conversation is not None for r in requests):
            talks = await asyncio.gather(*(_converse(turns, send, t0) for turns in by_conversation(requests)))
            records = [rec for talk in talks for rec in talk]
        else:
            records = await asyncio.gather(*(one(r) for r in requests))
    records = sorted(records, key=lambda r: r.index)
    sent = [r for r in records if r.end_s is not None]      # a turn never sent has no times
    duration = max(r.end_s for r in sent) - min(r.sent_s for r in sent) if sent else 0.0
    return Block(records=records, duration_s=duration, started_at=started_at, concurrency=concurrency)


def drive(base_url: str, endpoint: str, requests: Sequence[Request], **kw: Any) -> Block:
    """``run_block`` on an event loop of its own (callers run it in a worker thread)."""
    return asyncio.run(run_block(base_url, endpoint, requests, **kw))


# --- readiness and single calls --------------------------------------------------------

def wait_ready(base_url: str, path: str, timeout_s: float, alive: Callable[[], bool] = lambda: True,
               interval_s: float = 0.25) -> float | None:
    """Poll ``GET path`` until HTTP 200 (llama-server answers 503 while it loads the model).
    Seconds waited, or None on timeout or once ``alive()`` says the server process is gone."""
    url = _url(base_url, path)
    start = time.perf_counter()
    deadline = start + timeout_s
    with httpx.Client(trust_env=False) as client:
        while alive():
            left = deadline - time.perf_counter()
            try:
                if client.get(url, timeout=max(0.05, min(5.0, left))).status_code == 200:
                    return time.perf_counter() - start
            except httpx.HTTPError:
                pass        # not listening yet
            left = deadline - time.perf_counter()
            if left <= 0:
                return None
            time.sleep(min(interval_s, left))
    return None


def complete_tokens(base_url: str, path: str, prompt: Sequence[int] | str, max_tokens: int,
                    fields: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
    """One non-streaming call to llama-server's native ``/completion`` (``n_predict``; pass
    ``return_tokens: true`` in ``fields`` for the ids); the decoded JSON object."""
    url = _url(base_url, path)
    body = {**fields, "prompt": prompt if isinstance(prompt, str) else [int(t) for t in prompt],
            "n_predict": max_tokens, "stream": False}
    try:
        with httpx.Client(trust_env=False, timeout=httpx.Timeout(timeout_s)) as client:
            resp = client.post(url, json=body)
    except httpx.TimeoutException as e:
        raise ServerError(f"{url} timed out after {timeout_s:g} s") from e
    except httpx.HTTPError as e:
        raise ServerError(f"{url} could not be reached: {type(e).__name__}: {e}") from e
    if resp.status_code != 200:
        raise ServerError(f"{url} answered HTTP {resp.status_code}: {resp.text[:ERROR_BODY_BYTES]}")
    try:
        out = resp.json()
    except ValueError as e:
        raise ServerError(f"{url} answered invalid JSON: {resp.text[:120]!r}") from e
    if not isinstance(out, dict):
        raise ServerError(f"{url} answered JSON that is not an object: {resp.text[:120]!r}")
    return out
