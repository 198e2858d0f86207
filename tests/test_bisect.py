"""`console bisect`'s loop: ends first, probes, the check against the bad end, the record and its
reports. Steps here are the decision benchmark's simulated rounds (the runner's own timed loop and
``gate.decide`` on simulated pairs) or, for the loop's edges, steps with a given outcome; the real
rounds on the demo engine's repository are in tests/integration/test_bisect_rounds.py."""
from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from console.bisect import Bisection, Config
from console.bisect import record as records
from console.cli import main as cli
from console.core.provenance.bisection import Mark, Step
from console.engine import ranges
from console.engine.ranges import Item
from console.profile import Source, load_profile
from console.reports import bisect as report
from console.reports.export import render

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


BQ = _load("bisect_quality")
PROFILE = load_profile(ROOT / "profiles" / "demo.toml")


def _items(n: int, where: Path) -> list[Item]:
    return [Item(Source(path=str(where)), str(i)) for i in range(n)]


def _simulated(tmp_path: Path, changes: dict[int, float], n: int = 16, seed: int = 1, sd: float = 0.03):
    steps = BQ.SimulatedSteps(np.random.default_rng(seed), sd, changes, tmp_path)
    lines: list[str] = []
    rec = Bisection(Config(PROFILE, _items(n, tmp_path), tmp_path), steps, say=lines.append).run()
    return rec, lines


def test_one_slow_item_is_found_through_the_round_loop_and_the_record_is_kept(tmp_path):
    rec, lines = _simulated(tmp_path, {9: -0.10})
    assert rec.result == "found" and rec.first_bad == 9 and rec.exit_code == 0, rec.sentence
    assert rec.direction == "slower" and rec.step_min_gain == pytest.approx(0.05, abs=0.03)
    roles = [s.role for s in rec.steps]
    assert roles[0] == "endpoints" and roles[-1] == "check" and set(roles[1:-1]) == {"probe"}
    assert len(rec.steps) <= rec.planned_steps and rec.step_rate == pytest.approx(0.05 / 6)
    assert all(s.rate == pytest.approx(rec.step_rate) for s in rec.steps)
    assert "first slower item: 9" in rec.sentence and lines[0].startswith("bisecting 16 items")
    again = records.read(rec.path(tmp_path))
    assert again.to_dict() == rec.to_dict()


def test_two_slow_items_are_not_forced_into_one(tmp_path):
    rec, _ = _simulated(tmp_path, {5: -0.06, 11: -0.06}, seed=2)
    assert rec.result == "not-one-step" and rec.exit_code == 1, rec.sentence
    assert "second change" in rec.sentence or "not one step" in rec.sentence


def test_a_flat_range_stops_at_its_ends(tmp_path):
    rec, _ = _simulated(tmp_path, {}, seed=3)
    assert rec.result == "not-one-step" and len(rec.steps) == 1
    assert rec.steps[0].outcome in ("none", "undecided") and "not decided apart" in rec.sentence


class Given:
    """Steps whose outcome is given per item (the loop's edges: skips, undecided, a node failure)."""

    def __init__(self, outcomes: dict[int, str], default_bad_from: int):
        self.outcomes, self.bad_from = outcomes, default_bad_from
        self.asked: list[tuple[int, int]] = []

    def __call__(self, profile, main, cand, title) -> Step:
        i, j = int(main.label), int(cand.label)
        self.asked.append((i, j))
        out = self.outcomes.get(j) or ("slower" if (j >= self.bad_from) != (i >= self.bad_from) else "none")
        rate = {"none": 0.01, "slower": 0.01}.get(out, 0.0)
        return Step(role="", item=0, against=0, outcome=out, rate=rate, gain=-0.1 if out == "slower" else 0.0)


def test_a_midpoint_that_fails_to_build_is_skipped_and_its_neighbour_tried(tmp_path):
    given = Given({7: "build-failed"}, 9)
    rec = Bisection(Config(PROFILE, _items(16, tmp_path), tmp_path), given, say=lambda _: None).run()
    assert rec.result == "found" and rec.first_bad == 9
    assert [j for _, j in given.asked][:3] == [15, 7, 8]
    assert rec.steps[1].mark is Mark.SKIP


def test_unjudged_neighbours_leave_suspects_and_exit_5(tmp_path):
    given = Given({8: "undecided", 7: "build-failed"}, 8)
    rec = Bisection(Config(PROFILE, _items(16, tmp_path), tmp_path), given, say=lambda _: None).run()
    assert rec.result == "suspects" and rec.suspects == [7, 8, 9] and rec.exit_code == 5, rec.sentence


def test_a_node_failure_stops_the_bisection_as_infra(tmp_path):
    given = Given({7: "infra"}, 9)
    rec = Bisection(Config(PROFILE, _items(16, tmp_path), tmp_path), given, say=lambda _: None).run()
    assert rec.result == "infra" and rec.exit_code == 3 and len(rec.steps) == 2


def test_a_change_the_other_way_is_not_one_step(tmp_path):
    given = Given({7: "accepted"}, 12)
    rec = Bisection(Config(PROFILE, _items(16, tmp_path), tmp_path), given, say=lambda _: None).run()
    assert rec.result == "not-one-step" and "changed the other way" in rec.sentence


def test_an_interruption_keeps_the_finished_steps(tmp_path):
    given = Given({7: "interrupted"}, 9)
    rec = Bisection(Config(PROFILE, _items(16, tmp_path), tmp_path), given, say=lambda _: None).run()
    assert rec.result == "interrupted" and rec.exit_code == 130
    assert len(records.read(rec.path(tmp_path)).steps) == 2


def test_the_reports_show_every_step(tmp_path, capsys):
    rec, _ = _simulated(tmp_path, {9: -0.10})
    doc = rec.to_dict()
    page = report.write_html(doc, tmp_path / "b.html")
    assert "<svg" in page.read_text() and "first slower item: 9" in page.read_text()
    assert cli(["bisect", "--show", str(rec.path(tmp_path)), "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["summary"][0]["first_bad"] == 9 and len(shown["steps"]) == len(rec.steps)
    import io
    buf = io.StringIO()
    render(report.tables(doc), "md", buf)
    assert "| step | role |" in buf.getvalue()


def _repo(tmp_path: Path, n: int) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=env)
    for k in range(n):
        (repo / "f").write_text(str(k))
        subprocess.run(["git", "-C", str(repo), "add", "f"], check=True, env=env)
        subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", f"c{k}"], check=True, env=env)
    return repo


def test_a_commit_range_is_the_good_end_then_the_first_parent_line(tmp_path):
    repo = _repo(tmp_path, 6)
    items = ranges.resolve(f"{repo}@main~4..main")
    assert [i.label.split(" ", 1)[1] for i in items] == ["c1", "c2", "c3", "c4", "c5"]
    assert all(i.source.git == str(repo) and len(i.source.ref) == 40 for i in items)
    same = ranges.between(Source(git=str(repo), ref="main~4"), Source(git=str(repo), ref="main"))
    assert [i.source.ref for i in same] == [i.source.ref for i in items]


@pytest.mark.parametrize("text,why", [("{repo}@main..main~2", "is not an ancestor"),
                                      ("{repo}@nope..main", "rev-parse"), ("{repo}@main..", "not a commit range")])
def test_a_bad_commit_range_is_said(tmp_path, text, why):
    from console.errors import UsageError
    repo = _repo(tmp_path, 4)
    with pytest.raises(UsageError, match=why):
        ranges.resolve(text.format(repo=repo))


def test_releases_are_ordered_finals_between_the_ends():
    got = ranges.order_releases(["0.3.2", "0.3.10", "0.3.9", "0.3.10rc1", "0.3.1", "0.4.0", "junk"], "0.3.1", "0.3.10")
    assert got == ["0.3.1", "0.3.2", "0.3.9", "0.3.10"]
    from console.errors import UsageError
    with pytest.raises(UsageError, match="not on the index"):
        ranges.order_releases(["0.3.1"], "0.3.1", "0.3.5")
    with pytest.raises(UsageError, match="not before"):
        ranges.order_releases(["0.3.1", "0.3.5"], "0.3.5", "0.3.1")


def test_releases_of_a_package_come_from_the_index():
    got = ranges.resolve("pypi:llama-cpp-python==0.3.16..0.3.18", Source(pypi="llama-cpp-python==0.3.16",
                                                                           subtree="vendor/llama.cpp"))
    assert [i.label for i in got] == ["0.3.16", "0.3.17", "0.3.18"]
    assert got[1].source.pypi == "llama-cpp-python==0.3.17" and got[1].source.subtree == "vendor/llama.cpp"


def test_the_command_refuses_what_it_cannot_bisect(tmp_path, capsys):
    assert cli(["bisect", "x@a..b", "--headless"]) == 2
    assert "--profile is needed" in capsys.readouterr().err
    assert cli(["bisect", "--profile", "demo", "--headless"]) == 2
    assert "say what to bisect" in capsys.readouterr().err
    assert cli(["bisect", "--profile", "demo", "--good", "a.patch", "--bad", "b.patch", "--headless"]) == 2
    assert "a patch has no place" in capsys.readouterr().err
    assert cli(["bisect", "--profile", "demo", "x@a..b", "--error-rate", "1.5", "--headless"]) == 2
    assert "is not a rate" in capsys.readouterr().err
    assert cli(["bisect", "--profile", "demo", "x@a..b", "--metric", "prefill_tok_s", "--headless"]) == 2
    assert "measures decode_tok_s" in capsys.readouterr().err


# --- the live view --------------------------------------------------------------------------------

def test_the_strip_shows_marks_the_open_range_and_the_probe():
    from console.tui.bisect import strip
    text = strip(8, {0: Mark.GOOD, 7: Mark.BAD, 3: Mark.GOOD, 5: Mark.SKIP}, probing=4)
    assert text.plain.startswith(" ✓  ·  ·  ✓  ·  s  ·  ✗ ") and "open 3..7: 2 untried" in text.plain
    probed = [s for s in text.spans if "reverse" in str(s.style)]
    assert [text.plain[s.start:s.end] for s in probed] == [" · "] and probed[0].start == 12


def test_the_live_view_follows_the_bisection_to_its_end(tmp_path):
    import asyncio
    from textual.widgets import DataTable, Static
    from console.tui.bisect import BisectApp

    class Live(Given):
        sink = None

        def abort(self):
            pass

    given = Live({7: "build-failed"}, 9)
    b = Bisection(Config(PROFILE, _items(16, tmp_path), tmp_path), given)

    async def run():
        app = BisectApp(b, given)
        async with app.run_test(size=(140, 40)) as pilot:
            for _ in range(100):
                await pilot.pause(0.05)
                if app.record is not None:
                    break
            table = app.query_one(DataTable)
            return app.record, table.row_count, str(app.query_one("#strip", Static).render()), \
                str(app.query_one("#said", Static).render())
    rec, rows, strip_text, said = asyncio.run(run())
    assert rec.result == "found" and rec.first_bad == 9 and rows == len(rec.steps)
    assert "✗" in strip_text and "open 8..9" in strip_text and "first slower item: 9" in said
