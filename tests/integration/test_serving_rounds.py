"""Serving rounds through a real llama-server: 0.3.16's, built from its sdist with the server, on the
real GGUF model, driven by the console's own load client, its served tokens graded after the
blocks; and six serving adversaries (patches over main's server): three refused by the check before
any block is timed; one that cheats only under load, rejected by the grading of what it served (the
module's timed round, a matrix of two loads, one and four requests in flight: main's side of it is
an honest server's whole round, and the cheat is honest at one request in flight); one that withholds the
ids of what it skims, so that only its honest answers could be graded (its block is misreported);
and one that computed, before it was ready, the answers to the workload the console used to send
(every timed prompt was public), rejected because a round's prompts are now drawn when its blocks
begin and its stored answers depart from the reference's.

Everything here is real: the daemon, the compiler in the pinned image, the server, the model, the
HTTP. Missing pieces fail with what to run (`make llama-setup`), never skip.
"""
from __future__ import annotations

import hashlib
import re
import json
from pathlib import Path

import pytest

from console.cli import main as cli
from console.paths import SERVER_CANDIDATES, SERVER_MATRIX_PROFILE, SERVER_PROFILE
from console.profile import load_profile
from console.results import lockfile
from console.round import Round, RoundConfig

from .rounds import codes, honest, llama_ready, verdict_of

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


CELLS = ("cell:concurrency=1", "cell:concurrency=4")


@pytest.fixture(scope="module")
def under_load(served, tmp_path_factory):
    """The one timed serving round, a matrix of two loads (llama-server-matrix: one request in flight
    and four, two pairs each): main against a candidate that is main's server one request at a
    time (so both pass the check, and its blocks at one in flight are honest) and skims its prompts
    while another slot is busy (so its blocks at four are faster, and what it served is wrong).
    Main's side is the honest server throughout: the check, the paired blocks, the latencies and the
    grading read it as they would a benign round's, and the candidate is rejected by the grading of
    what it served, whatever the speed."""
    out = tmp_path_factory.mktemp("serve-round")
    matrix = load_profile(SERVER_MATRIX_PROFILE)
    return out, *serve_round(matrix, ("patch", str(SERVER_CANDIDATES / "skims-under-load.patch")), out, reps=2)


def test_a_serving_round_checks_both_servers_then_times_paired_blocks(under_load):
    out, rnd, events = under_load
    r, v = rnd.receipt, verdict_of(events)
    check = r["parity"]["server"]
    for b in ("main", "candidate"):
        side = check[b]
        assert side["error"] == "" and side["probe_error"] == "" and side["ready_s"] > 0
        assert len(side["completions"]) == 8 and all(len(c["tokens"]) == 16 for c in side["completions"])
        assert sum(c["tokens"][0] == c["reference"][0] for c in side["completions"]) >= 6
        assert len(side["probe_ttft_s"]) == 3 and min(side["probe_ttft_s"]) > 0.5 * side["probe_ttft_s"][0]
    assert {b: v["parity"]["server"][b] for b in ("main", "candidate")} == {
        b: {"status": "pass", "problems": []} for b in ("main", "candidate")}
    # two pairs of each load, each load's blocks at its own cap, through servers started once (4 slots)
    main = [x for c in CELLS for x in blocks(r, "main", c)]
    cand = [x for c in CELLS for x in blocks(r, "candidate", c)]
    assert len(main) == len(cand) == 4 and not blocks(r, "main") and rnd.receipt["kind"] == "matrix"
    # a pair answers the same requests; another pair, or another load, others
    assert [m["reported"]["workload_sha256"] for m in main] == [c["reported"]["workload_sha256"] for c in cand]
    assert len({m["reported"]["workload_sha256"] for m in main}) == 4
    for rep in main + cand:
        fig = rep["reported"]
        assert fig["completed"] == 8 and fig["failed"] == 0 and len(fig["requests"]) == 8
        assert all(q["output_tokens"] == q["max_tokens"] == 16 and len(q["token_s"]) == 16 for q in fig["requests"])
        assert rep["value"] == pytest.approx(fig["output_throughput"]) and fig["p99_ttft_ms"] >= fig["median_ttft_ms"]
        assert rep["telemetry"]["source"] and rep["suspect"] == [] and rep["reported"]["served_sha256"]
        assert fig["server_starts"] == 1
        # at one in flight no request starts before the one before it has ended
        if rep["phase"] == CELLS[0]:
            spans = sorted((q["sent_s"], q["end_s"]) for q in fig["requests"])
            assert all(a[1] <= b[0] + 1e-3 for a, b in zip(spans, spans[1:])), spans
    # each load's latency guards read that load's pairs (the verdict computes no speed once the grading
    # rejects: the gate's own per-cell reading is asked here)
    from console.core.decisions import cells as cell_rules, counting
    from console.core.records import matrix
    from console.core.records.receipt import Receipt
    sealed = Receipt.from_dict(r)
    c = counting.counted(sealed, sealed.rules)
    fam = matrix.family_rules(sealed.rules, 2)
    for cell in sealed.profile.matrix.cells:
        served_cell = cell_rules.served_figures(sealed, cell_rules.cell_view(c, cell), fam)
        assert {row["metric"]: row["pairs"] for row in served_cell["latency"]} == {"ttft_p99_ms": 2, "itl_p99_ms": 2}
        assert all(x is not None and x > 0 for x in served_cell["ttft_p99_ms"] + served_cell["itl_p99_ms"])


def test_every_served_token_is_graded_and_only_the_skimming_server_departs(under_load):
    out, rnd, events = under_load
    r, v = rnd.receipt, verdict_of(events)
    assert v["outcome"] == "rejected" and codes(v) == {"served-tokens"}, v["reasons"]
    graded = v["parity"]["server"]["graded"]
    count = {b: 8 * sum(len(blocks(r, b, c)) for c in CELLS) for b in ("main", "candidate")}
    # every response of every counted timed block, each with its ids, is graded: none is left out
    assert graded["counted"] == graded["available"] == count and graded["ungradable"] == {}
    assert graded["main"]["requests"] == graded["candidate"]["requests"] == count["main"] == 32
    assert all(len(q["served"]) == len(q["best"]) == 16 for q in r["parity"]["server"]["graded"]["requests"])
    # graded as parity grades: main's served tokens agree with the reference's choice nearly always
    assert graded["main"]["agreement"] > 0.9 and graded["main"]["mean_gap"] < 0.05
    # the honest server departs nowhere; the one that skims under load, often (its 16 requests at four
    # in flight: at one in flight no other slot is busy, and it is honest)
    assert honest(graded["main"]) and graded["candidate"]["departed"] >= 7, graded
    assert graded["seconds"] > 0
    why = [x["message"] for x in v["reasons"] if x["code"] == "served-tokens"]
    assert all(x.startswith("candidate's server under load: ") for x in why)
    [departs] = [x for x in why if "depart from the reference's tokens" in x]
    assert re.search(r"main's \d+ of 32 under the same load", departs), departs
    # graded as parity grades too: its tokens fail a bar (agreement, or mean gap: how far under the
    # agreement bar a skimmer lands depends on what its skimmed prompts still say), and fewer of them are
    # the reference's choice than main's
    bars = ("are the reference's own choice, under the bar", "nats below the reference's choice on average, over")
    assert any(b in x for x in why for b in bars), why
    assert graded["candidate"]["agreement"] < graded["main"]["agreement"] and \
        graded["candidate"]["mean_gap"] > graded["main"]["mean_gap"], graded
    # the workload was drawn for this round: committed before the first block, revealed after the last
    work = r["parity"]["server"]["workload"]
    committed = [e for e in events if e.kind == "workload_committed"]
    assert len(committed) == 1 and committed[0].commitment == work["commitment"] != work["seed"]
    assert hashlib.sha256(work["seed"].encode()).hexdigest() == work["commitment"] and work["drawn"] == 4


def test_the_revealed_seed_re_derives_every_blocks_requests(under_load, served):
    from console.core.decisions.sweep import Level
    from console.engine.vocabulary import text_ids
    from console.round.serving.draw import block_requests
    from console.serving.workload import workload_sha256
    _, rnd, _ = under_load
    r = rnd.receipt
    doc = [int(x) for x in Path(served.parity.document).read_text().split()]
    seed = r["parity"]["server"]["workload"]["seed"]
    # the drawn ids' pool: the ids the model's tokenizer makes from text, as the receipt counts them
    pool = text_ids(Path(served.model[0].path), served.parity.vocab)
    assert r["parity"]["server"]["workload"]["pool"] == len(pool) == 143866
    reps = [x for c in CELLS for b in ("main", "candidate") for x in blocks(r, b, c)]
    assert len(reps) == 8
    for rep in reps:
        load = Level(int(rep["phase"].rsplit("=", 1)[1]))
        reqs = block_requests(served.server, doc, seed, rep["phase"], rep["index"], load, pool)
        assert workload_sha256(reqs) == rep["reported"]["workload_sha256"]


def test_the_blocks_export_as_a_table_and_as_vllm_named_results(under_load, tmp_path, capsys):
    out, rnd, _ = under_load
    assert cli(["blocks", str(rnd.receipt_path), "--format", "csv", "--save-result", str(tmp_path)]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert rows[0].startswith("build,phase,index,attempt,status,counted,completed") and len(rows) == 1 + 2 + 8
    # one vLLM-named result per load and build, each at its load
    for cell in (1, 4):
        for build in ("main", "candidate"):
            doc = json.loads((tmp_path / f"{rnd.round_id}-concurrency-{cell}-{build}.json").read_text())
            assert doc["completed"] == doc["num_prompts"] == 16 and doc["total_output_tokens"] == 16 * 16
            assert doc["median_ttft_ms"] > 0 and doc["max_concurrency"] == cell and len(doc["ttfts"]) == 16
            assert doc["bench_console"]["cell"] == f"concurrency={cell}" and doc["bench_console"]["blocks"] == 2


@pytest.mark.untimed
@pytest.mark.xdist_group("llama-server")     # one worker builds main's server, once
@pytest.mark.parametrize("patch, said", [
    ("stops-early", "stopped early: 8 of 16 tokens at position 32 (8 of 8 completions short), reported as complete"),
    ("prompt-cache", "answered a repeated prompt from a cache: time to first token "),
    # reads a prompt's first token and its last 8 only when the request is streamed, and reports the
    # full length: the check goes the timed way (streamed, the timed endpoint), so it is caught there
    ("skims-when-streamed", ""),
])
def test_a_serving_adversary_is_refused_by_the_check_before_any_block(served, tmp_path, patch, said):
    rnd, events = serve_round(served, ("patch", str(SERVER_CANDIDATES / f"{patch}.patch")), tmp_path, reps=4)
    r, v = rnd.receipt, verdict_of(events)
    assert v["outcome"] == "rejected" and "server-check" in codes(v), v["reasons"]
    assert v["parity"]["server"]["main"]["status"] == "pass"
    assert any(x["message"].startswith(f"candidate's server: {said}") for x in v["reasons"]), v["reasons"]
    assert not blocks(r, "main") and not blocks(r, "candidate")     # nothing was timed


def test_a_server_that_withholds_the_ids_of_what_it_skims_is_rejected_at_its_first_block(served, tmp_path):
    """skims-under-load, except that the requests it skims stream their text without ids: were only
    the responses that carry ids graded, it would be graded on its honest answers alone. The console
    establishes what was served: a timed response without its ids is misreported."""
    rnd, events = serve_round(served, ("patch", str(SERVER_CANDIDATES / "withholds-ids.patch")), tmp_path, reps=4)
    r, v = rnd.receipt, verdict_of(events)
    assert v["outcome"] == "rejected" and v["parity"]["server"]["candidate"]["status"] == "pass", v["reasons"]
    [why] = [x["message"] for x in v["reasons"] if x["code"] == "failed-run"]
    assert "the server misreported its work on " in why and "token ids for 16 tokens" in why, why
    assert not [b for b in blocks(r, "candidate") if b["status"] == "ok"]     # no block of it counted


def test_answers_computed_before_ready_for_a_public_workload_are_rejected(served, tmp_path):
    """A server that computed, before it said it was ready, the answers to the 72 prompts the console
    used to send (seed 0: every one public) and serves a stored answer instead of reading the prompt.
    The round's prompts are drawn only once both servers are ready, so it finds none of them; betting
    that a stored answer is close enough, it serves answers the reference would not, and the time it
    spent before ready is said beside main's."""
    rnd, events = serve_round(served, ("patch", str(SERVER_CANDIDATES / "precomputes-public.patch")), tmp_path,
                              reps=4)
    r, v = rnd.receipt, verdict_of(events)
    assert v["outcome"] == "rejected" and "served-tokens" in codes(v), v["reasons"]
    graded = v["parity"]["server"]["graded"]
    assert honest(graded["main"]) and graded["candidate"]["departed"] >= graded["candidate"]["requests"] // 2
    check = r["parity"]["server"]
    assert check["candidate"]["ready_cpu_s"] > 10 * max(check["main"]["ready_cpu_s"], 0.5)
    [ready] = [w["message"] for w in v["warnings"] if w["code"] == "server-ready-work"]
    assert ready.startswith("the candidate's server spent ")


def test_a_server_that_serves_part_of_the_vocabulary_departs_on_the_ids_the_prompts_ask_it_to_copy(served, tmp_path):
    """A server that never serves ids outside a shortlist (those below 72,000 and the public
    document's own: about 28 % of the vocabulary). The server check's prompts are the document's, so
    it passes them; every timed prompt carries a planted run of ids drawn from all the tokenizer's text
    ids that the prompt ends by repeating, and the reference's answer copies it: the shortlist's
    answers depart, decidedly more often than main's on the same requests."""
    rnd, events = serve_round(served, ("patch", str(SERVER_CANDIDATES / "shortlist.patch")), tmp_path, reps=4)
    r, v = rnd.receipt, verdict_of(events)
    assert v["outcome"] == "rejected" and "served-tokens" in codes(v), v["reasons"]
    assert v["parity"]["server"]["candidate"]["status"] == "pass"       # the check over the document passed
    graded = v["parity"]["server"]["graded"]
    assert honest(graded["main"]) and graded["candidate"]["departed"] >= graded["candidate"]["requests"] // 2, graded
    # what main served: the planted runs, copied (ids above 72,000 that the document never uses)
    doc = {int(x) for x in Path(load_profile(SERVER_PROFILE).parity.document).read_text().split()}
    main_ids = {t for q in r["parity"]["server"]["graded"]["requests"] if q["build"] == "main" for t in q["served"]}
    assert len({t for t in main_ids if t >= 72000 and t not in doc}) >= 16
