"""Engine sources: a directory, a git repository at a ref, or a patch over main.

Each is snapshotted into the round's work directory before anything is built, so
an edit during the round cannot leak into a build, and its tree digest goes into
the receipt.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError
from .profile import Source


@dataclass
class Snapshot:
    dir: Path
    record: dict            # what the receipt says about the source
    files: dict[str, str]   # relative path -> sha256, for the apparatus guard


def parse_spec(text: str) -> Source | tuple[str, str]:
    """``DIR``, ``REPO@REF`` (git), or ``FILE.patch`` (applied over main)."""
    if text.endswith((".patch", ".diff")):
        return ("patch", str(Path(text).resolve()))
    if "@" in text and not Path(text).exists():
        repo, ref = text.rsplit("@", 1)
        return Source(git=repo, ref=ref)
    return Source(path=str(Path(text).resolve()))


def snapshot(spec: Source | tuple[str, str], dest: Path, main: Snapshot | None = None) -> Snapshot:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        shutil.rmtree(dest)
    if isinstance(spec, tuple):
        if main is None:
            raise UsageError("a patch needs a main tree to apply to", "Give --main a directory or REPO@REF.")
        patch = Path(spec[1])
        if not patch.is_file():
            raise UsageError(f"patch {patch} does not exist", "Check the --candidate path.")
        shutil.copytree(main.dir, dest, symlinks=True)
        r = subprocess.run(["git", "apply", "--whitespace=nowarn", str(patch)], cwd=dest,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise UsageError(f"patch {patch.name} does not apply to main: {r.stderr.strip()[:400]}",
                             "Rebase the patch on main's tree.")
        record = {"patch": str(patch), "patch_sha256": _sha256(patch.read_bytes()), "over": main.record}
    elif spec.git:
        r = subprocess.run(["git", "clone", "--quiet", "--no-checkout", spec.git, str(dest)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise UsageError(f"cannot clone {spec.git}: {r.stderr.strip()[:400]}", "Check the repository path or URL.")
        r = subprocess.run(["git", "checkout", "--quiet", "--detach", spec.ref or "HEAD"], cwd=dest,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise UsageError(f"ref '{spec.ref}' not found in {spec.git}", "Check --main/--candidate REPO@REF.")
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=dest, capture_output=True,
                                text=True).stdout.strip()
        shutil.rmtree(dest / ".git")
        record = {"git": spec.git, "ref": spec.ref, "commit": commit}
    else:
        src = Path(spec.path or "")
        if not src.is_dir():
            raise UsageError(f"source directory {src} does not exist", "Check --main/--candidate.")
        shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        record = {"path": str(src)}
    files = tree_files(dest)
    record["tree_sha256"] = _sha256("".join(f"{p}\0{h}\n" for p, h in sorted(files.items())).encode())
    return Snapshot(dir=dest, record=record, files=files)


def tree_files(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            if p.is_file() and not p.is_symlink():
                out[str(p.relative_to(root))] = _sha256(p.read_bytes())
    return out


def _sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()
