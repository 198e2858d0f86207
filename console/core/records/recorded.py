"""Typed parts of a sealed receipt that write back exactly the keys they were read with.

A receipt's id is the hash of its bytes, and the shape of some parts changed with the rules
(a schema-1 verdict has no ``tier_span``; a noise report has one set of keys per rules
version, fewer when too few pairs were measured). A part read into a typed value records
which of its fields the JSON held (``keys``, in their order), so writing it again gives the
same JSON whichever version sealed it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from types import MappingProxyType
from typing import Any, Callable, ClassVar, Mapping

Convert = Callable[[Any], Any]


def plain(x: Any) -> Any:
    """``x`` as JSON values (``asdict``'s reading, frozen parts included): tuples were lists and
    read-only mappings objects, so a frozen part writes exactly the document it was read from."""
    if isinstance(x, Part) or (is_dataclass(x) and hasattr(x, "to_dict") and hasattr(x, "keys")):
        return x.to_dict()      # a part read with its keys writes exactly those
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


@dataclass(frozen=True)
class Part:
    """A typed part of a sealed document that writes back exactly the object it was read from.

    The fields a subclass declares are read typed (``READ`` converts those that need more than
    lists frozen to tuples; a value of None stays None); every key of the object, modelled or not,
    is written back in its order with its value, so a part sealed by older or newer rules keeps its
    bytes (``rest``: the keys this version does not model, as written). Readers read the fields;
    only this class reads the object."""
    keys: tuple[str, ...] = field(default=(), repr=False, compare=False, kw_only=True)
    rest: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False, kw_only=True)
    READ: ClassVar[Mapping[str, Convert]] = {}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Any:
        if not isinstance(d, Mapping):
            raise TypeError(f"expected an object for {cls.__name__}, got {type(d).__name__}")
        names = {f.name for f in fields(cls)} - {"keys", "rest"}
        typed = {k: (cls.READ[k](v) if k in cls.READ and v is not None else _frozen(v))
                 for k, v in d.items() if k in names}
        return cls(**typed, keys=tuple(d), rest=MappingProxyType({k: v for k, v in d.items() if k not in names}))

    def to_dict(self) -> dict[str, Any]:
        return {k: self.rest[k] if k in self.rest else plain(getattr(self, k)) for k in self.keys}

    def held(self, name: str) -> bool:
        """Whether the object held ``name`` (a figure older rules did not write is None and not held)."""
        return name in self.keys


def parts(cls: type[Part]) -> Convert:
    """A READ converter: a list of objects, each read as ``cls``."""
    return lambda xs: tuple(cls.from_dict(x) for x in xs)
