"""The node's compiler cache on the real daemon: a candidate whose build poisons the ccache store
it was given changes nothing that main's next build links."""
from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest

from console.engine import images
from console.paths import LLAMA_PROFILE
from console.profile import load_profile
from console.runtime import compiler_cache
from console.runtime.docker import DockerRuntime

TREES = Path(__file__).resolve().parents[1] / "fixtures" / "ccache-poison"
pytestmark = [pytest.mark.docker, pytest.mark.untimed]     # its own store, its own images


@pytest.fixture(scope="module")
def cpp_image(docker_client):
    """The llama.cpp profile's image (its base has ccache, asserted) building the fixture trees."""
    profile = load_profile(LLAMA_PROFILE)
    images.bootstrap(docker_client, profile, lambda line: None)
    return replace(profile.image, build="sh -e build.sh")


def _files_of(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_a_candidate_that_poisons_its_compiler_cache_changes_nothing_main_builds(cpp_image, tmp_path,
                                                                                  monkeypatch):
    monkeypatch.setenv("BENCH_CONSOLE_CACHE", str(tmp_path / "cache"))     # a store of this test's own
    rt = DockerRuntime(round_label="test-ccache-poison")
    built: set[str] = set()
    try:
        clean = rt.build("main", TREES / "main", cpp_image, lambda line: None, keep_cache=True)
        built.add(clean.image_id)
        store = compiler_cache.store_for(clean.base_image_id, clean.compiler)
        before = _files_of(store)
        assert clean.compiler_cache["misses"] == 1 and clean.compiler_cache["kept"] is True
        assert any(name.endswith("R") for name in before), sorted(before)
        cand = rt.build("candidate", TREES / "candidate", cpp_image, lambda line: None)
        built.add(cand.image_id)
        # it read main's object from the store, then overwrote that object's entry in its image's store
        assert cand.engine_files["poisoned"] == hashlib.sha256(b"1\n").hexdigest()
        assert cand.compiler_cache["hits"] == 1 and cand.compiler_cache["kept"] is False
        assert _files_of(store) == before
        again = rt.build("main", TREES / "main", cpp_image, lambda line: None, keep_cache=True)
        built.add(again.image_id)
        assert again.compiler_cache["hits"] == 1 and again.engine_files == clean.engine_files
    finally:
        for image_id in built:
            rt.client.images.remove(image_id, force=True)
