"""Headless reports render what the real gate decided, for every outcome it can produce."""
import xml.etree.ElementTree as ET

import pytest

from console.core.decisions import counting, gate
from console.core.records.receipt import Receipt
from console.core.records.verdict import OUTCOMES, VerdictRecord, stage_of
from console.reports.export.junit import junit_xml
from console.reports.export.summary import markdown_summary
from console.reports.text import LineReporter
from console.reports.words import HEADLINES, tier_text

from core.receipts import OUTCOME_RECEIPTS, default_rules, depth_figures, make_receipt

RULES = default_rules()


def _round(make):
    r = Receipt.from_dict(make())
    r.summary = counting.summarize(r, RULES)
    return r, VerdictRecord.of(gate.decide(r, RULES))


def test_there_is_a_headline_for_exactly_the_gates_outcomes():
    assert set(HEADLINES) == set(OUTCOMES) == set(OUTCOME_RECEIPTS)


@pytest.mark.parametrize("outcome", sorted(OUTCOME_RECEIPTS))
def test_each_outcome_renders_from_the_gates_verdict(outcome):
    r, v = _round(OUTCOME_RECEIPTS[outcome])
    assert v.outcome == outcome
    text = LineReporter(colour=False).verdict_text(v)
    assert text.splitlines()[0] == "verdict: " + HEADLINES[outcome].format(tier=tier_text(v))
    if v.tier_span:
        assert "(interval spans" in text.splitlines()[0]
    for reason in v.reasons:
        assert reason.message in text
    suite = ET.fromstring(junit_xml(r, v))         # well-formed, one case per gate stage
    failed = {c.get("name") for c in suite if len(c)}
    assert failed == {stage_of(x.code) for x in v.reasons}
    md = markdown_summary(r, v)
    assert f"**Verdict: {outcome}" in md
    if r.summary["main"].n:               # the summary shows the medians the gate decided on
        assert f"{counting.counted(r, RULES).values('main')[0]:.2f}" in md or f"{r.summary['main'].median:.2f}" in md


def test_a_verdict_that_does_not_record_its_false_accept_rate_says_no_level():
    """The rate is said as the verdict records it, and not at all where it does not: no reader
    supplies one of its own."""
    from console.core.provenance.ledger import FileIdentity
    from console.reports.ledger import verdict_table
    r, v = _round(OUTCOME_RECEIPTS["accepted"])
    doc = v.to_dict()
    del doc["speed"]["confidence"]
    unknown = VerdictRecord.from_dict(doc)
    assert v.false_accept == pytest.approx(0.01) and unknown.false_accept is None
    said = LineReporter(colour=False).verdict_text(v)
    assert "levels 1% false accept" in said
    assert LineReporter(colour=False).verdict_text(unknown) == said.replace("; levels 1% false accept", "")
    assert "1% false accept" in markdown_summary(r, v) and "at the 1% false-accept level" in markdown_summary(r, v)
    md = markdown_summary(r, unknown)
    assert "false accept" not in md and "false-accept" not in md and "interval [" in md
    ident = FileIdentity("unsealed", None, False, "")
    assert verdict_table(unknown, "f", ident).rows[0]["false_accept"] is None
    assert verdict_table(v, "f", ident).rows[0]["false_accept"] == 0.01


def test_summary_says_the_accuracy_grade_and_the_borderline_ruling_from_the_typed_verdict():
    answers = [str(k) for k in range(40)]
    d = make_receipt()
    d["accuracy"] = {"tasks_sha256": "x", "ids": [f"i{k}" for k in range(40)], "answers": answers,
                     "kinds": ["add"] * 40, "tokens": 8,
                     "reference": {"build": "main", "outputs": [f" {a}" for a in answers], "error": None, "wall_s": 1.0},
                     "candidate": {"build": "candidate", "outputs": [f" {a}" for a in answers[:39]] + [" 0"],
                                   "error": None, "wall_s": 1.0}}
    r = Receipt.from_dict(d)
    v = VerdictRecord.of(gate.decide(r, RULES))
    assert (v.accuracy.reference_correct, v.accuracy.candidate_correct, v.accuracy.passed) == (40, 39, True)
    md = markdown_summary(r, v)
    assert "**Task accuracy: pass.** Reference 40/40 (100.0%), candidate 39/40 (97.5%)" in md
    assert "| add | 40 | 40 | 39 |" in md
    band = default_rules(borderline_kl=0.10)
    d = make_receipt(cand_parity=depth_figures(kl=1e-3, at={2048: {"kl": 0.0586}}), main_parity=depth_figures(kl=0.0),
                     rules=band)
    ref = [[1, 2, 3, 4]] * 10
    d["parity"]["adjudication"] = {
        "depths": [2048], "positions": list(range(10)), "tokens": 4, "reference": ref, "candidate": ref,
        "variants": [{"name": "flash-attn", "args": ["--flash-attn", "1"], "kl": {"2048": 0.0412},
                      "followed": [[1, 2, 3, 9]] * 4 + ref[4:], "error": None}], "error": None}
    r = Receipt.from_dict(d)
    v = VerdictRecord.of(gate.decide(r, band))
    assert v.adjudication.passed and v.adjudication.depths["2048"].within
    md = markdown_summary(r, v)
    assert "**Borderline KL: pass (adjudicated).**" in md and "| flash-attn (`--flash-attn 1`) | 0.0412 |" in md
    assert "Depth 2048: candidate KL 0.0586 against the 2x line 0.0824: within." in md
    assert "at 0 of 40 positions; the reference's own kernels at 4 (line 8)." in md


def test_the_apparatus_refusal_is_a_verdict_the_gate_re_derives():
    r = make_receipt()
    r["apparatus"] = {"protected": ["src/bench.c"], "touched": ["src/bench.c"]}
    v = gate.decide(Receipt.from_dict(r), RULES)
    assert v.outcome == "rejected" and v.codes == ["apparatus-touched"] and v.exit_code == 1
    assert v.reasons[0].files == ("src/bench.c",) and "src/bench.c" in v.reasons[0].message
    assert v.speed is None and v.to_dict()["speed"] == {"suppressed": "the candidate touched the apparatus"}
    assert stage_of("apparatus-touched") == "verdict"


def test_junit_escapes_what_the_profile_and_engine_wrote():
    r, v = _round(OUTCOME_RECEIPTS["rejected"])
    r.profile.name = 'a "quoted" <name> & more'
    suite = ET.fromstring(junit_xml(r, v))
    assert suite[0].get("classname") == 'bench-console.a "quoted" <name> & more'


def test_the_workload_commitment_is_a_line_that_shows_the_hash_never_the_seed():
    import io
    from console import events as ev
    buf = io.StringIO()
    event = ev.WorkloadCommitted(commitment="ab" * 32, drawn=4, space_log10=21.64)
    LineReporter(buf, colour=False, github=False)(event)
    line = buf.getvalue()
    assert "workload: seed drawn, its sha256 abababababababab… committed" in line
    assert "4 drawn ids per prompt, about 10^21.6 possible prompts" in line
