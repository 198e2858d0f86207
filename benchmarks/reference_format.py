"""How far the compact (top-k + tail) reference's KL is from the full float32 KL, and how small it is.

For each k, the reference is compressed (``console.core.records.topk.compress``, what `console reference
capture` stores with ``parity.reference_format = "topk"``) and a candidate's logits are graded
against it with the functions a round uses (``topk.grade_logits`` per depth, ``topk.grade_row``
per row); the full float32 figures come from ``console.core.records.parity`` (``grade_logits``,
``grade_row``), the legacy path. Printed per k: the compact file's size, the reference's tail
mass (what the top k leave out), and the error of the compact KL against the full KL per row and
per depth (the mean the gate reads): mean and maximum absolute, and relative (compact / full - 1;
never above 0, since merging the tail can only lower a KL), and whether top-1 agreed everywhere.

On real logits (the harness's logits.npy: float32 of shape [depths, rows, vocab], or
[depths, vocab] for one row; a reference and a build, e.g. a CPU and a CUDA capture of the same
depths and rows, or main's and a candidate's parity output kept with ``--keep-work``):

    python benchmarks/reference_format.py REFERENCE.npy CANDIDATE.npy [--ks 64,128,256,1024,4096]

Without files, a synthetic set: 6 depths x 8 rows over 262,144 tokens, Zipf-like distributions
whose entropies and tail masses span those of Gemma 3 270M's rows (entropy 0.05 to 4.2 nats; 7e-5
to 15 % of the mass past the top 128), each depth's candidate perturbed by Gaussian logit noise of
another size (0.003 to 1.0):

    python benchmarks/reference_format.py [--rows 8 --vocab 262144 --seed 1]
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from console.core.records import parity, topk  # noqa: E402
from console.engine import protocol, reffile  # noqa: E402

NOISE = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0)     # the synthetic candidate's logit noise, one per depth


def synthetic(rows: int, vocab: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Peaked reference rows and a candidate perturbed by a different noise size at each depth."""
    rng = np.random.default_rng(seed)
    ref = np.empty((len(NOISE), rows, vocab), dtype=np.float32)
    cand = np.empty_like(ref)
    zipf = -np.log(np.arange(1, vocab + 1, dtype=np.float64))
    for d, noise in enumerate(NOISE):
        for r in range(rows):
            # p ~ rank^-s: s = 1.4 leaves 8 % of the mass past the top 128, s = 3 leaves 6e-5 (Gemma 3
            # 270M: 7e-5 to 15 %); a third of the rows get a dominant first token (entropy ~0.1 nats)
            row = rng.uniform(1.4, 3.0) * zipf + rng.standard_normal(vocab) * 0.5
            row[0] += 4.0 if rng.random() < 1 / 3 else 0.0
            row = row[rng.permutation(vocab)]
            ref[d, r] = row
            cand[d, r] = row + rng.standard_normal(vocab) * noise
    return ref, cand


def load(path: str) -> np.ndarray:
    """A logits file as the harness writes it, read by the round's own strict reader."""
    shape = np.load(path, mmap_mode="r").shape
    depths, rows, vocab = shape if len(shape) == 3 else (shape[0], 1, shape[-1])
    return protocol.read_logits(path, depths=depths, rows=rows, vocab=vocab, max_bytes=1 << 34)


def row_figures(ref: np.ndarray, cand: np.ndarray, comp: "topk.TopK") -> tuple[np.ndarray, np.ndarray, bool]:
    """Per row: the full KL, the compact KL, and whether top-1 agreed with the full path's everywhere."""
    d, r, _ = ref.shape
    full, compact, same_top1 = np.empty((d, r)), np.empty((d, r)), True
    for i in range(d):
        for j in range(r):
            f, c = parity.grade_row(ref[i, j], cand[i, j]), topk.grade_row(comp, i, j, cand[i, j])
            full[i, j], compact[i, j] = f.kl, c.kl
            same_top1 &= f.top1 == c.top1
    return full, compact, same_top1


def rel(compact: np.ndarray, full: np.ndarray) -> np.ndarray:
    keep = full > 1e-12
    return compact[keep] / full[keep] - 1.0 if keep.any() else np.zeros(1)


def report(ref: np.ndarray, cand: np.ndarray, ks: list[int]) -> None:
    d, r, v = ref.shape
    depths = list(range(1, d + 1))
    t0 = time.perf_counter()
    full_depths = parity.grade_logits(ref, cand, depths, r, v)
    print(f"{d} depths x {r} rows x {v} tokens; full float32 reference: {ref.nbytes / 1e6:.1f} MB, graded in "
          f"{time.perf_counter() - t0:.2f} s; mean KL per depth: " + ", ".join(f"{f.kl:.3g}" for f in full_depths))
    head = (f"{'k':>6} {'file MB':>8} {'tail mean':>10} {'tail max':>9} | {'row |dKL| mean':>14} {'max':>9} "
            f"{'rel mean':>9} {'rel worst':>9} | {'depth |dKL| max':>15} {'rel worst':>9} | top-1")
    print(head)
    print("-" * len(head))
    for k in ks:
        if not 1 <= k < v:
            continue
        comp = topk.compress(ref, k)
        size = len(reffile.topk_bytes(comp))
        tail = np.exp(comp.log_tail)
        full, compact, same = row_figures(ref, cand, comp)
        depth_full = np.array([f.kl for f in full_depths])
        depth_comp = np.array([f.kl for f in topk.grade_logits(comp, cand, depths, r, v)])
        rr, rd = rel(compact, full), rel(depth_comp, depth_full)
        print(f"{k:>6} {size / 1e6:>8.3f} {tail.mean():>10.2e} {tail.max():>9.2e} | "
              f"{np.abs(compact - full).mean():>14.3g} {np.abs(compact - full).max():>9.3g} "
              f"{rr.mean():>+9.2%} {rr.min():>+9.2%} | {np.abs(depth_comp - depth_full).max():>15.3g} "
              f"{rd.min():>+9.2%} | {'same' if same else 'DIFFERS'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reference", nargs="?", help="full float32 logits of the reference (.npy)")
    ap.add_argument("candidate", nargs="?", help="full float32 logits of a build, same shape")
    ap.add_argument("--ks", default="64,128,256,1024,4096", help="values of k to try (comma-separated)")
    ap.add_argument("--rows", type=int, default=8, help="synthetic: rows per depth")
    ap.add_argument("--vocab", type=int, default=262_144, help="synthetic: vocabulary size")
    ap.add_argument("--seed", type=int, default=1, help="synthetic: random seed")
    a = ap.parse_args(argv)
    if (a.reference is None) != (a.candidate is None):
        ap.error("give both files, or neither (a synthetic set)")
    if a.reference:
        ref, cand = load(a.reference), load(a.candidate)
        if ref.shape != cand.shape:
            ap.error(f"shapes differ: {list(ref.shape)} and {list(cand.shape)}")
    else:
        ref, cand = synthetic(a.rows, a.vocab, a.seed)
        ent = [parity.grade_row(x, x).ref_entropy for x in ref.reshape(-1, ref.shape[-1])]
        print(f"synthetic: noise per depth {NOISE}; reference entropies {min(ent):.2f} to {max(ent):.2f} nats "
              f"(log V = {math.log(ref.shape[-1]):.2f})")
    report(ref, cand, sorted(int(k) for k in a.ks.split(",")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
