"""``junit.xml`` beside a sealed receipt: one test case per gate stage, so CI dashboards show
where a round stopped (docs/CI.md)."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from ...core.records.receipt import Receipt
from ...core.records.verdict import Reason, VerdictRecord, stage_of
from .base import RECEIPT, Exporter


def junit_xml(r: Receipt, verdict: VerdictRecord) -> str:
    """A reason is a failure only when the verdict fails the job (its exit code); an outcome that
    exits 0 (none, undecided, slower recorded) states its reasons as the stage's output instead."""
    stages: dict[str, list[Reason]] = {"parity": [], "claims": [], "guards": [], "verdict": []}
    for reason in verdict.reasons:
        stages[stage_of(reason.code)].append(reason)
    fails = verdict.exit_code not in (0, None)
    suite = ET.Element("testsuite", name=f"bench-console round {r.round_id}",
                       tests=str(len(stages)), failures=str(sum(1 for rs in stages.values() if rs) if fails else 0))
    classname = f"bench-console.{r.profile.name}"
    for name, rs in stages.items():
        case = ET.SubElement(suite, "testcase", classname=classname, name=name)
        for reason in rs:
            if fails:
                ET.SubElement(case, "failure", message=reason.message)
            else:
                ET.SubElement(case, "system-out").text = f"{verdict.outcome}: {reason.message}"
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


EXPORTER = Exporter("junit", ".xml", RECEIPT, junit_xml, stem="junit")
