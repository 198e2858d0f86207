"""Runtimes: where a round's builds are made and its reps run (``base`` says what each gives)."""
from __future__ import annotations

from pathlib import Path

from ..errors import UsageError


def make_runtime(kind: str, round_id: str, work: Path):
    """The runtime ``--runtime`` names; each is imported only when chosen (Docker's SDK is not
    needed on a node that forbids Docker)."""
    if kind == "docker":
        from .docker import DockerRuntime
        return DockerRuntime(round_label=round_id)
    if kind == "local":
        from .local import LocalRuntime
        return LocalRuntime(work / "local")
    raise UsageError(f"unknown runtime {kind!r}", "Use --runtime docker or --runtime local.")
