"""A block as a rep, through the round's own code (``round.serving``) and a real server process under
the local runtime: a whole block is a valid rep; a block with failed requests is never timed as
fast, it is retried like a suspect rep and then ends the round as an infrastructure failure."""
from __future__ import annotations

import re
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from console.core.decisions import health
from console.errors import InfraError, Interrupted
from console.paths import SERVER_PROFILE
from console.profile import load_profile
from console.round.schedule import DOC_NAME, Item
from console.round.reps import Bench, run_until_trusted
from console.round.serving.blocks import run_block
from console.round.serving.servers import Servers, ServerDown
from console.runtime.base import BuildResult
from console.runtime.local import LocalRuntime
from console.telemetry import open_telemetry

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "sse_server.py"


def _bench(tmp_path: Path, command: list[str], profile: Path = SERVER_PROFILE, **server: object) -> Bench:
    """A bench of ``profile`` whose builds' server is ``command`` on this host (the local runtime),
    with ``server`` keys of the profile's [server] replaced."""
    p = load_profile(profile)
    p = replace(p, server=replace(p.server, command=tuple(command), **{"warmup": 2, **server}))
    root = tmp_path / "build"
    (root / "engine").mkdir(parents=True)
    (tmp_path / "inputs").mkdir()
    shutil.copyfile(p.parity.document, tmp_path / "inputs" / DOC_NAME)
    built = BuildResult(build="main", image_id="local", base_image_id="host", compiler="", seconds=0.0,
                        root=str(root))
    tele = open_telemetry("host")
    return Bench(rt=LocalRuntime(tmp_path / "rt"), builds={"main": built, "candidate": built},
                 src_dirs={"main": root, "candidate": root}, inputs=tmp_path / "inputs", work=tmp_path,
                 gpus=False, tele=tele, preflight=tele.preflight(rules=p.preflight), profile=p)


def _servers(b: Bench) -> Servers:
    """The round's servers with the timed workload's seed drawn, as the serving stage draws it."""
    servers = Servers(b, lambda *a: None)
    servers.draw()
    return servers


def _item(k: int = 0) -> Item:
    return Item("main", "timed", k, k, 0, 0, "serve", "output_tok_s")


def test_a_whole_block_is_a_rep_with_its_figures_and_every_request(tmp_path):
    b = _bench(tmp_path, [sys.executable, str(SERVER), "--port", "{port}"])
    servers = _servers(b)
    try:
        rep, res = run_block(b, servers, _item(), 0, tmp_path / "out")
    finally:
        servers.stop_all()
    fig = rep.reported
    assert rep.status == "ok" and rep.suspect == [] and rep.context == "serve"
    assert fig["completed"] == 8 and fig["failed"] == 0 and rep.tokens == 8 * 16
    assert rep.value == pytest.approx(fig["output_throughput"]) and rep.value == pytest.approx(128 / fig["duration"])
    assert len(fig["requests"]) == 8 and all(len(q["token_s"]) == 16 for q in fig["requests"])
    assert fig["server_starts"] == 1 and len(fig["workload_sha256"]) == 64
    assert res.cpu_s is not None and res.telemetry is not None


def test_a_block_with_failed_requests_is_retried_then_the_round_is_infra(tmp_path):
    b = _bench(tmp_path, [sys.executable, str(SERVER), "--port", "{port}", "--mode", "errors"])
    servers = _servers(b)
    b.blocks = lambda item, attempt, out_dir: run_block(b, servers, item, attempt, out_dir)
    recorded = []
    try:
        with pytest.raises(InfraError) as e:
            run_until_trusted(b, _item(), 0, health.RetryBudget(retries=1), lambda ev: None,
                              lambda *a: None, lambda rep, _d: recorded.append(rep))
    finally:
        servers.stop_all()
    assert [r.status for r in recorded] == ["suspect", "suspect"] and all(r.value is None for r in recorded)
    assert "requests failed (request #" in recorded[0].suspect[0] and "HTTP 500" in recorded[0].suspect[0]
    assert "slot unavailable" in str(e.value)


@pytest.mark.parametrize("mode, said", [
    ("skims", r"8 of 8 requests \(request #0: read "),
    # the console, not the server, decides what is graded: a timed response that streams text
    # without its ids is misreported, whatever else it got right (every other request, as they arrive)
    ("withholds", r"4 of 8 requests \(request #\d: streamed 0 token ids for 16 tokens"),
])
def test_a_server_that_misreports_its_work_fails_its_block_never_retried(tmp_path, mode, said):
    b = _bench(tmp_path, [sys.executable, str(SERVER), "--port", "{port}", "--mode", mode])
    servers = _servers(b)
    try:
        rep, _ = run_block(b, servers, _item(), 0, tmp_path / "out")
    finally:
        servers.stop_all()
    assert rep.status == "failed" and rep.value is None and rep.suspect == []
    assert re.match(f"the server misreported its work on {said}", rep.refusals[0]), rep.refusals


def test_each_round_draws_its_timed_workload_and_commits_to_it(tmp_path):
    """The timed requests are a function of a seed drawn from the operating system when the blocks
    begin: two rounds never send the same work, and the seed's sha256 is what is said beforehand."""
    from console.core.records.served import commitment_of
    from console.round.serving.draw import block_requests
    from console.serving.workload import workload_sha256
    b = _bench(tmp_path, [sys.executable, str(SERVER), "--port", "{port}"])
    first, second = Servers(b, lambda *a: None), Servers(b, lambda *a: None)
    with pytest.raises(RuntimeError, match="before the round drew"):
        first.requests("timed", 0)
    a, z = first.draw(), second.draw()
    assert a.seed != z.seed and a.commitment == commitment_of(a.seed) and a.holds() and a.drawn == 4
    assert a.pool == len(first.pool) == 143866      # drawn from the text ids a server streams whole
    assert a.space_log10 > 20
    assert workload_sha256(first.requests("timed", 0)) != workload_sha256(second.requests("timed", 0))
    # the revealed seed re-derives every block's requests
    assert first.requests("timed", 3) == block_requests(b.profile.server, first.doc, a.seed, "timed", 3, first.load,
                                                        first.pool)


def test_a_server_that_never_answers_is_named_with_its_log(tmp_path):
    b = _bench(tmp_path, [sys.executable, "-c", "print('no model at /model/x.gguf'); raise SystemExit(1)"])
    servers = Servers(b, lambda *a: None)
    with pytest.raises(ServerDown) as e:
        servers.start("candidate")
    assert e.value.build == "candidate" and "candidate's server exited" in str(e.value)
    assert "no model at /model/x.gguf" in str(e.value)


def test_a_server_that_dies_under_load_fails_its_block_with_its_log_and_is_not_restarted(tmp_path):
    b = _bench(tmp_path, [sys.executable, str(SERVER), "--port", "{port}", "--mode", "dies"])
    b = replace(b, profile=replace(b.profile, server=replace(b.profile.server, warmup=0)))
    servers = _servers(b)
    try:
        rep, _ = run_block(b, servers, _item(), 0, tmp_path / "out")
        assert rep.status == "failed" and rep.value is None and rep.exit_code is None
        assert rep.refusals[0].startswith("the server exited during the block (")
        assert any("out of memory in the KV cache" in line for line in rep.log_tail)
        with pytest.raises(ServerDown, match="main's server exited during an earlier block"):
            servers.get("main")     # the next block does not start it again: that would hide the crash
    finally:
        servers.stop_all()
    with pytest.raises(Interrupted):          # after the round's end or abort nothing starts again
        servers.start("main")


def test_restart_per_block_starts_the_server_again_before_each_block_and_counts_it(tmp_path):
    b = _bench(tmp_path, [sys.executable, str(SERVER), "--port", "{port}"])
    b = replace(b, profile=replace(b.profile, server=replace(b.profile.server, restart="block", warmup=0)))
    servers = _servers(b)
    try:
        reps = [run_block(b, servers, _item(k), 0, tmp_path / f"out{k}")[0] for k in range(2)]
    finally:
        servers.stop_all()
    assert [r.reported["server_starts"] for r in reps] == [1, 2] and all(r.status == "ok" for r in reps)


def test_when_the_references_tokens_cannot_be_made_the_round_is_infra_and_no_server_is_blamed(tmp_path):
    from console.round.serving.check import check
    b = _bench(tmp_path, [sys.executable, str(SERVER), "--port", "{port}"])    # its build has no harness
    servers = Servers(b, lambda *a: None)
    with pytest.raises(InfraError, match="the reference's tokens for the server check could not be generated"):
        check(b, servers, ["main", "candidate"], lambda e: None, lambda: None)
    assert servers.live == {} and servers.starts == {}
