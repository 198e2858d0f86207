"""The HTML report: a well-formed, self-contained page of real receipts, drawn by a real browser.

The browser test needs Chromium (`make test` and `make test-fast` install it) and fails, never skips, without it.
"""
import html
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from console.cli import main
from console.core.decisions import counting, gate
from console.core.records.receipt import Receipt
from console.core.records.verdict import VerdictRecord
from console.reports.html import COLOURS, render_html

from browser import inked, screenshot
from core.receipts import OUTCOME_RECEIPTS, make_receipt

ROOT = Path(__file__).resolve().parents[1]
SEALED_V1 = ROOT / "tests" / "data" / "receipts-v1"        # real demo rounds, schema 1, one of them noise
LLAMA = next((ROOT / "benchmarks" / "data" / "receipts-llama").glob("*.json"))   # a real llama.cpp round
PLOTS = 4           # per round: reps, paired gains, parity, telemetry
VOID = {"meta", "br", "hr", "img", "input", "link", "col", "wbr"}


class Page(HTMLParser):
    """Checks that every element closes in order; collects tags, ids and text."""

    def __init__(self, text: str):
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.ids: list[str] = []
        self.problems: list[str] = []
        self.feed(text)
        self.close()
        if self.stack:
            self.problems.append(f"left open: {self.stack}")

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.ids += [v for k, v in attrs if k == "id"]
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)
        self.ids += [v for k, v in attrs if k == "id"]

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def _check(text: str, svgs: int) -> Page:
    page = Page(text)
    assert not page.problems, page.problems[:5]
    assert page.tags.count("svg") == svgs
    assert len(page.ids) == len(set(page.ids)), "ids repeat across the inlined plots"
    assert "<script" not in text and "<link" not in text and "<img" not in text
    urls = set(re.findall(r"https?://[^\s\"'<>)]*", text))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls
    return page


def _recorded(path: Path) -> Receipt:
    return Receipt.from_dict(json.loads(path.read_text()))


def test_a_recorded_round_renders_every_plot():
    r = _recorded(LLAMA)
    text = render_html([r], [VerdictRecord.of(gate.decide(r, r.rules))])
    _check(text, PLOTS)
    for shown in ("ACCEPTED, tier XL", r.profile.sha256[:12], r.builds["main"].image_id[:19],
                  "g++ (Debian 12.2.0-14+deb12u1) 12.2.0", "cpu-2core", "prefill_tok_s", "KL per depth"):
        assert shown in text, shown


@pytest.mark.parametrize("outcome", sorted(OUTCOME_RECEIPTS))
def test_every_outcome_renders(outcome):
    r = Receipt.from_dict(OUTCOME_RECEIPTS[outcome]())
    v = VerdictRecord.of(gate.decide(r, r.rules))
    text = render_html([r], [v])
    # These receipts record no telemetry; a round rejected before its pairs has no paired plot.
    has_pairs = bool(counting.pairs_of(counting.counted(r, r.rules)))
    _check(text, 2 + has_pairs)
    assert "telemetry not recorded" in text
    for reason in v.reasons:
        assert html.escape(reason.message) in text


def test_text_from_a_receipt_is_escaped():
    d = make_receipt()
    d["profile"]["name"] = 'a "quoted" <name>'
    d["builds"]["candidate"]["compiler"] = "gcc <script>alert(1)</script> $x$"
    d["profile"]["bench"]["metric"] = "decode_$tok$_s"
    text = render_html([Receipt.from_dict(d)])
    assert 'a "quoted" <name>' not in text and "<script>" not in text
    assert "a &quot;quoted&quot; &lt;name&gt;" in text
    assert "gcc &lt;script&gt;alert(1)&lt;/script&gt; $x$" in text
    _check(text, 3)


def test_an_old_receipt_missing_sections_still_renders():
    d = make_receipt()
    for key in ("parity", "builds", "summary", "verdict", "ended_at"):
        d.pop(key, None)
    d["reps"] = []
    text = render_html([Receipt.from_dict(d)])
    _check(text, 0)
    assert text.count("not recorded") >= 6


def test_a_comparison_adds_one_combined_plot():
    a, b = _recorded(LLAMA), Receipt.from_dict(OUTCOME_RECEIPTS["undecided"]())
    text = render_html([a, b])
    _check(text, 1 + PLOTS + 3)
    assert "Comparison" in text and a.round_id in text and b.round_id in text


def test_the_command_reports_a_results_directory(tmp_path, capsys):
    out = tmp_path / "sub" / "report.html"
    assert main(["report", str(SEALED_V1), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out.resolve())
    text = out.read_text()
    ids = [json.loads(line)["round_id"] for line in (SEALED_V1 / "ledger.jsonl").read_text().splitlines()]
    assert all(i in text for i in ids) and "Comparison of 4 rounds" in text
    _check(text, 1 + 3 * PLOTS + 1)         # one round was rejected at parity: it ran no rep


def test_the_command_refuses_what_is_not_a_receipt(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing.json")]) == 2
    (tmp_path / "x.json").write_text('{"schema": "something else"}')
    assert main(["report", str(tmp_path / "x.json"), "--out", str(tmp_path / "r.html")]) == 2
    assert main(["report", str(tmp_path)]) == 2
    assert not (tmp_path / "r.html").exists()


def test_importing_the_console_does_not_import_matplotlib():
    code = "import sys, console.cli, console.commands, console.reports.html; print('matplotlib' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                          cwd=ROOT).stdout.strip() == "False"


@pytest.mark.browser
def test_chromium_draws_the_report_of_a_recorded_round(tmp_path):
    page, shot = tmp_path / "report.html", tmp_path / "report.png"
    assert main(["report", str(LLAMA), "--out", str(page)]) == 0
    screenshot(page, shot)
    import numpy as np
    from PIL import Image
    img = Image.open(shot).convert("RGB")
    assert img.size == (1280, 2400)
    pixels = np.asarray(img, dtype=int).reshape(-1, 3)
    share, colours = inked(shot)
    assert share > 0.05, f"only {share:.1%} of the page is drawn"
    assert colours > 200, "too few colours: the plots did not render"
    for build, colour in COLOURS.items():       # both builds' points are drawn, not just the text
        rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)])
        near = int((np.abs(pixels - rgb).sum(axis=1) < 40).sum())
        assert near > 500, f"{build}'s colour {colour} hardly appears in the screenshot ({near} pixels)"


def test_a_matrix_round_draws_a_heat_map_of_its_cells():
    from core.receipts import make_matrix_receipt
    fast = [200.0, 201.0, 199.5, 200.5, 200.2, 200.8, 199.2, 200.1, 200.4, 199.8, 200.3, 200.6]
    r = Receipt.from_dict(make_matrix_receipt({1024: (fast, [x * 1.3 for x in fast]),
                                               4096: (fast, [x * 0.8 for x in fast])}))
    text = render_html([r], [VerdictRecord.of(gate.decide(r, r.rules))])
    assert "Matrix: each cell&#x27;s gain" in text or "Matrix: each cell's gain" in text
    assert "depth=1024" in text and "depth=4096" in text and "slower" in text and "accepted" in text
    assert "Paired gains and the decision" not in text      # the cells replace the one-cell plot
    assert "2 cells, Bonferroni" in text
