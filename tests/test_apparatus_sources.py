"""The apparatus guard and source snapshots (patches, git refs, directories)."""
from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import given, strategies as st

from console.engine import sources
from console.core.apparatus import changed_paths, is_protected, touched_protected

ROOT = Path(__file__).resolve().parents[1]
DEMO_MAIN = ROOT / "images" / "demo-engine"
CANDIDATES = ROOT / "images" / "demo-candidates"
PROTECTED = ("src/bench.c", "src/npy.h", "parity/")


def test_directory_prefix_exact_and_glob_patterns():
    assert is_protected("parity/README.md", PROTECTED)
    assert is_protected("src/bench.c", PROTECTED)
    assert not is_protected("src/bench.cc", PROTECTED)
    assert not is_protected("paritys/x", PROTECTED)
    assert is_protected("bench/results/a.json", ("bench/results/*.json",))


paths = st.lists(st.sampled_from(["a", "b/c", "src/bench.c", "parity/x", "d/e/f"]), unique=True)


@given(paths, paths, st.data())
def test_guard_names_exactly_the_changed_protected_files(a, b, data):
    main = {p: "h1" for p in a}
    cand = {p: data.draw(st.sampled_from(["h1", "h2"])) for p in b}
    touched = touched_protected(main, cand, PROTECTED)
    assert set(touched) == {p for p in changed_paths(main, cand) if is_protected(p, PROTECTED)}
    assert touched_protected(main, dict(main), PROTECTED) == []


def test_demo_patches_apply_and_only_touch_apparatus_names_its_file(tmp_path):
    main = sources.snapshot(sources.parse_spec(str(DEMO_MAIN)), tmp_path / "main")
    for patch in sorted(CANDIDATES.glob("*.patch")):
        cand = sources.snapshot(sources.parse_spec(str(patch)), tmp_path / patch.stem, main)
        touched = touched_protected(main.files, cand.files, PROTECTED)
        assert cand.record["patch_sha256"] and cand.record["tree_sha256"] != main.record["tree_sha256"]
        if patch.stem == "touch-apparatus":
            assert touched and all(is_protected(t, PROTECTED) for t in touched)
        else:
            assert touched == [], f"{patch.name} touches {touched}"


def test_git_source_records_the_commit(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "f.txt").write_text("one\n")
    run = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)
    run("init", "-q")
    run("-c", "user.email=a@b", "-c", "user.name=n", "add", "f.txt")
    run("-c", "user.email=a@b", "-c", "user.name=n", "commit", "-qm", "one")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    snap = sources.snapshot(sources.parse_spec(f"{repo}@HEAD"), tmp_path / "snap")
    assert snap.record["commit"] == commit
    assert (snap.dir / "f.txt").read_text() == "one\n" and not (snap.dir / ".git").exists()


def test_patch_that_does_not_apply_is_a_usage_error(tmp_path):
    import pytest
    from console.errors import UsageError
    main = sources.snapshot(sources.parse_spec(str(DEMO_MAIN)), tmp_path / "main")
    bad = tmp_path / "bad.patch"
    bad.write_text("--- a/nope.c\n+++ b/nope.c\n@@ -1 +1 @@\n-x\n+y\n")
    with pytest.raises(UsageError) as e:
        sources.snapshot(sources.parse_spec(str(bad)), tmp_path / "cand", main)
    assert "does not apply" in e.value.message
