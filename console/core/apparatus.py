"""The apparatus guard: a candidate may not change what measures it.

Pure: works on {relative path: content digest} maps of the two trees, so it
is tested without any filesystem and the round only supplies the maps.
"""
from __future__ import annotations

import fnmatch


def is_protected(path: str, patterns: tuple[str, ...] | list[str]) -> bool:
    """``dir/`` protects everything below dir; otherwise an exact path or a glob."""
    for pat in patterns:
        if pat.endswith("/"):
            if path.startswith(pat) or path == pat.rstrip("/"):
                return True
        elif path == pat or fnmatch.fnmatchcase(path, pat):
            return True
    return False


def changed_paths(main: dict[str, str], candidate: dict[str, str]) -> list[str]:
    """Paths added, removed or changed between the two trees, sorted."""
    return sorted(p for p in main.keys() | candidate.keys() if main.get(p) != candidate.get(p))


def touched_protected(main: dict[str, str], candidate: dict[str, str],
                      patterns: tuple[str, ...] | list[str]) -> list[str]:
    return [p for p in changed_paths(main, candidate) if is_protected(p, patterns)]
