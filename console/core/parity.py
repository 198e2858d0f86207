"""Next-token parity: KL(p_ref ‖ p_cand), top-1 agreement, entropy, per-depth status.

Everything here is computed in float64 on small chunks (one row of the vocabulary
at a time), so a memory-mapped float32 file is never copied whole. Inputs may be
raw logits or log-probabilities: every figure is shift-invariant per row, which is
what makes log-softmax the identity on log-probabilities.

Per row, with dx = x - max(x), dy = y - max(y), e = exp(dx), s_x = Σe, s_y = Σexp(dy):

    p            = e / s_x
    H(p_ref)     = log s_x - Σ p·dx
    KL(p ‖ q)    = Σ p·(dx - dy) - (log s_x - log s_y)

Taking the dot product with (dx - dy) rather than subtracting two large sums keeps
the cancellation first-order small, so a KL of 1e-9 is still resolved.
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from console.core.rules import GateRules
from console.core.verdict import Reason


class ParityInputError(ValueError):
    """A logits array that cannot be graded (shape, dtype, non-finite values)."""


# --- figures ---------------------------------------------------------------

@dataclass(frozen=True)
class DepthFigures:
    depth: int
    top1: float          # share of rows whose argmax agrees with the reference
    kl: float            # mean forward KL(p_ref ‖ p_cand) over rows, nats
    ref_entropy: float   # mean entropy of the reference rows, nats
    max_entropy: float   # log(V): the entropy of a uniform distribution

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "DepthFigures":
        return cls(depth=int(d["depth"]), top1=float(d["top1"]), kl=float(d["kl"]),
                   ref_entropy=float(d["ref_entropy"]), max_entropy=float(d["max_entropy"]))


@dataclass(frozen=True)
class RowGrade:
    kl: float
    top1: float          # 1.0 when the argmax agrees, else 0.0
    ref_entropy: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DepthStatus:
    """One depth graded against the rules (and against main, for the ratchet)."""
    depth: int
    status: str                          # "pass" | "fail" | "regressed" | "uncheckable"
    drift: float | None                  # cand kl / main kl; None when main is unknown or 0 < cand
    reasons: tuple[Reason, ...] = field(default_factory=tuple)

    @property
    def checkable(self) -> bool:
        return self.status != "uncheckable"


# --- log-softmax -------------------------------------------------------------

def log_softmax(x: Any, axis: int = -1) -> np.ndarray:
    """Stable log-softmax in float64 (the identity, up to rounding, on log-probabilities)."""
    a = np.asarray(x, dtype=np.float64)
    m = np.max(a, axis=axis, keepdims=True)
    d = a - m
    return d - np.log(np.sum(np.exp(d), axis=axis, keepdims=True))


# --- validation --------------------------------------------------------------

def _as_grid(arr: Any, name: str, n_depths: int, rows: int, vocab: int) -> np.ndarray:
    """View ``arr`` as [depths, rows, vocab] without copying, or say precisely why not."""
    if not isinstance(arr, np.ndarray):
        arr = np.asarray(arr)
    if not np.issubdtype(arr.dtype, np.floating):
        raise ParityInputError(f"{name}: expected floating-point logits (float32 or float64), got dtype {arr.dtype}")
    expected = f"[{n_depths}, {rows}, {vocab}]" + (f" or [{n_depths}, {vocab}]" if rows == 1 else "")
    if arr.ndim == 2 and rows == 1:
        arr = arr[:, None, :]
    if arr.ndim != 3:
        raise ParityInputError(f"{name}: expected shape {expected}, got {list(arr.shape)} ({arr.ndim}-D)")
    d, r, v = arr.shape
    if v != vocab:
        raise ParityInputError(f"{name}: vocabulary size {v}, expected {vocab} (shape {list(arr.shape)})")
    if d < n_depths:
        raise ParityInputError(f"{name}: {d} depth rows for {n_depths} depths: missing depths "
                               f"(expected shape {expected}, got {list(arr.shape)})")
    if d > n_depths:
        raise ParityInputError(f"{name}: {d} depth rows for {n_depths} depths "
                               f"(expected shape {expected}, got {list(arr.shape)})")
    if r != rows:
        raise ParityInputError(f"{name}: {r} rows per depth, expected {rows} (shape {list(arr.shape)})")
    return arr


def _non_finite_message(name: str, row: np.ndarray, depth: int | None, r: int | None) -> str:
    bad = ~np.isfinite(row)
    first = int(np.argmax(bad))
    kinds = []
    if np.isnan(row).any():
        kinds.append("NaN")
    if np.isposinf(row).any():
        kinds.append("+inf")
    if np.isneginf(row).any():
        kinds.append("-inf")
    where = f"depth {depth}, row {r}" if depth is not None else "row"
    return (f"{name}: {' and '.join(kinds)} at {where} ({int(bad.sum())} values, first at token {first}); "
            "logits must be finite")


# --- the per-row kernel --------------------------------------------------------

# Rows are processed in slices of this many tokens so the three float64 scratch
# slices (3 x 512 KiB) stay in a core's L2 cache while every pass runs over them.
_CHUNK = 65_536


class _Buffers:
    """Three float64 scratch slices, reused for every row a worker grades."""

    def __init__(self, vocab: int):
        n = min(vocab, _CHUNK)
        self.dx = np.empty(n, dtype=np.float64)
        self.dy = np.empty(n, dtype=np.float64)
        self.e = np.empty(n, dtype=np.float64)


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    # einsum runs numpy's own single-threaded loop; BLAS dot would start its own
    # threads and fight the row workers for the same cores.
    return float(np.einsum("i,i->", a, b))


def _grade_one(x: np.ndarray, y: np.ndarray, buf: _Buffers) -> tuple[float, bool, float] | None:
    """(kl, argmax agrees, ref entropy) of one row pair; None if any input is non-finite.

    Non-finite values need no separate pass: NaN/+inf poison the max, and -inf
    poisons Σ e·dx (0·-inf) or Σ e·(dx-dy) (+inf), so a non-finite result is the signal.
    """
    ix, iy = int(np.argmax(x)), int(np.argmax(y))
    mx, my = float(x[ix]), float(y[iy])     # the argmax gives the max for free
    s_x = s_y = e_dx = e_diff = 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        for lo in range(0, x.shape[0], _CHUNK):
            xs, ys = x[lo:lo + _CHUNK], y[lo:lo + _CHUNK]
            n = xs.shape[0]
            dx, dy, e = buf.dx[:n], buf.dy[:n], buf.e[:n]
            # dtype=float64 makes the subtraction itself float64, not a float32 result widened.
            np.subtract(xs, mx, out=dx, dtype=np.float64)
            np.subtract(ys, my, out=dy, dtype=np.float64)
            np.exp(dx, out=e)
            s_x += float(e.sum())
            e_dx += _dot(e, dx)
            np.subtract(dx, dy, out=dx)          # dx := dx - dy
            e_diff += _dot(e, dx)
            np.exp(dy, out=dy)
            s_y += float(dy.sum())
    if not all(math.isfinite(v) for v in (mx, my, s_x, s_y, e_dx, e_diff)):
        return None
    log_sx, log_sy = math.log(s_x), math.log(s_y)
    kl = e_diff / s_x - (log_sx - log_sy)
    entropy = log_sx - e_dx / s_x
    return max(kl, 0.0), ix == iy, max(entropy, 0.0)   # rounding can dip a hair below 0


def grade_row(ref_row: Any, cand_row: Any) -> RowGrade:
    """The scored-path check: one [vocab] vector against the reference row at that depth."""
    ref = np.asarray(ref_row)
    cand = np.asarray(cand_row)
    for name, a in (("reference row", ref), ("candidate row", cand)):
        if not np.issubdtype(a.dtype, np.floating):
            raise ParityInputError(f"{name}: expected floating-point logits, got dtype {a.dtype}")
        if a.ndim != 1:
            raise ParityInputError(f"{name}: expected a [vocab] vector, got shape {list(a.shape)}")
    if ref.shape != cand.shape:
        raise ParityInputError(f"candidate row: vocabulary size {cand.shape[0]}, expected {ref.shape[0]}")
    if ref.shape[0] < 2:
        raise ParityInputError(f"reference row: expected a vocabulary of at least 2, got {ref.shape[0]}")
    got = _grade_one(ref, cand, _Buffers(ref.shape[0]))
    if got is None:
        for name, a in (("reference row", ref), ("candidate row", cand)):
            if not np.isfinite(a).all():
                raise ParityInputError(_non_finite_message(name, a, None, None))
    kl, agree, entropy = got  # type: ignore[misc]
    return RowGrade(kl=kl, top1=1.0 if agree else 0.0, ref_entropy=entropy)


def _grade_rows(ref: np.ndarray, cand: np.ndarray, cells: Sequence[tuple[int, int]],
                depths: Sequence[int]) -> list[tuple[float, bool, float]]:
    buf = _Buffers(ref.shape[2])
    out = []
    for d, r in cells:
        got = _grade_one(ref[d, r], cand[d, r], buf)
        if got is None:
            for name, a in (("reference logits", ref), ("candidate logits", cand)):
                row = np.asarray(a[d, r])
                if not np.isfinite(row).all():
                    raise ParityInputError(_non_finite_message(name, row, depths[d], r))
        out.append(got)  # type: ignore[arg-type]
    return out


def grade_logits(ref: Any, cand: Any, depths: Sequence[int], rows: int, vocab: int,
                 workers: int = 2) -> list[DepthFigures]:
    """Per-depth figures of ``cand`` against ``ref`` (both [depths, rows, vocab]).

    Rows are graded in ``workers`` threads (numpy releases the GIL in its loops); each
    row is computed identically whatever the split, and rows are averaged in a fixed
    order, so the result does not depend on ``workers``.
    """
    depths = [int(d) for d in depths]
    if not depths:
        raise ParityInputError("no depths to grade")
    if rows < 1 or vocab < 2:
        raise ParityInputError(f"expected rows >= 1 and vocab >= 2, got rows={rows}, vocab={vocab}")
    r_grid = _as_grid(ref, "reference logits", len(depths), rows, vocab)
    c_grid = _as_grid(cand, "candidate logits", len(depths), rows, vocab)

    cells = [(d, r) for d in range(len(depths)) for r in range(rows)]
    workers = max(1, min(int(workers), len(cells)))
    # Contiguous blocks keep each worker's reads sequential in the mapped file.
    size = -(-len(cells) // workers)
    blocks = [cells[i:i + size] for i in range(0, len(cells), size)]
    if len(blocks) == 1:
        results = _grade_rows(r_grid, c_grid, blocks[0], depths)
    else:
        with ThreadPoolExecutor(max_workers=len(blocks)) as pool:
            parts = list(pool.map(lambda b: _grade_rows(r_grid, c_grid, b, depths), blocks))
        results = [x for part in parts for x in part]

    max_entropy = math.log(vocab)
    figures = []
    for i, depth in enumerate(depths):
        chunk = results[i * rows:(i + 1) * rows]
        figures.append(DepthFigures(
            depth=depth,
            top1=sum(1 for _, agree, _ in chunk if agree) / rows,
            kl=math.fsum(kl for kl, _, _ in chunk) / rows,
            ref_entropy=math.fsum(h for _, _, h in chunk) / rows,
            max_entropy=max_entropy,
        ))
    return figures


# --- status against the rules ------------------------------------------------------

def _fmt(x: float) -> str:
    return f"{x:.3g}"


def _reason(code: str, depth: int, figure: str, value: float, bar: float, message: str) -> Reason:
    return Reason(code, message, depth=depth, figure=figure, bar=bar, value=value)


def drift_ratio(cand_kl: float, main_kl: float | None) -> float | None:
    """cand/main KL at one depth; 1.0 when both are exactly 0, None when undefined."""
    if main_kl is None:
        return None
    if main_kl > 0:
        return cand_kl / main_kl
    return 1.0 if cand_kl == 0 else None


def is_uncheckable(fig: DepthFigures, rules: GateRules) -> bool:
    """A near-uniform reference cannot reveal a wiring fault through top-1 or small KL."""
    return fig.ref_entropy >= rules.uncheckable_entropy * fig.max_entropy


def depth_status(cand: DepthFigures, main: DepthFigures | None, rules: GateRules) -> DepthStatus:
    """Grade one depth: absolute bars first, then the ratchet with its floor.

    A near-uniform reference makes top-1 meaningless and hides small drifts, so such
    a depth is "uncheckable" — unless its KL is over the bar anyway: a large divergence
    from even a near-uniform reference is real evidence, so that still fails.
    """
    d = cand.depth
    reasons: list[Reason] = []
    drift = drift_ratio(cand.kl, main.kl if main is not None else None)
    kl_over = cand.kl > rules.kl_max
    if kl_over:
        reasons.append(_reason("parity-kl", d, "kl", cand.kl, rules.kl_max,
                               f"depth {d}: mean KL {_fmt(cand.kl)} nats > bar {_fmt(rules.kl_max)}"))
    if is_uncheckable(cand, rules):
        if kl_over:
            return DepthStatus(d, "fail", drift, tuple(reasons))
        return DepthStatus(d, "uncheckable", drift, ())
    if cand.top1 < rules.top1_min:
        reasons.append(_reason("parity-top1", d, "top1", cand.top1, rules.top1_min,
                               f"depth {d}: top-1 agreement {cand.top1:.3f} < bar {rules.top1_min:.3f}"))
    if reasons:
        return DepthStatus(d, "fail", drift, tuple(reasons))
    # The floor: below the absolute bar a ratio is never a regression.
    if main is not None and cand.kl >= rules.kl_max and cand.kl >= rules.ratchet * main.kl:
        ratio = "∞" if drift is None else f"{drift:.2f}"
        reasons.append(_reason("parity-ratchet", d, "kl", cand.kl, rules.ratchet * main.kl,
                               f"depth {d}: mean KL {_fmt(cand.kl)} nats is at the bar {_fmt(rules.kl_max)} "
                               f"and {ratio}x main's {_fmt(main.kl)} (ratchet {rules.ratchet:g}x)"))
        return DepthStatus(d, "regressed", drift, tuple(reasons))
    return DepthStatus(d, "pass", drift, ())


def worst_depth(figures: Sequence[DepthFigures], rules: GateRules) -> int | None:
    """The checkable depth with the highest KL (ties: lowest top-1, then deepest)."""
    # An uncheckable depth that fails on KL anyway is graded like any other.
    checkable = [f for f in figures if not is_uncheckable(f, rules) or f.kl > rules.kl_max]
    if not checkable:
        return None
    return max(checkable, key=lambda f: (f.kl, -f.top1, f.depth)).depth
