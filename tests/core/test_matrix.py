"""A matrix round's rules: cells, rates for the family, one verdict from many cells, and the gate
deciding a real matrix receipt."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from console.core.decisions import cells, counting, gate
from console.core.records import matrix
from console.core.statistics import sequential
from console.core.records.matrix import Cell, CellResult, MatrixSpec
from console.core.records.receipt import Receipt
from console.core.records.rules import GateRules

from core.receipts import make_matrix_receipt, typed

TIERS = ("xs", "s", "m", "l", "xl")
SCORED_STATES = ("accepted", "none", "slower", "open", "conflict")
GUARDED_STATES = ("cleared", "slower", "open", "conflict")


def result(key: str, role: str, state: str, tier: str | None = None, cleared: bool = False) -> CellResult:
    return CellResult(key, (("cell", key),), role, state, 8, 0.05, (0.01, 0.09),
                      tier=tier if state == "accepted" else None, cleared=cleared or state in ("cleared", "none",
                                                                                                  "accepted"))


@st.composite
def cell_sets(draw):
    n = draw(st.integers(1, 8))
    out = []
    for i in range(n):
        role = draw(st.sampled_from(matrix.ROLES))
        state = draw(st.sampled_from(SCORED_STATES if role == "scored" else GUARDED_STATES))
        # an open scored cell may or may not exclude a regression yet; a guarded one that does is "cleared"
        cleared = draw(st.booleans()) if role == "scored" and state == "open" else False
        out.append(result(f"c{i}", role, state, draw(st.sampled_from(TIERS)), cleared))
    return out


@settings(max_examples=400, deadline=None)
@given(cell_sets(), st.sampled_from(sorted(matrix.RULES)))
def test_one_verdict_from_many_cells_follows_the_rule_in_every_case(cells, rule):
    v = matrix.verdict_of(cells, rule)
    states = [c.state for c in cells]
    scored = [c for c in cells if c.role == "scored"]
    if "conflict" in states:
        assert v.outcome == "infra"
    elif "slower" in states:                        # a regression anywhere is never hidden
        assert v.outcome == "slower" and set(v.deciding) == {c.key for c in cells if c.state == "slower"}
    elif v.outcome == "accepted":
        accepted = [c for c in scored if c.state == "accepted"]
        # nothing still open may hide a regression: guarded cells cleared, open scored cells too
        assert accepted and all(c.cleared for c in cells if c.state == "open")
        assert all(c.state != "open" for c in cells if c.role == "guarded")
        if rule == "all":
            assert len(accepted) == len(scored)
        assert v.tier == min((c.tier for c in accepted), key=TIERS.index)   # the most conservative cell
    elif v.outcome == "none":
        assert "open" not in states and not any(c.state == "accepted" for c in scored if rule == "any")
    else:
        assert v.outcome == "undecided" and any(c.state == "open" for c in cells)
    assert v.outcome != "accepted" or v.tier is not None


def test_rates_split_evenly_over_the_cells():
    rules = GateRules(false_accept=0.01, false_slower=0.02, miss=0.05, step_level=0.01)
    fam = matrix.family_rules(rules, 4)
    assert (fam.false_accept, fam.false_slower, fam.miss, fam.step_level) == (0.0025, 0.005, 0.05, 0.0025)
    assert matrix.family_rules(rules, 1) == rules


@given(st.integers(1, 9), st.integers(0, 50))
def test_the_rotation_is_a_permutation_and_each_cell_leads_once_per_cycle(n, start):
    keys = [f"k{i}" for i in range(n)]
    orders = [matrix.rotation(keys, start + k) for k in range(n)]
    assert all(sorted(o) == sorted(keys) for o in orders)
    assert sorted(o[0] for o in orders) == sorted(keys) and sorted(o[-1] for o in orders) == sorted(keys)


def test_a_guarded_cell_is_cleared_once_a_regression_is_excluded_and_needs_no_gain():
    guard = Cell("depth=128", (("depth", "128"),), 128, 64, "decode_tok_s", role="guarded")
    d = sequential.Decision("open", 10, 0, 0.0, (-0.05, 0.05), 0.03, (-0.05, 0.05), 0.03, lower_miss=-0.02)
    assert matrix.state_of(guard, d, 0.035) == "cleared" and matrix.done(guard, d, 0.035)
    d.lower_miss = -0.05
    assert matrix.state_of(guard, d, 0.035) == "open" and not matrix.done(guard, d, 0.035)
    scored = replace(guard, role="scored")
    assert matrix.state_of(scored, d, 0.035) == "open"


def test_the_spec_reads_back_as_written():
    spec = MatrixSpec(axes=("test", "depth"), home="test=pp512,depth=512", rule="all",
                      cells=(Cell("test=pp512,depth=512", (("test", "pp512"), ("depth", "512")), 512, 512,
                                  "prefill_tok_s", (("fill", "prefill"),)),
                             Cell("test=tg64,depth=0", (("test", "tg64"), ("depth", "0")), 0, 64, "decode_tok_s",
                                  role="guarded")))
    assert MatrixSpec.from_dict(spec.to_dict()) == spec


# --- the gate on a matrix receipt --------------------------------------------------------------

FAST = [200.0, 201.0, 199.5, 200.5, 200.2, 200.8, 199.2, 200.1, 200.4, 199.8, 200.3, 200.6]


def scaled(xs, k):
    return [x * k for x in xs]


def test_a_cell_decided_slower_makes_the_round_slower_whatever_another_cell_gained():
    r = make_matrix_receipt({1024: (FAST, scaled(FAST, 1.30)), 4096: (FAST, scaled(FAST, 0.80))})
    v = gate.decide(typed(r), typed(r).rules)
    assert v.outcome == "slower" and v.exit_code == 1
    cells = {c["key"]: c for c in v.speed.matrix["cells"]}
    assert cells["depth=4096"]["state"] == "slower" and cells["depth=1024"]["state"] == "accepted"
    assert v.speed.matrix["lead"] == "depth=4096" and v.speed.gain < 0
    assert v.speed.matrix["false_accept_per_cell"] == pytest.approx(0.005)


def test_faster_everywhere_is_accepted_at_the_lowest_cells_tier_and_rederives_from_the_document():
    r = make_matrix_receipt({1024: (FAST, scaled(FAST, 1.30)), 4096: (FAST, scaled(FAST, 1.07))})
    v = gate.decide(typed(r), typed(r).rules)
    assert v.outcome == "accepted", v.reasons
    tiers = {c["key"]: c["tier"] for c in v.speed.matrix["cells"]}
    assert tiers == {"depth=1024": "xl", "depth=4096": "m"} and v.tier == "m"
    again = Receipt.from_dict(typed(r).to_dict())
    assert gate.decide(again, again.rules).to_dict() == v.to_dict()


def test_a_guarded_cell_still_open_holds_the_acceptance():
    noisy = [200.0, 230.0, 170.0, 215.0, 185.0, 240.0, 160.0, 210.0]
    r = make_matrix_receipt({128: (noisy, list(reversed(noisy))), 4096: (FAST, scaled(FAST, 1.30))},
                            guarded=(128,))
    v = gate.decide(typed(r), typed(r).rules)
    states = {c["key"]: c["state"] for c in v.speed.matrix["cells"]}
    assert states == {"depth=128": "open", "depth=4096": "accepted"}
    assert v.outcome == "undecided" and "[depth=128]" in v.reasons[0].message


def test_the_stopping_rule_reads_the_same_decisions_the_verdict_does():
    r = typed(make_matrix_receipt({1024: (FAST, scaled(FAST, 1.30)), 4096: (FAST, scaled(FAST, 0.80))}))
    found = cells.matrix_progress(r, r.rules)
    assert [(c.key, d.state) for c, d in found] == [("depth=1024", "accepted"), ("depth=4096", "slower")]


def test_the_home_cells_runs_are_the_long_runs_of_the_wall_clock_differential():
    r = typed(make_matrix_receipt({1024: (FAST, scaled(FAST, 1.30)), 4096: (FAST, scaled(FAST, 1.07))}))
    c = counting.counted(r, r.rules)
    assert c.differential["candidate"]["checked"] and c.differential["candidate"]["tokens"] == 192
    assert not c.problems["candidate"]


def test_a_cells_pin_is_its_own_frontier():
    r = make_matrix_receipt({1024: (FAST, scaled(FAST, 1.30)), 4096: (FAST, scaled(FAST, 1.07))},
                            lock={"frontier": 0.0, "anchor": 0.0, "cells": {"depth=4096": 240.0},
                                  "cell_slots": {"depth=4096": "x/y/main/decode_tok_s/ctx4096/depth=4096"}})
    v = gate.decide(typed(r), typed(r).rules)
    cells = {c["key"]: c for c in v.speed.matrix["cells"]}
    # against a pin above main's level, the 4096 cell's 7 % gain is no gain over the frontier
    assert cells["depth=4096"]["basis_lower"] < 0 < cells["depth=1024"]["basis_lower"]
    assert cells["depth=4096"]["state"] != "accepted" and math.isfinite(cells["depth=1024"]["gain"])


def test_compare_lines_up_the_cells_of_two_matrix_rounds_by_their_axes():
    from console.core.provenance.compare import Source, compare
    a = typed(make_matrix_receipt({1024: (FAST, scaled(FAST, 1.30)), 4096: (FAST, scaled(FAST, 0.80))}))
    b = typed(make_matrix_receipt({1024: (FAST, scaled(FAST, 1.25)), 4096: (FAST, scaled(FAST, 1.05))}))
    c = compare([Source("a", a), Source("b", b)])
    rows = {(s.source, s.phase, s.build): s for s in c.speed if s.phase.startswith("cell:")}
    assert {p for _, p, _ in rows} == {"cell:depth=1024", "cell:depth=4096"}
    assert rows[("b", "cell:depth=4096", "candidate")].versus_first.value == pytest.approx(1.05 / 0.80 - 1, rel=1e-6)
    assert rows[("a", "cell:depth=1024", "candidate")].paired.value == pytest.approx(0.30, rel=1e-6)
    assert all(s.metric == "decode_tok_s" for s in rows.values())


def test_a_matrix_verdict_rederives_unchanged_after_the_receipt_is_sealed_and_frozen():
    r = typed(make_matrix_receipt({1024: (FAST, scaled(FAST, 1.30)), 4096: (FAST, scaled(FAST, 0.80))}))
    before = gate.decide(r, r.rules).to_dict()
    r.freeze()
    assert gate.decide(r, r.rules).to_dict() == before


def test_a_replayed_matrix_receipt_shows_its_cells_as_the_verdict_decided_them():
    from console import events as ev
    from console.reports.replay import events_from_receipt
    doc = make_matrix_receipt({1024: (FAST, scaled(FAST, 1.30)), 4096: (FAST, scaled(FAST, 0.80))})
    events = list(events_from_receipt(doc))
    cells = [e for e in events if isinstance(e, ev.CellsStep)]
    assert len(cells) == 1 and [c.state for c in cells[0].cells] == ["accepted", "slower"]
    assert events.index(cells[0]) < next(i for i, e in enumerate(events) if isinstance(e, ev.VerdictReady))
