"""Reading a profile file: TOML, validated against the declared tables, into a typed Profile.

Every error names the file, the key (dotted path) and what was expected, and is raised before
anything is built. A file with several problems reports one: an unknown key first (it is most
often a typo of the key that is then missing), else the first problem in the file's table order.
"""
from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..files import read_capped
from .spec import Profile
from .tables import ProfileFile, matrix_spec

MAX_PROFILE_BYTES = 1 << 20     # a profile is a few KB; a device or a huge file is not one


class ProfileError(Exception):
    def __init__(self, path: Path | str, key: str, expected: str):
        self.path, self.key, self.expected = str(path), key, expected
        super().__init__(f"{path}: key '{key}': {expected}")


def load_profile(path: str | Path) -> Profile:
    path = Path(path).resolve()
    try:
        raw_bytes = read_capped(path, MAX_PROFILE_BYTES)
    except ValueError as e:
        raise ProfileError(path, "(file)", f"a readable TOML file ({e})") from None
    try:
        data = tomllib.loads(raw_bytes.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as e:
        why = "nested too deeply" if isinstance(e, RecursionError) else e
        raise ProfileError(path, "(syntax)", f"valid TOML: {why}") from None
    try:
        f = ProfileFile.model_validate(data, context={"base": path.parent})
    except ValidationError as e:
        raise _profile_error(path, e) from None
    return _profile(f, path, hashlib.sha256(raw_bytes).hexdigest(), data)


def _profile(f: ProfileFile, path: Path, sha256: str, data: dict[str, Any]) -> Profile:
    """The typed Profile, with the defaults that come from other tables filled in."""
    run = f.run
    if "output_limit_mb" not in data.get("run", {}):
        run = replace(run, output_limit_mb=max(run.output_limit_mb, f.parity.output_mb()))
    reference = f.reference if f.reference.command else replace(f.reference, command=f.parity.command)
    e = f.engine
    return Profile(
        name=f.name, path=str(path), sha256=sha256, description=f.description, node=f.node,
        source=e.source, protected=e.protected, exclude=e.exclude, candidate=e.candidate,
        image=f.image, run=run, bench=f.bench, parity=f.parity, reference=reference, gate=f.gate.rules(),
        health=f.health.rules(), preflight=f.preflight.rules(), queue=f.queue.rules(),
        harness=f.harness, model=f.model.files, accuracy=f.accuracy, adjudication=f.adjudication,
        server=f.server, matrix=matrix_spec(f) if f.matrix is not None else None)


@cache
def json_schema() -> dict[str, Any]:
    """The profile's JSON Schema (draft 2020-12): what editors complete and check a profile with."""
    schema = ProfileFile.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


# --- pydantic's errors in the profile's words --------------------------------

_UNKNOWN = {"extra_forbidden", "unexpected_keyword_argument"}


def _profile_error(path: Path, e: ValidationError) -> ProfileError:
    errors = e.errors(include_url=False)
    err = next((x for x in errors if x["type"] in _UNKNOWN), errors[0])
    loc = tuple(err["loc"])
    inner = (err.get("ctx") or {}).get("key") or ""
    return ProfileError(path, _dotted(loc + ((inner,) if inner else ())), _expected(err, loc))


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _expected(err: dict[str, Any], loc: tuple[Any, ...]) -> str:
    kind, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    if kind == "profile":
        return ctx["expected"]
    if kind in _UNKNOWN:
        return "unknown key; expected one of " + ", ".join(sorted(_schema_at(loc[:-1]).get("properties", {})))
    at = _schema_at(loc)
    if kind.startswith("missing"):
        what = at.get("description", "")
        return f"missing; expected {_kind(at)}" + (f" ({what})" if what else "")
    if kind == "literal_error":
        return f"expected {ctx['expected']}, got {value!r}"
    got = repr(value) if isinstance(value, bool) else f"{type(value).__name__} {value!r}"
    if kind.endswith("_type"):
        return f"expected {_kind(at)}, got {got}"
    return f"expected {_kind(at)}: {err['msg']}, got {got}"


def resolved(s: dict[str, Any]) -> dict[str, Any]:
    """A schema node with its reference followed and an optional's null left out."""
    if "$ref" in s:
        s = {**json_schema()["$defs"][s["$ref"].rsplit("/", 1)[1]], **{k: v for k, v in s.items() if k != "$ref"}}
    if "anyOf" in s:
        s = {**resolved(next(x for x in s["anyOf"] if x.get("type") != "null")),
             **{k: v for k, v in s.items() if k != "anyOf"}}
    return s


def _schema_at(loc: tuple[Any, ...]) -> dict[str, Any]:
    s = resolved(json_schema())
    for part in loc:
        s = resolved(s.get("items", {}) if isinstance(part, int) else s.get("properties", {}).get(part, {}))
    return s


_KINDS = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
          "object": "a table"}


def _kind(s: dict[str, Any]) -> str:
    if "enum" in s:
        return " or ".join(repr(v) for v in s["enum"])
    if s.get("type") == "array":
        items = resolved(s.get("items", {}))
        plural = {"a table": "tables", "an integer": "integers", "a number": "numbers", "a string": "strings"}
        return f"a list of {plural.get(_kind(items), 'values')}"
    return _KINDS.get(s.get("type", ""), "a value")
