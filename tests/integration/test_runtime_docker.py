"""The Docker runtime against the real daemon, with a deliberately hostile engine."""
from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from console.engine import protocol
from console.errors import CompilerMismatch, InfraError
from console.profile import load_profile
from console.runtime.docker import LABEL, DockerRuntime

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def hostile(base_image):
    profile = load_profile(FIXTURES / "hostile.toml")
    rt = DockerRuntime(round_label="test-hostile")
    built = rt.build("main", Path(profile.source.path), profile.image, lambda line: None)
    yield profile, rt, built
    rt.client.images.remove(built.image_id, force=True)


def _run(hostile, tmp_path, mode: int, **env):
    profile, rt, built = hostile
    inputs = tmp_path / "inputs"
    inputs.mkdir(exist_ok=True)
    (inputs / "document.tok").write_text("1 2 3\n")
    argv = ["/engine/engine", "bench", "--depth", str(mode), "--out", "/out"]
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return rt.run(built, argv, src_dir=Path(profile.source.path), inputs_dir=inputs,
                      out_dir=tmp_path / f"out-{mode}", run=profile.run, label=f"mode{mode}")
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _no_leftovers(rt) -> bool:
    return not rt.client.containers.list(all=True, filters={"label": LABEL})


def test_build_records_image_base_and_asserted_compiler(hostile, base_image):
    _, _, built = hostile
    assert built.image_id.startswith("sha256:")
    assert built.base_image_id == base_image
    assert built.compiler == "gcc (Debian 12.2.0-14+deb12u1) 12.2.0"


def test_honest_run_parses_and_peak_memory_is_measured_outside(hostile, tmp_path):
    res = _run(hostile, tmp_path, 1)
    assert res.exit_code == 0 and res.killed_reason is None
    parsed = protocol.parse_bench_output(res.stdout, metric="decode_tok_s", tokens=10, depth=1, context="doc")
    assert parsed.ok, parsed.refusals
    assert res.wall_s > 0
    assert _no_leftovers(hostile[1])


def test_isolation_no_network_nonroot_no_caps_readonly_env_filtered(hostile, tmp_path):
    res = _run(hostile, tmp_path, 6, BENCH_CONSOLE_SECRET="hunter2", BENCH_CONSOLE_ALLOWED="yes")
    text = res.stdout.decode()
    assert "interfaces: lo\n" in text, text          # network_mode none: loopback only
    assert "uid: 65534" in text
    assert "CapEff:\t0000000000000000" in text
    assert "root writable: no" in text
    assert "secret env: absent" in text               # nothing from the host but the profile's names
    assert "allowed env: yes" in text


def test_engine_that_never_exits_is_killed_at_the_timeout(hostile, tmp_path):
    t0 = time.monotonic()
    res = _run(hostile, tmp_path, 2)
    assert res.timed_out and res.exit_code is None
    assert time.monotonic() - t0 < hostile[0].run.timeout_s + 15
    assert _no_leftovers(hostile[1])


def test_children_left_behind_go_with_the_container(hostile, tmp_path):
    res = _run(hostile, tmp_path, 3)
    assert res.exit_code == 0
    assert _no_leftovers(hostile[1])


def test_output_directory_flood_is_stopped(hostile, tmp_path):
    res = _run(hostile, tmp_path, 4)
    assert res.killed_reason == "output limit"
    assert res.exit_code is None


def test_garbage_and_imitation_lines_never_parse_as_a_result(hostile, tmp_path):
    res = _run(hostile, tmp_path, 5)
    parsed = protocol.parse_bench_output(res.stdout, metric="decode_tok_s", tokens=10, depth=5, context="doc")
    assert parsed.result is None and parsed.refusals


def test_compiler_pin_mismatch_fails_the_build_naming_both(hostile):
    profile, rt, _ = hostile
    wrong = replace(profile.image, compiler="gcc (Debian 99.0.0-1) 99.0.0")
    with pytest.raises(CompilerMismatch) as e:
        rt.build("candidate", Path(profile.source.path), wrong, lambda line: None)
    assert "expected 'gcc (Debian 99.0.0-1) 99.0.0'" in e.value.message
    assert "found 'gcc (Debian 12.2.0-14+deb12u1) 12.2.0'" in e.value.message
    assert _no_leftovers(rt)


def test_unreachable_daemon_says_so(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(InfraError) as e:
        DockerRuntime()
    assert "Docker is not reachable" in e.value.message
    assert "Start the Docker daemon" in e.value.hint


def test_a_round_with_no_daemon_exits_with_the_infrastructure_code(tmp_path):
    import subprocess
    import sys
    env = dict(os.environ, DOCKER_HOST="unix:///nonexistent/docker.sock", NO_COLOR="1")
    r = subprocess.run([sys.executable, "-m", "console.cli", "demo", "--headless", "--out", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=120,
                       cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 3, r.stdout + r.stderr
    assert "Docker is not reachable" in r.stdout + r.stderr and "--runtime local" in r.stdout + r.stderr


class PidRecorder:
    """A watch that records the PIDs the runtime calls the engine's own, sample by sample."""

    def __init__(self):
        self.seen: list[set[int]] = []
        self.monitor = None

    def __call__(self, own_pids):
        from console.telemetry.base import RepMonitor
        seen = self.seen

        class M(RepMonitor):
            def _sample(self):
                pids = set(own_pids())
                seen.append({pid: _cmdline(pid) for pid in pids})
                return {}

            def _summary(self, samples, duration_s):
                return {"source": "recorder"}

        self.monitor = M(0.05)
        return self.monitor


def test_telemetry_window_covers_the_engine_and_names_its_host_pids(hostile, tmp_path):
    profile, rt, built = hostile
    watch = PidRecorder()
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    res = rt.run(built, ["/engine/engine", "bench", "--depth", "2", "--out", "/out"],
                 src_dir=Path(profile.source.path), inputs_dir=inputs, out_dir=tmp_path / "o",
                 run=replace(profile.run, timeout_s=2), label="watch", watch=watch)
    assert res.killed_reason == "timeout"
    # The summary comes back with the result, and the window closed inside the run's wall time.
    assert res.telemetry["source"] == "recorder" and res.telemetry["duration_s"] <= res.wall_s
    # While the engine ran, its processes were named by host PID (what NVML reports), so GPU
    # telemetry never takes the engine for a foreign process.
    # (The first sample may catch the container's PID a moment before runc execs the command in
    # it: the same host PID, still named "runc init".)
    cmdlines = [c for s in watch.seen for c in s.values() if c != "runc init"]
    assert any(cmdlines) and all(c.startswith("/engine/engine bench") for c in cmdlines if c), cmdlines
    assert _no_leftovers(rt)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


# --- the profile's harness, tools and model mounts -----------------------------------------

def _harness(tmp_path: Path, build: str):
    from console.profile import HarnessSpec
    d = tmp_path / "harness"
    d.mkdir()
    (d / "measure.sh").write_text("#!/bin/sh\necho measured\n")
    return HarnessSpec(path=str(d), build=build)


def test_the_harness_is_built_after_the_engine_and_its_files_are_hashed(base_image, tmp_path):
    from console.profile import Tool
    profile = load_profile(FIXTURES / "hostile.toml")
    image = replace(profile.image, tools=(Tool("make", ("make", "--version"), "GNU Make 4.3"),))
    rt = DockerRuntime(round_label="test-harness")
    # the engine's build cannot see the harness: it is copied in only after
    harness = _harness(tmp_path, "test ! -e /src/measure.sh && cp measure.sh /engine/measure.sh")
    built = rt.build("main", Path(profile.source.path), image, lambda line: None, harness=harness)
    try:
        assert built.tools == {"make": "GNU Make 4.3"}
        assert "measure.sh" in built.engine_files and "engine" in built.engine_files
        import hashlib
        assert built.engine_files["measure.sh"] == hashlib.sha256(b"#!/bin/sh\necho measured\n").hexdigest()
        # model files are mounted read-only: the engine can read them and cannot change them
        weights = tmp_path / "w.bin"
        weights.write_bytes(b"weights")
        inputs = tmp_path / "inputs"
        inputs.mkdir()
        res = rt.run(built, ["sh", "-c", "cat /model/w.bin; echo; echo x > /model/w.bin || echo refused"],
                     src_dir=Path(profile.source.path), inputs_dir=inputs, out_dir=tmp_path / "out",
                     run=profile.run, label="model", models={"w.bin": str(weights)})
        assert res.stdout.decode().split() == ["weights", "refused"] and weights.read_bytes() == b"weights"
    finally:
        rt.client.images.remove(built.image_id, force=True)


def test_a_harness_that_fails_to_build_is_a_build_error(base_image, tmp_path, docker_client):
    from console.errors import BuildError
    profile = load_profile(FIXTURES / "hostile.toml")
    rt = DockerRuntime(round_label="test-harness-fails")
    with pytest.raises(BuildError) as e:
        rt.build("candidate", Path(profile.source.path), profile.image, lambda line: None,
                 harness=_harness(tmp_path, "echo 'harness: no compiler for this' >&2; exit 4"))
    assert "harness: no compiler for this" in "\n".join(e.value.log_tail)
    assert not docker_client.containers.list(all=True, filters={"label": LABEL})


def test_a_tool_that_moved_is_named(base_image, tmp_path):
    from console.profile import Tool
    profile = load_profile(FIXTURES / "hostile.toml")
    image = replace(profile.image, tools=(Tool("make", ("make", "--version"), "GNU Make 9.9"),))
    with pytest.raises(CompilerMismatch, match="the make moved: expected 'GNU Make 9.9', found 'GNU Make 4.3'"):
        DockerRuntime(round_label="test-tools").build("main", Path(profile.source.path), image, lambda line: None)
