"""A compiler cache kept on the node between builds (``image.compiler_cache = "ccache"``).

ccache runs inside the pinned image (the base includes it, the profile asserts its version
like any tool), and reuses a compiled object only when the compiler, its arguments and the
preprocessed source are identical: a candidate that differs from main in one file compiles
that file, not the tree. No build directory crosses builds; only ccache's own store does.

The store lives on the host, one per base image and compiler, and travels into the build
context. Every build reads it, but only a build whose sources the console trusts (main, the
reference) writes it: the caller says so (``keep_cache``, off unless given). ccache trusts its
store, and a build's commands can write any object under any key, so a candidate that could
write the store could choose what main's next build links. After a trusted build, the image's
updated store replaces the node's (atomically: a build that fails leaves the previous store);
a candidate's updated store is discarded (under Docker it stays in the image; under the local
runtime the build gets a throwaway copy). What a build got from the store (hits, misses) and
whether its store was kept go into its receipt.

Builds on one node may overlap (two rounds, or a queue's worker beside a user's round): a build
copying the store holds a shared lock on it, and the replacement waits for an exclusive one, so a
copy never reads a store half replaced.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tarfile
import tempfile
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator

from ..paths import cache_dir

IN_IMAGE = "/ccache"
STATS_PREFIX = "bench-console: ccache: "


def store_for(base_image_id: str, compiler: str) -> Path:
    """The node's ccache store for one base image and compiler (created empty on first use)."""
    tag = hashlib.sha256(f"{base_image_id}\n{compiler}".encode()).hexdigest()[:16]
    path = cache_dir() / "ccache" / tag
    path.mkdir(parents=True, exist_ok=True)
    return path


def build_env(store: Path, root: Path) -> dict[str, str]:
    """ccache's settings for a build outside an image (the image's Dockerfile sets the same): the
    node's store, and paths made relative to the build's own root so two builds' objects match."""
    return {"CCACHE_DIR": str(store), "CCACHE_BASEDIR": str(root), "CCACHE_NOHASHDIR": "true",
            "CCACHE_MAXSIZE": "256M"}


@contextmanager
def _locked(store: Path, mode: int) -> Iterator[None]:
    """``store``'s lock (a file beside it, so that replacing the directory keeps it) held in ``mode``."""
    with open(store.parent / f".{store.name}.lock", "a+b") as f:
        fcntl.flock(f.fileno(), mode)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def reading(store: Path | None):
    """Held while a build copies ``store`` (into a build context, or a candidate's throwaway copy):
    no replacement swaps it meanwhile. A no-op without a store."""
    return _locked(store, fcntl.LOCK_SH) if store is not None else nullcontext()


@contextmanager
def store_to_write(store: Path | None, keep: bool, scratch: Path) -> Iterator[Path | None]:
    """The store a build outside an image points ccache at: the node's own when the build may keep
    what it writes, else a copy under ``scratch`` (the same hits; its writes go nowhere), removed
    when the build ends. None without a compiler cache."""
    if store is None or keep:
        yield store
        return
    copy = scratch / "ccache"
    with reading(store):
        shutil.copytree(store, copy, symlinks=True)
    try:
        yield copy
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def replace_store(store: Path, chunks) -> int:
    """Unpack the image's ``/ccache`` (a tar stream from the daemon) as the new store; its bytes."""
    parent = store.parent
    with tempfile.TemporaryDirectory(prefix=".incoming-", dir=parent) as tmp:
        archive = Path(tmp) / "store.tar"     # on disk, not in memory: a store may be 256 MB
        with open(archive, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        fresh = Path(tmp) / Path(IN_IMAGE).name
        size = sum(p.stat().st_size for p in fresh.rglob("*") if p.is_file())
        old = parent / (store.name + ".old")
        with _locked(store, fcntl.LOCK_EX):    # no build is copying it: swap the two directories
            shutil.rmtree(old, ignore_errors=True)
            os.replace(store, old)
            os.replace(fresh, store)
        shutil.rmtree(old, ignore_errors=True)
    return size


def parse_stats(lines: list[str]) -> dict[str, int]:
    """ccache --print-stats lines (``key<TAB>value``), as the build log echoed them: hits and misses."""
    raw: dict[str, int] = {}
    for line in lines:
        if line.startswith(STATS_PREFIX):
            key, _, value = line[len(STATS_PREFIX):].partition("\t")
            if value.strip().isdigit():
                raw[key.strip()] = int(value)
    hits = raw.get("direct_cache_hit", 0) + raw.get("preprocessed_cache_hit", 0)
    return {"hits": hits, "misses": raw.get("cache_miss", 0)}
