"""The kinds of round, one module each: ``compare`` (a round: main against a candidate),
``noise`` (main against itself), ``sweep`` (both servers over load levels), ``bisect`` (a step of a
bisection: a midpoint against the good end), ``matrix`` (a round over every cell of a profile's
[matrix]). A kind owns what
differs (which builds, what is timed, what is decided, what is sealed, what the plan shows); the
runner calls its hooks and never asks which kind it runs. A new kind is a new module here."""
from .base import Kind, TimedOutputs
from .bisect import Bisect
from .compare import Compare
from .matrix import Matrix
from .noise import Noise

# the kinds a journal can name and a round be resumed as (a sweep is run again, not resumed)
BY_NAME: dict[str, type[Kind]] = {k.name: k for k in (Compare, Noise, Bisect, Matrix)}


def named(name: str) -> Kind:
    """The kind a plan or receipt names."""
    try:
        return BY_NAME[name]()
    except KeyError:
        raise ValueError(f"no kind of round named {name!r} (expected one of {sorted(BY_NAME)})") from None


__all__ = ["BY_NAME", "Bisect", "Compare", "Kind", "Matrix", "Noise", "TimedOutputs", "named"]
