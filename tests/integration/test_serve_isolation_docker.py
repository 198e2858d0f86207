"""An idle server that tries, against the real daemon: two builds' servers, each of which burns CPU
and listens. One cannot reach the other's address; the idle one is frozen (its CPU stops) while the
other runs; neither sees anything of the apparatus (its mounts are its own tree, the model and its
own output); the round's end leaves no container, running or paused, and no network."""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import replace

import httpx
import pytest

from console.paths import SERVER_PROFILE
from console.profile import load_profile
from console.round.schedule import DOC_NAME
from console.runtime.base import INPUTS_ROOT, MODEL_ROOT, OUT_ROOT, SRC_ROOT
from console.round.reps import Bench
from console.round.serving.servers import Servers
from console.runtime.base import BuildResult, Served
from console.runtime.docker import LABEL, SERVE_NETWORK, DockerRuntime

from serving.test_server_freeze import _advances     # the same CPU-progress probe as the local runtime's test

pytestmark = pytest.mark.docker

# Answers every request with 200 and, beside it, spins: what an idle server could do with its time.
SERVER_SH = r"""while :; do :; done &
exec perl -MIO::Socket::INET -e '
$s = IO::Socket::INET->new(LocalPort => $ARGV[0], Listen => 16, ReuseAddr => 1) or die "listen: $!";
while ($c = $s->accept) {
    while (defined($l = <$c>) && $l !~ /^\r?\n$/) {}
    print $c "HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nok\n"; close $c;
}' "$1"
"""


@pytest.fixture
def servers(base_image, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "server.sh").write_text(SERVER_SH)
    os.chmod(src, 0o755)        # the server's user (nobody) reads it through the mount
    os.chmod(src / "server.sh", 0o644)
    (tmp_path / "inputs").mkdir()
    p = load_profile(SERVER_PROFILE)
    p = replace(p, server=replace(p.server, command=("/bin/sh", "/src/server.sh", "{port}"), warmup=0,
                                  restart="never", ready_timeout_s=30.0))
    shutil.copyfile(p.parity.document, tmp_path / "inputs" / DOC_NAME)
    (tmp_path / "model.gguf").write_bytes(b"GGUF weights")
    rt = DockerRuntime(round_label=f"test-serve-isolation-{os.urandom(3).hex()}")
    built = {b: BuildResult(build=b, image_id=base_image, base_image_id=base_image, compiler="", seconds=0.0)
             for b in ("main", "candidate")}
    b = Bench(rt=rt, builds=built, src_dirs={"main": src, "candidate": src}, inputs=tmp_path / "inputs",
              work=tmp_path, gpus=False, tele=None, preflight={}, profile=p,
              models={"model.gguf": str(tmp_path / "model.gguf")})
    s = Servers(b, lambda *a: None)
    s.get("main")
    s.get("candidate")
    yield s
    s.stop_all()
    rt.cleanup_round()


def _container(s: Servers, served: Served):
    (c,) = s.b.rt.client.containers.list(all=True, filters={"label": f"{LABEL}.run={served.label}"})
    return c


def _status(s: Servers, build: str) -> str:
    return _container(s, s.live[build]).status


def _connects(container, url: str) -> bool:
    """Whether a TCP connection from inside ``container`` to ``url``'s address opens within 2 s."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    r = container.exec_run(["timeout", "2", "bash", "-c", f"exec 3<>/dev/tcp/{host}/{port}"])
    return r.exit_code == 0




def test_a_server_sees_its_own_tree_the_model_and_its_output_and_nothing_of_the_apparatus(servers):
    """``docker inspect``'s mounts of each server: its tree and the model read-only, its own output
    directory, and not the round's inputs (the document, the reference, the grading's files)."""
    for build in ("main", "candidate"):
        served = servers.live[build]
        served.resume()                 # a frozen container runs no command
        c = _container(servers, served)
        c.reload()
        mounts = {m["Destination"]: m for m in c.attrs["Mounts"]}
        assert set(mounts) == {SRC_ROOT, OUT_ROOT, f"{MODEL_ROOT}/model.gguf"}, mounts
        assert not mounts[SRC_ROOT]["RW"] and not mounts[f"{MODEL_ROOT}/model.gguf"]["RW"] and mounts[OUT_ROOT]["RW"]
        assert mounts[OUT_ROOT]["Source"].endswith(f"/servers/{build}-1")
        r = c.exec_run(["sh", "-c", f"ls {INPUTS_ROOT}; cat {MODEL_ROOT}/model.gguf"])
        assert b"No such file" in r.output and b"GGUF weights" in r.output, r.output


def test_one_server_cannot_reach_the_others_address(servers):
    main, cand = servers.live["main"], servers.live["candidate"]
    main.resume()       # both running: only the network may stop the attempt
    nets = [set(_container(servers, x).attrs["NetworkSettings"]["Networks"]) for x in (main, cand)]
    assert all(len(n) == 1 and next(iter(n)).startswith(SERVE_NETWORK + "-") for n in nets) and nets[0] != nets[1]
    assert httpx.get(cand.url + "/health", trust_env=False, timeout=5).status_code == 200    # the host reaches it
    inside = _container(servers, main)
    assert _connects(inside, main.url)              # the attempt works where there is a path
    assert not _connects(inside, cand.url)          # and there is none to the other server
    assert not _connects(_container(servers, cand), main.url)
    # what a shared network (the old design) allowed: the other server, joined to main's, is reachable
    net = servers.b.rt.client.networks.get(next(iter(nets[0])))
    other = _container(servers, cand)
    net.connect(other)
    try:
        other.reload()
        ip = other.attrs["NetworkSettings"]["Networks"][net.name]["IPAddress"]
        assert _connects(inside, f"http://{ip}:{cand.url.rsplit(':', 1)[1]}")
    finally:
        net.disconnect(other)


def test_the_idle_server_is_frozen_while_the_other_runs(servers):
    main, cand = servers.live["main"], servers.live["candidate"]
    assert cand.cpu_s() is not None
    assert _status(servers, "main") == "paused" and _status(servers, "candidate") == "running"
    assert main.alive()                             # paused is not gone
    c0 = main.cpu_s()
    assert _advances(cand, 0.2, 10)                 # the running one spins...
    assert main.cpu_s() - c0 < 0.001                # ...the frozen one does not
    servers.get("main")
    assert _status(servers, "main") == "running" and _status(servers, "candidate") == "paused"
    assert _advances(main, 0.2, 10)
    c1 = cand.cpu_s()
    time.sleep(0.5)
    assert cand.cpu_s() - c1 < 0.001


def test_the_rounds_end_leaves_no_server_running_or_paused_and_no_network(servers):
    rt = servers.b.rt
    assert _status(servers, "main") == "paused"
    servers.stop_all()
    mine = {"label": f"{LABEL}.round={rt.round_label}"}
    assert rt.client.containers.list(all=True, filters=mine) == []
    assert rt.client.networks.list(filters=mine) == []
