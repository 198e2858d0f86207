"""The apparatus guard: a candidate may not change what measures it.

Pure: works on {relative path: content digest} maps of the two trees (links included, by their
target) and {link: the tree path it resolves to} maps, so it is tested without any filesystem and
the round only supplies the maps.
"""
from __future__ import annotations

import fnmatch
from typing import Mapping


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


def touched_protected(main: dict[str, str], candidate: dict[str, str], patterns: tuple[str, ...] | list[str],
                      links: Mapping[str, str] | None = None, main_links: Mapping[str, str] | None = None) -> list[str]:
    """The changed paths that touch the apparatus. ``links``/``main_links``: each tree's symbolic links
    and the tree path each resolves to. Besides a changed protected path, a link touches it when it
    is new or changed and reaches into a protected path (a build writing through it edits the
    apparatus), when a protected link now resolves elsewhere, or when a changed path is what a
    protected link reads (the apparatus would read the candidate's bytes)."""
    links, main_links = links or {}, main_links or {}
    read = [t for p, t in links.items() if is_protected(p, patterns)]
    touched = {p for p in changed_paths(main, candidate)
               if is_protected(p, patterns) or (p in links and _reaches(links[p], patterns))
               or any(_under(p, t) for t in read)}
    touched |= {p for p, t in links.items() if is_protected(p, patterns) and main_links.get(p, t) != t}
    return sorted(touched)


def _reaches(target: str, patterns: tuple[str, ...] | list[str]) -> bool:
    """A link to ``target`` reaches the apparatus: it is protected, or holds a protected path."""
    return is_protected(target, patterns) or any(_under(pat.rstrip("/"), target) for pat in patterns)


def _under(path: str, top: str) -> bool:
    return top == "." or path == top or path.startswith(top.rstrip("/") + "/")
