"""Where the console's own files are: the demo profile, engine and candidates, and the default results."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO_PROFILE = ROOT / "profiles" / "demo.toml"
DEMO_MAIN = ROOT / "images" / "demo-engine"
DEMO_CANDIDATES = ROOT / "images" / "demo-candidates"
LLAMA_PROFILE = ROOT / "profiles" / "llama-cpp.toml"
LLAMA_BENCH_PROFILE = ROOT / "profiles" / "llama-cpp-bench.toml"
LLAMA_CANDIDATES = ROOT / "profiles" / "llama-cpp" / "candidates"


def demo_candidates() -> list[str]:
    return sorted(p.stem for p in DEMO_CANDIDATES.glob("*.patch"))


def version() -> str:
    """The installed distribution's version (the checkout's, for an editable install)."""
    from importlib.metadata import PackageNotFoundError, version as dist_version
    try:
        return dist_version("bench-console")
    except PackageNotFoundError:
        return "unknown (not installed: run `pip install .`)"
