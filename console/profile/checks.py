"""The value kinds a profile's keys are declared with: strict scalars, ranges, patterns, commands
and paths, each failing with the profile's own wording ("expected a value in [0 .. 1], got 1.5")
and telling editors the same constraint through the JSON Schema.

A path is resolved against the profile's directory only while a profile is loaded (the loader
passes that directory as the validation context); a spec built in code keeps its path as given.
"""
from __future__ import annotations

import math
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable, ClassVar

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationInfo
from pydantic.functional_validators import AfterValidator
from pydantic_core import PydanticCustomError, core_schema

Int = Annotated[int, Strict()]           # TOML integers only: 10.0, "10" and true are refused
Num = Annotated[float, Strict()]         # an integer is accepted and becomes a float
Str = Annotated[str, Strict()]
Bool = Annotated[bool, Strict()]
Strs = tuple[Str, ...]


def refuse(expected: str, key: str = "") -> PydanticCustomError:
    """A failed check, worded as the profile error shows it; ``key`` names a key inside the table
    the check runs on (a cross-field check on a table names the key that is wrong)."""
    return PydanticCustomError("profile", "{expected}", {"expected": expected, "key": key})


def key(description: str, derived_from: str = "") -> Any:
    """A key's one-line description; a key whose default is another key's value says so, and the
    schema shows no literal default for it."""
    if not derived_from:
        return Field(description=description)
    return Field(description=f"{description} (default: {derived_from})",
                 json_schema_extra=lambda s: s.pop("default", None))


@dataclass(frozen=True)
class Check:
    """A constraint: ``problem(value)`` says what was expected, or None when the value is fine;
    ``schema`` is what the JSON Schema tells an editor about it."""
    problem: Callable[[Any], str | None]
    schema: dict[str, Any] = field(default_factory=dict)

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        return {**handler(schema), **self.schema}

    def _check(self, value: Any) -> Any:
        if (expected := self.problem(value)) is not None:
            raise refuse(expected)
        return value


def within(lo: float | None = None, hi: float | None = None) -> Check:
    """A closed interval; either end may be open-ended."""
    def problem(v: float) -> str | None:
        # inf passes an open upper end and NaN fails every comparison: say "finite" for both
        if isinstance(v, float) and not math.isfinite(v):
            return f"expected a finite number, got {v!r}"
        if (lo is None or v >= lo) and (hi is None or v <= hi):
            return None
        return f"expected a value in [{'' if lo is None else lo} .. {'' if hi is None else hi}], got {v!r}"
    bounds = {"minimum": lo, "maximum": hi}
    return Check(problem, {k: v for k, v in bounds.items() if v is not None})


# An error rate: strictly between 0 and 0.5 (0 decides nothing; 0.5 is a coin).
RATE = Check(lambda v: None if 0.0 < v < 0.5 else f"expected an error rate in (0, 0.5), got {v!r}",
             {"exclusiveMinimum": 0, "exclusiveMaximum": 0.5})
NONEMPTY = Check(lambda v: None if v else "expected a non-empty list", {"minItems": 1})


def matches(pattern: str, what: str) -> Check:
    rx = re.compile(pattern)
    return Check(lambda v: None if rx.fullmatch(v) else f"expected {what}, got {v!r}", {"pattern": pattern})


SHA256 = matches("[0-9a-f]{64}", "64 lowercase hex digits")
# not 0: Docker reads a zero memory limit as none
SIZE = matches("0*[1-9][0-9]*[kmgKMG]", "a size like '512m' or '2g', more than 0")
# a numeric uid[:gid], or a plain user[:group] name as useradd allows it by default
USER = matches(r"[0-9]{1,10}(:[0-9]{1,10})?|[a-z_][a-z0-9_-]{0,31}(:[a-z_][a-z0-9_-]{0,31})?",
               "a numeric uid[:gid] or a plain user[:group] name")
IMAGE_ID = matches("sha256:[0-9a-f]{64}", "an image ID 'sha256:' and 64 lowercase hex digits")
# a fully qualified CDI device name: vendor.com/class=name (the CDI spec's grammar, slightly simplified)
_CDI = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*[A-Za-z0-9]/[A-Za-z][A-Za-z0-9_-]*=[A-Za-z0-9][A-Za-z0-9_.:-]*")
_COMPONENT = re.compile(r"[a-z0-9][a-z0-9-]*")


def _cdi_devices(v: tuple[str, ...]) -> str | None:
    bad = [d for d in v if not _CDI.fullmatch(d)]
    if bad:
        return f"expected fully qualified CDI device names like 'nvidia.com/gpu=all', got {bad[0]!r}"
    return None if len(set(v)) == len(v) else "expected each device once"


def _components(v: tuple[str, ...]) -> str | None:
    bad = [c for c in v if not _COMPONENT.fullmatch(c)]
    if bad:
        return f"expected Debian archive components like 'main' or 'non-free', got {bad[0]!r}"
    if "main" not in v or len(set(v)) != len(v):
        return "expected 'main' (debootstrap's own packages are there) and each component once"
    return None


CDI_DEVICES = Check(_cdi_devices, {"items": {"type": "string", "pattern": _CDI.pattern}})
COMPONENTS = Check(_components, {"minItems": 1, "items": {"type": "string", "pattern": _COMPONENT.pattern}})


def increasing(v: tuple[int, ...]) -> str | None:
    if v and all(d > 0 for d in v) and list(v) == sorted(set(v)):
        return None
    return "expected a non-empty, strictly increasing list of positive integers"


def placeholders(argv: tuple[str, ...]) -> list[str]:
    """The ``{placeholders}`` an argv list takes, in order."""
    return [name for part in argv for _, name, _, _ in string.Formatter().parse(part) if name is not None]


def argv(allowed: set[str], nonempty: bool = True) -> Any:
    """An argv list whose ``{placeholders}`` are among ``allowed``."""
    def problem(argv: tuple[str, ...]) -> str | None:
        for name in placeholders(argv):
            if name not in allowed:
                return (f"unknown placeholder {{{name}}}; allowed: "
                        + ", ".join("{" + a + "}" for a in sorted(allowed)))
        return None
    checks = (NONEMPTY, Check(problem)) if nonempty else (Check(problem),)
    return Annotated[(Strs, *checks)]


def _resolve(value: str, info: ValidationInfo, must_exist: bool) -> str:
    base = (info.context or {}).get("base")
    if base is None:                    # built in code, not read from a profile: as given
        return value
    p = (Path(base) / value).resolve()
    if must_exist and not p.exists():
        raise refuse(f"expected an existing file, but {p} does not exist")
    return str(p)


# Relative to the profile's directory; a Place may be made later (a checkout, a capture).
Place = Annotated[Str, AfterValidator(lambda v, info: _resolve(v, info, must_exist=False))]
ExistingFile = Annotated[Str, AfterValidator(lambda v, info: _resolve(v, info, must_exist=True))]


def loading(info: ValidationInfo) -> bool:
    """True while a profile file is read: the checks that need its directory or that the file
    itself must satisfy run then, not when a spec is built in code."""
    return bool(info.context and "base" in info.context)


class Table(BaseModel):
    """A profile table whose keys are declared with these kinds; unknown keys are refused."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    RULES: ClassVar[type] = dict         # the core type a rules table becomes

    def fields(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in type(self).model_fields}

    def rules(self) -> Any:
        return self.RULES(**self.fields())
