"""Float64 exp, log and sums whose bits are the same on every node: what a pinned reference is
computed with.

numpy's ``exp`` and ``einsum`` pick their code at run time by the CPU (numpy has its own AVX-512
``exp`` for float64, other CPUs get the C library's) and change with numpy's version, each a last
bit apart; a reference captured from the very same logits then hashes differently on two nodes,
and its pin holds on one of them only. Here every elementwise step is one IEEE-754 operation
(subtract, multiply, add, ``rint``, ``ldexp``: correctly rounded, so the same on any CPU and at any
vector width), sums add halves elementwise until one number is left (a fixed order, whatever
numpy's own reductions do), and the few logarithms of a row's sums are taken in decimal
arithmetic, which is software.
"""
from __future__ import annotations

import decimal
import math

import numpy as np

# ln 2 split so that k * LN2_HI is exact for |k| < 2**20 (its low 21 bits are zero: fdlibm's split)
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
INV_LN2 = 1.44269504088896338700e+00
# Taylor coefficients of e**r up to r**13: on |r| <= ln2 / 2 the truncation is under 2e-18, relative
_TAYLOR = tuple(1.0 / math.factorial(i) for i in range(14))
# below this every exp underflows to 0 in float64 (e**-745 is the smallest subnormal)
_FLOOR = -800.0
_DECIMAL = decimal.Context(prec=34, rounding=decimal.ROUND_HALF_EVEN)


def exp(x: np.ndarray) -> np.ndarray:
    """e**x elementwise, float64, for x <= 0 (-inf gives 0): within 1 ulp of the true value and
    bit-identical on every CPU. x = k ln2 + r with |r| <= ln2/2, e**r by Horner, times 2**k."""
    x = np.maximum(np.asarray(x, dtype=np.float64), _FLOOR)
    k = np.rint(x * INV_LN2)
    r = (x - k * LN2_HI) - k * LN2_LO
    p = np.full_like(r, _TAYLOR[-1])
    for c in _TAYLOR[-2::-1]:
        p *= r
        p += c
    return np.ldexp(p, k.astype(np.int32))


def log(s: float) -> float:
    """The natural log of one positive float, correctly rounded from 34 decimal digits."""
    if not (s > 0 and math.isfinite(s)):
        raise ValueError(f"log of {s!r}")
    return float(_DECIMAL.ln(decimal.Decimal(s)))


def total(a: np.ndarray) -> float:
    """The sum of a float64 vector in a fixed order: zero-padded to a power of two, then its two
    halves added elementwise until one number is left (pairwise summation's accuracy, and only
    elementwise adds, whose results no CPU or numpy version changes)."""
    v = np.asarray(a, dtype=np.float64).ravel()
    if v.size == 0:
        return 0.0
    n = 1 << (v.size - 1).bit_length()
    if n != v.size:
        v = np.concatenate([v, np.zeros(n - v.size)])
    while v.size > 1:
        half = v.size // 2
        v = v[:half] + v[half:]
    return float(v[0])
