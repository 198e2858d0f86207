"""llama.cpp through real Docker rounds: the llama.cpp adversaries (patches over main, 0.3.16 built
from its sdist) on a real GGUF model with the profile's own harness. The two releases' whole round
is tests/integration/test_offline_local.py's, under the local runtime, as a GPU node runs it.

Everything here is real: the daemon, pip, the compiler in the pinned image, the model.
Missing pieces fail with what to run (`make llama-setup`), never skip.
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pytest

from console import events as ev
from console.results import lockfile
from console.paths import LLAMA_BENCH_PROFILE, LLAMA_CANDIDATES, LLAMA_PROFILE
from console.round import Round, RoundConfig

from .rounds import codes, llama_ready, profile_variant, verdict_of

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.llama]


@pytest.fixture(scope="module")
def llama(docker_client):
    """The llama profile, ready: base image, model file, pinned reference (captured if absent)."""
    return llama_ready(docker_client)


def run_round(profile, candidate, out: Path, reps: int = 12):
    lock = lockfile.ensure(out / "reference.lock", profile)
    cfg = RoundConfig(profile=profile, main=profile.source, candidate=candidate, out_dir=out,
                      reps=reps, lock_path=lock)
    rnd = Round(cfg)
    events = list(rnd.events())
    return rnd, events


def timed_reps(receipt: dict, build: str) -> list[dict]:
    return [r for r in receipt["reps"] if r["build"] == build and r["phase"] == "timed"]


@pytest.mark.untimed
def test_the_reference_capture_does_not_depend_on_the_engines_thread_count(llama, tmp_path):
    """Captured with two threads instead of the profile's one (main's build, reused by its key), the
    reference is the pinned bytes: a node's pin holds whatever thread count captured it. The numpy
    side (dispatch, BLAS threads) is tests/test_reference_dispatch.py's."""
    from console.round import reference
    two = dataclasses.replace(llama, run=dataclasses.replace(llama.run, cpus=2.0),     # {threads}: 2
                              parity=dataclasses.replace(llama.parity, reference=str(tmp_path / "reference-topk.npz")))
    said: list[str] = []
    got = reference.capture(two, said.append)
    assert any("--threads 2" in line for line in said), said
    assert got.reproduces_pin, (got.sha256, got.difference)


def fresh_patch(name: str, where: Path) -> Path:
    """A candidate patch plus one new file unique to this run: a tree no earlier round on this node
    built (so the candidate is built here), compiling nothing more than the patch does."""
    note = f"NOTE-{os.urandom(6).hex()}"
    extra = (f"diff --git a/{note} b/{note}\nnew file mode 100644\n--- /dev/null\n+++ b/{note}\n"
             "@@ -0,0 +1 @@\n+a tree no earlier round built\n")
    out = where / name
    out.write_text((LLAMA_CANDIDATES / name).read_text() + extra)
    return out


@pytest.mark.untimed
def test_a_change_that_drifts_past_a_position_is_named_at_its_depth(llama, tmp_path, docker_client):
    rnd, events = run_round(llama, ("patch", str(fresh_patch("drift-past-768.patch", tmp_path))), tmp_path)
    v = verdict_of(events)
    # main is not built again: the image of its build key (the reference capture's, made by
    # `make llama-setup`) is reused, with its engine files read again from that image
    main = rnd.receipt["builds"]["main"]
    assert main["reused_from"] and main["reused_from"]["image_id"] == main["image_id"], main.get("reused_from")
    assert main["engine_sha256"]
    assert not [e for e in events if isinstance(e, ev.BuildStarted) and e.build == "main"]
    # the candidate, main with one file patched, is built and compiles that file: ccache reuses
    # the rest, and the store keeps nothing the candidate's build wrote
    cand = rnd.receipt["builds"]["candidate"]
    assert not cand.get("reused_from"), cand["reused_from"]
    cache = cand["compiler_cache"]
    assert cache["tool"] == "ccache" and cache["hits"] > 10 * cache["misses"] and cache["hits"] > 0, cache
    assert cache["kept"] is False, cache
    assert v["outcome"] == "rejected" and "parity-kl" in codes(v), v["reasons"]
    failing = {r["depth"] for r in v["reasons"] if r["code"] == "parity-kl"}
    assert failing == {1024}, v["reasons"]          # exact up to 768, caught deep
    assert not timed_reps(rnd.receipt, "candidate")  # before any timed rep
    # no weights in an image: each is the base plus a build of a few tens of MB
    base = docker_client.images.get(main["base_image_id"]).attrs["Size"]
    for b in ("main", "candidate"):
        size = docker_client.images.get(rnd.receipt["builds"][b]["image_id"]).attrs["Size"]
        assert size - base < 150 * 2**20, (b, size, base)
    for b in ("main", "candidate"):     # the image's own tools, as the profile pins them
        assert rnd.receipt["builds"][b]["tools"] == {"cmake": "cmake version 3.25.1", "ccache": "ccache version 4.7.5"}


@pytest.mark.untimed
def test_a_change_that_skips_work_is_rejected_before_any_timed_rep(llama, tmp_path):
    rnd, events = run_round(llama, ("patch", str(LLAMA_CANDIDATES / "skip-layers.patch")), tmp_path)
    v = verdict_of(events)
    assert v["outcome"] == "rejected", v
    failing = {r["depth"] for r in v["reasons"] if r["code"] == "parity-kl"}
    assert failing == set(llama.parity.depths), v["reasons"]
    # the round stops at the stage that rejects it: no task accuracy after a parity failure
    assert rnd.receipt.get("accuracy") is None and not v["parity"].get("accuracy"), v["parity"]
    assert not [e for e in events if isinstance(e, ev.AccuracyProgress)]
    assert "accuracy-skipped" in {e.code for e in events if isinstance(e, ev.Notice)}
    assert not [e for e in events if isinstance(e, ev.RepStarted) and e.phase == "timed"]


def test_a_lower_precision_kv_cache_drifts_under_the_bar_and_keeps_its_accuracy(llama, tmp_path):
    # K cache in q8_0. With 4 rows per depth it read KL 0.059 at depth 768 and needed the adjudication;
    # with 32 rows its worst depth reads 0.035 (depth 32), under the 0.04 bar: legal drift, named
    # nothing here reads the timing: two pairs, the fewest a round compares, and no guard (the
    # two-releases round measures the guard)
    unguarded = dataclasses.replace(llama, gate=dataclasses.replace(llama.gate, guards=()))
    rnd, events = run_round(unguarded, ("patch", str(LLAMA_CANDIDATES / "kv-cache-q8.patch")), tmp_path, reps=2)
    v = verdict_of(events)
    assert not any(c.startswith(("parity", "accuracy")) for c in codes(v)), v["reasons"]
    status = {row["depth"]: row["status"] for row in v["parity"]["depths"]}
    assert set(status.values()) <= {"pass", "drift"} and status[256] == "drift", status
    assert not v["parity"].get("adjudication") and not rnd.receipt["parity"].get("adjudication")
    # under the bar, but far from main's exact zero: legal drift, named with its depths
    [drift] = [w for w in v["warnings"] if w["code"] == "parity-drift"]
    assert "depth 32, 128, 256, 768, 1024" in drift["message"], drift["message"]
    worst = max(d["kl"] for d in rnd.receipt["parity"]["candidate"]["depths"])
    assert 0.01 < worst < llama.gate.kl_max
    acc = v["parity"]["accuracy"]
    assert acc["status"] == "pass" and acc["items"] == 158 and acc["reference_correct"] == 103, acc
    assert acc["estimator"] == "paired t interval over items"
    assert len(rnd.receipt["accuracy"]["candidate"]["outputs"]) == 158
    progress = [e for e in events if isinstance(e, ev.AccuracyProgress)]
    assert [e.done for e in progress if e.build == "candidate"] == [40, 80, 120, 158]
    assert not [e for e in events if isinstance(e, ev.AdjudicationStep)]
    # console verdict re-derives it from the sealed receipt alone
    from console.core.decisions import gate
    from console.core.records.receipt import Receipt
    r = Receipt.from_dict(rnd.receipt)
    again = gate.decide(r, r.rules).to_dict()["parity"]["depths"]
    assert [row["status"] for row in again] == [row["status"] for row in v["parity"]["depths"]]


def test_a_library_that_interposes_the_harness_clock_is_refused_by_the_console_clock(llama, tmp_path):
    # libllama defines the steady_clock::now() the harness links, taking a third of each llama_decode
    # off it: the work, the logits and the wall clock are main's. The console's clock times the section
    # it hands over, so the candidate gains nothing, and the engine's own clock, a third under the
    # console's, names it. Only the clock is in question: no task accuracy, no guard, two pairs at most
    lean = dataclasses.replace(llama, accuracy=None, gate=dataclasses.replace(llama.gate, guards=()))
    rnd, events = run_round(lean, ("patch", str(LLAMA_CANDIDATES / "clock-interpose.patch")), tmp_path, reps=2)
    v = verdict_of(events)
    assert v["outcome"] == "rejected" and codes(v) == {"claim-clock"}, v["reasons"]
    assert "under the console's" in v["reasons"][0]["message"]
    for build, (lo, hi) in {"main": (0.9, 1.01), "candidate": (0.55, 0.8)}.items():
        reps = [x for x in rnd.receipt["reps"] if x["build"] == build and x["phase"] in ("timed", "short")]
        ratios = [x["reported"]["elapsed_s"] / x["section_s"] for x in reps]
        assert reps and all(lo < r <= hi for r in ratios), (build, ratios)
    # the decided figure is the console's: tokens over its own clock, for both builds
    timed = timed_reps(rnd.receipt, "candidate") + timed_reps(rnd.receipt, "main")
    assert timed and all(x["value"] == x["tokens"] / x["section_s"] for x in timed)


@pytest.mark.untimed
def test_a_wrong_rope_base_near_the_bar_is_rejected_by_the_adjudication(llama, tmp_path):
    rnd, events = run_round(llama, ("patch", str(LLAMA_CANDIDATES / "rope-swa-base.patch")), tmp_path)
    v = verdict_of(events)
    assert v["outcome"] == "rejected", v
    assert "parity-adjudication" in codes(v), v["reasons"]
    ruling = v["parity"]["adjudication"]
    assert not ruling["passed"]
    # 32 rows: KL 0.048 at depth 256, over the 0.04 bar and over twice the reference's own kernel
    # spread there (flash attention on/off: 0.021)
    assert list(ruling["depths"]) == ["256"] and not ruling["depths"]["256"]["within"], ruling
    adj = rnd.receipt["parity"]["adjudication"]
    assert [x["name"] for x in adj["variants"]] == ["flash-attn", "batch-64", "threads-2"]
    steps = [e.step for e in events if isinstance(e, ev.AdjudicationStep)]
    assert steps[0] == "started" and steps[-1] == "ruling", steps
    assert not timed_reps(rnd.receipt, "candidate")


@pytest.mark.untimed
def test_a_change_to_the_bench_tool_is_refused_before_building(llama, tmp_path, docker_client):
    # its own reference (4 rows, float32, captured by its own build if absent): a reference records
    # the build that made it, so the profiles no longer share one file
    profile = llama_ready(docker_client, LLAMA_BENCH_PROFILE)
    rnd, events = run_round(profile, ("patch", str(LLAMA_CANDIDATES / "bench-inflate.patch")), tmp_path)
    v = verdict_of(events)
    assert v["outcome"] == "rejected" and codes(v) == {"apparatus-touched"}
    assert "tools/llama-bench/llama-bench.cpp" in v["reasons"][0]["message"]
    assert not [e for e in events if isinstance(e, ev.BuildStarted)]


def console_with(profile_text: str, out: Path) -> subprocess.CompletedProcess:
    """`console run` on a variant of the llama profile."""
    with profile_variant(profile_text, out.name) as bad:
        return subprocess.run([str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "console"), "run",
                               "--profile", str(bad), "--headless", "--out", str(out)],
                              capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("content, key, what", [
    (b"not the weights", "model.files[0].sha256", "not the pinned"),
    (None, "model.files[0].path", "is not at"),
])
def test_wrong_or_missing_weights_name_the_key_and_build_nothing(llama, tmp_path, docker_client, content, key, what):
    fake = tmp_path / "weights.gguf"
    if content is not None:
        fake.write_bytes(content)
    text = LLAMA_PROFILE.read_text().replace(f'path = "{_model_path_text()}"', f'path = "{fake}"')
    assert str(fake) in text
    r = console_with(text, tmp_path / "out")
    said = r.stdout + r.stderr
    assert r.returncode == 2, said
    assert key in said and what in said, said
    assert not docker_client.containers.list(all=True, filters={"label": "bench-console"})


def _model_path_text() -> str:
    import tomllib
    return tomllib.loads(LLAMA_PROFILE.read_text())["model"]["files"][0]["path"]
