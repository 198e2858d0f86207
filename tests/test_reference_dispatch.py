"""The compact reference's bytes do not depend on numpy's CPU dispatch or on BLAS threads: a node
with AVX-512 and one without, one thread or two, pin the same file from the same logits."""
import os
import subprocess
import sys

import pytest

SCRIPT = """
import hashlib, json, numpy as np
from numpy._core._multiarray_umath import __cpu_features__ as features
from console.core.records import topk
from console.engine import reffile
rng = np.random.default_rng(7)
x = (rng.standard_normal((2, 3, 262144)) * 4).astype(np.float32)   # a real vocabulary's row length
x[..., :50] += 12
x[0, 1, 200000:200400] = np.partition(x[0, 1], -1024)[-1024]   # 400 ties at the k-th value
x[0, 0, 5:9] = x[0, 0, 4]                           # and among the kept tokens
digest = hashlib.sha256(reffile.topk_bytes(topk.compress(x, 1024))).hexdigest()
print(json.dumps({"sha": digest, "on": sorted(k for k, v in features.items() if v)}))
"""

SETTINGS = {
    "all of this CPU's features": {},
    "no AVX-512": {"NPY_DISABLE_CPU_FEATURES": "X86_V4,AVX512_ICL,AVX512_SPR"},
    "no AVX2 or AVX-512": {"NPY_DISABLE_CPU_FEATURES": "X86_V3,X86_V4,AVX512_ICL,AVX512_SPR"},
    "two BLAS threads": {"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"},
}


def _run(extra):
    import json
    env = {k: v for k, v in os.environ.items() if k not in ("NPY_DISABLE_CPU_FEATURES",)}
    r = subprocess.run([sys.executable, "-c", SCRIPT], env={**env, **extra}, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_reference_bytes_are_the_same_under_every_dispatch_and_thread_count():
    got = {name: _run(extra) for name, extra in SETTINGS.items()}
    full = set(got["all of this CPU's features"]["on"])
    if "X86_V3" not in full:
        pytest.fail("this CPU has no AVX2 (X86_V3): the dispatch comparison needs a node that has it")
    # the settings really took: fewer features were on where they were disabled
    assert "X86_V4" not in got["no AVX-512"]["on"] and "X86_V3" not in got["no AVX2 or AVX-512"]["on"]
    assert len({g["sha"] for g in got.values()}) == 1, {name: g["sha"] for name, g in got.items()}
