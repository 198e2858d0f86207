"""A real llama.cpp round with no Docker and no network: a bundle made here with the package index
reachable, then `benchmarks/gpu_round.sh` (what a GPU node runs) with the index unreachable, a fresh
home and cache, and the CPU profile's bundle: the console installed from the bundle's wheels, the
host toolchain pinned and asserted, the reference captured under --runtime local (bit-identical to
the pinned one) with main's build kept by its key, and the round under --runtime local.

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

from console.paths import LLAMA_CANDIDATES, LLAMA_PROFILE
from console.profile import load_profile

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
    made = subprocess.run([sys.executable, "-m", "console.cli", "bundle", "--profile", "llama-cpp", "--candidate",
                           str(LLAMA_CANDIDATES / "bench-inflate.patch"), str(dest)],
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


def test_a_bundle_runs_a_whole_local_round_with_the_index_unreachable(offline_round, bundle):
    r, receipt, work = offline_round
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert receipt["status"] == "complete" and receipt["runtime"]["kind"] == "local"
    # the round read the bundle, checked, and nothing else
    took = receipt["bundle"]["took"]
    assert took["sdists"] == ["llama-cpp-python==0.3.16"] and took["model"] == ["gemma-3-270m-q4_k_m.gguf"]
    assert receipt["bundle"]["path"] == str(bundle)
    # the console itself came from the bundle's wheels
    assert (work / "venv" / "bin" / "console").is_file()
    # both builds asserted the host's toolchain, as pinned from this host by the script
    for b in ("main", "candidate"):
        build = receipt["builds"][b]
        assert build["compiler"] == "g++ (Debian 12.2.0-14+deb12u1) 12.2.0"
        assert build["tools"]["cmake"].startswith("cmake version ") and "ccache" in build["tools"]
    # main was built once, by the reference capture, and kept by its key; the candidate (main with
    # a file the library does not build patched) compiled nothing new
    assert receipt["builds"]["main"]["reused_from"], receipt["builds"]["main"]
    cache = receipt["builds"]["candidate"]["compiler_cache"]
    assert cache["hits"] > 0 and cache["misses"] == 0, cache
    # the reference captured here under the local runtime is the pinned one, bit for bit
    assert "identical to the pinned reference" in r.stdout, r.stdout[-3000:]
    par = receipt["parity"]
    assert [d["depth"] for d in par["candidate"]["depths"]] == [32, 128, 256, 512, 768, 1024]
    assert all(d["kl"] == pytest.approx(0.0, abs=1e-9) for d in par["main"]["depths"])
    timed = [x for x in receipt["reps"] if x["phase"] == "timed" and x["status"] == "ok"]
    assert len(timed) >= 4 and all(x["telemetry"] for x in timed)
    v = receipt["verdict"]
    assert v["outcome"] in ("none", "undecided", "accepted", "slower"), v
    # the script says what it measured
    assert "verdict:" in r.stdout and "parity main:" in r.stdout and "build candidate:" in r.stdout
