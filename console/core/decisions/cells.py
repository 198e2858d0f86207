"""A matrix round decided: every cell at the family's rates (``records.matrix.family_rules``), one
verdict from all of them by the profile's rule. ``matrix_progress`` is the same decision so far,
for the round's stopping rule (a decided cell costs no more pairs)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable

from console.core.decisions import serving
from console.core.decisions.counting import Counted, counted, log_ratios, pairs_of, typed, unresolved_claim
from console.core.decisions.speed import (basis_of, conflict, decide_timed, design_of, implausible,
                                          latency_findings, ruleset, speed_of)
from console.core.records import matrix
from console.core.statistics import sequential, stats
from console.core.records.figures import finite
from console.core.records.receipt import BUILDS, Receipt
from console.core.records.rules import GateRules
from console.core.records.verdict import Caveat, Speed, Verdict
from console.core.records.verdict import reason





def cell_view(c: Counted, cell: matrix.Cell) -> Counted:
    """The round's counted reps as one cell sees them: its own reps are its timed reps."""
    return Counted({(b, "timed"): c.valid.get((b, cell.phase), []) for b in BUILDS}, c.problems, [], c.differential)


def _cell_receipt(r: Receipt, cell: matrix.Cell) -> Receipt:
    """The receipt with the cell's own pin as its frontier (pins are keyed by every axis)."""
    lock = replace(r.lock, frontier=float(r.lock.cells.get(cell.key) or 0.0),
                   frontier_slot=str(r.lock.cell_slots.get(cell.key) or ""))
    return replace(r, lock=lock)


def cell_decisions(r: Receipt, c: Counted, rules: GateRules) -> list[tuple[matrix.Cell, sequential.Decision]]:
    """Each cell's decision so far at the family's rates (the round's stopping rule reads these)."""
    spec = r.profile.matrix
    fam = matrix.family_rules(rules, len(spec.cells))
    design = design_of(fam, ruleset(r).design)
    out = []
    for cell in spec.cells:
        view = cell_view(c, cell)
        d = sequential.decide_pairs([log_ratios(view)], design, basis_of(view, _cell_receipt(r, cell).lock, fam),
                                    rules.bands)
        d.pending = unresolved_claim(c) if cell.key == spec.home else None
        out.append((cell, d))
    return out


def matrix_progress(receipt: Receipt, rules: GateRules) -> list[tuple[matrix.Cell, sequential.Decision]] | None:
    """The matrix round's decisions so far; None once nothing can be decided (claims refused)."""
    r = typed(receipt)
    c = counted(r, rules)
    if c.problems["main"] or c.problems["candidate"]:
        return None
    return cell_decisions(r, c, rules)


def _cell_result(r: Receipt, c: Counted, cell: matrix.Cell, fam: GateRules) -> tuple[matrix.CellResult, Speed | None]:
    view = cell_view(c, cell)
    if any(len(view.valid[(b, "timed")]) < 2 for b in BUILDS):
        return matrix.CellResult(cell.key, cell.axes, cell.role, "open", len(pairs_of(view)), math.nan,
                                 (-math.inf, math.inf), metric=cell.metric,
                                 sentence="fewer than two valid runs of a build: not measured"), None
    rc, said = _cell_receipt(r, cell), []
    speed, d = speed_of(rc, view, fam, said)
    shifted = ruleset(r).settle(rc, view, d, speed, fam, said)
    state = "conflict" if d.state == "conflict" or shifted is not None else matrix.state_of(cell, d, fam.min_gain)
    sentence = (shifted or (conflict(d, fam) if d.state == "conflict" else None))
    return matrix.CellResult(
        cell.key, cell.axes, cell.role, state, d.pairs, d.gain, d.interval, speed.main_median,
        speed.candidate_median, d.tier if state == "accepted" else None, d.span if state == "accepted" else None,
        d.basis_interval[0], d.lower_miss, d.upper_miss, cell.metric,
        sentence.message if sentence is not None else "", tuple(w.message for w in said),
        matrix.cleared(d, fam.min_gain), **served_figures(r, view, fam)), speed


def served_figures(r: Receipt, view: Counted, fam: GateRules) -> dict:
    """A serving cell's latencies (each build's median over its counted blocks) and its latency
    guards, read from the same pairs at the cell's share of the family's rate; nothing for a bench cell."""
    if not r.profile.server:
        return {}
    pairs = [((m.reported or {}), (cand.reported or {})) for m, cand in pairs_of(view)]

    def median(i: int, key: str) -> float | None:
        xs = [float(p[i][key]) for p in pairs if finite(p[i].get(key))]
        return stats.median(xs) if xs else None
    rows = serving.latency_rows(pairs, fam.latency, fam.false_accept) if fam.latency else {}
    return {"ttft_p99_ms": (median(0, "p99_ttft_ms"), median(1, "p99_ttft_ms")),
            "itl_p99_ms": (median(0, "p99_itl_ms"), median(1, "p99_itl_ms")), "latency": tuple(rows.values())}


def _latency_found(results: list[matrix.CellResult], warnings: list[Caveat]) -> list:
    """A serving cell whose latency rose decidedly past its guard (or reads as no number) rejects the
    round, whatever the other cells gained; a possible rise is said. Each cell's rows are said as a
    one-shape round's are (``speed.latency_findings``), naming the cell."""
    found: list = []
    for x in results:
        latency_findings(x.latency or (), found, warnings, where=f"cell [{x.key}]: ", figure=f"latency:{x.key}:")
    return found


def decide_matrix(r: Receipt, c: Counted, rules: GateRules, warnings: list[Caveat],
                   verdict: Callable[..., Verdict]) -> Verdict:
    """Every cell decided at the family's rates (core.matrix), then one verdict by the profile's rule.
    The verdict's figures are those of the cell its outcome rests on first; every cell is kept."""
    spec = r.profile.matrix
    if spec is None:        # a matrix receipt whose profile names no cells: one shape, as a round's
        return decide_timed(r, c, rules, warnings, verdict)
    fam = matrix.family_rules(rules, len(spec.cells))
    results, speeds = [], {}
    for cell in spec.cells:
        res, speeds[cell.key] = _cell_result(r, c, cell, fam)
        results.append(res)
    fv = matrix.verdict_of(results, spec.rule)
    lead = next((k for k in (*fv.deciding, spec.home) if speeds.get(k) is not None), None)
    speed = speeds.get(lead) if lead else None
    if speed is not None:
        speed.matrix = {"cells": [x.to_dict() for x in results], "rule": spec.rule, "rule_text": matrix.RULES[spec.rule],
                        "family": matrix.FAMILY, "cells_n": len(results), "lead": lead, "sentence": fv.sentence,
                        "false_accept_per_cell": fam.false_accept, "false_slower_per_cell": fam.false_slower}
    if breached := _latency_found(results, warnings):
        return verdict("rejected", breached, speed, suppressed="guard breached")
    held = [x for k, sp in speeds.items() if sp is not None and (x := implausible(sp)) is not None]
    if held:
        return verdict("implausible", held, speed, would_be_tier=fv.tier)
    if fv.outcome == "infra":
        return verdict("infra", [reason("cell-conflict", fv.sentence, build=None)], speed)
    if fv.outcome == "slower":
        return verdict("slower", [reason("slower", f"decided: {fv.sentence}")], speed,
                       slower_rejects=rules.slower == "reject")
    if fv.outcome == "accepted":
        return verdict("accepted", [], speed, tier=fv.tier)
    if fv.outcome == "none":
        return verdict("none", [reason("no-gain", f"decided: {fv.sentence}")], speed)
    return verdict("undecided", [reason("undecided", fv.sentence)], speed)
