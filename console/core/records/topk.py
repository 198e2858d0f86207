"""A compact parity reference: per row the reference's k most likely tokens with their
log-probabilities, and the log of the rest's total probability (the tail). 32 rows x 6 depths of a
262,144-token vocabulary are 201 MB of float32 logits, 2.4 MB this way with k = 1024 (12 bytes per
kept token); every token's log-probability in 16 bits (llama-perplexity's compressed KL base)
would still be 100 MB.

The KL is that of the two distributions coarsened to k + 1 outcomes (the reference's top k, and
the tail T of every other token), with q the build's full float32 output in float64:

    KL_c = sum_{i in top k} p_i (log p_i - log q_i) + p_T (log p_T - log q_T),   q_T = sum_{i in T} q_i

Merging outcomes never raises a KL (the log-sum inequality), so 0 <= KL_c <= KL, with equality
when the build spreads its tail mass as the reference does; what KL_c cannot see is a change of
how the tail's mass (p_T) is spread among the tail's own tokens. ``benchmarks/reference_format.py``
measures that gap on real logits. Top-1 agreement compares the reference's argmax (its first id)
with the build's full argmax. Each row's entropy and the log-probability of the document's next
token (for Δp) are computed from the full row at capture and stored with it, so those figures are
the full path's.

The same function (``_logs``) turns the reference row into log-probabilities at capture and a
build's row at grading, so a build that reproduces the reference's logits bit for bit gets a KL of
exactly 0, as against the full reference. It computes with ``portable``'s exp, log and sums, so
the reference's bytes, and the pin over them, are the same on any node that gets the same logits.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from console.core.statistics import portable
from console.core.records.parity import (DepthFigures, ParityInputError, RowFigures, RowGrade, _as_grid, _non_finite_message,
                     check_grid_args, grade_grid, grade_logits as grade_full, grade_row as grade_full_row,
                     token_grid)

FORMAT_VERSION = 1
# Slack for a stored distribution's total probability (float64 sums of up to 262,144 terms).
MASS_TOLERANCE = 1e-6


@dataclass(frozen=True, eq=False)
class TopK:
    """The compact reference, [depths, rows] rows of ``k`` tokens each."""
    ids: np.ndarray          # [depths, rows, k] int: the k most likely tokens, most likely first
    logp: np.ndarray         # [depths, rows, k] float64: their log-probabilities, non-increasing
    log_tail: np.ndarray     # [depths, rows] float64: log of every other token's total probability
    entropy: np.ndarray      # [depths, rows] float64: the full row's entropy, nats
    next_token: np.ndarray   # [depths, rows] int: the document's next token after the row, -1 where none
    next_logp: np.ndarray    # [depths, rows] float64: its log-probability (0 where none)
    vocab: int

    @property
    def shape(self) -> tuple[int, int, int]:
        d, r, k = self.ids.shape
        return int(d), int(r), int(k)


# A parity reference in either form: full logits [depths, rows, vocab], or the compact one.
Reference = np.ndarray | TopK


# --- one row -------------------------------------------------------------------

class _Logs(NamedTuple):
    top: np.ndarray          # the log-probabilities of the kept ids
    tail: float              # the log of every other token's total probability
    argmax: int
    token: float | None      # the log-probability of the asked token (None for -1)
    entropy: float | None    # the full row's, nats (None unless asked: grading reads the reference's)


def _logs(x: np.ndarray, ids: np.ndarray, token: int = -1, entropy: bool = False) -> _Logs:
    """One row's figures in float64, computed with ``portable``'s exp, log and sums so that a
    reference captured from the same logits has the same bytes on every node. Raises on a
    non-finite row."""
    a = np.asarray(x, dtype=np.float64)
    i = int(np.argmax(a))
    d = a - a[i]
    if not np.isfinite(d).all():
        raise ParityInputError("non-finite")
    e = portable.exp(d)
    s = portable.total(e)
    lse = portable.log(s)
    # rounding can dip a hair below 0
    ent = max(lse - portable.total(e * d) / s, 0.0) if entropy else None
    top = d[ids] - lse
    tok = float(d[token]) - lse if token >= 0 else None
    d[ids] = -np.inf
    m = float(d.max())
    # the tail in log space: finite even when every tail token's probability underflows
    tail = m + portable.log(portable.total(portable.exp(d - m))) - lse
    return _Logs(top, tail, i, tok, ent)


def top_ids(x: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` largest entries of ``x``, largest first, ties broken by lower id over the whole row
    (so the first is numpy's argmax, and which of several tokens tied at the k-th value are kept
    depends on their ids alone, never on how a partition happened to visit them)."""
    a = np.asarray(x)
    v = a[np.argpartition(-a, k - 1)[k - 1]]          # the k-th largest value
    if not np.isfinite(v):
        raise ParityInputError("non-finite")
    above = np.flatnonzero(a > v)
    tied = np.flatnonzero(a == v)[: k - above.size]   # flatnonzero is in id order
    idx = np.concatenate([above, tied])
    return idx[np.lexsort((idx, -a[idx].astype(np.float64)))].astype(np.int32)


def compress(full: Any, k: int, next_tokens: Any = None) -> TopK:
    """The compact form of full logits [depths, rows, vocab] (float32 or float64)."""
    arr = np.asarray(full)
    if arr.ndim != 3 or not np.issubdtype(arr.dtype, np.floating):
        raise ParityInputError(f"expected floating-point logits [depths, rows, vocab], got {arr.dtype} "
                               f"{list(arr.shape)}")
    nd, rows, vocab = arr.shape
    if not 1 <= k < vocab:
        raise ParityInputError(f"top-k: expected 1 <= k < vocab ({vocab}), got {k}")
    tokens = token_grid(next_tokens, nd, rows, vocab)
    ids = np.empty((nd, rows, k), dtype=np.int32)
    logp = np.empty((nd, rows, k), dtype=np.float64)
    log_tail, entropy, next_logp = (np.zeros((nd, rows), dtype=np.float64) for _ in range(3))
    for d in range(nd):
        for r in range(rows):
            x = arr[d, r]
            try:
                ids[d, r] = top_ids(x, k)
                got = _logs(x, ids[d, r], int(tokens[d, r]), entropy=True)
            except ParityInputError:
                raise ParityInputError(_non_finite_message("reference logits", np.asarray(x), d, r)) from None
            logp[d, r], log_tail[d, r], entropy[d, r] = got.top, got.tail, got.entropy
            next_logp[d, r] = got.token if got.token is not None else 0.0
    return TopK(ids, logp, log_tail, entropy, tokens.astype(np.int64), next_logp, int(vocab))


def _grade_one(ref: TopK, d: int, r: int, y: np.ndarray) -> RowFigures:
    lq, lq_tail, iy, tok, _ = _logs(y, ref.ids[d, r], int(ref.next_token[d, r]))
    lp, lp_tail = ref.logp[d, r], float(ref.log_tail[d, r])
    kl = float(np.dot(np.exp(lp), lp - lq)) + math.exp(lp_tail) * (lp_tail - lq_tail)
    dp = None if tok is None else math.exp(tok) - math.exp(float(ref.next_logp[d, r]))
    # rounding can dip a hair below 0; the log-sum inequality says it cannot really
    return max(kl, 0.0), iy == int(ref.ids[d, r, 0]), float(ref.entropy[d, r]), dp


# --- grading -------------------------------------------------------------------

def _topk_cells(ref: TopK, cand: np.ndarray, depths: Sequence[int]) -> Callable[[], Callable[[int, int], RowFigures]]:
    def new_cell() -> Callable[[int, int], RowFigures]:
        def cell(d: int, r: int) -> RowFigures:
            try:
                return _grade_one(ref, d, r, cand[d, r])
            except ParityInputError:
                raise ParityInputError(_non_finite_message("candidate logits", np.asarray(cand[d, r]),
                                                           depths[d], r)) from None
        return cell
    return new_cell


def grade_logits(ref: "TopK | Any", cand: Any, depths: Sequence[int], rows: int, vocab: int,
                 workers: int = 2, next_tokens: Any = None) -> list[DepthFigures]:
    """Per-depth figures of ``cand`` against either form of reference: full logits (graded by
    ``console.core.records.parity.grade_logits``) or a ``TopK``."""
    if not isinstance(ref, TopK):
        return grade_full(ref, cand, depths, rows, vocab, workers=workers, next_tokens=next_tokens)
    depths = check_grid_args(depths, rows, vocab)
    check(ref, len(depths), rows, vocab)
    if next_tokens is not None and not np.array_equal(token_grid(next_tokens, len(depths), rows, vocab),
                                                      ref.next_token):
        raise ParityInputError("reference: its rows' next tokens are not the document's: it was captured "
                               "over another document")
    c_grid = _as_grid(cand, "candidate logits", len(depths), rows, vocab)
    return grade_grid(_topk_cells(ref, c_grid, depths), depths, rows, vocab, workers)


def grade_row(ref: "TopK | Any", depth_index: int, row: int, cand_row: Any) -> RowGrade:
    """One [vocab] vector against the reference's row (the scored path), either form."""
    if not isinstance(ref, TopK):
        return grade_full_row(np.asarray(ref)[depth_index, row], cand_row)
    y = np.asarray(cand_row)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.floating):
        raise ParityInputError(f"candidate row: expected a [vocab] vector of floats, got {y.dtype} {list(y.shape)}")
    if y.shape[0] != ref.vocab:
        raise ParityInputError(f"candidate row: vocabulary size {y.shape[0]}, expected {ref.vocab}")
    row %= ref.shape[1]
    try:
        kl, agree, entropy, _ = _grade_one(ref, depth_index, row, y)
    except ParityInputError:
        raise ParityInputError(_non_finite_message("candidate row", y, None, None)) from None
    return RowGrade(kl=kl, top1=1.0 if agree else 0.0, ref_entropy=entropy)


# --- validation ------------------------------------------------------------------

def check(ref: TopK, depths: int, rows: int, vocab: int, k: int | None = None) -> None:
    """Refuse a compact reference that does not fit the profile or is not a distribution."""
    d, r, kk = ref.shape
    if (d, r) != (depths, rows) or ref.vocab != vocab or (k is not None and kk != k):
        raise ParityInputError(f"reference: {d} depths x {r} rows x top-{kk} of a vocabulary of {ref.vocab}, "
                               f"expected {depths} x {rows} x top-{k if k is not None else kk} of {vocab}")
    if not 1 <= kk < vocab:
        raise ParityInputError(f"reference: top-{kk} of a vocabulary of {vocab}: expected 1 <= k < vocab")
    for name, a, shape in (("logp", ref.logp, (d, r, kk)), ("log_tail", ref.log_tail, (d, r)),
                           ("entropy", ref.entropy, (d, r)), ("next_token", ref.next_token, (d, r)),
                           ("next_logp", ref.next_logp, (d, r))):
        if a.shape != shape:
            raise ParityInputError(f"reference: {name} has shape {list(a.shape)}, expected {list(shape)}")
        if not np.isfinite(a).all():
            raise ParityInputError(f"reference: {name} holds non-finite values")
    _check_rows(ref, vocab)


def _check_rows(ref: TopK, vocab: int) -> None:
    if not (np.issubdtype(ref.ids.dtype, np.integer) and np.issubdtype(ref.next_token.dtype, np.integer)):
        raise ParityInputError("reference: token ids must be integers")
    ids = ref.ids.astype(np.int64)
    if ids.min() < 0 or ids.max() >= vocab:
        raise ParityInputError(f"reference: token ids must lie in [0, {vocab})")
    if (np.diff(np.sort(ids, axis=-1), axis=-1) == 0).any():
        raise ParityInputError("reference: a row lists the same token twice")
    if (np.diff(ref.logp, axis=-1) > 0).any() or (ref.logp > 0).any() or (ref.log_tail > 0).any():
        raise ParityInputError("reference: log-probabilities must be <= 0 and non-increasing along each row")
    mass = np.exp(ref.logp).sum(-1) + np.exp(ref.log_tail)
    if (np.abs(mass - 1.0) > MASS_TOLERANCE).any():
        worst = float(mass.flat[int(np.argmax(np.abs(mass - 1.0)))])
        raise ParityInputError(f"reference: a row's probabilities sum to {worst:.9g}, not 1")
    if (ref.entropy < 0).any() or (ref.entropy > math.log(vocab) + MASS_TOLERANCE).any():
        raise ParityInputError(f"reference: entropies must lie in [0, log {vocab}]")
    if ref.next_token.min() < -1 or ref.next_token.max() >= vocab or (ref.next_logp > 0).any():
        raise ParityInputError(f"reference: next tokens must lie in [-1, {vocab}) with log-probabilities <= 0")
