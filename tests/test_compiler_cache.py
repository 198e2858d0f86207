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
    """The ccache/ entries of the build context the Docker runtime sends."""
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    with tarfile.open(fileobj=_build_context(src, None, store)) as tar:
        return {m.name for m in tar.getmembers() if m.name.split("/")[0] == "ccache"}


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
    assert sorted(p.name for p in store.parent.iterdir()) == ["abc"]     # nothing left beside it


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
