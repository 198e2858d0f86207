"""A noise round decided: a build measured against itself gives the node's pair noise, on the scale
the decisions use. It decides nothing about a candidate; the lock pools the report per node."""

from __future__ import annotations

import math
from typing import Any, Callable

from console.core.decisions.counting import Counted, counted, log_ratios, node_fault
from console.core.decisions.speed import design_of
from console.core.decisions import legacy
from console.core.statistics import sequential, stats
from console.core.records.receipt import Receipt
from console.core.records.rules import GateRules
from console.core.records.verdict import Caveat, NoiseReport, Verdict
from console.core.records.verdict import reason, warning





def decide_noise(r: Receipt, rules: GateRules) -> Verdict:
    """A build measured against itself: the node's pair noise, on the scale the decisions use.

    Reps are validated like a round's (claims, exclusions); any claim problem or fewer
    than three pairs is ``infra``. The report is the SD of the paired log ratios with its
    95 % interval (``sequential.pair_noise``); the lock pools it with the node's earlier
    noise rounds. Schema-1 receipts keep their old report (``stats.noise_report``).
    """
    warnings: list[Caveat] = []
    if r.status == "infra":
        return Verdict("infra", reasons=[node_fault(r)])
    c = counted(r, rules)
    warnings.extend(c.warnings)
    problems = c.problems["main"] + c.problems["candidate"]
    if problems:
        return Verdict("infra", reasons=problems, warnings=warnings)
    return _BY_SCHEMA[r.rules_version](c, rules, warnings)


def _decide_noise_pairs(c: Counted, rules: GateRules, warnings: list) -> Verdict:
    """The SD of the paired log ratios with its 95 % interval."""
    xs = log_ratios(c)
    found = sequential.pair_noise([xs]) if len(xs) >= 3 else None
    report: dict[str, Any] = {"pairs": len(xs), "log_ratios": xs}
    if found is None:
        return Verdict("infra", reasons=[reason("too-few-reps", f"{len(xs)} valid pair(s); at least 3 are needed "
                                                                "to measure noise", build=None)],
                       warnings=warnings, noise=NoiseReport.from_dict(report))
    report.update(found.to_dict())
    report["gain"] = math.expm1(stats.mean(xs))
    design = design_of(rules)
    report["decidable_gain"] = sequential.smallest_decidable_gain(found.sd, design)
    report["max_pairs"] = design.max_pairs
    return Verdict("noise", warnings=warnings, noise=NoiseReport.from_dict(report))


def _noise_sides(c: Counted) -> tuple[list[float], list[float]]:
    """The two copies of the same build: main vs candidate, or alternate reps of main alone."""
    a, b = c.values("main"), c.values("candidate")
    if not b:
        pairs = list(zip(a[0::2], a[1::2]))
        a, b = [x for x, _ in pairs], [y for _, y in pairs]
    return a, b


def _decide_noise_v1(c: Counted, rules: GateRules, warnings: list) -> Verdict:
    """Schema 1: the largest single-pair deviation, and how often the old rule was fooled."""
    warnings.insert(0, warning("legacy-rules", f"this noise receipt is {legacy.NOTE}"))
    a, b = _noise_sides(c)
    report = stats.noise_report(a, b, rules.significance, rules.confidence)
    if report["pairs"] < 2:
        return Verdict("infra", reasons=[reason("too-few-reps", f"{report['pairs']} valid pair(s); at least 2 "
                                                                "are needed to measure noise", build=None)],
                       warnings=warnings, noise=NoiseReport.from_dict(report))
    if report["spread"] > rules.significance:
        warnings.append(warning("threshold-below-noise",
                                f"the significance threshold {rules.significance:.1%} is below this node's "
                                f"noise {report['spread']:.1%} (max pair gain): the gate would be decorative"))
    if report["false_positives"]:
        warnings.append(warning("false-positives",
                                f"the significance rule fired on {report['false_positives']} of "
                                f"{report['windows']} windows of this build against itself "
                                f"({report['false_positive_rate']:.0%})"))
    return Verdict("noise", warnings=warnings, noise=NoiseReport.from_dict(report))


# The noise report by the rules a receipt was sealed under: schema 1 kept the largest single-pair
# deviation; later schemas the pair SD on the scale the decisions use.
_BY_SCHEMA: dict[int, Callable[[Counted, GateRules, list], Verdict]] = {
    1: _decide_noise_v1, 2: _decide_noise_pairs, 3: _decide_noise_pairs}
