"""A bundle's manifest: every piece a round on a node without network reads, with its hash.

`console bundle` writes it; `console run --bundle` checks the bundle against it before anything
else. The rules here are pure: the edge (console.engine.bundle) lists and hashes the files, this
module says what is wrong with them.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from console.core.records.untrusted import loads

FORMAT = "bench-console/bundle/1"
KINDS = ("profile", "profile-file", "reference", "reference-record", "source", "sdist", "candidate", "model",
         "wheel", "image")


class ManifestError(ValueError):
    """A manifest this version cannot read."""


@dataclass(frozen=True)
class Piece:
    kind: str           # one of KINDS
    path: str           # relative to the bundle's root, '/'-separated
    sha256: str
    size: int
    stands_for: str     # what it is: the requirement, the model file's name, the profile key

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "sha256": self.sha256, "size": self.size,
                "for": self.stands_for}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Piece:
        return cls(kind=str(d["kind"]), path=str(d["path"]), sha256=str(d["sha256"]), size=int(d["size"]),
                   stands_for=str(d.get("for") or ""))


@dataclass
class Manifest:
    profile: str                    # the profile file's path in the bundle
    profile_name: str
    profile_sha256: str
    made_at: str
    console: str                    # the version that made it
    candidate: str = ""             # the candidate it was made for: pypi:…, or a path in the bundle
    wheels: dict[str, Any] | None = None    # the target the wheels were gathered for
    base_image: dict[str, str] | None = None    # --image: {ref, id} of the saved base
    pieces: list[Piece] = field(default_factory=list)
    format: str = FORMAT

    def to_json(self) -> str:
        doc = {**{k: v for k, v in asdict(self).items() if k != "pieces"},
               "pieces": [p.to_dict() for p in sorted(self.pieces, key=lambda p: (p.kind, p.path))]}
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        try:
            d = loads(text)
            if not isinstance(d, dict):
                raise ManifestError("not a readable manifest: expected a JSON object")
            if d.get("format") != FORMAT:
                raise ManifestError(f"format {d.get('format')!r}; this version reads {FORMAT}")
            pieces = [Piece.from_dict(x) for x in d["pieces"]]
            _confined(d, pieces)
            return cls(profile=str(d["profile"]), profile_name=str(d["profile_name"]),
                       profile_sha256=str(d["profile_sha256"]), made_at=str(d["made_at"]),
                       console=str(d["console"]), candidate=str(d.get("candidate") or ""),
                       wheels=d.get("wheels"), base_image=d.get("base_image"), pieces=pieces)
        except ManifestError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ManifestError(f"not a readable manifest: {type(e).__name__}: {e}") from None

    def of_kind(self, *kinds: str) -> list[Piece]:
        return [p for p in self.pieces if p.kind in kinds]


def path_problem(path: str) -> str | None:
    """Why ``path`` cannot name a file inside the bundle, or None: it must be relative,
    '/'-separated, with no '..' or empty part (a link is for the edge to see, on disk)."""
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or "\0" in path or any(p in ("", ".", "..") for p in parts):
        return f"{path!r} is not a path inside the bundle (relative, no '..', '.' or empty part)"
    return None


def _confined(d: Mapping[str, Any], pieces: list[Piece]) -> None:
    """Every path the manifest names stays in the bundle, checked before any file is read."""
    named = [("profile", str(d["profile"]))] + [(f"pieces[{i}].path", p.path) for i, p in enumerate(pieces)]
    cand = str(d.get("candidate") or "")
    if cand and not cand.startswith("pypi:"):
        named.append(("candidate", cand))
    for where, path in named:
        if (why := path_problem(path)) is not None:
            raise ManifestError(f"key '{where}': {why}")


def digest(manifest_bytes: bytes) -> str:
    """What a receipt names a bundle by: the sha256 of its manifest as stored (which holds every
    piece's sha256)."""
    return hashlib.sha256(manifest_bytes).hexdigest()


def problems(pieces: list[Piece], found: Mapping[str, tuple[int, str] | None],
             present: set[str]) -> list[str]:
    """What is wrong with a bundle: a listed piece missing or not its bytes, a file that is not
    listed, or a path that would leave the bundle. ``found`` maps each listed path to its (size,
    sha256) on disk (None: missing); ``present`` is every file under the bundle but the manifest."""
    out = []
    for p in pieces:
        if path_problem(p.path) is not None:
            out.append(f"{p.path} ({p.kind}, {p.stands_for}): a path outside the bundle")
            continue
        got = found.get(p.path)
        if got is None:
            out.append(f"{p.path} ({p.kind}, {p.stands_for}) is missing")
        elif got[0] != p.size or got[1] != p.sha256:
            out.append(f"{p.path} ({p.kind}, {p.stands_for}) changed: sha256 {got[1][:16]}…, {got[0]} bytes; "
                       f"the manifest says {p.sha256[:16]}…, {p.size} bytes")
    listed = {p.path for p in pieces}
    out += [f"{path} is not in the manifest" for path in sorted(present - listed)]
    return out
