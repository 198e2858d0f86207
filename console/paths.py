"""Where the console's own files are: shipped profiles, the demo engine and candidates, the Dockerfile.

They are package data under ``console/assets`` so a wheel install works anywhere; a checkout keeps
``profiles/`` and ``images/`` at its top as links to the same folders. Results never go here: they
default to ``./results/`` of the working directory. The cache kept between rounds (``cache_dir``) is
the user's, outside the package.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

ASSETS = Path(__file__).resolve().parent / "assets"
PROFILES = ASSETS / "profiles"
IMAGES = ASSETS / "images"
DOCKERFILE = IMAGES / "engine.Dockerfile"
DEMO_PROFILE = PROFILES / "demo.toml"
DEMO_MAIN = IMAGES / "demo-engine"
DEMO_CANDIDATES = IMAGES / "demo-candidates"
LLAMA_PROFILE = PROFILES / "llama-cpp.toml"
LLAMA_BENCH_PROFILE = PROFILES / "llama-cpp-bench.toml"
LLAMA_CANDIDATES = PROFILES / "llama-cpp" / "candidates"
SERVER_PROFILE = PROFILES / "llama-server.toml"
SERVER_MATRIX_PROFILE = PROFILES / "llama-server-matrix.toml"
SERVER_CHAT_PROFILE = PROFILES / "llama-server-chat.toml"
SERVER_CANDIDATES = PROFILES / "llama-server" / "candidates"


def cache_dir() -> Path:
    """Where downloaded sources, kept builds and compiler caches stay between rounds
    (BENCH_CONSOLE_CACHE overrides)."""
    base = os.environ.get("BENCH_CONSOLE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "bench-console")
    return Path(base)


def demo_candidates() -> list[str]:
    return sorted(p.stem for p in DEMO_CANDIDATES.glob("*.patch"))


def shipped_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILES.glob("*.toml"))


def profile_arg(value: str) -> Path:
    """``--profile``: a path to a TOML file, or the name of a shipped profile (``demo``, ``llama-cpp``)."""
    path = Path(value)
    if path.suffix == ".toml" or path.exists() or "/" in value:
        return path
    shipped = PROFILES / f"{value}.toml"
    if shipped.is_file():
        return shipped
    raise argparse.ArgumentTypeError(
        f"{value!r} is neither a profile file nor a shipped profile (shipped: {', '.join(shipped_profiles())})")


def version() -> str:
    """The installed distribution's version (the checkout's, for an editable install)."""
    from importlib.metadata import PackageNotFoundError, version as dist_version
    try:
        return dist_version("bench-console")
    except PackageNotFoundError:
        return "unknown (not installed: run `pip install .`)"
