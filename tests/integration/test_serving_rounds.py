"""Serving rounds through a real llama-server: 0.3.16's, built from its sdist with the server, on the
real GGUF model, driven by the console's own load client, its served tokens graded after the
blocks; and four serving adversaries (patches over main's server): three refused by the check before
any block is timed, one that cheats only under load rejected by the grading of what it served.

Everything here is real: the daemon, the compiler in the pinned image, the server, the model, the
HTTP. Missing pieces fail with what to run (`make llama-setup`), never skip.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.cli import main as cli
from console.paths import SERVER_CANDIDATES, SERVER_PROFILE
from console.results import lockfile
from console.round import Round, RoundConfig

from .rounds import codes, llama_ready, verdict_of

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.llama]


@pytest.fixture(scope="module")
def served(docker_client):
    """The llama-server profile, ready: base image, model file, the pinned reference (llama-cpp's)."""
    return llama_ready(docker_client, SERVER_PROFILE)


def serve_round(profile, candidate, out: Path, reps: int = 6):
    cfg = RoundConfig(profile=profile, main=profile.source, candidate=candidate, out_dir=out, reps=reps,
                      lock_path=lockfile.ensure(out / "reference.lock", profile))
    rnd = Round(cfg)
    return rnd, list(rnd.events())


def blocks(receipt: dict, build: str, phase: str = "timed") -> list[dict]:
    return [r for r in receipt["reps"] if r["build"] == build and r["phase"] == phase]


@pytest.fixture(scope="module")
def benign(served, tmp_path_factory):
    """main against itself as the candidate: both servers answer, blocks are timed in pairs."""
    out = tmp_path_factory.mktemp("serve-round")
    return out, *serve_round(served, served.source, out, reps=4)


def test_a_serving_round_checks_both_servers_then_times_paired_blocks(benign):
    out, rnd, events = benign
    r, v = rnd.receipt, verdict_of(events)
    assert v["outcome"] in ("none", "undecided", "accepted", "slower"), v["reasons"]
    check = r["parity"]["server"]
    for b in ("main", "candidate"):
        side = check[b]
        assert side["error"] == "" and side["probe_error"] == "" and side["ready_s"] > 0
        assert len(side["completions"]) == 8 and all(len(c["tokens"]) == 16 for c in side["completions"])
        assert sum(c["tokens"][0] == c["reference"][0] for c in side["completions"]) >= 6
        assert len(side["probe_ttft_s"]) == 3 and min(side["probe_ttft_s"]) > 0.5 * side["probe_ttft_s"][0]
    assert {b: v["parity"]["server"][b] for b in ("main", "candidate")} == {
        b: {"status": "pass", "problems": []} for b in ("main", "candidate")}
    main, cand = blocks(r, "main"), blocks(r, "candidate")
    assert len(main) == len(cand) == 4
    # a pair answers the same requests; another pair, others
    assert [m["reported"]["workload_sha256"] for m in main] == [c["reported"]["workload_sha256"] for c in cand]
    assert len({m["reported"]["workload_sha256"] for m in main}) == 4
    for rep in main + cand:
        fig = rep["reported"]
        assert fig["completed"] == 8 and fig["failed"] == 0 and len(fig["requests"]) == 8
        assert all(q["output_tokens"] == q["max_tokens"] == 16 and len(q["token_s"]) == 16 for q in fig["requests"])
        assert rep["value"] == pytest.approx(fig["output_throughput"]) and fig["p99_ttft_ms"] >= fig["median_ttft_ms"]
        assert rep["telemetry"]["source"] and rep["suspect"] == []
    # every served token of every block is kept and graded after the blocks: main against itself departs nowhere
    graded = v["parity"]["server"]["graded"]
    assert graded["available"] == {"main": 8 * len(blocks(r, "main", "timed") + blocks(r, "main", "warmup")),
                                   "candidate": 8 * len(blocks(r, "candidate", "timed") + blocks(r, "candidate", "warmup"))}
    assert graded["main"]["requests"] == graded["candidate"]["requests"] == min(96, graded["available"]["main"])
    assert graded["main"]["departed"] == graded["candidate"]["departed"] == 0 and graded["seconds"] > 0
    assert all(len(q["served"]) == len(q["best"]) == 16 for q in check["graded"]["requests"])
    assert all(rep["reported"]["served_sha256"] for rep in main + cand)
    assert {k for k in v["speed"]["guards"]} == {"latency:ttft_p99_ms", "latency:itl_p99_ms"}
    assert all(row["pairs"] == 4 for row in v["speed"]["guards"].values())


def test_the_blocks_export_as_a_table_and_as_vllm_named_results(benign, tmp_path, capsys):
    out, rnd, _ = benign
    assert cli(["blocks", str(rnd.receipt_path), "--format", "csv", "--save-result", str(tmp_path)]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert rows[0].startswith("build,phase,index,attempt,status,counted,completed") and len(rows) == 1 + 2 + 8
    for build in ("main", "candidate"):
        doc = json.loads((tmp_path / f"{rnd.round_id}-{build}.json").read_text())
        assert doc["completed"] == doc["num_prompts"] == 32 and doc["total_output_tokens"] == 32 * 16
        assert doc["median_ttft_ms"] > 0 and doc["max_concurrency"] == 4 and len(doc["ttfts"]) == 32


@pytest.mark.parametrize("patch, code, said", [
    ("stops-early", "server-check",
     "stopped early: 8 of 16 tokens at position 32 (8 of 8 completions short), reported as complete"),
    ("prompt-cache", "server-check", "answered a repeated prompt from a cache: time to first token "),
    # reads a prompt's first token and its last 8 only when the request is streamed, and reports the
    # full length: the check goes the timed way (streamed, the timed endpoint), so it is caught there
    ("skims-when-streamed", "server-check", ""),
    # the same only while another slot is busy: one request at a time (the check, the cache probe) it
    # is main's server; timed at concurrency 4 it is faster, and its served tokens are graded after
    ("skims-under-load", "served-tokens", "candidate's server under load: "),
])
def test_a_serving_adversary_is_rejected(served, tmp_path, patch, code, said):
    # four pairs at most: the grading after them decides, whatever the speed did
    rnd, events = serve_round(served, ("patch", str(SERVER_CANDIDATES / f"{patch}.patch")), tmp_path, reps=4)
    r, v = rnd.receipt, verdict_of(events)
    assert v["outcome"] == "rejected" and code in codes(v), v["reasons"]
    assert v["parity"]["server"]["main"]["status"] == "pass"
    if code == "server-check":
        assert any(x["message"].startswith(f"candidate's server: {said}") for x in v["reasons"]), v["reasons"]
        assert not blocks(r, "main") and not blocks(r, "candidate")     # nothing was timed
        return
    graded = v["parity"]["server"]["graded"]
    assert graded["main"]["departed"] == 0 and graded["candidate"]["departed"] >= 12, graded
    [why] = [x["message"] for x in v["reasons"] if x["code"] == code]
    assert why.startswith(said) and "depart from the reference's tokens" in why and "main's 0 of" in why
    assert blocks(r, "candidate")        # it was timed, then graded
