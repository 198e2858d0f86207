"""``console compare``'s tables: the rounds, speed per metric and depth, parity per depth
(docs/EXPORTS.md, "Compare")."""
from __future__ import annotations

from typing import Any

from ..core.provenance.compare import Comparison, Gain
from .tables import Column, Table, fraction, percent, sci, short

GAIN_COLUMNS = (Column("gain", "estimated gain as a fraction (0.05 = 5 % faster)", percent),
         Column("low", "lower end of its interval, a fraction (empty: unbounded)", percent),
         Column("high", "upper end of its interval, a fraction (empty: unbounded)", percent))

ROUND_COLUMNS = (
    Column("source", "the receipt: its id's first 12 characters, or the file name of an unsealed one"),
    Column("round_id", "the round's own id"),
    Column("kind", "round | noise"),
    Column("sealed_at", "when it was sealed (UTC, ISO 8601)"),
    Column("profile", "the profile's name"),
    Column("profile_sha256", "the profile file's sha256", short(12)),
    Column("node", "the machine: host name, CPU, cores, GPUs"),
    Column("model_sha256", "the model files' sha256, comma-joined (empty: the profile has none)", short(12)),
    Column("outcome", "the gate's outcome, re-derived from the receipt under its own rules"),
    Column("tier", "the tier of an accepted round"),
    *GAIN_COLUMNS,
    Column("pairs", "timed pairs the decision used"),
    Column("comparable", "true when this round's figures may be set against the first round's",
           lambda x: "yes" if x else "no"),
    Column("why_not", "why not: which of node, profile, model differ"),
)

SPEED_COLUMNS = (
    Column("source", "the receipt (as in the rounds table)"),
    Column("metric", "the profile's bench metric (e.g. decode_tok_s: tokens per second)"),
    Column("phase", "timed | short | guard:<name>"),
    Column("depth", "context depth of the reps, tokens"),
    Column("build", "main | candidate"),
    Column("n", "counted reps (suspect, refused and failed reps never count)"),
    Column("median", "median of the counted reps, in the metric's unit"),
    Column("paired_gain", "candidate rows: candidate over main in the same round (paired pairs, geometric "
                          "mean of the ratios), a fraction", percent),
    Column("paired_low", "lower end of its two-sided 95 % Student t interval on the log ratios", percent),
    Column("paired_high", "upper end of that interval", percent),
    Column("vs_first_gain", "this build over the same build, metric and depth in the first round "
                            "(unpaired, geometric means), a fraction; empty when not comparable", percent),
    Column("vs_first_low", "lower end of its two-sided 95 % Welch t interval on the logs", percent),
    Column("vs_first_high", "upper end of that interval", percent),
    Column("refused", "the gate's reason codes when it refused this build's claims (median and gains are "
                      "then left empty: refused figures are not shown)"),
)

PARITY_COLUMNS = (
    Column("source", "the receipt (as in the rounds table)"),
    Column("depth", "context depth, tokens"),
    Column("build", "main | candidate"),
    Column("kl", "mean KL(reference ‖ build) over the depth's rows, nats", sci),
    Column("top1", "share of rows whose most likely token agrees with the reference", fraction),
    Column("status", "pass | drift (legal, warned) | adjudicated (borderline, settled) | fail | regressed | uncheckable, graded under the receipt's rules"),
)

def _gain_cols(g: Gain | None, prefix: str) -> dict[str, Any]:
    if g is None:
        return {f"{prefix}gain": None, f"{prefix}low": None, f"{prefix}high": None}
    return {f"{prefix}gain": g.value, f"{prefix}low": g.low, f"{prefix}high": g.high}


def comparison_tables(c: Comparison) -> list[Table]:
    rounds = [{"source": r.source, "round_id": r.round_id, "kind": r.kind, "sealed_at": r.sealed_at,
               "profile": r.profile, "profile_sha256": r.identity.profile_sha256, "node": r.identity.node,
               "model_sha256": r.identity.model_sha256, "outcome": r.outcome, "tier": r.tier,
               "gain": r.gain, "low": r.low, "high": r.high, "pairs": r.pairs,
               "comparable": not r.not_comparable, "why_not": "; ".join(r.not_comparable)}
              for r in c.rounds]
    speed = [{"source": s.source, "metric": s.metric, "phase": s.phase, "depth": s.depth, "build": s.build,
              "n": s.n, "median": s.median, **_gain_cols(s.paired, "paired_"),
              **_gain_cols(s.versus_first, "vs_first_"), "refused": "; ".join(s.refused)} for s in c.speed]
    parity = [{"source": p.source, "depth": p.depth, "build": p.build, "kl": p.kl, "top1": p.top1,
               "status": p.status} for p in c.parity]
    return [Table("rounds", "Rounds (the first is the baseline of every vs_first gain)", ROUND_COLUMNS, rounds),
            Table("speed", "Speed per metric and depth (medians of counted reps)", SPEED_COLUMNS, speed),
            Table("parity", "Parity per depth", PARITY_COLUMNS, parity)]
