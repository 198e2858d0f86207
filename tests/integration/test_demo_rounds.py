"""Every demo candidate through a real round on the real daemon: outcome and reasons.

These are the adversaries of the gate: a genuine speedup, noise, a deep-context
bug, a broken fast path, a candidate that computes ahead what it guesses the section is,
a faked seek, a clock that runs slow, padded short sections and a candidate that edits
the measuring apparatus. Each must end exactly as the gate's rules say.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from console import events as ev
from console.engine import sources
from console.results import store
from console.cli import main as cli_main
from console.paths import DEMO_CANDIDATES, DEMO_MAIN, DEMO_PROFILE
from console.profile import load_profile
from console.round import Round, RoundConfig

from .rounds import codes, verdict_of

pytestmark = [pytest.mark.docker, pytest.mark.slow]


DEMO_MATRIX = DEMO_PROFILE.parent / "demo-matrix.toml"


def run_demo(candidate: str | None, out: Path, reps: int | None = 3, runtime: str = "docker",
             profile_path: Path = DEMO_PROFILE):
    """A demo round of ``candidate`` against main; ``None``: a noise round (main against itself).
    ``reps``: timed pairs at most (None: the profile's budget); a round stops once decided.
    With the demo-matrix profile it is a matrix round (its lock beside the demo's)."""
    from console.results import lockfile
    profile = load_profile(profile_path)
    lock = lockfile.ensure(out / f"{profile.name}.lock", profile) if profile.matrix else \
        lockfile.ensure(out / "reference.lock", profile)
    main = sources.parse_spec(str(DEMO_MAIN))
    patch = Path(candidate) if candidate and candidate.endswith(".patch") else DEMO_CANDIDATES / f"{candidate}.patch"
    cand = main if candidate is None else ("patch", str(patch))
    cfg = RoundConfig(profile=profile, main=main, candidate=cand, out_dir=out, runtime=runtime, reps=reps,
                      lock_path=lock, kind="noise" if candidate is None else "round")
    rnd = Round(cfg)
    events = list(rnd.events())
    return rnd, events


@pytest.fixture(scope="module")
def shared(tmp_path_factory, base_image):
    """The node's noise first (it sizes significance), then four rounds and a matrix round (the
    mixed candidate: faster at depth 1024, slower at 4096) in one ledger, then a rerun of the
    matrix round's regression (decided already: it measures nothing)."""
    out = tmp_path_factory.mktemp("ledger")
    rounds = {"node-noise": run_demo(None, out, reps=6)}
    # a round stops once decided, or once a build's claims are refused (inflate, fake-seek)
    budget = {"fast": None, "noise": 4, "inflate": 2, "fake-seek": None, "clock-skew": None, "pad-short": None}
    rounds.update({c: run_demo(c, out, reps=budget.get(c, 3)) for c in budget})
    rounds["mixed"] = run_demo("mixed", out, reps=None, profile_path=DEMO_MATRIX)
    rounds["mixed-again"] = run_demo("mixed", out, reps=None, profile_path=DEMO_MATRIX)
    return out, rounds


def test_noise_round_measures_the_node_and_pins_it(shared):
    out, rounds = shared
    rnd, events = rounds["node-noise"]
    v = verdict_of(events)
    assert v["outcome"] == "noise" and rnd.receipt["noise"]["pairs"] == 6
    assert rnd.receipt["builds"]["main"]["image_id"] == rnd.receipt["builds"]["candidate"]["image_id"]
    from console.results import store
    lock = store.read_lock(out / "reference.lock")
    entry = lock["noise"]["cpu-2core"]
    assert float(entry["sd"]) == pytest.approx(rnd.receipt["noise"]["sd"], rel=1e-5) and entry["df"] == 5
    assert list(entry["receipts"]) == [Path(rnd.receipt_path).stem]


def test_rounds_of_the_same_main_share_its_image_by_build_key(shared):
    out, rounds = shared
    mains = [rnd.receipt["builds"]["main"] for rnd, _ in rounds.values() if rnd.receipt]
    assert len(mains) == 8
    assert len({m["image_id"] for m in mains}) == len({m["engine_sha256"] for m in mains}) == 1
    assert len({m["key"] for m in mains}) == 1
    # built at most once (by the first round, or by an earlier test on this node), reused after
    assert all(m["reused_from"]["image_id"] == m["image_id"] for m in mains[1:]), mains[1:]


def test_fast_is_accepted_with_a_tier_and_a_faster_median(shared):
    out, rounds = shared
    rnd, events = rounds["fast"]
    v = verdict_of(events)
    assert v["outcome"] == "accepted" and v["tier"] in ("s", "m", "l", "xl"), v
    r = rnd.receipt
    assert r["summary"]["candidate"]["median"] > r["summary"]["main"]["median"]
    timed = [x for x in r["reps"] if x["phase"] == "timed"]
    assert len([x for x in timed if x["build"] == "main"]) >= 5 and len([x for x in timed if x["build"] == "candidate"]) >= 5
    order = [x["build"] for x in sorted(timed, key=lambda x: x["position"])]
    assert order[:4] == ["main", "candidate", "candidate", "main"]        # A B B A cancels linear drift
    for b in ("main", "candidate"):
        assert r["builds"][b]["image_id"].startswith("sha256:")
        assert r["builds"][b]["compiler"] == load_profile(DEMO_PROFILE).image.compiler
    assert r["builds"]["main"]["image_id"] != r["builds"]["candidate"]["image_id"]
    # the timed path computed what main's did, rep by rep
    assert v["parity"]["timed_path"]["status"] == "pass" and v["parity"]["timed_path"]["reps"] >= 5
    assert all(x["peak_mem_bytes"] for x in timed)                        # measured from the cgroup
    assert v["speed"]["gain"] > 0 and v["speed"]["interval"][0] > 0.02
    # reps until decided: it stopped once the tier was settled or its budget was spent
    assert r["sequential"]["stopped"] in ("decided", "settle-budget", "budget-pairs")
    assert v["speed"]["decision"]["state"] == "accepted"
    if r["sequential"]["stopped"] != "budget-pairs":     # decided, then at most the settle budget
        assert len(v["speed"]["ratios"]) <= r["sequential"]["decided_at"] + r["sequential"]["settle_pairs"]
    plan = next(e for e in events if isinstance(e, ev.PlanReady))
    assert r["sequential"]["preview"] == plan.preview and "decides gains" in plan.sentence


def test_verdict_rederived_from_the_receipt_file_agrees(shared, capsys):
    out, rounds = shared
    rnd, events = rounds["fast"]
    code = cli_main(["verdict", str(rnd.receipt_path), "--json"])
    again = json.loads(capsys.readouterr().out)
    assert (again["outcome"], again["tier"]) == (verdict_of(events)["outcome"], verdict_of(events)["tier"])
    assert code == 0


def test_noise_never_earns_a_tier(shared):
    v = verdict_of(shared[1]["noise"][1])
    assert v["outcome"] in ("none", "undecided") and v["tier"] is None, v
    assert codes(v) & {"no-gain", "undecided"}


def test_a_matrix_round_calls_a_regression_in_one_cell_slower_and_still_shows_the_gain_in_another(shared, capsys):
    out, rounds = shared
    rnd, events = rounds["mixed"]
    v = verdict_of(events)
    assert rnd.receipt["kind"] == "matrix" and v["outcome"] == "slower" and rnd.exit_code == 1, v
    cells = {c["key"]: c for c in v["speed"]["matrix"]["cells"]}
    assert cells["depth=4096"]["state"] == "slower" and cells["depth=4096"]["interval"][1] < 0
    assert cells["depth=1024"]["state"] != "slower" and cells["depth=1024"]["gain"] > 0
    # every cell's pairs are in the receipt, each cell's builds adjacent, main first on even pairs
    for key, c in cells.items():
        reps = sorted((x for x in rnd.receipt["reps"] if x["phase"] == f"cell:{key}" and x["status"] == "ok"),
                      key=lambda x: x["position"])
        assert len({(x["build"], x["index"]) for x in reps}) >= 2 * c["pairs"]
        assert [(x["build"], x["index"]) for x in reps[:4]] == [("main", 0), ("candidate", 0), ("candidate", 1),
                                                               ("main", 1)]
    steps = [e for e in events if isinstance(e, ev.CellsStep)]
    assert steps and {c.key for c in steps[-1].cells} == set(cells)
    assert v["parity"]["timed_path"]["status"] == "pass"      # the home cell's runs, against main's
    assert cli_main(["verdict", str(rnd.receipt_path), "--format", "md"]) == 1
    shown = capsys.readouterr().out
    assert "| depth | metric | role | main | candidate | gain | low | high | pairs | outcome | tier |" in shown
    lock = store.read_lock(out / "demo-matrix.lock")
    assert {k.split("/")[-1] for k in lock["baselines"]} == {"depth=1024", "depth=4096"}


def test_a_regression_is_decided_slower_and_a_rerun_measures_nothing(shared):
    out, rounds = shared
    rnd, events = rounds["mixed"]
    v = verdict_of(events)
    assert v["outcome"] == "slower" and rnd.exit_code == 1 and v["tier"] is None, v
    assert v["speed"]["gain"] < 0 and v["speed"]["decision"]["upper_slower"] < 0
    again, again_events = rounds["mixed-again"]
    ended = again_events[-1]
    assert isinstance(ended, ev.RoundEnded) and ended.status == "decided" and ended.receipt_path is None
    assert again.exit_code == 1                         # the regression still fails the job that reruns it
    assert not any(isinstance(e, ev.BuildStarted) for e in again_events)
    said = [e.message for e in again_events if isinstance(e, ev.Notice) and e.code == "already-decided"]
    assert said and rnd.receipt["round_id"] in said[0] and "--fresh" in said[0]
    assert not list((out / "journal").glob(f"{again.round_id}*"))      # nothing to resume either


def test_every_rep_is_timed_by_the_console_on_a_section_drawn_after_it_was_committed(shared):
    from console.core.records.section import chunks_of, commitment_of, run_length, section_tokens
    rnd, events = shared[1]["fast"]
    r = rnd.receipt
    doc = [int(t) for t in (DEMO_PROFILE.parent / "demo" / "document.tok").read_text().split()]
    counted = [x for x in r["reps"] if x["status"] == "ok" and x["phase"] != "scored_path"]
    # the figure is the console's clock over the section; the engine's own timing sits beside it
    assert counted and all(x["value"] == x["tokens"] / x["section_s"] for x in counted)
    assert all(0.85 * x["section_s"] <= x["reported"]["elapsed_s"] <= 1.01 * x["section_s"] for x in counted)
    assert all(x["section_s"] < x["wall_s"] for x in counted)        # the container's start is not timed
    committed = {(e.phase, e.index): e.commitment for e in events if isinstance(e, ev.SectionCommitted)}
    revealed = [e for e in events if isinstance(e, ev.SectionRevealed)]
    sections = {(s["phase"], s["index"]): s for s in r["sections"]}
    assert set(committed) == set(sections) == {(x["phase"], x["index"]) for x in counted}
    for key, s in sections.items():
        assert commitment_of(s["seed"]) == s["commitment"] == committed[key]
    # every seed was revealed once the timed stage was over: after the last run it could be handed to
    last_run = max(i for i, e in enumerate(events) if isinstance(e, ev.RepDone) and e.rep.phase != "scored_path")
    first_reveal = min(i for i, e in enumerate(events) if isinstance(e, ev.SectionRevealed))
    assert first_reveal > last_run and {(e.phase, e.index) for e in revealed} == set(sections)
    # the seed re-derives what was handed over, one id per chunk: it ends on the run it drew
    s = sections[("timed", 0)]
    ids = section_tokens(s["seed"], doc, 2048, 192)[0]
    n = run_length(192)
    assert len(chunks_of("decode_tok_s", [ids])) == 192
    assert any(ids[i:i + n - 1] == ids[192 - (n - 1):] for i in range(96))
    # every candidate run answered its section as main's run of the same section did
    assert verdict_of(events)["parity"]["timed_path"]["status"] == "pass"
    tp = r["parity"]["timed_path"]
    assert tp["basis"] == "section" and {x["phase"] for x in tp["candidate"]} >= {"timed", "short"}
    assert all(x["acks_agree"] == 1.0 and x["kl"] == 0.0 for x in tp["candidate"])


def test_inflate_computes_ahead_what_it_guessed_and_is_rejected_by_main_on_the_same_section(shared):
    # it decodes the document's tokens before the handover, guessing the section, and skips the
    # first 60 % of what it is handed: faster on the console's clock, wrong for the drawn section
    rnd, events = shared[1]["inflate"]
    v = verdict_of(events)
    assert v["outcome"] == "rejected" and v["tier"] is None, v
    assert codes(v) and codes(v) <= {"timed-path-kl", "timed-path-top1", "timed-path-answers"}, v["reasons"]
    assert "against main's runs of the same sections" in v["reasons"][0]["message"]


def test_a_clock_that_runs_slow_is_refused_by_the_console_clock(shared):
    # clock-skew interposes clock_gettime in the engine's own code: its work and logits are main's,
    # its own clock reads a third under the console's
    rnd, events = shared[1]["clock-skew"]
    v = verdict_of(events)
    assert v["outcome"] == "rejected" and codes(v) == {"claim-clock"}, v["reasons"]
    assert v["tier"] is None and "under the console's" in v["reasons"][0]["message"]
    cand = [x for x in rnd.receipt["reps"] if x["build"] == "candidate" and x["phase"] == "timed"]
    assert cand and all(0.55 < x["reported"]["elapsed_s"] / x["section_s"] < 0.75 for x in cand)
    # refused claims end the verdict before the guards: none is measured
    assert not [r for r in rnd.receipt["reps"] if r["phase"].startswith("guard:")]
    assert "guards-skipped" in {e.code for e in events if isinstance(e, ev.Notice)}


def test_short_sections_padded_are_refused_by_their_fixed_cost_per_section(shared):
    rnd, events = shared[1]["pad-short"]
    v = verdict_of(events)
    assert v["outcome"] == "rejected" and codes(v) == {"claim-overhead"}, v["reasons"]
    assert "fixed cost per section" in v["reasons"][0]["message"]


def test_fake_seek_is_refused_by_peak_memory_and_by_its_own_output(shared):
    v = verdict_of(shared[1]["fake-seek"][1])
    # it never allocated the cache it claims, and attending over fewer positions changed its logits
    assert v["outcome"] == "rejected" and {"claim-seek-memory", "timed-path-kl"} <= codes(v), v
    assert v["tier"] is None


def test_ledger_verifies_and_rescore_under_new_bands_changes_labels(shared, tmp_path, capsys):
    out, _ = shared
    assert [p for p in store.verify_dir(out) if p.fatal] == []
    entries, _ = store.read_ledger(out)
    assert len(entries) == 8
    # the same rules with every band far out of reach: the accepted tier must change
    text = DEMO_PROFILE.read_text().replace("bands = { s = 0.035, m = 0.06, l = 0.10, xl = 0.18 }",
                                            "bands = { s = 5.0, m = 6.0, l = 7.0, xl = 8.0 }")
    prof = DEMO_PROFILE.parent / "zz-rescore-test.toml"
    prof.write_text(text)
    try:
        before = sorted(p.name for p in (out / "receipts").iterdir())
        assert cli_main(["ledger", "rescore", str(out), "--profile", str(prof)]) == 0
        printed = capsys.readouterr().out
        assert "<- changed" in printed and "accepted xs" in printed
        assert sorted(p.name for p in (out / "receipts").iterdir()) == before     # sealed files untouched
        assert [p for p in store.verify_dir(out) if p.fatal] == []
    finally:
        prof.unlink()


@pytest.mark.untimed
@pytest.mark.xdist_group("demo")     # one worker builds demo main, once
@pytest.mark.parametrize("candidate", ["corrupt-deep", "fast-path-broken"])
def test_wrong_output_is_rejected_before_any_speed_credit(candidate, tmp_path, base_image):
    rnd, events = run_demo(candidate, tmp_path / candidate)
    v = verdict_of(events)
    assert v["outcome"] == "rejected" and v["tier"] is None and v["speed"].get("suppressed"), v
    assert not [x for x in rnd.receipt["reps"] if x["phase"] == "timed"]    # no timed rep was even run
    if candidate == "corrupt-deep":
        failing = {r["depth"] for r in v["reasons"] if r["code"].startswith("parity")}
        assert failing == {1024, 2048, 4096}, v["reasons"]
    else:
        assert "scored-path-kl" in codes(v) and not any(r["code"].startswith("parity") for r in v["reasons"])


@pytest.mark.untimed
@pytest.mark.xdist_group("demo")     # one worker builds demo main, once
def test_touching_the_apparatus_is_refused_before_building(tmp_path, base_image):
    rnd, events = run_demo("touch-apparatus", tmp_path / "ta")
    v = verdict_of(events)
    assert v["outcome"] == "rejected" and "apparatus-touched" in codes(v)
    assert "src/bench.c" in v["reasons"][0]["message"]
    assert not any(isinstance(e, ev.BuildStarted) for e in events)
    assert rnd.exit_code == 1


@pytest.mark.untimed
@pytest.mark.xdist_group("demo")     # one worker builds demo main, once
def test_a_symlink_into_the_apparatus_is_refused_before_building(tmp_path, base_image):
    """A patch adding only a link (src/par -> ../parity) changes the tree and touches parity/."""
    patch = tmp_path / "link.patch"
    patch.write_text("diff --git a/src/par b/src/par\nnew file mode 120000\n--- /dev/null\n+++ b/src/par\n"
                     "@@ -0,0 +1 @@\n+../parity\n\\ No newline at end of file\n")
    rnd, events = run_demo(str(patch), tmp_path / "ln")
    v = verdict_of(events)
    assert v["outcome"] == "rejected" and codes(v) == {"apparatus-touched"}
    assert "src/par" in v["reasons"][0]["message"] and rnd.receipt["apparatus"]["touched"] == ["src/par"]
    assert not any(isinstance(e, ev.BuildStarted) for e in events)
    assert rnd.exit_code == 1


def test_local_runtime_round_says_which_runtime_ran_it(tmp_path):
    rnd, events = run_demo("fast", tmp_path / "local", reps=None, runtime="local")
    v = verdict_of(events)
    assert rnd.receipt["runtime"]["kind"] == "local" and rnd.receipt["runtime"]["lacks"]
    assert v["outcome"] == "accepted", v
    assert rnd.receipt["builds"]["main"]["image_id"].startswith("local:")
