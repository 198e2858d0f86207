"""How far a round is, from its plan and its finished reps: a matrix round's pair is two reps per
cell, so its count and time left cover every cell's reps, not one cell's."""
from __future__ import annotations

from console.core.decisions.progress import Tracker
from console.core.records.receipt import Rep


def _reps(phases: list[str]) -> list[Rep]:
    return [Rep(build="main" if i % 2 == 0 else "candidate", phase=ph, index=i // 2, position=i, status="ok")
            for i, ph in enumerate(phases)]


def test_a_matrix_rounds_pairs_count_every_cell():
    cells = [{"key": "concurrency=1"}, {"key": "concurrency=4"}]
    t = Tracker()
    t.start({"reps": 10, "head_reps": 2, "tail_reps": 0, "matrix": {"cells": cells}})
    done = _reps(["warmup", "warmup"] + ["cell:concurrency=1", "cell:concurrency=1",
                                         "cell:concurrency=4", "cell:concurrency=4"])
    last = None
    for k, rep in enumerate(done):
        last = t.rep_done(rep, float(k))
    assert last.done == 6 and last.total == 2 + 10 * 2 * 2
    assert last.eta_s == (last.total - 6) * 1.0        # one second per rep so far, every rep left


def test_a_one_shape_rounds_pairs_are_two_reps():
    t = Tracker()
    t.start({"reps": 10, "head_reps": 2, "tail_reps": 4})
    last = None
    for k, rep in enumerate(_reps(["warmup", "warmup", "timed", "timed"])):
        last = t.rep_done(rep, float(k))
    assert last.total == 2 + 20 + 4 and last.eta_s == 22.0
