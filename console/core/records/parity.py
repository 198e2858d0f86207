"""Next-token parity: KL(p_ref ‖ p_cand), top-1 agreement, entropy, per-depth status.

Per depth, besides the mean KL and top-1 the gate judges, the distribution of the rows
is reported (``KLStats``, as llama-perplexity's KL-divergence report gives it): the
standard errors, the KL quantiles and maximum, and the RMS of Δp, the change in the
probability of the token the document really has next.

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
from typing import Any, Callable, Sequence

import numpy as np

from console.core.records.figures import finite, shown
from console.core.records.rules import GateRules
from console.core.records.verdict import Reason


class ParityInputError(ValueError):
    """A logits array that cannot be graded (shape, dtype, non-finite values)."""


# --- figures ---------------------------------------------------------------

# The KL quantiles reported per depth, by field name.
KL_QUANTILES = {"kl_median": 0.5, "kl_p90": 0.90, "kl_p95": 0.95, "kl_p99": 0.99, "kl_p999": 0.999}


@dataclass(frozen=True)
class KLStats:
    """How one depth's rows are spread: reported beside the gated mean KL and top-1, never gated.

    The mean KL and the top-1 agreement themselves are ``DepthFigures.kl`` and ``.top1``.
    """
    rows: int                 # rows graded at this depth (n)
    kl_se: float | None       # standard error of the mean KL, nats; None with one row
    kl_median: float          # KL quantiles over the rows, nats
    kl_p90: float
    kl_p95: float
    kl_p99: float
    kl_p999: float
    kl_max: float             # the largest row KL, nats
    top1_se: float            # binomial standard error of top-1 agreement, sqrt(p(1-p)/n)
    rms_dp: float | None      # RMS of Δp = p_cand(t) - p_ref(t), t the document's next token; probability
    dp_rows: int              # rows with a next token in the document (rms_dp's n); 0: rms_dp is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "KLStats":
        opt = lambda k: None if d.get(k) is None else float(d[k])  # noqa: E731
        return cls(rows=int(d["rows"]), kl_se=opt("kl_se"),
                   **{k: float(d[k]) for k in (*KL_QUANTILES, "kl_max", "top1_se")},
                   rms_dp=opt("rms_dp"), dp_rows=int(d.get("dp_rows") or 0))


def kl_stats(kl: Sequence[float], agree: Sequence[bool], dp: Sequence[float | None]) -> KLStats:
    """The spread of one depth's rows: per-row KL (nats), argmax agreement, and Δp (None for a
    row whose next token the document does not hold)."""
    k = np.asarray(kl, dtype=np.float64)
    n = int(k.size)
    if n == 0:
        raise ParityInputError("no rows to summarise")
    # numpy's default method "linear" (Hyndman & Fan type 7): interpolates between the two
    # nearest order statistics, so every quantile lies within [min, max] and rises with q.
    q = np.quantile(k, list(KL_QUANTILES.values()), method="linear")
    p = sum(1 for a in agree if a) / n
    d = np.asarray([x for x in dp if x is not None], dtype=np.float64)
    return KLStats(
        rows=n,
        # the sample SD (ddof=1) over sqrt(n), as llama-perplexity reports the mean's uncertainty
        kl_se=float(np.std(k, ddof=1) / math.sqrt(n)) if n > 1 else None,
        **{name: float(v) for name, v in zip(KL_QUANTILES, q)},
        kl_max=float(k.max()),
        top1_se=math.sqrt(p * (1.0 - p) / n),
        rms_dp=float(np.sqrt(np.mean(d * d))) if d.size else None,
        dp_rows=int(d.size),
    )


@dataclass(frozen=True)
class DepthFigures:
    depth: int
    top1: float          # share of rows whose argmax agrees with the reference
    kl: float            # mean forward KL(p_ref ‖ p_cand) over rows, nats
    ref_entropy: float   # mean entropy of the reference rows, nats
    max_entropy: float   # log(V): the entropy of a uniform distribution
    stats: KLStats | None = None   # the rows' spread; None in receipts that predate it

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.stats is None:
            del d["stats"]      # absent, as in receipts that predate it
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "DepthFigures":
        return cls(depth=int(d["depth"]), top1=float(d["top1"]), kl=float(d["kl"]),
                   ref_entropy=float(d["ref_entropy"]), max_entropy=float(d["max_entropy"]),
                   stats=KLStats.from_dict(d["stats"]) if d.get("stats") else None)


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
    status: str                          # one of STATUSES
    drift: float | None                  # cand kl / main kl; None when main is unknown or 0 < cand
    reasons: tuple[Reason, ...] = field(default_factory=tuple)   # why it fails (fail, regressed)
    warning: Reason | None = None        # "drift": legal, but moving away from main (never a rejection)

    @property
    def checkable(self) -> bool:
        return self.status != "uncheckable"

    @property
    def passing(self) -> bool:
        return self.status in PASSING

    @property
    def messages(self) -> list[str]:
        """What a reader is told about this depth: its failures, or its drift warning."""
        return [r.message for r in self.reasons] + ([self.warning.message] if self.warning else [])


# Every grade a depth can get. "drift" passes: it is under every bar, but it moved from main
# by more than the ratchet and more than the drift floor, so it is shown as a warning.
# "adjudicated" passes: its KL was borderline and console.core.records.adjudication settled it.
STATUSES = ("pass", "drift", "adjudicated", "uncheckable", "fail", "regressed")
PASSING = ("pass", "drift", "adjudicated", "uncheckable")


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


def _grade_one(x: np.ndarray, y: np.ndarray, buf: _Buffers,
               token: int = -1) -> tuple[float, bool, float, float | None] | None:
    """(kl, argmax agrees, ref entropy, Δp) of one row pair; None if any input is non-finite.

    Δp is p_cand(token) - p_ref(token), None when ``token`` is -1 (no next token known);
    it reuses the maxima and sums of the pass, so it costs two lookups.

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
    dp = None
    if token >= 0:
        dp = math.exp(float(y[token]) - my) / s_y - math.exp(float(x[token]) - mx) / s_x
    return max(kl, 0.0), ix == iy, max(entropy, 0.0), dp   # rounding can dip a hair below 0


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
    kl, agree, entropy, _ = got  # type: ignore[misc]
    return RowGrade(kl=kl, top1=1.0 if agree else 0.0, ref_entropy=entropy)


# One row's figures: (kl, argmax agrees, ref entropy, Δp or None).
RowFigures = tuple[float, bool, float, "float | None"]


def _dense_cells(ref: np.ndarray, cand: np.ndarray, depths: Sequence[int],
                 tokens: np.ndarray) -> Callable[[], Callable[[int, int], RowFigures]]:
    """Per worker, the grader of one cell (depth index, row) of two full logits grids."""
    def new_cell() -> Callable[[int, int], RowFigures]:
        buf = _Buffers(ref.shape[2])

        def cell(d: int, r: int) -> RowFigures:
            got = _grade_one(ref[d, r], cand[d, r], buf, int(tokens[d, r]))
            if got is None:
                for name, a in (("reference logits", ref), ("candidate logits", cand)):
                    row = np.asarray(a[d, r])
                    if not np.isfinite(row).all():
                        raise ParityInputError(_non_finite_message(name, row, depths[d], r))
            return got  # type: ignore[return-value]
        return cell
    return new_cell


def next_token_ids(doc: Sequence[int], depths: Sequence[int], rows: int) -> np.ndarray:
    """The document's own next token for every parity row, [depths, rows]; -1 past its end.

    Row r of depth d predicts the token after a prefix of d - rows + 1 + r tokens
    (docs/PROTOCOL.md), which is doc[d - rows + 1 + r].
    """
    out = np.full((len(depths), rows), -1, dtype=np.int64)
    for i, d in enumerate(depths):
        for r in range(rows):
            pos = int(d) - rows + 1 + r
            if 0 <= pos < len(doc):
                out[i, r] = int(doc[pos])
    return out


def token_grid(tokens: Any, n_depths: int, rows: int, vocab: int) -> np.ndarray:
    if tokens is None:
        return np.full((n_depths, rows), -1, dtype=np.int64)
    t = np.asarray(tokens)
    if t.shape != (n_depths, rows) or not np.issubdtype(t.dtype, np.integer):
        raise ParityInputError(f"next tokens: expected integer ids of shape [{n_depths}, {rows}], "
                               f"got {t.dtype} {list(t.shape)}")
    if t.size and (t.min() < -1 or t.max() >= vocab):
        raise ParityInputError(f"next tokens: ids must lie in [0, {vocab}) (or -1 for none)")
    return t


def grade_logits(ref: Any, cand: Any, depths: Sequence[int], rows: int, vocab: int,
                 workers: int = 2, next_tokens: Any = None) -> list[DepthFigures]:
    """Per-depth figures of ``cand`` against ``ref`` (both [depths, rows, vocab]).

    ``next_tokens`` ([depths, rows], ``next_token_ids``) gives each row's true next token
    for Δp; without it RMS Δp is not reported. Rows are graded in ``workers`` threads (numpy
    releases the GIL in its loops); each row is computed identically whatever the split,
    and rows are averaged in a fixed order, so the result does not depend on ``workers``.
    """
    depths = check_grid_args(depths, rows, vocab)
    r_grid = _as_grid(ref, "reference logits", len(depths), rows, vocab)
    c_grid = _as_grid(cand, "candidate logits", len(depths), rows, vocab)
    tokens = token_grid(next_tokens, len(depths), rows, vocab)
    return grade_grid(_dense_cells(r_grid, c_grid, depths, tokens), depths, rows, vocab, workers)


def check_grid_args(depths: Sequence[int], rows: int, vocab: int) -> list[int]:
    depths = [int(d) for d in depths]
    if not depths:
        raise ParityInputError("no depths to grade")
    if rows < 1 or vocab < 2:
        raise ParityInputError(f"expected rows >= 1 and vocab >= 2, got rows={rows}, vocab={vocab}")
    return depths


def grade_grid(new_cell: Callable[[], Callable[[int, int], RowFigures]], depths: Sequence[int], rows: int,
               vocab: int, workers: int = 2) -> list[DepthFigures]:
    """Every cell graded by ``new_cell()``'s grader (one per worker), summed up per depth: the one
    place the per-depth figures are made, whatever the reference's form."""
    cells = [(d, r) for d in range(len(depths)) for r in range(rows)]
    workers = max(1, min(int(workers), len(cells)))
    # Contiguous blocks keep each worker's reads sequential in the mapped file.
    size = -(-len(cells) // workers)
    blocks = [cells[i:i + size] for i in range(0, len(cells), size)]

    def run(block: Sequence[tuple[int, int]]) -> list[RowFigures]:
        cell = new_cell()
        return [cell(d, r) for d, r in block]
    if len(blocks) == 1:
        results = run(blocks[0])
    else:
        with ThreadPoolExecutor(max_workers=len(blocks)) as pool:
            results = [x for part in pool.map(run, blocks) for x in part]

    max_entropy = math.log(vocab)
    figures = []
    for i, depth in enumerate(depths):
        kls, agrees, entropies, dps = zip(*results[i * rows:(i + 1) * rows])
        figures.append(DepthFigures(
            depth=depth,
            top1=sum(1 for agree in agrees if agree) / rows,
            kl=math.fsum(kls) / rows,
            ref_entropy=math.fsum(entropies) / rows,
            max_entropy=max_entropy,
            stats=kl_stats(kls, agrees, dps),
        ))
    return figures


# --- status against the rules ------------------------------------------------------

def _fmt(x: float) -> str:
    return f"{x:.3g}"


def _reason(code: str, depth: int, figure: str, value: float | None, bar: float | None, message: str) -> Reason:
    return Reason(code, message, depth=depth, figure=figure, bar=bar, value=value)


def drift_ratio(cand_kl: float, main_kl: float | None) -> float | None:
    """cand/main KL at one depth; 1.0 when both are exactly 0, None when undefined."""
    if main_kl is None:
        return None
    if main_kl > 0:
        return cand_kl / main_kl
    return 1.0 if cand_kl == 0 else None


def is_uncheckable(fig: DepthFigures, rules: GateRules) -> bool:
    """A near-uniform reference cannot reveal a wiring fault through top-1 or small KL (an
    entropy that is not a finite number excuses nothing)."""
    return (finite(fig.ref_entropy) and finite(fig.max_entropy)
            and fig.ref_entropy >= rules.uncheckable_entropy * fig.max_entropy)


# Every figure of a depth a bar reads: the gated two, and the entropies that may excuse a depth.
GRADED = {"kl": "mean KL", "top1": "top-1 agreement", "ref_entropy": "reference entropy",
          "max_entropy": "maximum entropy"}


def not_finite(fig: DepthFigures, rules: GateRules) -> list[Reason]:
    """A depth whose figures are not all finite numbers fails, each such figure named: a
    comparison with NaN is never true, so no bar could reject it otherwise."""
    bars = {"kl": rules.kl_max, "top1": rules.top1_min}
    return [_reason("parity-not-finite", fig.depth, name, None, bars.get(name),
                    f"depth {fig.depth}: {what} is {shown(getattr(fig, name))}, not a finite number: "
                    "it cannot pass its bar")
            for name, what in GRADED.items() if not finite(getattr(fig, name))]


def depth_status(cand: DepthFigures, main: DepthFigures | None, rules: GateRules) -> DepthStatus:
    """Grade one depth: absolute bars first, then the ratchet with its floor.

    A near-uniform reference makes top-1 meaningless and hides small drifts, so such
    a depth is "uncheckable" — unless its KL is over the bar anyway: a large divergence
    from even a near-uniform reference is real evidence, so that still fails.
    """
    d = cand.depth
    if bad := not_finite(cand, rules):
        return DepthStatus(d, "fail", None, tuple(bad))
    if main is not None and not_finite(main, rules):
        main = None         # main's gap: the ratchet cannot apply (main's own grade says why)
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
        reasons.append(_reason("parity-ratchet", d, "kl", cand.kl, rules.ratchet * main.kl,
                               f"depth {d}: mean KL {_fmt(cand.kl)} nats is at the bar {_fmt(rules.kl_max)}, "
                               f"{versus_main(drift, main.kl)} (ratchet {rules.ratchet:g}x)"))
        return DepthStatus(d, "regressed", drift, tuple(reasons))
    if main is not None and is_drifting(cand.kl, main.kl, rules):
        return DepthStatus(d, "drift", drift, (), _reason(
            "parity-drift", d, "kl", cand.kl, rules.drift_floor,
            f"depth {d}: drifting from main: mean KL {_fmt(cand.kl)} nats, {versus_main(drift, main.kl)} "
            f"(under the bar {_fmt(rules.kl_max)}, so legal; reported from {_fmt(rules.drift_floor)} nats)"))
    return DepthStatus(d, "pass", drift, ())


def versus_main(drift: float | None, main_kl: float | None = None) -> str:
    """A KL against main's, as said to people: "26,000x main's 1.1e-06", "2.50x main's" (without
    ``main_kl``), or "main 0" where main's KL is exactly zero (a reference captured from main's own
    release): a ratio to zero says nothing."""
    if drift is None:
        return "main 0"
    ratio = f"{drift:,.0f}x" if drift >= 10 else f"{drift:.2f}x"
    return f"{ratio} main's" if main_kl is None else f"{ratio} main's {_fmt(main_kl)}"


def is_drifting(cand_kl: float, main_kl: float, rules: GateRules) -> bool:
    """Legal drift worth a warning: at least the drift floor in absolute terms (a ratio of two
    tiny KLs is rounding, not drift) and at least the ratchet's multiple of main's KL."""
    return cand_kl >= rules.drift_floor and cand_kl >= rules.ratchet * main_kl


def worst_depth(figures: Sequence[DepthFigures], rules: GateRules) -> int | None:
    """The checkable depth with the highest KL (ties: lowest top-1, then deepest); a depth whose
    figures are not finite numbers is the worst of all."""
    # An uncheckable depth that fails on KL anyway is graded like any other.
    checkable = [f for f in figures if not is_uncheckable(f, rules) or not f.kl <= rules.kl_max]
    if not checkable:
        return None
    broken = [f for f in checkable if not_finite(f, rules)]
    if broken:
        return max(f.depth for f in broken)
    return max(checkable, key=lambda f: (f.kl, -f.top1, f.depth)).depth
