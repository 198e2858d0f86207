"""What `console bisect` is asked to bisect: the range's items, and the profile scoring the metric."""
from __future__ import annotations

from dataclasses import replace

from ..engine import ranges, sources
from ..errors import UsageError
from ..profile import Profile


def with_metric(p: Profile, metric: str | None) -> Profile:
    """``p`` scoring ``metric``: one the profile already measures (its bench metric or a guard's)."""
    if not metric or metric == p.bench.metric:
        return p
    known = sorted({p.bench.metric, *(g.metric for g in p.gate.guards if g.metric)})
    if metric not in known:
        raise UsageError(f"--metric {metric}: {p.path} measures {', '.join(known)}",
                         "Give one of those (a profile's bench command prints only the metrics it declares).")
    return replace(p, bench=replace(p.bench, metric=metric))


def items_of(p: Profile, given_range: str | None, good: str | None, bad: str | None) -> list[ranges.Item]:
    """The range's items, good end first: from ``REPO@A..B`` / ``pypi:NAME==A..B``, or from two ends."""
    if given_range and (good or bad):
        raise UsageError("give a RANGE or --good and --bad, not both", "E.g. REPO@GOOD..BAD.")
    if given_range:
        if not ranges.is_range(given_range):
            raise UsageError(f"{given_range!r} is not a range", "Write REPO@GOOD..BAD or pypi:NAME==GOOD..BAD.")
        return ranges.resolve(given_range, p.source)
    if good and bad:
        ends = [sources.parse_spec(x, p.source) for x in (good, bad)]
        if any(isinstance(e, tuple) for e in ends):
            raise UsageError("a patch has no place in an ordered range", "Give commits, releases or directories.")
        return ranges.between(ends[0], ends[1], p.source)       # type: ignore[arg-type]
    raise UsageError("say what to bisect: a RANGE, or --good and --bad",
                     "E.g. `console bisect --profile demo REPO@GOOD..BAD`.")
