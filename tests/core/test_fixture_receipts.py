"""Every receipt kept under tests/data re-derives its sealed verdict, exactly as it did when the
receipt reader last changed (``receipts-v1.rederived.json``: the verdicts as re-derived then)."""
import json
from pathlib import Path

import pytest

from console.core.decisions import counting, gate
from console.core.records.receipt import Receipt

DATA = Path(__file__).resolve().parents[1] / "data"
FIXTURES = sorted((DATA / "receipts-v1").rglob("*.json"))
REDERIVED = json.loads((DATA / "receipts-v1.rederived.json").read_text())


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name[:12])
def test_each_fixture_receipt_re_derives_its_sealed_verdict(path: Path):
    stored = json.loads(path.read_text())
    r = Receipt.from_dict(stored)
    got = gate.decide(r, r.rules).to_dict()
    assert got == REDERIVED[str(path.relative_to(DATA / "receipts-v1"))]
    sealed = stored["verdict"]
    # what was sealed stands; re-deriving adds only the note that old rules decided it
    assert (got["outcome"], got["tier"], got["exit_code"]) == (sealed["outcome"], sealed["tier"], sealed["exit_code"])
    assert [x["code"] for x in got["reasons"]] == [x["code"] for x in sealed["reasons"]]
    assert got["warnings"] == [{"code": "legacy-rules", "message": got["warnings"][0]["message"]}] + sealed["warnings"]
    assert counting.summarize(r, r.rules) == r.summary
