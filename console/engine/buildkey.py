"""A build identified by what went into it.

Two builds with the same key had the same source tree, the same base image (by ID), the same
recipe (the runtime's Dockerfile), the same build and harness commands, the same harness tree
and the same asserted compiler and tools. Such a build can be reused instead of redone; and a
rebuild of the same key that yields other engine files is a reproducibility finding, said with
the files that differ.

Pure: the runtime supplies its recipe, the round the trees' hashes.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

SCHEMA = "bench-console/build-key/1"


@dataclass(frozen=True)
class BuildInputs:
    recipe: dict[str, str]          # runtime, base image ID, recipe digest (the runtime's own)
    tree_sha256: str                # the engine's source tree (sources.digest_of)
    build: str                      # image.build: the engine's build command
    compiler: str                   # the asserted compiler line and the probe that reads it
    compiler_probe: tuple[str, ...]
    tools: tuple[tuple[str, str, tuple[str, ...]], ...]   # (name, expected, probe), as asserted
    harness_sha256: str | None = None       # the profile's harness tree, when it has one
    harness_build: str | None = None
    compiler_cache: str = "none"            # image.compiler_cache: how objects of identical inputs are reused

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **asdict(self)}


def build_key(inputs: BuildInputs) -> str:
    """sha256 over the canonical JSON of the inputs (sorted keys, no whitespace)."""
    text = json.dumps(inputs.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def inputs_of(recipe: dict[str, str], tree_sha256: str, image: Any, harness: Any = None,
              harness_sha256: str | None = None) -> BuildInputs:
    """The inputs of one build from the profile's image and harness specs."""
    return BuildInputs(recipe=dict(recipe), tree_sha256=tree_sha256, build=image.build,
                       compiler=image.compiler, compiler_probe=tuple(image.compiler_probe),
                       tools=tuple((t.name, t.expect, tuple(t.probe)) for t in image.tools),
                       harness_sha256=harness_sha256 if harness is not None else None,
                       harness_build=harness.build if harness is not None else None,
                       compiler_cache=image.compiler_cache)


def key_of(recipe: dict[str, str], tree_sha256: str, image: Any, harness: Any = None,
           harness_sha256: str | None = None) -> str:
    """The build key of one build from the profile's image and harness specs."""
    return build_key(inputs_of(recipe, tree_sha256, image, harness, harness_sha256))


def built_by(reused_from: dict[str, Any] | None) -> str:
    """The round that built a reused image, as said everywhere ("" for a build made now)."""
    if not reused_from:
        return ""
    return str(reused_from.get("round") or "an earlier round")


@dataclass(frozen=True)
class FileDiff:
    """How a rebuild's engine files differ from the recorded build's."""
    changed: tuple[str, ...]
    only_recorded: tuple[str, ...]
    only_rebuilt: tuple[str, ...]

    @property
    def same(self) -> bool:
        return not (self.changed or self.only_recorded or self.only_rebuilt)

    def sentence(self, limit: int = 6) -> str:
        parts = []
        for what, names in (("differ", self.changed), ("only in the recorded build", self.only_recorded),
                            ("only in the rebuild", self.only_rebuilt)):
            if names:
                shown = ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
                parts.append(f"{what}: {shown}")
        return "; ".join(parts) if parts else "the same files"

    def to_dict(self) -> dict[str, Any]:
        return {"same": self.same, "changed": list(self.changed), "only_recorded": list(self.only_recorded),
                "only_rebuilt": list(self.only_rebuilt)}


def diff_files(recorded: dict[str, str], rebuilt: dict[str, str]) -> FileDiff:
    """Which engine files (path -> sha256) a rebuild of the same key did not reproduce."""
    return FileDiff(changed=tuple(sorted(k for k in recorded.keys() & rebuilt.keys() if recorded[k] != rebuilt[k])),
                    only_recorded=tuple(sorted(recorded.keys() - rebuilt.keys())),
                    only_rebuilt=tuple(sorted(rebuilt.keys() - recorded.keys())))
