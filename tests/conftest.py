"""Shared fixtures. Docker tests use the real daemon and fail, never skip, without it."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def docker_client():
    from console.errors import InfraError
    from console.runtime.docker import connect
    try:
        return connect()
    except InfraError as e:
        pytest.fail(f"these tests need the real Docker daemon: {e.paragraph()}", pytrace=False)


@pytest.fixture(scope="session")
def base_image(docker_client):
    """The demo's pinned base, made once with debootstrap if this node lacks it."""
    from console.engine import images
    from console.profile import load_profile
    profile = load_profile(ROOT / "profiles" / "demo.toml")
    return images.bootstrap(docker_client, profile, lambda line: None)["image_id"]


@pytest.fixture(scope="session")
def installed_demo(tmp_path_factory, base_image):
    """The console installed from a wheel into a fresh venv, and its demo round in a real terminal
    (tests/installed.py): the wheel tests and the terminal test read the same round."""
    from installed import demo_in_tmux, install
    top = tmp_path_factory.mktemp("installed")
    inst = install(top)
    before = inst.tree()
    return inst, before, demo_in_tmux(inst, top / "tmux")
