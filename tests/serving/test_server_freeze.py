"""Only the server whose block is timed runs: ``Servers`` freezes the other build's (a fake runtime
records the order), and the local runtime's pause really stops a server's CPU (SIGSTOP to its group)."""
from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest

from console.paths import SERVER_PROFILE
from console.profile import load_profile
from console.round.serving import servers as servers_mod
from console.round.schedule import DOC_NAME
from console.round.reps import Bench
from console.round.serving.servers import Servers
from console.runtime.base import BuildResult, Served
from console.runtime.local import LocalRuntime


class FakeRuntime:
    """Servers that only record what was done to them, in order."""

    def __init__(self):
        self.events: list[tuple[str, str]] = []
        self.state: dict[str, str] = {}

    def serve_address(self, port: int) -> tuple[str, int]:
        return "127.0.0.1", port

    def serve(self, built: BuildResult, argv: list[str], *, label: str, **kw) -> Served:
        self.events.append(("start", label))
        self.state[label] = "running"

        def do(what: str, state: str):
            def f() -> None:
                self.events.append((what, label))
                self.state[label] = state
            return f
        return Served(build=built.build, url="http://127.0.0.1:1", label=label,
                      alive=lambda: self.state[label] != "stopped", logs=lambda: "", cpu_s=lambda: 0.0,
                      pids=lambda: set(), stop=do("stop", "stopped"), pause=do("pause", "paused"),
                      resume=do("resume", "running"))


def _bench(tmp_path: Path, rt, restart: str = "never") -> Bench:
    p = load_profile(SERVER_PROFILE)
    p = replace(p, server=replace(p.server, warmup=0, restart=restart))
    (tmp_path / "inputs").mkdir()
    shutil.copyfile(p.parity.document, tmp_path / "inputs" / DOC_NAME)
    built = {b: BuildResult(build=b, image_id="fake", base_image_id="host", compiler="", seconds=0.0)
             for b in ("main", "candidate")}
    return Bench(rt=rt, builds=built, src_dirs={"main": tmp_path, "candidate": tmp_path}, inputs=tmp_path / "inputs",
                 work=tmp_path, gpus=False, tele=None, preflight={}, profile=p)


@pytest.fixture
def ready(monkeypatch):
    monkeypatch.setattr(servers_mod.client, "wait_ready", lambda *a, **k: 0.01)


def test_the_idle_server_is_paused_before_the_other_runs_and_resumed_for_its_own_block(tmp_path, ready):
    rt = FakeRuntime()
    servers = Servers(_bench(tmp_path, rt), lambda *a: None)
    servers.get("main")
    servers.get("candidate")        # starts: main is frozen while it loads
    assert rt.events == [("start", "main/server/1"), ("pause", "main/server/1"), ("start", "candidate/server/1")]
    rt.events.clear()
    servers.get("main")
    assert rt.events == [("pause", "candidate/server/1"), ("resume", "main/server/1")]
    assert rt.state == {"main/server/1": "running", "candidate/server/1": "paused"}
    rt.events.clear()
    servers.get("candidate")
    assert rt.events == [("pause", "main/server/1"), ("resume", "candidate/server/1")]
    servers.stop_all()
    assert set(rt.state.values()) == {"stopped"} and servers.live == {}


def test_a_restart_per_block_freezes_the_other_while_the_new_server_loads(tmp_path, ready):
    rt = FakeRuntime()
    servers = Servers(_bench(tmp_path, rt, restart="block"), lambda *a: None)
    servers.get("main")
    servers.get("candidate")
    rt.events.clear()
    servers.get("main")
    assert rt.events == [("stop", "main/server/1"), ("pause", "candidate/server/1"), ("start", "main/server/2")]
    servers.stop_all()      # a paused server is stopped too: nothing stays frozen
    assert rt.state["candidate/server/1"] == "stopped" and rt.state["main/server/2"] == "stopped"


def test_the_local_runtime_pause_stops_the_servers_cpu_and_resume_restarts_it(tmp_path):
    profile = load_profile(SERVER_PROFILE)
    root = tmp_path / "build"
    (root / "engine").mkdir(parents=True)
    built = BuildResult(build="main", image_id="local", base_image_id="host", compiler="", seconds=0.0,
                        root=str(root))
    rt = LocalRuntime(tmp_path / "rt")
    served = rt.serve(built, ["/bin/sh", "-c", "while :; do :; done"], port=1, src_dir=root,
                      out_dir=tmp_path / "srv", run=profile.run, label="main/server/1")
    try:
        assert _advances(served, 0.05, 10)
        served.pause()
        time.sleep(0.1)     # the signal is asynchronous
        c0 = served.cpu_s()
        time.sleep(1.0)
        assert served.cpu_s() == c0 and served.alive()      # frozen, not gone
        served.resume()
        assert _advances(served, 0.05, 10)
        served.pause()
    finally:
        served.stop()       # a stopped group is killed all the same
    assert not served.alive()


def _advances(served: Served, by: float, within_s: float) -> bool:
    c0, deadline = served.cpu_s(), time.monotonic() + within_s
    while time.monotonic() < deadline:
        if served.cpu_s() - c0 >= by:
            return True
        time.sleep(0.05)
    return False
