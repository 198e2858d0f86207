"""A profile's [matrix]: the axes of a matrix round, which cells are guarded, and the verdict's rule
(console.core.records.matrix says how cells are decided and how one verdict comes from them)."""
from __future__ import annotations

import itertools
import re
from typing import Annotated, Any, Literal

from pydantic import model_validator

from ..core.records.matrix import Cell, MatrixSpec, cell_key
from .checks import Int, Str, Table, key, refuse

# What a cell may set: the rep's shape, the placeholders the console fills with a default, and a
# serving cell's load (requests in flight, and an arrival rate: 0 is a closed loop at the cap).
FIELDS = ("depth", "tokens", "metric", "threads", "fill", "concurrency", "rate")
BENCH_FIELDS = FIELDS[:5]
SERVING_FIELDS = ("concurrency", "rate")
Scalar = Int | float | Str
AxisValue = Scalar | dict[str, Scalar]


class AxisTable(Table):
    name: Annotated[Str, key("the axis: a bench field (depth, tokens, metric, threads, fill) or any name whose "
                             "values are tables of fields")]
    values: Annotated[tuple[AxisValue, ...], key(
        "its values: numbers or words set the field the axis names; a table sets several fields and "
        "names itself with `label` (llama-bench's pp512 = { label = \"pp512\", metric = \"prefill_tok_s\", "
        "tokens = 512 })")]

    @model_validator(mode="after")
    def _values(self) -> AxisTable:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise refuse("expected a lower-case name (letters, digits, _): it names the cell's lock slot", "name")
        if not self.values:
            raise refuse("expected at least one value", "values")
        for v in self.values:
            if isinstance(v, dict):
                if not isinstance(v.get("label"), str) or not v["label"]:
                    raise refuse("expected each table value to name itself with a `label`", "values")
                if bad := sorted(set(v) - {"label", *FIELDS}):
                    raise refuse(f"expected fields among {', '.join(FIELDS)}, got {', '.join(bad)}", "values")
            elif self.name not in FIELDS:
                raise refuse(f"expected tables (with a `label`) for the axis {self.name!r}, which is not a bench "
                             f"field ({', '.join(FIELDS)})", "values")
        for v in self.values:
            for k, x in _fields_of(self.name, v).items():
                if (bad := _field_problem(k, x)) is not None:
                    raise refuse(bad, "values")
        labels = [label_of(v) for v in self.values]
        if len(set(labels)) != len(labels):
            raise refuse("expected distinct values", "values")
        if any(c in x for x in labels for c in ",=/\""):
            raise refuse("expected values without ',', '=', '/' or '\"' (they name the cell's lock slot)", "values")
        return self


class MatrixTable(Table):
    axes: Annotated[tuple[AxisTable, ...], key("the axes ([[matrix.axes]]); the cells are every combination")]
    guarded: Annotated[tuple[dict[str, Scalar], ...], key(
        "cells that must only not get worse: each entry matches the cells whose axes have those values "
        "(e.g. { depth = 4096 }); every other cell is scored")] = ()
    rule: Annotated[Literal["any", "all"], key(
        "accepted when a scored cell (any) or every scored cell (all) is accepted, no cell is slower and "
        "every other cell excludes a regression of gate.min_gain")] = "any"

    @model_validator(mode="after")
    def _axes(self) -> MatrixTable:
        names = [a.name for a in self.axes]
        if not names:
            raise refuse("expected at least one axis", "axes")
        if len(set(names)) != len(names):
            raise refuse("expected distinct axis names", "axes")
        for sel in self.guarded:
            if bad := sorted(set(sel) - set(names)):
                raise refuse(f"expected axes among {', '.join(names)}, got {', '.join(bad)}", "guarded")
        return self


def _field_problem(key: str, x: Any) -> str | None:
    """What a cell's field must be (the bench table's own ranges), or None."""
    if key in ("depth", "tokens", "threads"):
        least = {"depth": 0, "tokens": 2, "threads": 1}[key]
        if isinstance(x, bool) or not isinstance(x, int) or x < least:
            return f"expected {key} to be an integer of at least {least}, got {x!r}"
    elif key == "metric" and not (isinstance(x, str) and x):
        return f"expected metric to be a metric name, got {x!r}"
    elif key == "fill" and x not in ("decode", "prefill"):
        return f"expected fill to be 'decode' or 'prefill', got {x!r}"
    elif key == "concurrency" and (isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= 1024):
        return f"expected concurrency to be an integer from 1 to 1024, got {x!r}"
    elif key == "rate" and (isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x <= 1e5):
        return f"expected rate to be requests per second from 0 (a closed loop) to 100000, got {x!r}"
    return None


def label_of(v: Any) -> str:
    return str(v["label"]) if isinstance(v, dict) else str(v)


def _fields_of(axis: str, v: Any) -> dict[str, Any]:
    return {k: x for k, x in v.items() if k != "label"} if isinstance(v, dict) else {axis: v}


def spec_of(t: MatrixTable, defaults: dict[str, Any]) -> MatrixSpec:
    """The cells of ``t``: every combination of its axes' values over the bench's own ``defaults``
    (depth, tokens, metric, threads, fill; and a serving profile's concurrency and rate); the home
    cell is the one of the bench's own shape (a serving matrix whose cells all change the load has
    none: it has no short runs to check against long ones, and its first cell stands in)."""
    cells = []
    for combo in itertools.product(*[[(a.name, v) for v in a.values] for a in t.axes]):
        fields = dict(defaults)
        for axis, v in combo:
            fields.update(_fields_of(axis, v))
        axes = tuple((axis, label_of(v)) for axis, v in combo)
        guarded = any(all(dict(axes).get(k) == str(x) for k, x in sel.items()) for sel in t.guarded)
        args = tuple((k, _text(fields[k])) for k in FIELDS[3:] if k in defaults and _text(fields[k]) != _text(defaults[k]))
        cells.append(Cell(key=cell_key(axes), axes=axes, depth=int(fields["depth"]), tokens=int(fields["tokens"]),
                          metric=str(fields["metric"]), args=args, role="guarded" if guarded else "scored"))
    home = next((c.key for c in cells if not c.args and (c.depth, c.tokens, c.metric)
                 == (defaults["depth"], defaults["tokens"], defaults["metric"])), "")
    if not home and "concurrency" in defaults and cells:
        home = cells[0].key
    return MatrixSpec(axes=tuple(a.name for a in t.axes), cells=tuple(cells), home=home, rule=t.rule)


def _text(x: Any) -> str:
    """A field's value as a cell's argument says it (a rate of 2 and of 2.0 are one rate)."""
    return f"{x:g}" if isinstance(x, float) else str(x)


def serving_problem(t: MatrixTable) -> tuple[str, str] | None:
    """(key, what was expected) when a serving profile's [matrix] sets what a serving cell cannot:
    its cells are loads (concurrency, rate) and the scored metric; the rest is the workload's."""
    return _sets_only(t, SERVING_FIELDS, "a serving cell to set only {allowed} (axis {axis!r} sets {bad}): "
                                         "its prompts are the workload's")


def bench_problem(t: MatrixTable) -> tuple[str, str] | None:
    """(key, what was expected) when a bench profile's [matrix] sets a serving load."""
    return _sets_only(t, BENCH_FIELDS, "fields among {allowed} (axis {axis!r} sets {bad}, a load: only a "
                                       "serving profile has one)")


def _sets_only(t: MatrixTable, allowed: tuple[str, ...], expected: str) -> tuple[str, str] | None:
    for a in t.axes:
        for v in a.values:
            if bad := sorted(set(_fields_of(a.name, v)) - set(allowed)):
                return ("axes", "expected " + expected.format(allowed=", ".join(allowed), axis=a.name,
                                                              bad=", ".join(bad)))
    return None


def problem(spec: MatrixSpec, placeholders: set[str], short_tokens: int,
            serving: bool = False) -> tuple[str, str] | None:
    """(key, what was expected) when the cells cannot run as declared, else None."""
    if serving:
        return None if any(c.scored for c in spec.cells) else ("guarded", "expected at least one scored cell")
    if not spec.home:
        return ("axes", "expected a cell of the bench's own shape (bench.depth, bench.tokens, bench.metric, the "
                        "default threads and fill): its runs are the long runs the short runs' wall-clock "
                        "differential is checked against")
    if not any(c.scored for c in spec.cells):
        return ("guarded", "expected at least one scored cell")
    for c in spec.cells:
        if missing := sorted({k for k, _ in c.args} - placeholders):
            return ("axes", f"expected bench.command to take {{{missing[0]}}}: cell [{c.key}] sets it")
        if c.tokens <= short_tokens:
            return ("axes", f"expected more tokens than bench.short_tokens ({short_tokens}) in cell [{c.key}]")
    return None
