"""Fixtures of the serving tests."""
from __future__ import annotations

from pathlib import Path

import pytest

from console.paths import SERVER_PROFILE


@pytest.fixture
def variant(request):
    """A variant of a shipped serving profile, written beside it (its relative paths resolve),
    removed after the test."""
    made: list[Path] = []

    def make(text: str) -> Path:
        p = SERVER_PROFILE.parent / f".variant-{request.module.__name__.rsplit('.', 1)[-1]}-{len(made)}-" \
                                    f"{request.node.name[:40]}.toml"
        p.write_text(text)
        made.append(p)
        return p
    yield make
    for p in made:
        p.unlink(missing_ok=True)
