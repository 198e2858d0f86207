"""Headless reports render what the real gate decided, for every outcome it can produce."""
import xml.etree.ElementTree as ET

import pytest

from console.core import gate
from console.core.receipt import Receipt
from console.core.verdict import OUTCOMES, VerdictRecord, stage_of
from console.reports.export.junit import junit_xml
from console.reports.export.summary import markdown_summary
from console.reports.text import LineReporter
from console.reports.words import HEADLINES, tier_text

from core.receipts import OUTCOME_RECEIPTS, default_rules, make_receipt

RULES = default_rules()


def _round(make):
    r = Receipt.from_dict(make())
    r.summary = gate.summarize(r, RULES)
    return r, gate.decide(r, RULES).to_dict()


def test_there_is_a_headline_for_exactly_the_gates_outcomes():
    assert set(HEADLINES) == set(OUTCOMES) == set(OUTCOME_RECEIPTS)


@pytest.mark.parametrize("outcome", sorted(OUTCOME_RECEIPTS))
def test_each_outcome_renders_from_the_gates_verdict(outcome):
    r, v = _round(OUTCOME_RECEIPTS[outcome])
    assert v["outcome"] == outcome
    rec = VerdictRecord.from_dict(v)
    text = LineReporter(colour=False).verdict_text(v)
    assert text.splitlines()[0] == "verdict: " + HEADLINES[outcome].format(tier=tier_text(rec))
    if v.get("tier_span"):
        assert "(interval spans" in text.splitlines()[0]
    for reason in v["reasons"]:
        assert reason["message"] in text
    suite = ET.fromstring(junit_xml(r, rec))         # well-formed, one case per gate stage
    failed = {c.get("name") for c in suite if len(c)}
    assert failed == {stage_of(x["code"]) for x in v["reasons"]}
    md = markdown_summary(r, rec)
    assert f"**Verdict: {outcome}" in md
    if r.summary["main"].n:               # the summary shows the medians the gate decided on
        assert f"{gate.counted(r, RULES).values('main')[0]:.2f}" in md or f"{r.summary['main'].median:.2f}" in md


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
    suite = ET.fromstring(junit_xml(r, VerdictRecord.from_dict(v)))
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
