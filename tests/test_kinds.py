"""A round has one kind (round.kinds): the kind owns what differs, the runner never asks which it runs."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from console.core.decisions.sweep import Level
from console.core.records.kinds import KINDS
from console.paths import DEMO_PROFILE, SERVER_PROFILE
from console.profile import load_profile
from console.round import kinds
from console.round.kinds.sweep import Sweep
from console.round.measure import Harness, Served, measure_of
from console.round.plan import RoundConfig, pair_budget

CONSOLE = Path(__file__).resolve().parents[1] / "console"
ROUND = CONSOLE / "round"
KIND_NAMES = set(KINDS) | {"compare", "serve", "harness"}


def _mentions_kind(node: ast.AST) -> bool:
    """``x.kind``, ``kind``, ``x.get("kind")`` or ``x["kind"]`` (anything spelled like a kind's holder)."""
    for n in ast.walk(node):
        if (isinstance(n, ast.Attribute) and n.attr in ("kind", "mode")) or \
                (isinstance(n, ast.Name) and "kind" in n.id) or \
                (isinstance(n, ast.Constant) and n.value == "kind"):
            return True
    return False


def _names(node: ast.AST) -> set[str]:
    """The strings a side of a comparison spells: a constant, or the items of a tuple, list or set."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return {s.value for s in items if isinstance(s, ast.Constant) and isinstance(s.value, str)}


def _asks_which_kind(path: Path, root: Path = CONSOLE.parent) -> list[str]:
    """Comparisons of a kind (or a mode) with a kind's name: what the kind's record answers instead."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_names(s) & KIND_NAMES for s in sides) and any(_mentions_kind(s) for s in sides):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def _asks_whether_it_serves(path: Path, root: Path = CONSOLE.parent) -> list[str]:
    """Tests of whether a profile has a server: what the measure (round.measure) answers instead."""
    return [f"{path.relative_to(root)}:{n.lineno}" for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Compare) and any(isinstance(s, ast.Attribute) and s.attr == "server"
                                                  for s in (n.left, *n.comparators))
            and any(isinstance(s, ast.Constant) and s.value is None for s in (n.left, *n.comparators))]


def test_nothing_in_the_console_compares_a_kinds_name():
    hits = [hit for p in sorted(CONSOLE.rglob("*.py")) for hit in _asks_which_kind(p)]
    assert hits == [], "read the kind's record (console.core.records.kinds) instead:\n" + "\n".join(hits)


def test_nothing_in_the_round_outside_the_measure_asks_whether_it_serves():
    outside = [p for p in ROUND.rglob("*.py") if p.name != "measure.py"]
    assert [hit for p in outside for hit in _asks_whether_it_serves(p)] == []


def test_the_checks_find_such_questions(tmp_path):
    src = tmp_path / "x.py"
    src.write_text('if cfg.kind == "noise":\n    pass\nif p.server is not None:\n    pass\n'
                   'if r.get("kind") not in ("round", "matrix"):\n    pass\nif kind != "sweep":\n    pass\n'
                   'if e["kind"] == "round_ended":\n    pass\n')
    assert _asks_which_kind(src, tmp_path) == ["x.py:1", "x.py:5", "x.py:7"]
    assert _asks_whether_it_serves(src, tmp_path) == ["x.py:3"]


def test_every_kind_has_its_record_and_its_hooks():
    assert set(kinds.BY_NAME) == set(KINDS)
    assert all(k.record is KINDS[name] for name, k in kinds.BY_NAME.items())
    from console.core.decisions.gate import DECIDERS
    assert {k.decider for k in KINDS.values() if k.sealed} <= set(DECIDERS) | {"pair-noise"}


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
    sweep = kinds.named("sweep", levels=(Level(1), Level(4)), blocks=3)
    assert isinstance(sweep, Sweep) and not sweep.resumable and not sweep.decides and sweep.slots(s) == 4
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
