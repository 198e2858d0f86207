"""[server]: how a serving profile starts the engine's own server, what load drives it, and how
its answers are checked before anything is timed (docs/SERVING.md).

A profile with a [server] table times blocks of requests through the server instead of runs of a
bench command: each block is one rep, the same pairs, decision and tiers as any round.
"""
from __future__ import annotations

import math
from dataclasses import field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ValidationInfo, model_validator

from ..core.decisions.serving import SCORED, SLO_KEYS
from ..serving.conversations import trace_shapes
from ..serving.workload import WorkloadError, file_requests
from .checks import Check, ExistingFile, Int, Num, Str, argv, key, loading, refuse, within
from .spec import COMMON_PLACEHOLDERS, table

SERVER_PLACEHOLDERS = {"host", "port", "slots"} | COMMON_PLACEHOLDERS
Length = Annotated[tuple[Int, Int], Check(lambda v: None if 1 <= v[0] <= v[1] else
                                          f"expected [low, high] with 1 <= low <= high, got {list(v)}")]


# what keeps a request's work fixed and comparable, and the only value each may have: greedy
# decoding (temperature 0 — an OpenAI server's default is 1 —, top_k 1 where a server takes it),
# exactly max_tokens (no stop at the end of sequence) and no prompt cache. The timed requests may
# turn the prompt cache on for a conversation workload only (``ServerSpec._consistent``)
_PINNED = {"temperature": 0, "top_k": 1, "ignore_eos": True, "cache_prompt": False}
CACHE = "cache_prompt"


def _pinned_fields(fields: dict[str, Any], cache_free: bool = False) -> str | None:
    if "temperature" not in fields:
        return "expected temperature = 0 among the fields: without it the server samples (greedy decoding is pinned)"
    for k, want in _PINNED.items():
        got = fields.get(k, want)
        if k == CACHE and cache_free and isinstance(got, bool):
            continue
        same = got is want if isinstance(want, bool) else (
            not isinstance(got, bool) and isinstance(got, (int, float)) and got == want)
        if not same:
            return (f"expected {k} = {str(want).lower()} or no {k}: {k} = {got!r} would change the work "
                    "being timed (greedy decoding, exactly max_tokens, no prompt cache are pinned)")
    return None


Fields = Annotated[dict[str, Any], Check(_pinned_fields)]
# the timed requests' fields: cache_prompt true or false here; true only for conversations (below)
TimedFields = Annotated[dict[str, Any], Check(lambda v: _pinned_fields(v, cache_free=True))]
SLO = Annotated[dict[str, float], Check(lambda v: next(
    (f"expected a positive, finite target in ms for {k}, got {x!r}" for k, x in v.items()
     if not (math.isfinite(x) and x > 0)), None))]


@table
class WorkloadSpec:
    """The requests of a block: drawn from the profile's token document (seeded per block, the
    same for both builds of a pair), or read from a file of prompts."""
    kind: Annotated[Literal["random", "shared_prefix", "file", "conversations"], key(
        "random slices of the document, a shared prefix plus random suffixes, a JSON Lines file, or multi-turn "
        "conversations (drawn, or shaped by a trace file)")] = "random"
    requests: Annotated[Int, within(1, 10000), key(
        "requests per block (kind = 'conversations': conversations × turns instead)")] = 16
    input: Annotated[Length, key(
        "prompt tokens, drawn uniformly in [low, high] (the suffix for shared_prefix; each turn's new user part "
        "for conversations)")] = (64, 256)
    output: Annotated[Length, key("output tokens asked per request, uniformly in [low, high]")] = (32, 32)
    prefix: Annotated[Int, within(0), key(
        "tokens of the shared prefix (kind = 'shared_prefix'; the system prefix a conversation opens with)")] = 0
    groups: Annotated[Int, within(1), key("distinct shared prefixes (kind = 'shared_prefix' or 'conversations')")] = 1
    conversations: Annotated[Int, within(1, 1000), key(
        "conversations per block (kind = 'conversations' without a file)")] = 4
    turns: Annotated[Int, within(1, 100), key(
        "turns per conversation, each sent after the answer to the one before (kind = 'conversations' without "
        "a file)")] = 3
    file: Annotated[ExistingFile | None, key(
        "a JSON Lines file of {\"prompt\": text or token ids, \"max_tokens\": n} (kind = 'file'), or a "
        "conversation trace of {\"timestamp\", \"chat_id\", \"turn\", \"input_length\", \"output_length\"} "
        "(kind = 'conversations')")] = None
    drawn: Annotated[Int, within(0, 64), key(
        "positions of each drawn prompt overwritten with ids drawn per round from the document's vocabulary, "
        "its last always (0: none, and the prompts are plain slices of a public document)")] = 4

    @property
    def draws_ids(self) -> bool:
        """Whether the round draws ids into its prompts (a file's requests are sent as written)."""
        return self.kind != "file"

    @property
    def said(self) -> str:
        """What a block sends, in a few words."""
        if self.kind == "conversations":
            return (f"the conversations of {Path(self.file).name}" if self.file else
                    f"{self.conversations} conversations of {self.turns} turns")
        return f"the requests of {Path(self.file).name}" if self.kind == "file" else f"{self.requests} requests"

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> WorkloadSpec:
        if self.kind == "file" and not self.file:
            raise refuse("expected a file when kind = 'file'", "file")
        if self.kind == "file" and loading(info):
            try:        # every line is read now: a bad one is named before anything is built
                file_requests(Path(self.file), self.output[1])
            except WorkloadError as e:
                raise refuse(str(e), "file") from None
        if self.kind in ("shared_prefix", "conversations") and self.prefix < 1:
            raise refuse(f"expected a positive prefix when kind = {self.kind!r}", "prefix")
        if self.kind == "conversations" and self.file and loading(info):
            _check_trace(Path(self.file), self.prefix)
        return self


def _check_trace(path: Path, prefix: int) -> None:
    """Every line of a conversation trace is read when the profile is: a bad one is named (file and
    line) before anything is built; a first turn no longer than the prefix names the prefix."""
    try:
        shapes = trace_shapes(path)
    except WorkloadError as e:
        raise refuse(str(e), "file") from None
    short = next((c for c, turns in enumerate(shapes) if turns[0].new <= prefix), None)
    if short is not None:
        raise refuse(f"expected a prefix shorter than every conversation's first prompt: {path}'s conversation "
                     f"{short + 1} (in order of its first turn) opens with {shapes[short][0].new} tokens, the prefix "
                     f"is {prefix}", "prefix")


@table
class ServerCheck:
    """Before any block is timed: greedy completions through each server against the reference's
    tokens, and a repeated prompt that a response or prompt cache would answer early."""
    endpoint: Annotated[Str, key("the endpoint that returns generated token ids")] = "/completion"
    request: Annotated[Fields, key(
        "fields of every check request (greedy; token ids returned; no prompt cache)")] = field(
        default_factory=lambda: {"temperature": 0, "ignore_eos": True, "return_tokens": True,
                                 "cache_prompt": False})
    tokens_field: Annotated[Str, key("the response key that holds the generated token ids")] = "tokens"
    prompts: Annotated[Int, within(1, 200), key(
        "completions, their prompts the document's first tokens up to positions evenly over the parity depths")] = 8
    longest: Annotated[Int, within(0), key("the longest prompt (0: the largest parity depth)")] = 0
    tokens: Annotated[Int, within(1, 512), key("tokens per completion")] = 16
    min_match: Annotated[Num, within(0.0, 1.0), key(
        "share of completions whose first token must be the reference's (a near-tie may flip one)")] = 0.75
    repeats: Annotated[Int, within(2, 20), key("times the cache probe sends one prompt")] = 3
    repeat_ratio: Annotated[Num, within(0.0, 1.0), key(
        "a repeat whose time to first token is under this share of the first's reads as a cache")] = 0.5
    probe_tokens: Annotated[Int, within(16), key("prompt tokens of the cache probe")] = 256


@table
class ServerGrade:
    """After the timed blocks, outside the clock: the tokens the servers served, teacher-forced
    through the reference build's harness, each request's served tokens against its own argmax."""
    command: Annotated[argv(COMMON_PLACEHOLDERS | {"requests", "out"}, nonempty=False), key(
        "the harness's grade command (argv): {requests} (a file of prompt ids, a tab, served ids per "
        "line), {out}, {threads}, {model}")] = ()
    requests: Annotated[Int, within(0, 100000), key(
        "served requests graded per build, drawn after the blocks (0: every one)")] = 0
    margin: Annotated[Num, within(0.0, 20.0), key(
        "nats a served token's logit may be below the reference's argmax (a near-tie) and still agree")] = 1.0
    gap_max: Annotated[Num, within(0.0, 20.0), key(
        "the bar on a build's mean gap: nats its served tokens are below the reference's argmax on average")] = 0.10
    ratchet: Annotated[Num, within(1.0, 100.0), key(
        "on the same requests, the candidate's mean gap and share of tokens off the reference's choice may "
        "reach this x main's own (at its upper bound) before they are decidedly worse")] = 3.0
    false_reject: Annotated[Num, within(1e-6, 0.5), key(
        "the rate at which a candidate whose servers depart no more often than main's is rejected")] = 0.01


@table
class ServerSpec:
    command: Annotated[argv(SERVER_PLACEHOLDERS), key(
        "the server's command (argv): {host}, {port}, {slots} (the concurrency), {threads}, {model}")]
    ready: Annotated[Str, key("a path that answers HTTP 200 once the server can take requests")] = "/health"
    ready_timeout_s: Annotated[Num, within(1), key("seconds the server may take to become ready")] = 120.0
    endpoint: Annotated[Str, key(
        "the completions endpoint the load drives, streamed: OpenAI's, or llama-server's native /completion, whose "
        "chunks carry token ids (only served ids can be graded)")] = "/v1/completions"
    request: Annotated[TimedFields, key(
        "fields that pin every timed request (greedy, no early stop, no prompt cache but for conversations)")] = field(
        default_factory=lambda: {"temperature": 0, "ignore_eos": True, "cache_prompt": False})
    port: Annotated[Int, within(1, 65535), key("the port the server listens on inside its container")] = 8080
    concurrency: Annotated[Int, within(1, 1024), key("requests in flight at most (the load's cap)")] = 4
    rate: Annotated[Num, within(0.0), key(
        "requests per second, Poisson arrivals under the cap; 0: a closed loop at the concurrency")] = 0.0
    warmup: Annotated[Int, within(0), key("requests each server answers before its first block")] = 4
    restart: Annotated[Literal["never", "block"], key(
        "start each server once per round, or again before each block (restart-to-restart variance)")] = "never"
    timeout_s: Annotated[Num, within(1), key("seconds one request may take")] = 60.0
    seed: Annotated[Int | None, key(
        "no longer taken: each round draws its workload's seed from the operating system")] = None
    workload: Annotated[WorkloadSpec, key("the requests of a block")] = field(default_factory=WorkloadSpec)
    check: Annotated[ServerCheck, key("the server check before timing")] = field(default_factory=ServerCheck)
    grade: Annotated[ServerGrade, key("the served tokens' grading after the timed blocks")] = field(
        default_factory=ServerGrade)
    slo: Annotated[SLO, key(
        "goodput targets in ms: ttft_ms, tpot_ms, e2el_ms (a sweep counts the requests meeting all)")] = field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> ServerSpec:
        if not loading(info):
            return self
        bad = sorted(set(self.slo or {}) - set(SLO_KEYS))
        if bad:
            raise refuse(f"unknown target {bad[0]!r}; expected ttft_ms, tpot_ms or e2el_ms", "slo")
        if self.seed is not None:
            raise refuse("expected no seed: a round draws its timed workload's seed from the operating system "
                         "when its blocks begin (a fixed seed makes every timed prompt public in advance)", "seed")
        if self.request.get(CACHE) is True and self.workload.kind != "conversations":
            raise refuse(f"expected cache_prompt = false with kind = {self.workload.kind!r}: a single-turn workload's "
                         "prompts have nothing of their own to reuse, so a prompt cache would only answer repeated "
                         "or shared prompts from memory (the server check's repeated prompt among them); it may be "
                         "on only for kind = 'conversations', whose turns reuse their own history", "request")
        if not self.grade.command:
            raise refuse("expected the harness's grade command: every timed token a server serves is graded "
                         "against the reference after the blocks", "grade.command")
        return self


def scored_problem(metric: str) -> str | None:
    """Why ``metric`` cannot be a serving profile's bench.metric, or None."""
    if metric in SCORED:
        return None
    return f"expected one of {', '.join(sorted(SCORED))} for a serving profile (all higher is better), got {metric!r}"
