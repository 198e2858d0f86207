"""Typed parts of a sealed receipt that write back exactly the keys they were read with.

A receipt's id is the hash of its bytes, and the shape of some parts changed with the rules
(a schema-1 verdict has no ``tier_span``; a noise report has one set of keys per rules
version, fewer when too few pairs were measured). A part read into a typed value records
which of its fields the JSON held (``keys``, in their order), so writing it again gives the
same JSON whichever version sealed it.
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any, Callable, Mapping

Convert = Callable[[Any], Any]


def plain(x: Any) -> Any:
    """``x`` as JSON values (``asdict``'s reading, frozen parts included): tuples were lists and
    read-only mappings objects, so a frozen part writes exactly the document it was read from."""
    if is_dataclass(x) and not isinstance(x, type):
        return {f.name: plain(getattr(x, f.name)) for f in fields(x)}
    if isinstance(x, Mapping):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x


def _frozen(v: Any) -> Any:
    return tuple(_frozen(x) for x in v) if isinstance(v, list) else v


def read_keys(cls: type, d: Mapping[str, Any], read: Mapping[str, Convert] | None = None) -> dict[str, Any]:
    """The constructor arguments of ``cls`` that ``d`` holds (lists frozen to tuples, or read by
    ``read[name]``), with ``keys``: the names it held, in its order."""
    if not isinstance(d, Mapping):
        raise TypeError(f"expected an object, got {type(d).__name__}")
    read = read or {}
    names = {f.name for f in fields(cls)} - {"keys"}
    held = tuple(k for k in d if k in names)
    return {**{k: read[k](d[k]) if k in read else _frozen(d[k]) for k in held}, "keys": held}


def write_keys(obj: Any, write: Mapping[str, Convert] | None = None) -> dict[str, Any]:
    """The JSON of a value made by ``read_keys``: the keys it was read with, and only those."""
    write = write or {}
    return {k: write[k](getattr(obj, k)) if k in write else plain(getattr(obj, k)) for k in obj.keys}
