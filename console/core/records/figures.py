"""What a figure must be before a bar may read it: a finite number.

Every comparison with NaN is false, so a bar written ``value > bar`` lets NaN through, and
``value < bar`` lets -inf through. The gate therefore asks ``finite`` first, everywhere a bar
is read, and fails the figure (the candidate's), leaves it out as a gap (the console's own
clock) or refuses the file (the rules and pins the round was decided under) when it is not.
"""
from __future__ import annotations

import math
from typing import Any


def finite(x: Any) -> bool:
    """A real number that is neither NaN nor infinite (booleans are not figures)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def shown(x: Any) -> str:
    """How a figure that is not a finite number is named in a message."""
    if x is None:
        return "missing"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return f"{x!r} (not a number)"
    if math.isnan(x):
        return "NaN"
    return "+inf" if x > 0 else "-inf"
