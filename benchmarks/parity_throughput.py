"""Parity throughput: read and grade a 7 x 64 x 262,144 float32 pair the way a round does.

Writes a reference and a slightly perturbed candidate to a temporary directory, then
times what the round runs on them: ``protocol.read_logits`` for each file (validated,
read once, kept in the file's own precision) and ``grade_logits`` (best of several runs).
Memory, relative to the size of one input file:

- anonymous RSS peak increase (sampled from /proc/self/statm): everything the read and
  the grading allocated, both inputs included;
- heap peak of the grading alone (tracemalloc sees numpy's allocations).

    python benchmarks/parity_throughput.py [--depths 7 --rows 64 --vocab 262144 --runs 5 --workers 2]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from console.core.records.parity import grade_logits  # noqa: E402
from console.engine.protocol import read_logits  # noqa: E402


def write_inputs(tmp: Path, depths: int, rows: int, vocab: int) -> tuple[Path, Path]:
    """Reference logits and a candidate = reference + small noise, written depth by depth.

    Written through plain file writes (not a writable memmap) so that no page of
    either file is resident in this process before the timed runs map them.
    """
    rng = np.random.default_rng(20261202)
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
              "fortran_order": False, "shape": (depths, rows, vocab)}
    ref_path, cand_path = tmp / "reference.npy", tmp / "candidate.npy"
    with open(ref_path, "wb") as fr, open(cand_path, "wb") as fc:
        np.lib.format.write_array_header_1_0(fr, header)
        np.lib.format.write_array_header_1_0(fc, header)
        for _ in range(depths):
            block = rng.standard_normal((rows, vocab), dtype=np.float32) * 2.5
            fr.write(block.tobytes())
            fc.write((block + rng.standard_normal((rows, vocab), dtype=np.float32) * 0.01).tobytes())
    return ref_path, cand_path


class AnonSampler:
    """Peak anonymous (non file-backed) resident memory, sampled from /proc/self/statm.

    Resident minus shared pages excludes the mapped input files, which are page cache
    rather than memory the grading allocated.
    """

    def __init__(self, interval_s: float = 0.001):
        self.interval_s, self.peak, self._stop = interval_s, 0, threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._thread = threading.Thread(target=self._run, daemon=True)

    def anon(self) -> int:
        with open("/proc/self/statm") as f:
            _, resident, shared = (int(v) for v in f.read().split()[:3])
        return (resident - shared) * self._page

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.anon())
            time.sleep(self.interval_s)

    def __enter__(self) -> "AnonSampler":
        self.base = self.anon()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.anon())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", type=int, default=7)
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=262_144)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    depth_list = [4 * 2 ** i for i in range(a.depths)]

    with tempfile.TemporaryDirectory(prefix="parity-bench-") as t:
        ref_path, cand_path = write_inputs(Path(t), a.depths, a.rows, a.vocab)
        file_size = os.path.getsize(ref_path)

        def read(path: Path) -> np.ndarray:
            return read_logits(path, depths=a.depths, rows=a.rows, vocab=a.vocab, max_bytes=4 * file_size)

        best = best_grade = float("inf")
        with AnonSampler() as anon:
            for _ in range(a.runs):
                t0 = time.perf_counter()
                ref, cand = read(ref_path), read(cand_path)
                t1 = time.perf_counter()
                figures = grade_logits(ref, cand, depth_list, a.rows, a.vocab, workers=a.workers)
                t2 = time.perf_counter()
                best, best_grade = min(best, t2 - t0), min(best_grade, t2 - t1)
                del ref, cand
        anon_increase = max(0, anon.peak - anon.base)

        ref, cand = read(ref_path), read(cand_path)
        tracemalloc.start()
        grade_logits(ref, cand, depth_list, a.rows, a.vocab, workers=a.workers)
        _, heap_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del ref, cand

    worst = max(figures, key=lambda f: f.kl)
    print(f"worst depth {worst.depth}: kl {worst.kl:.3e} nats, top1 {worst.top1:.3f}, "
          f"ref entropy {worst.ref_entropy:.3f} / {worst.max_entropy:.3f}")
    mib = 2 ** 20
    print(f"file size {file_size / mib:.0f} MiB each; grading heap peak {heap_peak / mib:.1f} MiB")
    print(f"parity {a.depths}x{a.rows}x{a.vocab}: read + grade {best:.2f} s (grade alone {best_grade:.2f} s), "
          f"anonymous memory peak +{anon_increase / file_size:.2f}x one file (both inputs held), "
          f"{a.workers} workers, best of {a.runs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
