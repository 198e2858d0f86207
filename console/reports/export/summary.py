"""``summary.md`` beside a sealed receipt: the verdict, its gain and interval, the builds, parity
per depth (docs/CI.md); under GitHub Actions it is also the job's step summary."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from ...core.records.adjudication import Adjudication
from ...core.records.receipt import BUILDS, Figures, ParityRecord, Receipt
from ...core.records.verdict import VerdictRecord
from ..matrix import cells_of, matrix_table, summary_line
from ..words import accuracy_sentence, gain_phrase, rate_text, tier_text
from . import markdown
from .base import RECEIPT, Exporter

DECIDED = ("accepted", "none", "slower")    # the outcomes the stopping rule decides (the rest are not decided)


def markdown_summary(r: Receipt, verdict: VerdictRecord) -> str:
    lines = [f"# Round {r.round_id} — {r.profile.name}", "",
             f"**Verdict: {verdict.outcome}" + (f", tier {tier_text(verdict).lower()}" if verdict.tier
                                                else "") + "**" + gain_phrase(verdict), ""]
    lines += [f"- {reason.message}" for reason in verdict.reasons]
    lines += [f"- warning: {w.message}" for w in verdict.warnings]
    lines += _decision_lines(r, verdict)
    if cells_of(verdict):     # a matrix round: every cell, as the exports show it
        md = markdown.render([matrix_table(verdict)])
        lines += ["", summary_line(verdict), "", *md.splitlines()[2:]]
    # As reported by the engine over its ok timed reps; the verdict above says which claims stood.
    lines += ["", "| build | image | compiler | reported median | reps | spread |", "|---|---|---|---|---|---|"]
    for b in BUILDS:
        bd, fig = r.builds.get(b), (r.summary or {}).get(b, Figures())
        med = "-" if fig.median is None else f"{fig.median:.2f}"
        spread = "-" if fig.spread is None else f"{fig.spread:.2%}"
        image, compiler = (bd.image_id, bd.compiler) if bd else (None, None)
        lines.append(f"| {b} | `{(image or 'not built')[:19]}` | {compiler or '-'} | {med} | {fig.n} | {spread} |")
    lines += _parity_lines(r.parity, verdict)
    lines += _adjudication_lines(r.parity.adjudication, verdict) + _accuracy_lines(verdict)
    return "\n".join(lines) + "\n"


def _decision_lines(r: Receipt, verdict: VerdictRecord) -> list[str]:
    """Where the stopping rule left the round, and what its plan said it could decide."""
    d = verdict.decision
    if d is None:
        return []
    iv = ", ".join("unbounded" if x is None else f"{x:+.1%}" for x in d.interval or (None, None))
    pooled = f" (+{d.prior_pairs} pooled from earlier rounds)" if d.prior_pairs else ""
    gain = "n/a" if d.gain is None else f"{d.gain:+.1%}"
    said = "Decided" if verdict.outcome in DECIDED else "Not decided"
    seq = r.sequential
    settle = seq.decided_at if seq else None
    when = (f" (decided after {settle}, then settling the tier)" if settle and settle != d.pairs else "")
    fa = verdict.false_accept       # the level is said only where the verdict records it
    level = f" at the {rate_text(fa)} false-accept level" if fa is not None else ""
    lines = ["", f"{said} on {d.pairs} pairs{pooled}{when}: gain {gain}, interval [{iv}]{level} "
                 f"({verdict.speed.method})."]
    # the plan, as the receipt recorded it (sequential.Preview.to_dict): a plan document, not the verdict
    plan = seq.preview if seq else None
    if isinstance(plan, Mapping) and plan.get("decidable_gain") is not None:
        lines.append(f"Planned from the node's noise ({plan['sd']:.1%}, {plan['sd_source']}): gains of "
                     f"{plan['decidable_gain']:.1%} or more decidable within {plan['max_pairs']} pairs.")
    return lines


def _parity_lines(par: ParityRecord, verdict: VerdictRecord) -> list[str]:
    """The candidate's figures per depth beside main's and the gate's grade."""
    if not (par.candidate and par.candidate.depths):
        return []
    lines = ["", "| depth | grade | main KL | candidate KL ± SE | median | p90 | p95 | p99 | p99.9 | max "
                 "| top-1 ± SE | RMS Δp |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    sci = lambda x: "-" if x is None else f"{x:.2e}"  # noqa: E731
    for d in par.candidate.depths:
        m, s = par.main.at(d.depth) if par.main else None, d.stats    # no stats in older receipts
        kl = sci(d.kl) + ("" if s is None or s.kl_se is None else f" ± {s.kl_se:.1e}")
        top1 = f"{d.top1:.3f}" + ("" if s is None else f" ± {s.top1_se:.3f}")
        spread = " | ".join(sci(s and getattr(s, k)) for k in ("kl_median", "kl_p90", "kl_p95", "kl_p99", "kl_p999",
                                                              "kl_max"))
        row = verdict.parity.row(d.depth)
        lines.append(f"| {d.depth} | {row.status if row else '-'} | {sci(m and m.kl)} | {kl} | {spread} | {top1} "
                     f"| {sci(s and s.rms_dp)} |")
    return lines + ["", f"KL(reference ‖ build) in nats over {'?' if par.reference.rows is None else par.reference.rows} rows per depth "
                        "(quantiles and max of the rows); top-1 ± its binomial SE; RMS Δp: the root mean square "
                        "change in the probability of the document's next token. The gate judges mean KL and "
                        "top-1 only."]


def _adjudication_lines(adj: Adjudication | None, verdict: VerdictRecord) -> list[str]:
    ruling = verdict.adjudication
    if ruling is None:
        return []
    depths = ruling.depths
    out = ["", f"**Borderline KL: {'pass (adjudicated)' if ruling.passed else 'rejected'}.** "
               "The reference build rerun with its alternative kernels:", "",
           "| kernel variant | " + " | ".join(f"KL @{d}" for d in depths) + " |",
           "|---|" + "---|" * len(depths)]
    for v in adj.variants if adj else []:
        # the ruling's depths are JSON keys (strings); the record's are ints
        cells = [("error" if v.error else f"{v.kl.get(int(d), float('nan')):.3g}") for d in depths]
        out.append(f"| {v.name} (`{' '.join(v.args)}`) | " + " | ".join(cells) + " |")
    for d, x in depths.items():
        line = "-" if x.line is None else f"{x.line:.3g}"
        out.append(f"\nDepth {d}: candidate KL {x.kl:.3g} against the 2x line {line}: "
                   + ("within." if x.within else "over."))
    if ruling.candidate_disagree is not None:
        out.append(f"\nCompletions ({len(adj.positions) if adj else 0} from the document, teacher-forced): the "
                   f"candidate's argmax differs from the reference's tokens at {ruling.candidate_disagree} of "
                   f"{ruling.positions} positions; the reference's own kernels at {ruling.variant_disagree}"
                   f" (line {ruling.agreement_line:g}).")
    return out


def _accuracy_lines(verdict: VerdictRecord) -> list[str]:
    said, acc = accuracy_sentence(verdict), verdict.accuracy
    if said is None or acc is None:
        return []
    head, rest = said.split(". ", 1)
    out = ["", f"**{head}.** {rest}", "", "| kind | items | reference | candidate |", "|---|---|---|---|"]
    for kind, row in (acc.per_kind or {}).items():
        out.append(f"| {kind or '-'} | {row['items']} | {row['reference']} | {row['candidate']} |")
    return out


def _save(path: Path, text: str) -> None:
    """summary.md, and appended to the job's step summary under GitHub Actions (GITHUB_STEP_SUMMARY)."""
    path.write_text(text)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as f:
            f.write(text + "\n")


EXPORTER = Exporter("summary", ".md", RECEIPT, markdown_summary, stem="summary", save=_save)
