"""Engine sources: a directory, a git repository at a ref, a pinned sdist from the
package index, or a patch over main.

Each is snapshotted into the round's work directory before anything is built, so
an edit during the round cannot leak into a build, and its tree digest goes into
the receipt.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..paths import cache_dir
from ..profile import Source


@dataclass
class Snapshot:
    dir: Path
    record: dict            # what the receipt says about the source
    files: dict[str, str]   # relative path -> sha256 (links too: tree_entries), for the apparatus guard
    links: dict[str, str] = field(default_factory=dict)    # link path -> the tree path it resolves to


def parse_spec(text: str, like: Source | None = None) -> Source | tuple[str, str]:
    """``DIR``, ``REPO@REF`` (git), ``pypi:NAME==VERSION`` (the subtree of ``like``, the
    profile's main source), or ``FILE.patch`` (applied over main)."""
    if text.endswith((".patch", ".diff")):
        return ("patch", str(Path(text).resolve()))
    if text.startswith("pypi:"):
        req = text[len("pypi:"):]
        if req.count("==") != 1 or not all(req.split("==")):
            raise UsageError(f"{text!r} is not a pinned requirement", "Write pypi:NAME==VERSION.")
        return Source(pypi=req, subtree=like.subtree if like else None)
    if "@" in text and not Path(text).exists():
        repo, ref = text.rsplit("@", 1)
        return Source(git=repo, ref=ref)
    return Source(path=str(Path(text).resolve()))


def snapshot(spec: Source | tuple[str, str], dest: Path, main: Snapshot | None = None,
             exclude: tuple[str, ...] = (), sdists: Path | None = None) -> Snapshot:
    """``sdists``: a bundle's directory of sdists, the only place a pinned sdist is taken from
    when given (no pip, no index)."""
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
    elif spec.pypi:
        sdist = bundled_sdist(spec.pypi, sdists) if sdists is not None else fetch_sdist(spec.pypi)
        _extract(sdist, spec.subtree or "", dest, exclude)
        record = {"pypi": spec.pypi, "sdist": sdist.name, "sdist_sha256": sha256_path(sdist)}
        if spec.subtree:
            record["subtree"] = spec.subtree
    else:
        src = Path(spec.path or "")
        if not src.is_dir():
            raise UsageError(f"source directory {src} does not exist", "Check --main/--candidate.")
        shutil.copytree(src, dest, symlinks=True, ignore=_top_level(src, (".git", *exclude)))
        record = {"path": str(src)}
    if exclude:
        record["excluded"] = list(exclude)
    links = tree_links(dest)
    files = tree_entries(dest, links)
    record["tree_sha256"] = digest_of(files)
    return Snapshot(dir=dest, record=record, files=files, links=links)


def digest_of(files: dict[str, str]) -> str:
    """One digest for a tree: over its sorted (path, sha256) pairs."""
    return _sha256("".join(f"{p}\0{h}\n" for p, h in sorted(files.items())).encode())


def tree_sha256(root: Path) -> str:
    """The digest of a tree as builds and receipts know it: its files and its links."""
    return digest_of(tree_entries(root))


def tree_entries(root: Path, links: dict[str, str] | None = None) -> dict[str, str]:
    """Regular files by content, and each link by its target string: a changed target changes the
    digest, and the value of a link can never equal a file's (a file holding the same bytes differs)."""
    out = tree_files(root)
    for rel in tree_links(root) if links is None else links:
        out[rel] = "symlink:" + _sha256(b"symlink\0" + os.fsencode(os.readlink(root / rel)))
    return out


def tree_files(root: Path) -> dict[str, str]:
    """The regular files under ``root`` by content; links are left out (see tree_entries)."""
    return {str(p.relative_to(root)): _sha256(p.read_bytes())
            for p in _entries(root) if p.is_file() and not p.is_symlink()}


def tree_links(root: Path) -> dict[str, str]:
    """Every symbolic link under ``root`` (to a file or a directory, dangling or not) and the tree path
    it resolves to ("." for the root). A link whose target leaves the tree is refused: what it points
    at is not in the digest, so the build key and the apparatus guard could not see it change."""
    top = Path(os.path.realpath(root))
    out: dict[str, str] = {}
    for p in _entries(root):
        if not p.is_symlink():
            continue
        rel, target = p.relative_to(root).as_posix(), os.readlink(p)
        lexical = os.path.normpath(os.path.join(os.path.dirname(rel), target))
        real = Path(os.path.realpath(p))
        if os.path.isabs(target) or lexical.split(os.sep)[0] == ".." or not real.is_relative_to(top):
            raise UsageError(f"the link {rel} -> {target} points outside the source tree: what it points at "
                             "is in no digest", "Replace the link with the file, or point it inside the tree "
                             "with a relative path.")
        out[rel] = real.relative_to(top).as_posix()
    return out


def _entries(root: Path):
    """Every path under ``root`` without following links (a link to a directory is listed, not entered)."""
    for dirpath, dirs, names in os.walk(root):
        for n in dirs + names:
            yield Path(dirpath) / n


def _sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def spec_text(spec: Source) -> str:
    """What ``parse_spec`` reads back as ``spec`` (a command line's SRC)."""
    if spec.pypi:
        return f"pypi:{spec.pypi}"
    return f"{spec.git}@{spec.ref}" if spec.git else str(spec.path)


def spec_label(spec: Source | tuple[str, str]) -> str:
    if isinstance(spec, tuple):
        return spec[1]
    if spec.pypi:
        return f"pypi:{spec.pypi}" + (f" ({spec.subtree})" if spec.subtree else "")
    return spec_text(spec)


def _top_level(root: Path, names: tuple[str, ...]):
    """A copytree ignore that leaves out ``names`` at the top of ``root`` only (and .git anywhere)."""
    def ignore(d: str, entries: list[str]) -> set[str]:
        if Path(d) == root:
            return {e for e in entries if e in names}
        return {".git"} & set(entries)
    return ignore


def fetch_sdist(requirement: str) -> Path:
    """The sdist of a pinned requirement, downloaded once with pip from the index this
    machine's pip uses; its sha256 goes into the receipt like a git commit would."""
    name = requirement.split("==")[0]
    dest = cache_dir() / "sdists"
    dest.mkdir(parents=True, exist_ok=True)

    def cached() -> list[Path]:
        return sdists_in(dest, requirement)
    if cached():
        return cached()[0]
    import sys
    # --no-binary for this package only: its build dependencies may come as wheels
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", name,
           "--dest", str(dest), requirement]
    r = subprocess.run(cmd, capture_output=True, text=True)
    found = cached()
    if r.returncode != 0 or not found:
        why = (r.stderr.strip().splitlines() or ["no sdist was downloaded"])[-1][:300]
        raise UsageError(f"cannot download the sdist of {requirement} with pip: {why}",
                         "Check the name and version and that pip reaches its package index.")
    return found[0]


def sdists_in(directory: Path, requirement: str) -> list[Path]:
    """The sdists of ``name==version`` in a directory (pip writes the name normalised with '_')."""
    name, version = requirement.split("==")
    norm = name.replace("-", "_").lower()
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name.lower().startswith(f"{norm}-{version}.")
                  and p.name.endswith((".tar.gz", ".zip")))


def bundled_sdist(requirement: str, directory: Path) -> Path:
    """The sdist of a pinned requirement from a bundle: never pip, never the index. The bundle was
    checked against its manifest before the round started; a requirement it lacks is refused."""
    found = sdists_in(directory, requirement)
    if not found:
        raise UsageError(f"the bundle has no sdist of {requirement} (looked in {directory})",
                         "Make the bundle for this source: `console bundle --profile PROFILE --candidate "
                         f"pypi:{requirement} DIR` on a machine that reaches the package index.")
    return found[0]


def _extract(sdist: Path, subtree: str, dest: Path, exclude: tuple[str, ...]) -> None:
    """Unpack ``subtree`` of an sdist into ``dest`` (paths checked: nothing outside it)."""
    import tarfile
    dest.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        members = tar.getmembers()
        top = members[0].name.split("/")[0] if members else ""
        prefix = f"{top}/{subtree.strip('/')}/" if subtree else f"{top}/"
        taken = 0
        for m in members:
            if not m.name.startswith(prefix):
                continue
            rel = m.name[len(prefix):]
            if not rel or rel.split("/")[0] in exclude or ".git" in rel.split("/"):
                continue    # .git: a submodule's pointer file would make the tree a foreign repo
            if not (m.isfile() or m.isdir()):      # links and devices are not source
                continue
            m.name = rel
            tar.extract(m, dest, filter="data")
            taken += 1
    if not taken:
        raise UsageError(f"{sdist.name} has no directory {subtree!r}",
                         "Check engine.source.subtree in the profile.")


def sha256_path(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
