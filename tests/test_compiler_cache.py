"""The node's compiler cache store: per base image and compiler, into the build context and back."""
from __future__ import annotations

import io
import tarfile

from console.runtime import compiler_cache as cc
from console.runtime.docker import _build_context


def test_a_store_per_base_image_and_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CONSOLE_CACHE", str(tmp_path))
    a = cc.store_for("sha256:" + "1" * 64, "g++ 12")
    assert a.is_dir() and a.parent == tmp_path / "ccache"
    assert cc.store_for("sha256:" + "1" * 64, "g++ 12") == a
    assert cc.store_for("sha256:" + "2" * 64, "g++ 12") != a and cc.store_for("sha256:" + "1" * 64, "g++ 13") != a


def _names(tmp_path, store) -> set[str]:
    """The ccache/ entries of the build context the Docker runtime sends (beside the engine's
    tree, under engine/: the two arrive in one COPY, before the harness)."""
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    with tarfile.open(fileobj=_build_context(src, None, store)) as tar:
        names = {m.name for m in tar.getmembers()}
    assert {"Dockerfile", "engine/src", "harness"} <= names, names
    return {n.removeprefix("engine/") for n in names if n.startswith("engine/ccache")}


def test_the_context_gets_the_store_or_an_empty_directory(tmp_path):
    assert _names(tmp_path, None) == {"ccache"}
    store = tmp_path / "store"
    store.mkdir()
    assert _names(tmp_path, store) == {"ccache"}
    (store / "a").mkdir()
    (store / "a" / "obj").write_bytes(b"x")
    assert _names(tmp_path, store) == {"ccache", "ccache/a", "ccache/a/obj"}


def _archive(files: dict[str, bytes]) -> list[bytes]:
    """What the daemon's get_archive('/ccache') streams: a tar whose top directory is ccache/."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("ccache")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(f"ccache/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    return [raw[:100], raw[100:]]


def test_the_image_store_replaces_the_node_store(tmp_path):
    store = tmp_path / "ccache" / "abc"
    store.mkdir(parents=True)
    (store / "old").write_bytes(b"stale")
    size = cc.replace_store(store, _archive({"0/obj": b"12345", "stats": b"7"}))
    assert size == 6 and sorted(p.name for p in store.rglob("*") if p.is_file()) == ["obj", "stats"]
    # nothing left beside it but its lock
    assert sorted(p.name for p in store.parent.iterdir()) == [".abc.lock", "abc"]


def test_a_replacement_waits_for_a_build_copying_the_store(tmp_path):
    """Two builds on one node: one copying the store (a build context, a candidate's copy) holds it;
    the other's replacement swaps it only once that copy is done, and a copy never sees half of it."""
    import threading
    store = tmp_path / "ccache" / "abc"
    store.mkdir(parents=True)
    (store / "old").write_bytes(b"stale")
    done = threading.Event()

    def replace():
        cc.replace_store(store, _archive({"new": b"fresh"}))
        done.set()

    with cc.reading(store):
        t = threading.Thread(target=replace)
        t.start()
        assert not done.wait(0.5)                       # held off while the copy reads
        assert (store / "old").read_bytes() == b"stale"
    assert done.wait(10)
    t.join()
    assert sorted(p.name for p in store.iterdir()) == ["new"]
    with cc.reading(None):                              # no compiler cache: nothing to hold
        pass


def test_a_broken_archive_leaves_the_store_as_it_was(tmp_path):
    store = tmp_path / "ccache" / "abc"
    store.mkdir(parents=True)
    (store / "kept").write_bytes(b"x")
    try:
        cc.replace_store(store, [b"not a tar"])
    except tarfile.TarError:
        pass
    assert (store / "kept").read_bytes() == b"x"


def test_stats_from_the_build_log():
    lines = [f"{cc.STATS_PREFIX}direct_cache_hit\t240", f"{cc.STATS_PREFIX}preprocessed_cache_hit\t3",
             f"{cc.STATS_PREFIX}cache_miss\t2", f"{cc.STATS_PREFIX}files_in_cache\tlots", "unrelated"]
    assert cc.parse_stats(lines) == {"hits": 243, "misses": 2}
    assert cc.parse_stats([]) == {"hits": 0, "misses": 0}


def _tree(path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_a_build_that_may_keep_the_store_writes_the_node_store_itself(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    with cc.store_to_write(store, True, tmp_path / "root") as writes:
        assert writes == store
    with cc.store_to_write(None, False, tmp_path / "root") as writes:
        assert writes is None       # no compiler cache: nothing to copy


def test_a_build_that_may_not_keep_the_store_reads_a_copy_that_is_thrown_away(tmp_path):
    store = tmp_path / "store"
    (store / "a").mkdir(parents=True)
    (store / "a" / "objR").write_bytes(b"main's object")
    (tmp_path / "root").mkdir()
    before = _tree(store)
    with cc.store_to_write(store, False, tmp_path / "root") as writes:
        assert writes != store and writes.parent == tmp_path / "root"
        assert _tree(writes) == before          # the same entries: the same hits
        (writes / "a" / "objR").write_bytes(b"poison")
        (writes / "b").mkdir()
        (writes / "b" / "newR").write_bytes(b"poison")
    assert _tree(store) == before and not writes.exists()
    try:                                        # a build that fails leaves no copy either
        with cc.store_to_write(store, False, tmp_path / "root") as writes:
            raise RuntimeError("build failed")
    except RuntimeError:
        pass
    assert not writes.exists() and _tree(store) == before


def test_the_docker_runtime_keeps_no_store_of_a_build_that_may_not_keep_it(tmp_path):
    """The image's store is not even read back: the node's stays as it was, and the receipt says so."""
    from types import SimpleNamespace
    from console.runtime.docker import DockerRuntime

    class NoDaemon:
        def create(self, *a, **kw):
            raise AssertionError("a candidate's store was read back from its image")

    store = tmp_path / "store"
    store.mkdir()
    (store / "objR").write_bytes(b"12345")
    rt = SimpleNamespace(client=SimpleNamespace(containers=NoDaemon()))
    lines = [f"{cc.STATS_PREFIX}direct_cache_hit\t3", f"{cc.STATS_PREFIX}cache_miss\t1"]
    got = DockerRuntime._keep_cache(rt, "sha256:x", store, lines, keep=False)
    assert got == {"tool": "ccache", "hits": 3, "misses": 1, "store_bytes": 5, "kept": False}
    assert (store / "objR").read_bytes() == b"12345"


def test_builds_keep_no_store_unless_the_caller_says_so():
    """A new caller of a runtime's build is safe by default."""
    import inspect
    from console.runtime.base import Runtime
    from console.runtime.docker import DockerRuntime
    from console.runtime.local import LocalRuntime
    for cls in (Runtime, DockerRuntime, LocalRuntime):
        assert inspect.signature(cls.build).parameters["keep_cache"].default is False, cls


def test_a_round_lets_only_main_write_the_store(tmp_path):
    """The round's builder: main's build may keep the store, the candidate's may not."""
    from types import SimpleNamespace
    from console.profile.spec import ImageSpec
    from console.round.builds import Builder
    from console.runtime.base import BuildResult

    asked: dict[str, bool] = {}

    class Runtime:
        def recipe(self, image):
            return {"Dockerfile": "x"}

        def find_build(self, *a, **kw):
            return None

        def build(self, name, src_dir, image, on_log, harness=None, key="", origin="", **kw):
            asked[name] = kw["keep_cache"]
            return BuildResult(build=name, image_id="sha256:" + name, base_image_id="b", compiler="c",
                               seconds=0.0, key=key)

    image = ImageSpec(base="b", compiler="c", build="true", compiler_cache="ccache")
    cfg = SimpleNamespace(profile=SimpleNamespace(image=image), resume=None, rebuild=False)
    builder = Builder(cfg, Runtime(), "round R", None, None, lambda e: None, lambda *a: None, lambda: None)
    snap = SimpleNamespace(dir=tmp_path, record={"tree_sha256": "0" * 64})
    builder.build("main", snap)
    builder.build("candidate", snap)
    assert asked == {"main": True, "candidate": False}
