"""How two captures of a parity reference differ, in the terms grading reads.

A capture that does not reproduce its pin used to stop with "it differs" and nothing more. What a
user needs to know is whether the difference can change any verdict: which rows moved, by how
many nats, whether only tokens tied in value swapped places, and whether any row's argmax moved.

The pin's side of the comparison is its *digest*: the pinned reference kept to its first
``DIGEST_K`` tokens per row (``truncate``), small enough to commit beside the profile, so a fresh
node that never held the pinned file can still say how its capture differs from it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from console.core.records.topk import TopK

DIGEST_K = 32
# Below this every figure a grading computes from the two references agrees to float64 rounding.
NEGLIGIBLE_NATS = 1e-9

Row = tuple[int, int]          # (depth, row index within the depth)


def truncate(ref: TopK, k: int = DIGEST_K) -> TopK:
    """The same reference with only its first ``k`` tokens per row kept; the others join the tail."""
    k = min(k, ref.shape[2])
    rest = np.concatenate([ref.logp[..., k:], ref.log_tail[..., None]], axis=-1)
    return TopK(ids=np.ascontiguousarray(ref.ids[..., :k]), logp=np.ascontiguousarray(ref.logp[..., :k]),
                log_tail=np.logaddexp.reduce(rest, axis=-1), entropy=ref.entropy, next_token=ref.next_token,
                next_logp=ref.next_logp, vocab=ref.vocab)


@dataclass(frozen=True)
class Difference:
    """Two references compared over their common first ``k`` tokens per row."""
    k: int
    rows: int                              # rows compared
    changed: tuple[Row, ...]               # rows whose kept ids or any figure differ
    ties_only: tuple[Row, ...]             # of those: only tokens of equal log-probability moved
    argmax_moved: tuple[Row, ...]          # rows whose most likely token is another one (top-1)
    membership: tuple[Row, ...]            # rows that keep another set of tokens (the KL's coarsening)
    max_logp: float                        # largest |difference| of a log-probability kept in both
    max_logp_at: tuple[int, int, int] | None   # (depth, row, token) where it is
    max_entropy: float
    max_next_logp: float

    @property
    def identical(self) -> bool:
        return not self.changed

    @property
    def depths(self) -> tuple[int, ...]:
        return tuple(sorted({d for d, _ in self.changed}))

    @property
    def grading_can_change(self) -> bool:
        """Whether some build could be graded differently against one than against the other: an
        argmax moved (top-1 agreement), a row keeps other tokens apart from its tail (the KL is over
        the kept tokens and the tail), or a figure moved by more than float64 rounding (KL, Δp). Tied
        tokens trading places inside the kept set change nothing a grading reads."""
        return bool(self.argmax_moved or self.membership) or max(
            self.max_logp, self.max_entropy, self.max_next_logp) > NEGLIGIBLE_NATS


def compare(pinned: TopK, captured: TopK, depths: Sequence[int]) -> Difference:
    """How ``captured`` differs from ``pinned`` (both [len(depths), rows, k] compact references of
    the same vocabulary; the longer is read to the shorter's k)."""
    if pinned.shape[:2] != captured.shape[:2] or pinned.vocab != captured.vocab:
        raise ValueError(f"cannot compare a {pinned.shape[:2]} reference of {pinned.vocab} tokens with a "
                         f"{captured.shape[:2]} one of {captured.vocab}")
    k = min(pinned.shape[2], captured.shape[2])
    changed, ties, moved, members = [], [], [], []
    worst, worst_at = 0.0, None
    nd, nr, _ = pinned.shape
    for d in range(nd):
        for r in range(nr):
            a_ids, a_lp = pinned.ids[d, r, :k], pinned.logp[d, r, :k]
            b_ids, b_lp = captured.ids[d, r, :k], captured.logp[d, r, :k]
            gap, token = _largest_gap(a_ids, a_lp, b_ids, b_lp)
            if gap > worst:
                worst, worst_at = gap, (int(depths[d]), r, token)
            same_ids = np.array_equal(a_ids, b_ids)
            same = (same_ids and np.array_equal(a_lp, b_lp) and pinned.entropy[d, r] == captured.entropy[d, r]
                    and pinned.next_logp[d, r] == captured.next_logp[d, r])
            if same:
                continue
            here = (int(depths[d]), r)
            changed.append(here)
            if not same_ids and _only_ties_moved(a_ids, a_lp, b_ids, b_lp):
                ties.append(here)
            if int(a_ids[0]) != int(b_ids[0]):
                moved.append(here)
            if set(a_ids.tolist()) != set(b_ids.tolist()):
                members.append(here)
    return Difference(k=k, rows=nd * nr, changed=tuple(changed), ties_only=tuple(ties), argmax_moved=tuple(moved),
                      membership=tuple(members),
                      max_logp=worst, max_logp_at=worst_at,
                      max_entropy=float(np.max(np.abs(pinned.entropy - captured.entropy))),
                      max_next_logp=float(np.max(np.abs(pinned.next_logp - captured.next_logp))))


def _largest_gap(a_ids: np.ndarray, a_lp: np.ndarray, b_ids: np.ndarray, b_lp: np.ndarray) -> tuple[float, int]:
    """The largest |log p| difference over tokens both rows keep, and its token (-1 if none shared)."""
    common, ia, ib = np.intersect1d(a_ids, b_ids, assume_unique=True, return_indices=True)
    if common.size == 0:
        return 0.0, -1
    gaps = np.abs(a_lp[ia] - b_lp[ib])
    i = int(np.argmax(gaps))
    return float(gaps[i]), int(common[i])


def _only_ties_moved(a_ids: np.ndarray, a_lp: np.ndarray, b_ids: np.ndarray, b_lp: np.ndarray) -> bool:
    """Same log-probabilities position by position, the ids differing only within groups of equal
    value (the last group may hold other members: its ties run on past k)."""
    if not np.array_equal(a_lp, b_lp):
        return False
    values = np.unique(a_lp)
    last = a_lp[-1]
    return all(v == last or set(a_ids[a_lp == v].tolist()) == set(b_ids[b_lp == v].tolist()) for v in values)
