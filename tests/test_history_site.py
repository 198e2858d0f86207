"""`console history --html DIR`: main's history as a static site, every point a link to its round's page.

The browser test needs Chromium (`make test` and `make test-fast` install it) and fails, never skips, without it.
"""
from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest

from console.core.decisions import gate
from console.core.provenance.alarm import alarm_of
from console.core.provenance.history import series_of
from console.core.records.verdict import VerdictRecord
from console.core.statistics import changepoints as cp
from console.errors import UsageError
from console.reports.history_site import write_site
from console.results import store
from console.results.saved import select_sources

from browser import dom, inked, screenshot
from core.receipts import MAIN, make_receipt

STEP_AT = 6
WOBBLE = [0.004, -0.003, 0.002, -0.001, 0.003, -0.004]
HREF = re.compile(r'href="([^"#]+)"')


def _seal(out: Path, k: int, level: float) -> str:
    jitter = WOBBLE[k % len(WOBBLE)]
    r = make_receipt(main=[m * level * (1 + jitter) for m in MAIN], cand=[m * level * 1.06 for m in MAIN])
    r["round_id"] = f"20261201T{k:06d}Z-{k:06x}"
    r["builds"]["main"]["source"] = {"git": "/repos/engine", "ref": "main", "commit": f"{k:040x}"}
    return store.seal_into(out, r, sealed_at=f"2026-12-01T{k // 60:02d}:{k % 60:02d}:00Z")


def _verdict(r):
    return VerdictRecord.of(gate.decide(r, r.rules))


def _publish(ledger: Path, site: Path, alarm: bool = True) -> tuple:
    h = series_of(select_sources([ledger]), cp.Rules())
    index = write_site(h, cp.Rules(), site, store.ledger_receipts(ledger), _verdict, alarm_of(h) if alarm else None)
    return h, index


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """12 rounds, main 8 % slower from round 6 on, each main a commit; published once (a page per round)."""
    top = tmp_path_factory.mktemp("site")
    for k in range(12):
        _seal(top / "ledger", k, 1.0 if k < STEP_AT else 0.92)
    h, index = _publish(top / "ledger", top / "site")
    return top, h, index


def test_one_plot_per_series_and_every_point_links_to_its_rounds_page(site):
    top, h, index = site
    assert index == top / "site" / "index.html"
    page = index.read_text()
    assert len(h.series) == 2 and page.count("<svg") == len(h.series)
    for s in h.series:
        assert f'title="{s.key.label()}">{s.key.name}' in page
        for p in s.points:
            assert f'<a href="receipts/{p.receipt}.html"><title>{p.round_id}: ' in page
            assert (index.parent / "receipts" / f"{p.receipt}.html").is_file()
    hrefs = HREF.findall(page)
    assert len(hrefs) >= 24 and all(not h_.startswith(("/", "file:", "http")) for h_ in hrefs)
    assert all((index.parent / h_).is_file() for h_ in hrefs)
    assert len(list((index.parent / "receipts").iterdir())) == 12


def test_the_change_point_its_size_and_the_command_to_bisect_are_shown(site):
    _, h, index = site
    page = index.read_text()
    c = h.series[0].changes[0]
    assert c.point.at == STEP_AT and page.count(f"round {STEP_AT}: <b>{c.point.change:+.1%}</b>") == 2
    assert f"console bisect --good /repos/engine@{STEP_AT - 1:040x} --bad /repos/engine@{STEP_AT:040x}" in page
    assert f"{STEP_AT} rounds before (the last <a href=\"receipts/{c.before.receipt}.html\">{c.before.round_id}</a>)" in page
    assert 'class="alarm fired"' in page and "2 regression(s) in 2 watched series" in page
    assert f"each series is searched at {h.series_alpha:.3g}" in page and html.escape(cp.METHOD) in page


def test_a_rounds_page_is_its_report_with_a_way_back(site):
    _, h, index = site
    p = h.series[0].points[STEP_AT]
    page = (index.parent / "receipts" / f"{p.receipt}.html").read_text()
    assert '<a href="../index.html">← main\'s history</a>' in page
    assert (index.parent / "receipts" / "../index.html").resolve() == index.resolve()
    assert f"Round {p.round_id}" in page and "Reps by position" in page and "<svg" in page


def test_publishing_again_renders_only_the_rounds_sealed_since(site, tmp_path):
    top, h, _ = site
    shutil.copytree(top / "ledger", tmp_path / "ledger")
    shutil.copytree(top / "site", tmp_path / "site")
    pages = tmp_path / "site" / "receipts"
    kept = pages / f"{h.series[0].points[0].receipt}.html"
    kept.write_text("an existing page")       # a page already there is never rendered again
    before = {f.name: f.stat().st_mtime_ns for f in pages.iterdir()}
    new = {_seal(tmp_path / "ledger", k, 0.92) for k in (12, 13)}
    h2, index = _publish(tmp_path / "ledger", tmp_path / "site")
    after = {f.name: f.stat().st_mtime_ns for f in pages.iterdir()}
    assert set(after) == set(before) | {f"{rid}.html" for rid in new}
    assert all(after[name] == t for name, t in before.items()) and kept.read_text() == "an existing page"
    assert all(f'href="receipts/{rid}.html"' in index.read_text() for rid in new)
    assert len(h2.series[0].points) == 14


def test_a_quiet_history_without_its_receipts_says_so_and_links_nowhere(tmp_path):
    for k in range(8):
        _seal(tmp_path / "ledger", k, 1.0)
    h = series_of(select_sources([tmp_path / "ledger"]), cp.Rules())
    index = write_site(h, cp.Rules(), tmp_path / "site", {}, _verdict, alarm_of(h))
    page = index.read_text()
    assert "no regression in 2 watched series" in page and 'class="alarm fired"' not in page
    assert "8 round(s) have no receipt in the ledgers read" in page and "<a href" not in page
    assert page.count("<li class=na>no change point</li>") == 2 and not (tmp_path / "site" / "receipts").exists()


def test_a_file_where_the_site_goes_is_a_usage_error(tmp_path):
    _seal(tmp_path / "ledger", 0, 1.0)
    (tmp_path / "site.html").write_text("a page")
    h = series_of(select_sources([tmp_path / "ledger"]), cp.Rules())
    with pytest.raises(UsageError) as e:
        write_site(h, cp.Rules(), tmp_path / "site.html", {}, _verdict)
    assert "is a file, not a directory" in e.value.message and "directory" in e.value.hint
    assert (tmp_path / "site.html").read_text() == "a page"


def test_a_browser_draws_the_site_and_follows_its_links(site, tmp_path):
    _, h, index = site
    shot = tmp_path / "index.png"
    screenshot(index, shot, (1280, 1100))
    share, colours = inked(shot)
    assert share > 0.02 and colours > 50, (share, colours)
    round_page = index.parent / "receipts" / f"{h.series[0].points[STEP_AT].receipt}.html"
    screenshot(round_page, tmp_path / "round.png", (1280, 2400))
    share, colours = inked(tmp_path / "round.png")
    assert share > 0.02 and colours > 50, (share, colours)
    parsed = dom(index, tmp_path / "profile")
    links = re.findall(r'<a href="(receipts/[0-9a-f]{64}\.html)"><title>', parsed)   # the plots' markers
    assert len(links) == sum(len(s.points) for s in h.series)
    assert all((index.parent / x).is_file() for x in links)
