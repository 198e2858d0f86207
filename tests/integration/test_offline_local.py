"""A real llama.cpp round with no Docker and no network: a bundle of the CPU profile's two releases
(0.3.16 and 0.3.36, from their sdists) made here with the package index reachable, then
`benchmarks/gpu_round.sh` (what a GPU node runs) with the index unreachable, a fresh home and cache:
the console installed from the bundle's wheels, the host toolchain pinned and asserted, the
reference captured under --runtime local (bit-identical to the pinned one) with main's build kept by
its key, and the whole round of the two releases under --runtime local (parity, interleaved pairs,
the guard; task accuracy is left out of this bundle's profile: the K-cache round measures it).

Missing pieces (the model, the captured reference, cmake or ccache on the host) fail with what to
run, never skip.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomlkit

from console.paths import LLAMA_PROFILE
from console.profile import load_profile

from .rounds import profile_variant

pytestmark = [pytest.mark.slow, pytest.mark.llama]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    profile = load_profile(LLAMA_PROFILE)
    for f in profile.model:
        if not Path(f.path).is_file():
            pytest.fail(f"the model file {f.path} is missing: run `make llama-setup`", pytrace=False)
    if not Path(profile.parity.reference).is_file():
        pytest.fail("the llama.cpp reference is not captured: run `make llama-setup`", pytrace=False)
    for tool in ("cmake", "ccache", "g++"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed: `make setup-test` installs it", pytrace=False)
    dest = tmp_path_factory.mktemp("bundle") / "llama-cpp.bundle"
    # The profile less its task accuracy (two minutes of CI here; the K-cache round under Docker
    # measures and asserts it), written beside it so that its relative paths hold. Its candidate is
    # the profile's own: llama-cpp-python 0.3.36's sdist.
    doc = tomlkit.parse(LLAMA_PROFILE.read_text())
    del doc["accuracy"]
    with profile_variant(tomlkit.dumps(doc), f"offline-{os.getpid()}") as variant:
        made = subprocess.run([sys.executable, "-m", "console.cli", "bundle", "--profile", str(variant), str(dest)],
                              capture_output=True, text=True, cwd=ROOT)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    return dest


@pytest.fixture(scope="module")
def offline_round(bundle, tmp_path_factory):
    work = tmp_path_factory.mktemp("node")
    home = work / "home"
    home.mkdir()
    # a node with nothing of this machine's: no index, no model cache, no sdist or compiler cache
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
           "PYTHON": sys.executable, "LC_ALL": "C.UTF-8"}
    r = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_round.sh"), str(bundle), str(work / "run"),
                        "--reps", "2"], capture_output=True, text=True, env=env, timeout=1500)
    receipt_path = work / "run" / "results" / "receipt.json"
    assert receipt_path.is_file(), r.stdout[-4000:] + r.stderr[-4000:]
    return r, json.loads(receipt_path.read_text()), work / "run"


def test_a_bundle_runs_a_whole_local_round_of_two_releases_with_the_index_unreachable(offline_round, bundle):
    r, receipt, work = offline_round
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert receipt["status"] == "complete" and receipt["runtime"]["kind"] == "local"
    # the round read the bundle, checked, and nothing else
    took = receipt["bundle"]["took"]
    assert took["sdists"] == ["llama-cpp-python==0.3.16", "llama-cpp-python==0.3.36"]
    assert took["model"] == ["gemma-3-270m-q4_k_m.gguf"] and receipt["bundle"]["path"] == str(bundle)
    # the console itself came from the bundle's wheels
    assert (work / "venv" / "bin" / "console").is_file()
    # what ran: sdists, harness, model, tools (the host's, as pinned from this host by the script)
    for b in ("main", "candidate"):
        build = receipt["builds"][b]
        assert build["compiler"] == "g++ (Debian 12.2.0-14+deb12u1) 12.2.0"
        assert build["tools"]["cmake"].startswith("cmake version ") and "ccache" in build["tools"]
        assert build["source"]["sdist_sha256"] and build["source"]["subtree"] == "vendor/llama.cpp"
        assert "harness" in build["engine_files"] and build["engine_sha256"]
    assert receipt["builds"]["main"]["source"]["pypi"] == "llama-cpp-python==0.3.16"
    assert receipt["builds"]["candidate"]["source"]["pypi"] == "llama-cpp-python==0.3.36"
    (model,) = receipt["inputs"]["model"]
    assert model["sha256"] == load_profile(LLAMA_PROFILE).model[0].sha256 and model["bytes"] > 200_000_000
    assert receipt["inputs"]["warm"]["bytes"] == model["bytes"]
    assert receipt["inputs"]["harness"]["tree_sha256"] and receipt["inputs"]["fill"] == "prefill"
    # main was built once, by the reference capture, and kept by its key; the candidate, another
    # release, was built here, reading the ccache store main's build left and keeping nothing
    assert receipt["builds"]["main"]["reused_from"], receipt["builds"]["main"]
    cand = receipt["builds"]["candidate"]
    assert not cand.get("reused_from") and cand["compiler_cache"]["misses"] > 0, cand["compiler_cache"]
    assert cand["compiler_cache"]["kept"] is False
    # the reference captured here under the local runtime is the pinned one, bit for bit, and it is
    # main's own build: main's KL is exactly 0 at every depth, and the verdict says so
    assert "identical to the pinned reference" in r.stdout, r.stdout[-3000:]
    par = receipt["parity"]
    assert [d["depth"] for d in par["candidate"]["depths"]] == [32, 128, 256, 512, 768, 1024]
    assert all(d["kl"] == pytest.approx(0.0, abs=1e-9) for d in par["main"]["depths"])
    assert par["reference"]["same_as_main"] is True
    v = receipt["verdict"]
    assert v["outcome"] in ("none", "undecided", "accepted", "slower"), v
    assert "reference-is-main" in {w["code"] for w in v["warnings"]}
    assert receipt.get("accuracy") is None      # the bundle's profile has none
    # the releases agree (parity passed at every depth), and no claim check refuses either honest one
    assert not any(x["code"].startswith(("parity", "claim")) for x in v["reasons"]), v["reasons"]
    timed = [x for x in receipt["reps"] if x["phase"] == "timed" and x["status"] == "ok"]
    assert len(timed) >= 4 and all(x["telemetry"] for x in timed)
    assert all(x["reported"]["metric"] == "prefill_tok_s" for x in timed if x["reported"])
    # the guard measures decode, the score prefill
    guard = [x for x in receipt["reps"] if x["phase"].startswith("guard:") and x["status"] == "ok"]
    assert guard and all(x["reported"]["metric"] == "decode_tok_s" for x in guard)
    # the script says what it measured
    assert "verdict:" in r.stdout and "parity main:" in r.stdout and "build candidate:" in r.stdout
