"""Compare, exports, the latest copy, verdict files, CI output: what a user reads around a round."""
from __future__ import annotations

import csv
import io
import json
import math
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from console.results import store
from console.reports import bisect as BI, history as H
from console.cli import main
from console.core.provenance import compare as cmp
from console.core.decisions import gate
from console.core.provenance.ledger import identify
from console.core.records.receipt import Receipt
from console.core.records.verdict import VerdictRecord
from console.reports.compare import PARITY_COLUMNS, ROUND_COLUMNS, SPEED_COLUMNS
from console.reports.export import write_sealed
from console.reports.export.junit import junit_xml
from console.reports.export.summary import markdown_summary
from console.reports.ledger import LEDGER_COLUMNS, VERDICT_COLUMNS
from console.reports.queue import HISTORY_COLUMNS, QUEUE_COLUMNS
from console.reports.matrix import MATRIX_COLUMNS, SERVED_COLUMNS
from console.reports.serving import BLOCK_COLUMNS
from console.reports.text import LineReporter, annotations

from core.receipts import MAIN, OUTCOME_RECEIPTS, _scaled, default_rules, make_receipt

ROOT = Path(__file__).resolve().parents[1]
RULES = default_rules()


def _sealed_dir(tmp_path: Path, receipts: list[dict], name: str = "out") -> Path:
    out = tmp_path / name
    for i, r in enumerate(receipts):
        r = dict(r, verdict=gate.decide(Receipt.from_dict(r), RULES).to_dict(), round_id=f"{r['round_id']}-{i}")
        rid = store.seal_into(out, r)
        (out / "receipt.json").write_bytes((out / "receipts" / f"{rid}.json").read_bytes())
    return out


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- compare ------------------------------------------------------------------------------

def test_compare_gives_paired_gains_within_and_unpaired_gains_across_comparable_rounds():
    a, b = make_receipt(), make_receipt(main=_scaled(MAIN, 1.10), cand=_scaled(MAIN, 1.16))
    c = cmp.compare([cmp.Source("a", Receipt.from_dict(a)), cmp.Source("b", Receipt.from_dict(b))])
    timed = {(s.source, s.build): s for s in c.speed if s.phase == "timed"}
    # within a round: candidate over main, paired, its interval around the estimate
    g = timed[("a", "candidate")].paired
    assert g.kind == "paired" and g.low < g.value < g.high and abs(g.value - 0.06) < 0.01
    assert timed[("a", "main")].paired is None and timed[("a", "main")].versus_first is None
    # across rounds: main over main, unpaired (Welch), about +10 %
    v = timed[("b", "main")].versus_first
    assert v.kind == "unpaired" and v.low < 0.10 < v.high and abs(v.value - 0.10) < 0.01
    assert all(not r.not_comparable for r in c.rounds)


def test_compare_refuses_cross_node_and_cross_model_gains_and_says_why():
    a = make_receipt()
    b = make_receipt()
    b["host"] = dict(b["host"], hostname="other-node")
    b["profile"] = dict(b["profile"], sha256="f" * 64)
    b["inputs"] = {"model": [{"name": "m", "path": "/m", "bytes": 1, "sha256": "e" * 64}]}
    c = cmp.compare([cmp.Source("a", Receipt.from_dict(a)), cmp.Source("b", Receipt.from_dict(b))])
    why = c.rounds[1].not_comparable
    assert [w.split(":")[0] for w in why] == ["node differs", "profile differs", "model differs"]
    assert all(s.versus_first is None for s in c.speed if s.source == "b")
    assert any(s.paired is not None for s in c.speed if s.source == "b")   # within-round figures still stand


def test_a_refused_build_shows_no_median_and_no_gain():
    r = make_receipt()
    for x in r["reps"]:
        if x["build"] == "candidate" and x["phase"] == "timed":
            x["wall_s"] = x["wall_s"] / 3        # reported rate the wall clock cannot support
    c = cmp.compare([cmp.Source("a", Receipt.from_dict(r))])
    cand = [s for s in c.speed if s.build == "candidate"]
    assert cand and all(s.refused and s.median is None and s.paired is None for s in cand)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.5, 2.0), min_size=2, max_size=20))
def test_paired_gain_interval_contains_its_estimate(ratios):
    g = cmp.paired_gain(ratios)
    assert g.n == len(ratios)
    if g.low is not None and g.high is not None:
        assert g.low <= g.value + 1e-12 and g.value <= g.high + 1e-12


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(1.0, 1000.0), min_size=2, max_size=12), st.floats(0.5, 2.0))
def test_unpaired_gain_of_a_scaled_sample_is_the_scale(values, k):
    g = cmp.unpaired_gain(values, [v * k for v in values])
    assert math.isclose(g.value, k - 1, rel_tol=1e-9, abs_tol=1e-9)


def test_compare_command_reads_ledgers_and_files_filters_and_exports_every_format(tmp_path, capsys):
    out = _sealed_dir(tmp_path, [make_receipt(), make_receipt(cand=_scaled(MAIN, 1.005))])
    code, text, _ = _run(capsys, "compare", str(out))
    assert code == 0 and "Rounds" in text and "Speed per metric and depth" in text and "Parity per depth" in text
    code, text, _ = _run(capsys, "compare", str(out), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and list(rows[0]) == [c.key for c in SPEED_COLUMNS]
    code, text, _ = _run(capsys, "compare", str(out), "--format", "csv", "--table", "rounds")
    assert [r["outcome"] for r in csv.DictReader(io.StringIO(text))] == ["accepted", "none"]
    code, text, _ = _run(capsys, "compare", str(out), "--format", "json")
    doc = json.loads(text)
    assert set(doc) == {"rounds", "speed", "parity"} and doc["rounds"][0]["comparable"] is True
    code, text, _ = _run(capsys, "compare", str(out / "receipt.json"), str(out), "--format", "md")
    assert text.count("| source |") == 3 and len(re.findall(r"^\| [0-9a-f]{12} \| ", text, re.M)) >= 2
    # the same sealed receipt named twice is one round
    assert len(json.loads(_run(capsys, "compare", str(out / "receipt.json"), str(out), "--format", "json")[1])
               ["rounds"]) == 2
    code, _, err = _run(capsys, "compare", str(out), "--node", "nowhere")
    assert code == 2 and "no round matches --node nowhere" in err
    code, _, err = _run(capsys, "compare", str(out), "--since", "2999-01-01")
    assert code == 2 and "no round matches" in err
    code, _, err = _run(capsys, "compare", str(out), "--since", "last tuesday")
    assert code == 2 and "is not a date" in err


# --- exports: columns are documented ------------------------------------------------------------

def test_every_exported_column_is_documented():
    doc = (ROOT / "docs" / "EXPORTS.md").read_text()
    for name, cols in (("rounds", ROUND_COLUMNS), ("speed", SPEED_COLUMNS), ("parity", PARITY_COLUMNS),
                       ("ledger", LEDGER_COLUMNS), ("verdict", VERDICT_COLUMNS), ("queue", QUEUE_COLUMNS),
                       ("history", HISTORY_COLUMNS), ("blocks", BLOCK_COLUMNS),
                       ("history-series", H.SERIES_COLUMNS), ("history-changes", H.CHANGE_COLUMNS),
                       ("history-points", H.POINT_COLUMNS), ("history-alarm", H.ALARM_COLUMNS),
                       ("history-culprits", H.CULPRIT_COLUMNS), ("bisect-summary", BI.SUMMARY_COLUMNS),
                       ("bisect-steps", BI.STEP_COLUMNS), ("matrix", MATRIX_COLUMNS),
                       ("matrix-served", SERVED_COLUMNS)):
        section = doc.split(f"<!-- table:{name} -->")[1].split("<!-- /table -->")[0]
        documented = re.findall(r"^\| `([a-z_0-9]+)` \|", section, re.M)
        assert documented == [c.key for c in cols], name


def test_every_kind_names_registered_exporters_of_what_it_leaves():
    """What a round leaves is chosen by its kind's record: a sealed kind's exporters read its sealed
    receipt, a kind that seals nothing (a sweep) has exporters of its own document."""
    from console.core.records import kinds
    from console.reports.export import EXPORTERS, after
    from console.reports.export.base import RECEIPT, SWEEP
    for k in kinds.KINDS.values():
        assert k.exports and set(k.exports) <= set(EXPORTERS), k.name
        assert {e.reads for e in after(k)} == {RECEIPT if k.sealed else SWEEP}, k.name


def test_ledger_show_exports_every_format(tmp_path, capsys):
    out = _sealed_dir(tmp_path, [make_receipt()])
    assert "accepted" in _run(capsys, "ledger", "show", str(out))[1]
    rows = list(csv.DictReader(io.StringIO(_run(capsys, "ledger", "show", str(out), "--format", "csv")[1])))
    assert rows[0]["outcome"] == "accepted" and len(rows[0]["id"]) == 64
    assert json.loads(_run(capsys, "ledger", "show", str(out), "--format", "json")[1])["ledger"][0]["line"] == 1


# --- the latest copy and verdict files -------------------------------------------------------------

def test_a_changed_byte_in_receipt_json_is_named_by_ledger_verify(tmp_path, capsys):
    out = _sealed_dir(tmp_path, [make_receipt(), make_receipt(cand=_scaled(MAIN, 1.005))])
    assert _run(capsys, "ledger", "verify", str(out))[0] == 0
    latest = out / "receipt.json"
    data = bytearray(latest.read_bytes())
    i = data.index(b'"value":') + 9
    data[i] = ord("9") if data[i] != ord("9") else ord("8")
    latest.write_bytes(bytes(data))
    code, text, _ = _run(capsys, "ledger", "verify", str(out))
    assert code == 1 and "receipt.json" in text and "latest-changed" in text and "changed after sealing" in text
    # an older sealed receipt copied over it is named as such
    first = store.read_ledger(out)[0][0].id
    latest.write_bytes((out / "receipts" / f"{first}.json").read_bytes())
    code, text, _ = _run(capsys, "ledger", "verify", str(out))
    assert code == 1 and "not its newest" in text


def test_verdict_says_whether_the_file_is_the_sealed_receipt(tmp_path, capsys):
    out = _sealed_dir(tmp_path, [make_receipt()])
    latest = out / "receipt.json"
    code, text, err = _run(capsys, "verdict", str(latest))
    assert code == 0 and "sealed receipt" in text and "newest" in text and "not a sealed" not in err
    doc = json.loads(_run(capsys, "verdict", str(latest), "--json")[1])
    assert doc["file"]["status"] == "sealed" and doc["file"]["head"] is True
    # pretty-printed: same values, other bytes
    latest.write_text(json.dumps(json.loads(latest.read_bytes()), indent=2))
    assert json.loads(_run(capsys, "verdict", str(latest), "--json")[1])["file"]["status"] == "sealed-reformatted"
    # a changed figure: re-derived from the file as it stands, and said to be modified
    doc = json.loads(latest.read_text())
    doc["reps"][3]["value"] *= 2
    latest.write_text(json.dumps(doc))
    code, text, err = _run(capsys, "verdict", str(latest), "--format", "json")
    assert json.loads(text)["file"]["status"] == "modified" and "not a sealed receipt (modified)" in err
    rows = list(csv.DictReader(io.StringIO(_run(capsys, "verdict", str(latest), "--format", "csv")[1])))
    assert rows[0]["sealed"] == "modified" and rows[0]["outcome"]
    # never sealed at all
    loose = tmp_path / "loose.json"
    loose.write_text(json.dumps(make_receipt()))
    assert json.loads(_run(capsys, "verdict", str(loose), "--json")[1])["file"]["status"] == "unsealed"


def test_identify_is_exact_about_every_case():
    r = make_receipt()
    assert identify(b"{}", r, None).status == "unsealed"
    assert identify(b"{}", dict(r, seal={"prev": None, "sealed_at": "x"}), None).status == "unverified"
    assert identify(b"{}", dict(r, seal={"prev": None, "sealed_at": "x"}), []).status == "modified"


# --- CI output ------------------------------------------------------------------------------------

def test_junit_parses_with_a_hostile_profile_name():
    r = make_receipt(cand_parity=None)
    r["profile"] = dict(r["profile"], name='a "quoted" <name> & \'more\'')
    r = Receipt.from_dict(r)
    v = VerdictRecord.of(gate.decide(r, RULES))
    suite = ET.fromstring(junit_xml(r, v))
    assert {c.get("classname") for c in suite} == {'bench-console.a "quoted" <name> & \'more\''}


def test_step_summary_is_appended_with_the_gain_and_its_interval(tmp_path, monkeypatch):
    r = Receipt.from_dict(make_receipt())
    v = VerdictRecord.of(gate.decide(r, RULES))
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    write_sealed(tmp_path, r, v)
    text = summary.read_text()
    assert text.startswith("earlier step\n") and "**Verdict: accepted" in text
    assert re.search(r"gain \+\d+\.\d%, interval \[\+\d+\.\d%, \+\d+\.\d%\], 1% false accept", text)
    assert text.count("# Round") == 1 and markdown_summary(r, v) in text


@pytest.mark.parametrize("outcome", sorted(OUTCOME_RECEIPTS))
def test_annotations_are_errors_exactly_when_the_verdict_fails_the_job(outcome):
    r = Receipt.from_dict(OUTCOME_RECEIPTS[outcome]())
    v = VerdictRecord.of(gate.decide(r, RULES))
    lines = annotations(v)
    assert len(lines) == len(v.reasons) + len(v.warnings)
    want = "::error " if v.exit_code else "::notice "
    assert all(x.startswith(want) for x in lines[:len(v.reasons)])
    assert all(x.startswith("::warning ") for x in lines[len(v.reasons):])
    assert all("\n" not in x for x in lines)


def test_headless_lines_carry_annotations_only_under_github_actions():
    r = Receipt.from_dict(OUTCOME_RECEIPTS["rejected"]())
    v = VerdictRecord.of(gate.decide(r, RULES))
    from console import events as ev
    for github, expected in ((True, 1), (False, 0)):
        buf = io.StringIO()
        LineReporter(buf, colour=False, github=github)(ev.VerdictReady(verdict=v))
        assert buf.getvalue().count("::error ") == expected * len(v.reasons)


def test_a_closed_pipe_ends_quietly(tmp_path):
    out = _sealed_dir(tmp_path, [make_receipt()])
    proc = subprocess.run(f"{sys.executable} -m console.cli verdict --json {out / 'receipt.json'} | head -c 10",
                          shell=True, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and len(proc.stdout) == 10 and proc.stderr == ""


# --- the command line itself -------------------------------------------------------------------

def test_version_is_the_installed_distributions(capsys):
    from importlib.metadata import version
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"console {version('bench-console')}"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_are_printed_for_each_shell(shell, capsys):
    code, text, _ = _run(capsys, "completion", shell)
    assert code == 0 and "console" in text and len(text) > 200


def test_bash_completion_answers_from_the_parser():
    """The real thing: bash sources the script and asks it to complete `console com`."""
    console = Path(sys.executable).parent / "console"
    script = subprocess.run([str(console), "completion", "bash"], capture_output=True, text=True, check=True).stdout
    probe = (f'{script}\nCOMP_LINE="console com"; COMP_POINT=${{#COMP_LINE}}; COMP_WORDS=(console com); '
             f'COMP_CWORD=1; COMP_TYPE=9; _python_argcomplete console; echo "${{COMPREPLY[@]}}"')
    env = {"PATH": f"{console.parent}:/usr/bin:/bin", "HOME": "/tmp"}
    words = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, env=env, timeout=60).stdout.split()
    assert set(words) == {"compare", "completion"}
