"""A serving round of multi-turn conversations with the prompt cache on (llama-server-chat): each turn
asks with its conversation's whole history, the answers served included, and every served token is
graded against the reference's with that whole prompt.

One round: main against ``cache-skips-suffix.patch``, a server that, when a prompt continues the
conversation its slot holds (the common part runs through the previous prompt into its answer),
reads the new user part as cached too and processes only the prompt's last token, so later turns are
answered sooner and wrongly, while it reports the whole prompt read. The server check's prompts
extend one another but never through an answer, so it passes the check; it is rejected by the
grading of what it served. Main's side is an honest server's whole round: its later turns are
answered largely from its own cache, by its own count, and nothing it served departs.

Everything here is real: the daemon, the compiler in the pinned image, the servers, the model, the
HTTP. Missing pieces fail with what to run (`make llama-setup`), never skip.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from console.paths import SERVER_CANDIDATES, SERVER_CHAT_PROFILE
from console.results import lockfile
from console.round import Round, RoundConfig

from .rounds import codes, honest, llama_ready, verdict_of

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.llama]

CHAT_PROFILE = SERVER_CHAT_PROFILE


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


@pytest.fixture(scope="module")
def skipping(chat, tmp_path_factory):
    out = tmp_path_factory.mktemp("chat-round")
    return chat_round(chat, ("patch", str(SERVER_CANDIDATES / "cache-skips-suffix.patch")), out, reps=2)


def test_main_reads_its_cache_hits_per_turn_and_each_turn_carries_its_history(skipping):
    rnd, events = skipping
    r, v = rnd.receipt, verdict_of(events)
    check = r["parity"]["server"]
    for b in ("main", "candidate"):
        side = check[b]
        assert side["probe_ttft_s"] == [] and "the cache probe was not run" in side["probe_skipped"]
        assert v["parity"]["server"][b] == {"status": "pass", "problems": []}
    assert len(timed(r, "main")) == len(timed(r, "candidate")) == 2
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
    # every graded prompt is a turn's whole prompt as it was sent
    sent = {q["input_tokens"] for rep in timed(r, "main") + timed(r, "candidate") for q in rep["reported"]["requests"]}
    assert {len(q["prompt"]) for q in check["graded"]["requests"]} <= sent


def test_a_cache_that_skips_the_rest_of_a_prompt_is_rejected_by_the_grading(skipping):
    rnd, events = skipping
    v = verdict_of(events)
    assert v["outcome"] == "rejected" and "served-tokens" in codes(v), v["reasons"]
    graded = v["parity"]["server"]["graded"]
    assert graded["counted"] == graded["available"] and graded["ungradable"] == {}
    # main's answers are the reference's; the skipping server's later turns are not
    assert honest(graded["main"]) and graded["main"]["agreement"] > 0.9, graded
    assert graded["candidate"]["departed"] >= 4, graded
