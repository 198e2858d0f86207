"""Ordered ranges of sources for a bisection: the commits of a git repository between two refs, or
the releases of a package on the index between two versions.

``REPO@A..B``: A, then every commit on B's first-parent line after A, oldest first (the line a
merge-based main moves along; a side branch's commits are reached by bisecting its merge).
``pypi:NAME==A..B``: every final release of NAME on the index from A to B, in version order (pre- and
dev releases left out), each taken as its sdist like any ``pypi:`` source.
"""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from . import sources
from ..errors import UsageError
from ..profile import Source

_HINT = "Write REPO@GOOD..BAD (commits of a git repository) or pypi:NAME==GOOD..BAD (releases on the index)."


@dataclass(frozen=True)
class Item:
    """One source in a range, with what a person calls it."""
    source: Source
    label: str          # a commit's short hash and subject, or a version


def is_range(text: str) -> bool:
    return ".." in text.rsplit("@", 1)[-1] or (text.startswith("pypi:") and ".." in text)


def resolve(text: str, like: Source | None = None) -> list[Item]:
    """The items of ``REPO@A..B`` or ``pypi:NAME==A..B``, good end first, bad end last."""
    if text.startswith("pypi:"):
        name, _, versions = text[len("pypi:"):].partition("==")
        good, _, bad = versions.partition("..")
        if not (name and good and bad):
            raise UsageError(f"{text!r} is not a release range", _HINT)
        return releases(name, good, bad, like)
    repo, _, refs = text.rpartition("@")
    good, _, bad = refs.partition("..")
    if not (repo and good and bad):
        raise UsageError(f"{text!r} is not a commit range", _HINT)
    return commits(str(Path(repo).resolve()) if Path(repo).is_dir() else repo, good, bad)


def between(good: Source, bad: Source, like: Source | None = None) -> list[Item]:
    """The range from ``--good`` to ``--bad``: both commits of one repository, or both releases of
    one package; anything else is a range of its two ends alone."""
    if good.git and bad.git and good.git == bad.git:
        return commits(good.git, good.ref or "HEAD", bad.ref or "HEAD")
    if good.pypi and bad.pypi and good.pypi.split("==")[0] == bad.pypi.split("==")[0]:
        name = good.pypi.split("==")[0]
        return releases(name, good.pypi.split("==")[1], bad.pypi.split("==")[1], like)
    return [Item(good, sources.spec_label(good)), Item(bad, sources.spec_label(bad))]


def _git(repo: str, *args: str) -> str:
    r = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise UsageError(f"git {' '.join(args)} in {repo}: {r.stderr.strip()[:300] or 'failed'}",
                         "Check the repository path and that both refs exist in it.")
    return r.stdout


def commits(repo: str, good: str, bad: str) -> list[Item]:
    """``good``, then the first-parent commits after it up to ``bad``, oldest first."""
    g = _git(repo, "rev-parse", "--verify", f"{good}^{{commit}}").strip()
    b = _git(repo, "rev-parse", "--verify", f"{bad}^{{commit}}").strip()
    if subprocess.run(["git", "-C", repo, "merge-base", "--is-ancestor", g, b]).returncode != 0:
        raise UsageError(f"{good} is not an ancestor of {bad} in {repo}",
                         "The good end must come before the bad end on one line of history.")
    lines = _git(repo, "log", "--reverse", "--first-parent", "--format=%H %s", f"{g}..{b}").splitlines()
    subject = _git(repo, "log", "-1", "--format=%s", g).strip()
    items = [Item(Source(git=repo, ref=g), f"{g[:10]} {subject}")]
    for line in lines:
        sha, _, subj = line.partition(" ")
        items.append(Item(Source(git=repo, ref=sha), f"{sha[:10]} {subj}"))
    if len(items) < 2:
        raise UsageError(f"{good}..{bad} in {repo} holds no commit after {good}", "Give a bad end after the good end.")
    return items


def order_releases(available: list[str], good: str, bad: str) -> list[str]:
    """The final releases from ``good`` to ``bad`` (both must be available), in version order."""
    try:
        lo, hi = Version(good), Version(bad)
    except InvalidVersion as e:
        raise UsageError(f"{e}", "Give two release numbers, e.g. pypi:llama-cpp-python==0.3.16..0.3.18.") from None
    if lo >= hi:
        raise UsageError(f"{good} is not before {bad}", "The good end is the older release.")
    vs: dict[Version, str] = {}
    for text in available:
        try:
            v = Version(text)
        except InvalidVersion:
            continue
        if not (v.is_prerelease or v.is_devrelease) and lo <= v <= hi:
            vs[v] = text
    for end, v in ((good, lo), (bad, hi)):
        if v not in vs:
            raise UsageError(f"release {end} is not on the index", "Check the version (`pip index versions NAME`).")
    return [vs[v] for v in sorted(vs)]


def available_versions(name: str) -> list[str]:
    """Every version of ``name`` on the index this machine's pip uses (``pip index versions``)."""
    r = subprocess.run([sys.executable, "-m", "pip", "index", "versions", name], capture_output=True, text=True)
    m = re.search(r"^Available versions:\s*(.+)$", r.stdout, re.MULTILINE)
    if r.returncode != 0 or m is None:
        why = (r.stderr.strip().splitlines() or ["no versions listed"])[-1][:300]
        raise UsageError(f"cannot list the releases of {name}: {why}", "Check the name and that pip reaches its index.")
    return [v.strip() for v in m.group(1).split(",") if v.strip()]


def releases(name: str, good: str, bad: str, like: Source | None = None) -> list[Item]:
    subtree = like.subtree if like is not None else None
    return [Item(Source(pypi=f"{name}=={v}", subtree=subtree), v)
            for v in order_releases(available_versions(name), good, bad)]
