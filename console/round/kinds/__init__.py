"""The kinds of round's run-time hooks, one module each: ``compare`` (a round: main against a
candidate), ``noise`` (main against itself), ``sweep`` (both servers over load levels), ``bisect`` (a
step of a bisection: a midpoint against the good end), ``matrix`` (a round over every cell of a
profile's [matrix]). A kind owns what differs at run time (which builds, what is timed, what is
sealed, what the plan shows); what it means is its record in ``console.core.records.kinds``. The
runner calls its hooks and never asks which kind it runs.

A new kind is its record in core, a module here, and one line in ``BY_NAME``."""
from .base import Kind, TimedOutputs
from .bisect import Bisect
from .compare import Compare
from .matrix import Matrix
from .noise import Noise
from .sweep import Sweep

BY_NAME: dict[str, type[Kind]] = {k.record.name: k for k in (Compare, Noise, Bisect, Matrix, Sweep)}


def named(name: str, **options) -> Kind:
    """The kind a plan, receipt or command names, with its options (a sweep's levels)."""
    try:
        return BY_NAME[name](**options)
    except KeyError:
        raise ValueError(f"no kind of round named {name!r} (expected one of {sorted(BY_NAME)})") from None


__all__ = ["BY_NAME", "Bisect", "Compare", "Kind", "Matrix", "Noise", "Sweep", "TimedOutputs", "named"]
