"""The local runtime (no Docker) with the same hostile engine: real processes, real limits."""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from console.engine import protocol
from console.errors import CompilerMismatch
from console.profile import load_profile
from console.profile.spec import HostToolchain, Tool
from console.runtime.local import LocalRuntime, map_paths

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    profile = load_profile(FIXTURES / "hostile.toml")
    rt = LocalRuntime(tmp_path_factory.mktemp("local"))
    built = rt.build("main", Path(profile.source.path), profile.image, lambda line: None)
    return profile, rt, built


def _run(hostile, tmp_path, mode):
    profile, rt, built = hostile
    (tmp_path / "in").mkdir(exist_ok=True)
    return rt.run(built, ["/engine/engine", "bench", "--depth", str(mode), "--out", "/out"],
                  src_dir=Path(built.root) / "src", inputs_dir=tmp_path / "in", out_dir=tmp_path / f"o{mode}",
                  run=profile.run, label=f"m{mode}")


def test_paths_are_mapped_only_at_root_boundaries():
    root = Path("/r")
    assert map_paths("make -s OUT=/engine", root, None, None) == "make -s OUT=/r/engine"
    assert map_paths("/engine/engine", root, None, None) == "/r/engine/engine"
    assert map_paths("/engineering/x", root, None, None) == "/engineering/x"
    assert map_paths("/out", root, Path("/i"), Path("/o")) == "/o"


def test_build_asserts_the_host_compiler_and_records_a_content_id(hostile):
    _, _, built = hostile
    assert built.image_id.startswith("local:") and built.base_image_id == "host"
    assert built.compiler.startswith("gcc ")


def test_wrong_compiler_pin_is_refused(hostile):
    profile, rt, _ = hostile
    with pytest.raises(CompilerMismatch) as e:
        rt.build("candidate", Path(profile.source.path), replace(profile.image, compiler="gcc 1.0"), lambda l: None)
    assert "expected 'gcc 1.0'" in e.value.message
    # the hint is about this host's packages, not a base image a local round never uses
    assert "sudo apt-get install" in e.value.hint and "images bootstrap" not in e.value.hint


def test_a_missing_host_tool_is_named_with_what_to_install(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    absent = Tool(name="cmake", probe=("bench-console-no-such-cmake", "--version"), expect="cmake version 3.25.1")
    image = replace(_image_of("true", host=HostToolchain(tools=(absent,))), packages=("g++", "cmake", "ccache"))
    with pytest.raises(CompilerMismatch) as e:
        LocalRuntime(tmp_path / "w").build("main", src, image, lambda line: None)
    assert "not runnable on this host" in e.value.message
    assert "cmake is not installed here" in e.value.hint
    assert "sudo apt-get install g++ cmake ccache" in e.value.hint and "make setup-local" in e.value.hint


def test_honest_run_parses_and_its_cpu_time_is_measured(hostile, tmp_path):
    res = _run(hostile, tmp_path, 1)
    assert res.exit_code == 0 and res.cpu_s is not None and res.cpu_s >= 0
    assert protocol.parse_bench_output(res.stdout, metric="decode_tok_s", tokens=10, depth=1, context="doc").ok


def test_never_exits_is_killed_at_the_timeout(hostile, tmp_path):
    t0 = time.monotonic()
    res = _run(hostile, tmp_path, 2)
    assert res.timed_out and res.exit_code is None
    assert time.monotonic() - t0 < hostile[0].run.timeout_s + 3


def test_lingering_children_are_killed_with_their_group(hostile, tmp_path):
    res = _run(hostile, tmp_path, 3)
    assert res.exit_code == 0
    time.sleep(0.2)
    binary = str(Path(hostile[2].root) / "engine" / "engine").encode()
    left = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cmdline").read_bytes().startswith(binary):
                left.append(proc.name)
        except OSError:
            continue
    assert left == []


def test_output_flood_is_stopped(hostile, tmp_path):
    res = _run(hostile, tmp_path, 4)
    assert res.killed_reason == "output limit"


def test_telemetry_window_opens_on_the_engine_process(hostile, tmp_path):
    from console.telemetry.base import RepMonitor
    profile, rt, built = hostile
    seen: list[set[int]] = []

    def watch(own_pids):
        class M(RepMonitor):
            def _sample(self):
                seen.append(set(own_pids()))
                return {}

            def _summary(self, samples, duration_s):
                return {"source": "recorder"}
        return M(0.05)

    (tmp_path / "in").mkdir()
    res = rt.run(built, ["/engine/engine", "bench", "--depth", "2", "--out", "/out"],
                 src_dir=Path(built.root) / "src", inputs_dir=tmp_path / "in", out_dir=tmp_path / "o",
                 run=replace(profile.run, timeout_s=1), label="watch", watch=watch)
    assert res.killed_reason == "timeout"
    assert res.telemetry["source"] == "recorder" and res.telemetry["duration_s"] <= res.wall_s
    assert seen and all(len(s) == 1 for s in seen)


def test_a_server_listens_on_loopback_is_watched_and_stopped_with_its_group(hostile, tmp_path):
    import sys

    from console.serving.client import wait_ready
    profile, rt, built = hostile
    host, port = rt.serve_address(8080)
    assert host == "127.0.0.1" and 0 < port < 65536
    served = rt.serve(built, [sys.executable, "-m", "http.server", "--bind", host, str(port)], port=port,
                      src_dir=Path(built.root) / "src", out_dir=tmp_path / "srv",
                      run=profile.run, label="main/server/1")
    assert served.url == f"http://127.0.0.1:{port}"
    assert wait_ready(served.url, "/", 20, alive=served.alive) is not None
    assert served.alive() and served.pids() and served.cpu_s() is not None
    assert "GET / HTTP" in served.logs()
    assert rt.cleanup_round() == 1 and not served.alive()


def test_a_server_that_exits_is_seen_as_gone_before_the_timeout(hostile, tmp_path):
    from console.serving.client import wait_ready
    profile, rt, built = hostile
    served = rt.serve(built, ["/bin/sh", "-c", "echo cannot load the model; exit 3"], port=1,
                      src_dir=Path(built.root) / "src", out_dir=tmp_path / "srv",
                      run=profile.run, label="main/server/1")
    started = time.monotonic()
    assert wait_ready(served.url, "/health", 30, alive=served.alive) is None
    assert time.monotonic() - started < 10 and "cannot load the model" in served.logs()
    served.stop()


def _image_of(build_cmd: str, **kw):
    """An image spec pinning this host's own gcc (the local runtime asserts it)."""
    import subprocess
    from console.profile.spec import ImageSpec
    line = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout.splitlines()[0].strip()
    return ImageSpec(base="unused", compiler=line, build=build_cmd, **kw)


def test_each_build_installs_under_its_own_prefix_and_scratch_directory(tmp_path):
    """The build contract both runtimes keep: $PREFIX and $BUILD_DIR, fresh per build, so a second
    build cannot reuse the first one's build directory."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "x.c").write_text("int main(void) { return 0; }\n")
    cmd = ('test -z "$(ls -A "$BUILD_DIR")"; gcc -c x.c -o "$BUILD_DIR/x.o"; gcc "$BUILD_DIR/x.o" -o "$PREFIX/x"; '
           'echo "$PREFIX $BUILD_DIR" > "$PREFIX/where"')
    rt = LocalRuntime(tmp_path / "w")
    a = rt.build("main", src, _image_of(cmd), lambda line: None)
    b = rt.build("candidate", src, _image_of(cmd), lambda line: None)
    where_a = (Path(a.root) / "engine" / "where").read_text().split()
    where_b = (Path(b.root) / "engine" / "where").read_text().split()
    assert where_a == [f"{a.root}/engine", f"{a.root}/build"] and where_b[0] != where_a[0]
    assert set(a.engine_files) == {"x", "where"} and a.engine_files["x"] == b.engine_files["x"]


def test_the_host_toolchain_table_replaces_the_image_pins_and_names_a_mismatch(tmp_path):
    from console.profile.spec import HostToolchain, Tool
    src = tmp_path / "src"
    src.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    nvcc = bin_dir / "fakecc"      # a tool only on the profile's host path
    nvcc.write_text("#!/bin/sh\necho 'fakecc 9.9'\n")
    nvcc.chmod(0o755)
    tool = Tool(name="fakecc", probe=("fakecc",), expect="fakecc 9.9")
    image = _image_of("fakecc > \"$PREFIX/seen\"", host=HostToolchain(path=(str(bin_dir),), tools=(tool,)))
    built = LocalRuntime(tmp_path / "w").build("main", src, image, lambda line: None)
    assert built.tools == {"fakecc": "fakecc 9.9"}
    assert (Path(built.root) / "engine" / "seen").read_text() == "fakecc 9.9\n"
    wrong = _image_of("true", host=HostToolchain(compiler="gcc 1.0"))
    with pytest.raises(CompilerMismatch) as e:
        LocalRuntime(tmp_path / "w2").build("main", src, wrong, lambda line: None)
    assert "expected 'gcc 1.0'" in e.value.message
    # under docker the image's own pins hold; the host table is for --runtime local only
    assert wrong.toolchain("docker")[0] == image.compiler and wrong.toolchain("local")[0] == "gcc 1.0"


def test_a_local_build_with_ccache_reuses_identical_objects_and_records_it(tmp_path, monkeypatch):
    import shutil as sh
    if sh.which("ccache") is None:
        pytest.fail("ccache is not installed: `make setup-test` installs it")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    src = tmp_path / "src"
    src.mkdir()
    (src / "x.c").write_text("int f(void) { return 41 + 1; }\n")
    cmd = 'ccache gcc -c "$PWD/x.c" -o "$BUILD_DIR/x.o" && cp "$BUILD_DIR/x.o" "$PREFIX/"'
    rt = LocalRuntime(tmp_path / "w")
    first = rt.build("main", src, _image_of(cmd, compiler_cache="ccache"), lambda line: None, keep_cache=True)
    second = rt.build("candidate", src, _image_of(cmd, compiler_cache="ccache"), lambda line: None)
    assert first.compiler_cache["misses"] == 1 and first.compiler_cache["hits"] == 0
    assert second.compiler_cache["hits"] == 1 and second.compiler_cache["misses"] == 0
    assert first.compiler_cache["kept"] is True and second.compiler_cache["kept"] is False


def _files_of(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_a_candidate_that_poisons_its_compiler_cache_changes_nothing_main_builds(tmp_path, monkeypatch):
    """The candidate's build overwrites every ccache result it was given with another source's
    object; main's store is not what it was given, so main's next build is its clean one."""
    import shutil as sh
    from console.runtime import compiler_cache
    if sh.which("ccache") is None:
        pytest.fail("ccache is not installed: `make setup-test` installs it")
    monkeypatch.setenv("BENCH_CONSOLE_CACHE", str(tmp_path / "cache"))
    trees = FIXTURES / "ccache-poison"
    image = _image_of("sh -e build.sh", compiler_cache="ccache")
    rt = LocalRuntime(tmp_path / "w")
    clean = rt.build("main", trees / "main", image, lambda line: None, keep_cache=True)
    store = compiler_cache.store_for("host", clean.compiler)
    before = _files_of(store)
    assert clean.compiler_cache["misses"] == 1 and any(name.endswith("R") for name in before)
    cand = rt.build("candidate", trees / "candidate", image, lambda line: None)
    assert (Path(cand.root) / "engine" / "poisoned").read_text().strip() == "1"   # it did poison its copy
    assert cand.compiler_cache["hits"] == 1 and cand.compiler_cache["kept"] is False
    assert _files_of(store) == before and not (Path(cand.root) / "ccache").exists()
    again = rt.build("main", trees / "main", image, lambda line: None, keep_cache=True)
    assert again.compiler_cache["hits"] == 1 and again.engine_files == clean.engine_files
    # the attack is real: had the candidate's store been kept, main's next build would link y.cc
    rt.build("candidate", trees / "candidate", image, lambda line: None, keep_cache=True)
    poisoned = rt.build("main", trees / "main", image, lambda line: None, keep_cache=True)
    assert poisoned.compiler_cache["hits"] == 1 and poisoned.engine_files != clean.engine_files


def test_a_build_is_kept_by_its_key_and_found_again_with_its_files_hashed_anew(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CONSOLE_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "src"
    src.mkdir()
    (src / "x.c").write_text("int main(void) { return 0; }\n")
    image = _image_of('gcc x.c -o "$PREFIX/x"')
    rt = LocalRuntime(tmp_path / "w")
    assert rt.find_build("main", "k1", image) is None
    built = rt.build("main", src, image, lambda line: None, key="k1", origin="round R")
    found = LocalRuntime(tmp_path / "w2").find_build("candidate", "k1", image)
    assert found is not None and found.reused_from["round"] == "round R"
    assert found.image_id == built.image_id and found.engine_files == built.engine_files
    assert rt.find_build("main", "k1", image, not_id=built.image_id) is None
    assert rt.find_build("main", "k2", image) is None
    # the key names the host toolchain: another pinned compiler is another recipe
    from dataclasses import replace as rep
    from console.profile.spec import HostToolchain
    assert rt.recipe(image) != rt.recipe(rep(image, host=HostToolchain(compiler="gcc 13")))
