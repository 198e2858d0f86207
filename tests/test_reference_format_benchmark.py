"""benchmarks/reference_format.py grades with the round's own functions, on files or a synthetic set."""
import importlib.util
import re
from pathlib import Path

import numpy as np

from console.core.records import parity, topk

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("reference_format", ROOT / "benchmarks" / "reference_format.py")
rf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rf)


def rows_of(out: str) -> dict[int, list[str]]:
    return {int(line.split()[0]): line.split() for line in out.splitlines() if re.match(r"\s*\d+\s+\d+\.\d+\s", line)}


def test_two_logits_files_as_the_harness_writes_them(tmp_path, capsys):
    rng = np.random.default_rng(0)
    ref = (rng.standard_normal((3, 2, 3000)) * 3).astype(np.float32)
    np.save(tmp_path / "ref.npy", ref)
    np.save(tmp_path / "cand.npy", ref + (rng.standard_normal(ref.shape) * 0.1).astype(np.float32))
    np.save(tmp_path / "one.npy", ref[:, 0])            # [depths, vocab]: one row per depth
    assert rf.main([str(tmp_path / "ref.npy"), str(tmp_path / "cand.npy"), "--ks", "16,256,2999,5000"]) == 0
    got = rows_of(capsys.readouterr().out)
    assert sorted(got) == [16, 256, 2999]                # k = vocab and above leave no tail: skipped
    for k, cols in got.items():
        assert float(cols[7].rstrip("%")) <= 0 and cols[-1] == "same"    # never above the full KL
    assert abs(float(got[2999][7].rstrip("%"))) < 1e-6   # a tail of one token is the full KL
    assert rf.load(str(tmp_path / "one.npy")).shape == (3, 1, 3000)


def test_the_synthetic_set_and_the_round_s_functions(capsys, monkeypatch):
    called = []
    for mod, name in ((topk, "grade_logits"), (topk, "grade_row"), (parity, "grade_logits"), (topk, "compress")):
        real = getattr(mod, name)
        monkeypatch.setattr(mod, name, lambda *a, _real=real, _n=name, **k: called.append(_n) or _real(*a, **k))
    assert rf.main(["--rows", "2", "--vocab", "4000", "--ks", "64"]) == 0
    out = capsys.readouterr().out
    assert "synthetic" in out and 64 in rows_of(out)
    assert {"grade_logits", "grade_row", "compress"} <= set(called)
