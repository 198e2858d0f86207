"""The apparatus guard and source snapshots (patches, git refs, directories)."""
from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import given, strategies as st

from console.engine import sources
from console.core.decisions.apparatus import changed_paths, is_protected, touched_protected

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


# --- symbolic links: in the digest, the build key and the guard -----------------------------

def _tree(root: Path, links: dict[str, str] = {}) -> Path:
    """A small engine tree on disk (parity/ protected), with the given links (path -> target)."""
    for rel, text in {"src/a.c": "int a;\n", "src/b.c": "int b;\n", "parity/check.py": "ok\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for rel, target in links.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).symlink_to(target)
    return root


def _touched(tmp_path: Path, cand_links: dict[str, str], main_links: dict[str, str] = {},
             edit: str | None = None) -> list[str]:
    main = sources.snapshot(sources.parse_spec(str(_tree(tmp_path / "m", main_links))), tmp_path / "sm")
    cand_dir = _tree(tmp_path / "c", cand_links)
    if edit:
        (cand_dir / edit).write_text("changed\n")
    cand = sources.snapshot(sources.parse_spec(str(cand_dir)), tmp_path / "sc")
    return touched_protected(main.files, cand.files, ("parity/",), cand.links, main.links)


def test_a_link_added_inside_the_protected_directory_touches_the_apparatus(tmp_path):
    assert _touched(tmp_path, {"parity/extra.py": "../src/a.c"}) == ["parity/extra.py"]


def test_a_link_from_outside_into_the_protected_directory_touches_the_apparatus(tmp_path):
    links = {"src/check.py": "../parity/check.py", "src/par": "../parity", "src/up": ".."}
    assert _touched(tmp_path, links) == ["src/check.py", "src/par", "src/up"]
    assert _touched(tmp_path / "ok", {"src/alias.c": "a.c"}) == []


def test_a_file_read_through_a_protected_link_is_apparatus(tmp_path):
    """main's parity/ reads src/a.c through a link: a candidate editing src/a.c edits the apparatus."""
    assert _touched(tmp_path, {"parity/a.c": "../src/a.c"}, {"parity/a.c": "../src/a.c"}, edit="src/a.c") == ["src/a.c"]
    assert _touched(tmp_path / "b", {"parity/a.c": "../src/a.c"}, {"parity/a.c": "../src/a.c"}, edit="src/b.c") == []


def test_a_protected_link_resolving_elsewhere_through_a_changed_link_is_a_touch(tmp_path):
    main = {"parity/x": "../src/hop", "src/hop": "a.c"}
    assert _touched(tmp_path, {"parity/x": "../src/hop", "src/hop": "b.c"}, main) == ["parity/x"]


def test_a_link_target_change_changes_the_digest_and_the_build_key(tmp_path):
    from console.engine import buildkey
    from console.paths import DEMO_PROFILE
    from console.profile import load_profile
    image = load_profile(DEMO_PROFILE).image
    recipe = {"runtime": "docker", "base_image_id": "sha256:" + "a" * 64, "recipe_sha256": "b" * 64}
    trees = {name: _tree(tmp_path / name, links) for name, links in
             (("none", {}), ("to-a", {"src/l.c": "a.c"}), ("to-b", {"src/l.c": "b.c"}))}
    as_file = _tree(tmp_path / "file")
    (as_file / "src/l.c").write_bytes(b"symlink\0a.c")         # the bytes a naive link hash would use
    digests = {n: sources.tree_sha256(t) for n, t in {**trees, "file": as_file}.items()}
    assert len(set(digests.values())) == 4
    keys = {buildkey.key_of(recipe, d, image) for d in digests.values()}
    assert len(keys) == 4
    assert changed_paths(sources.tree_entries(trees["to-a"]), sources.tree_entries(trees["to-b"])) == ["src/l.c"]


def test_a_link_leaving_the_tree_is_refused_with_its_name(tmp_path):
    import pytest
    from console.errors import UsageError
    (tmp_path / "outside.txt").write_text("host file\n")
    for i, links in enumerate(({"src/host": str(tmp_path / "outside.txt")}, {"src/host": "../../outside.txt"},
                               {"src/root": "..", "src/host": "root/../outside.txt"})):
        with pytest.raises(UsageError) as e:
            sources.snapshot(sources.parse_spec(str(_tree(tmp_path / f"t{i}", links))), tmp_path / f"s{i}")
        assert "the link src/host -> " in e.value.message and "outside the source tree" in e.value.message


def _link_patch(tmp_path: Path, path: str, target: str) -> Path:
    patch = tmp_path / f"{path.replace('/', '-')}.patch"
    patch.write_text(f"diff --git a/{path} b/{path}\nnew file mode 120000\n--- /dev/null\n+++ b/{path}\n"
                     f"@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n")
    return patch


def test_a_link_only_patch_is_a_change_and_one_into_parity_is_refused_at_submission(tmp_path):
    from console.paths import DEMO_PROFILE
    from console.profile import load_profile
    from console.queueing.worker import resolve
    profile = load_profile(DEMO_PROFILE)
    alias = resolve(profile, ("patch", str(_link_patch(tmp_path, "src/alias.c", "engine.c"))))
    assert alias.refused == "" and alias.files == ["src/alias.c"]
    into = resolve(profile, ("patch", str(_link_patch(tmp_path, "parity/bench.c", "../src/bench.c"))))
    assert into.refused == "it changes the measuring apparatus: parity/bench.c"
    escaping = resolve(profile, ("patch", str(_link_patch(tmp_path, "src/host", "/etc/hostname"))))
    assert "the link src/host -> /etc/hostname points outside the source tree" in escaping.refused


def test_a_round_refuses_a_link_into_parity_before_building(tmp_path):
    from console import events as ev
    from console.paths import DEMO_MAIN, DEMO_PROFILE
    from console.profile import load_profile
    from console.results import lockfile
    from console.round import Round, RoundConfig
    profile = load_profile(DEMO_PROFILE)
    cfg = RoundConfig(profile=profile, main=sources.parse_spec(str(DEMO_MAIN)),
                      candidate=("patch", str(_link_patch(tmp_path, "src/p", "../parity"))), out_dir=tmp_path / "out",
                      runtime="local", reps=2, lock_path=lockfile.ensure(tmp_path / "reference.lock", profile))
    rnd = Round(cfg)
    events = list(rnd.events())
    assert rnd.exit_code == 1 and not any(isinstance(e, ev.BuildStarted) for e in events)
    v = rnd.receipt["verdict"]
    assert v["outcome"] == "rejected" and [r["code"] for r in v["reasons"]] == ["apparatus-touched"]
    assert rnd.receipt["apparatus"]["touched"] == ["src/p"]
