"""A round has one kind (round.kinds): the kind owns what differs, the runner never asks which it runs."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from console.core.sweep import Level
from console.paths import DEMO_PROFILE, SERVER_PROFILE
from console.profile import load_profile
from console.round import kinds
from console.round.kinds.sweep import Sweep
from console.round.measure import Harness, Served, measure_of
from console.round.plan import RoundConfig, pair_budget

ROUND = Path(__file__).resolve().parents[1] / "console" / "round"
KIND_NAMES = {"round", "noise", "sweep", "serve", "harness"}


def _asks_which_kind(path: Path, root: Path = ROUND.parent) -> list[str]:
    """Comparisons of something's ``kind`` or ``mode`` with a kind's name, and tests of whether a
    profile has a server: what a kind or the measure answers instead."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        names = {s.value for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, str)}
        attrs = {s.attr for s in sides if isinstance(s, ast.Attribute)}
        if ({"kind", "mode"} & attrs and names & KIND_NAMES) or ("server" in attrs and any(
                isinstance(s, ast.Constant) and s.value is None for s in sides)):
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_nothing_in_the_round_outside_the_kinds_asks_which_kind_it_runs():
    outside = [p for p in ROUND.rglob("*.py") if "kinds" not in p.parts and p.name != "measure.py"]
    assert [hit for p in outside for hit in _asks_which_kind(p)] == []


def test_the_check_finds_such_a_question(tmp_path):
    src = tmp_path / "x.py"
    src.write_text('if cfg.kind == "noise":\n    pass\nif p.server is not None:\n    pass\n')
    assert _asks_which_kind(src, tmp_path) == ["x.py:1", "x.py:3"]


def test_each_kind_says_what_it_runs_and_decides():
    p = load_profile(DEMO_PROFILE)
    compare, noise = kinds.named("round"), kinds.named("noise")
    assert compare.builds == ["main", "candidate"] and compare.decides and compare.looks_back
    assert noise.builds == ["main"] and not noise.decides and not noise.looks_back
    assert pair_budget(RoundConfig(profile=p, main=None, candidate=None, out_dir=Path("."), kind="noise")) == p.bench.reps
    assert pair_budget(RoundConfig(profile=p, main=None, candidate=None, out_dir=Path("."))) == p.gate.max_pairs
    with pytest.raises(ValueError, match="no kind of round named 'grid'"):
        kinds.named("grid")
    # a round of a matrix profile is a matrix round: every cell measured and decided
    m = load_profile(DEMO_PROFILE.parent / "demo-matrix.toml")
    cfg = RoundConfig(profile=m, main=None, candidate=None, out_dir=Path("."))
    assert cfg.kind.name == "matrix" and cfg.kind.per_cell and cfg.kind.builds == ["main", "candidate"]
    assert kinds.named("matrix").looks_back and not compare.per_cell


def test_a_sweep_is_a_kind_that_is_not_resumed_and_holds_its_largest_level():
    s = load_profile(SERVER_PROFILE)
    sweep = Sweep(levels=(Level(1), Level(4)), blocks=3)
    assert not sweep.resumable and "sweep" not in kinds.BY_NAME and sweep.slots(s) == 4
    plan = sweep.plan({"reps": 0}, s)
    assert plan["reps"] == 2 * (3 + 1) and plan["levels"] == [lv.name for lv in sweep.levels]


def test_the_measure_is_asked_of_the_profile_once():
    assert isinstance(measure_of(load_profile(DEMO_PROFILE)), Harness)
    served = measure_of(load_profile(SERVER_PROFILE))
    assert isinstance(served, Served) and not served.writes_logits


def test_the_round_tells_its_kinds_whether_the_reference_is_mains_own(tmp_path):
    from console.round import Round
    rnd = Round(RoundConfig(profile=load_profile(DEMO_PROFILE), main=None, candidate=None, out_dir=tmp_path))
    assert rnd.reference_is_main is False
    rnd._ref_meta = {"same_as_main": True}
    assert rnd.reference_is_main is True
