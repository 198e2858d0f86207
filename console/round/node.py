"""The node a round runs on: its runtime, its facts, its telemetry, whether it may use a GPU."""
from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any, Callable

from ..errors import InfraError, UsageError


def make_runtime(kind: str, round_id: str, work: Path):
    if kind == "docker":
        from ..runtime.docker import DockerRuntime
        return DockerRuntime(round_label=round_id)
    if kind == "local":
        from ..runtime.local import LocalRuntime
        return LocalRuntime(work / "local")
    raise UsageError(f"unknown runtime {kind!r}", "Use --runtime docker or --runtime local.")


def open_telemetry():
    from ..telemetry import open_telemetry
    return open_telemetry()


def host_facts(rt) -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    facts = {"hostname": platform.node(), "cpu_model": cpu, "cores": os.cpu_count(),
             "kernel": platform.release(), "python": platform.python_version()}
    facts.update(rt.host_facts())
    return facts


def refuse_unfit(preflight: dict[str, Any], notice: Callable[[str, str, str], None]) -> None:
    """Say every preflight finding; a refusing one ends the round before anything is built."""
    findings = preflight.get("findings", [])
    for f in findings:
        notice("error" if f.get("level") == "refuse" else "warn", f.get("code", "preflight"), f.get("message", ""))
    refusing = [f for f in findings if f.get("level") == "refuse"]
    if refusing:
        raise InfraError("the node is not fit to measure: " + "; ".join(f.get("message", "") for f in refusing),
                         "Fix the node (or relax the profile) and retry; nothing was recorded as a regression.")


def use_gpus(want: str, rt, host: dict, notice: Callable[[str, str, str], None]) -> bool:
    """Whether the engine gets the GPUs, as the profile's ``run.gpus`` allows."""
    if want == "none":
        return False
    have = bool(host.get("gpus"))
    runtime_ok = rt.kind == "local" or getattr(rt, "has_gpu_runtime", lambda: False)()
    if have and runtime_ok:
        return True
    if not have:
        why = "this host has no GPU visible to NVML"
    else:
        why = "Docker has no NVIDIA runtime (install nvidia-container-toolkit and restart dockerd)"
    if want == "required":
        raise InfraError(f"the profile requires a GPU, but {why}.",
                         "Run on a GPU node, or set run.gpus = \"optional\" to allow CPU runs.")
    notice("warn", "no-gpu", f"{why}; running on CPU as the profile allows")
    return False
