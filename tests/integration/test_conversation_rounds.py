"""Serving rounds of multi-turn conversations with the prompt cache on (llama-server-chat): each turn
asks with its conversation's whole history, the answers served included, and every served token is
graded against the reference's with that whole prompt.

An honest round (main against the profile's candidate, 0.3.36): both servers pass the check (whose
cache probe is not run, and says why), and each turn after the first is answered largely from the
server's own cache, by its own count. An adversary: ``cache-skips-suffix.patch`` treats the rest of
a prompt that is mostly cached as cached too and reads only its last token, so it answers sooner
and wrongly; it is rejected by the server check (whose prompts extend one another, so the cache is
used there too) or by the grading of what it served, and main's side passes.

Everything here is real: the daemon, the compiler in the pinned image, the servers, the model, the
HTTP. Missing pieces fail with what to run (`make llama-setup`), never skip.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from console.engine import sources
from console.paths import SERVER_CANDIDATES, SERVER_PROFILE
from console.results import lockfile
from console.round import Round, RoundConfig

from .rounds import codes, llama_ready, verdict_of

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.llama]

CHAT_PROFILE = SERVER_PROFILE.parent / "llama-server-chat.toml"


@pytest.fixture(scope="module")
def chat(docker_client):
    """The llama-server-chat profile, ready: base image, model file, the pinned reference."""
    return llama_ready(docker_client, CHAT_PROFILE)


def chat_round(profile, candidate, out: Path, reps: int):
    cfg = RoundConfig(profile=profile, main=profile.source, candidate=candidate, out_dir=out, reps=reps,
                      lock_path=lockfile.ensure(out / "reference.lock", profile))
    rnd = Round(cfg)
    return rnd, list(rnd.events())


def timed(receipt: dict, build: str) -> list[dict]:
    return [r for r in receipt["reps"] if r["build"] == build and r["phase"] == "timed"]


def test_an_honest_conversation_round_reads_its_cache_hits_per_turn(chat, tmp_path):
    rnd, events = chat_round(chat, sources.parse_spec(chat.candidate, chat.source), tmp_path, reps=2)
    r, v = rnd.receipt, verdict_of(events)
    assert v["outcome"] != "rejected", v["reasons"]
    check = r["parity"]["server"]
    for b in ("main", "candidate"):
        side = check[b]
        assert side["probe_ttft_s"] == [] and "the cache probe was not run" in side["probe_skipped"]
        assert v["parity"]["server"][b] == {"status": "pass", "problems": []}
    for rep in timed(r, "main"):
        fig = rep["reported"]
        assert fig["completed"] == 12 and fig["failed"] == 0
        turns = {t["turn"]: t for t in fig["turns"]}
        assert sorted(turns) == [1, 2, 3] and all(t["completed"] == 4 for t in turns.values())
        # a later turn's prompt is its history, which its slot has cached: the server says so
        for k in (2, 3):
            assert turns[k]["cached_tokens"] > 0 and turns[k]["cache_hit_rate"] > 0.3, turns[k]
        # each turn's prompt as sent: its history grows with every turn, the answers included
        by_conv: dict[int, list[int]] = {}
        for q in fig["requests"]:
            by_conv.setdefault(q["conversation"], []).append(q["input_tokens"])
        assert all(a + 16 < b for lens in by_conv.values() for a, b in zip(lens, lens[1:])), by_conv
    graded = v["parity"]["server"]["graded"]
    assert graded["counted"] == graded["available"] and graded["ungradable"] == {}
    assert graded["main"]["departed"] == 0 and graded["main"]["agreement"] > 0.9
    # every graded prompt is a turn's whole prompt as it was sent
    sent = {q["input_tokens"] for rep in timed(r, "main") + timed(r, "candidate") for q in rep["reported"]["requests"]}
    assert {len(q["prompt"]) for q in check["graded"]["requests"]} <= sent


def test_a_cache_that_skips_the_rest_of_a_prompt_is_rejected(chat, tmp_path):
    rnd, events = chat_round(chat, ("patch", str(SERVER_CANDIDATES / "cache-skips-suffix.patch")), tmp_path, reps=4)
    r, v = rnd.receipt, verdict_of(events)
    assert v["outcome"] == "rejected", v["reasons"]
    assert codes(v) & {"server-check", "served-tokens"}, v["reasons"]
    assert v["parity"]["server"]["main"]["status"] == "pass"
    if "served-tokens" in codes(v):     # past the check: what it served departs, main's does not
        graded = v["parity"]["server"]["graded"]
        assert graded["main"]["departed"] == 0 and graded["candidate"]["departed"] > 0, graded
    else:                               # caught by the check: nothing was timed
        assert not timed(r, "main") and not timed(r, "candidate")
