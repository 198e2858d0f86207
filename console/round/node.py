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


def open_telemetry(prefer: str = "auto"):
    """A CPU-only profile asks for host telemetry only: no NVML probe, no 'no GPU' warning."""
    from ..telemetry import open_telemetry
    return open_telemetry(prefer)


# The instruction-set extensions a portable x86 build of an engine may rely on (llama.cpp's
# GGML_NATIVE=OFF baseline is AVX2/FMA/F16C; AVX-512 and VNNI change ggml's code paths).
CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw", "avx512vl",
             "avx512_vnni", "avx_vnni", "amx_tile", "asimd", "sve")


def host_facts(rt) -> dict:
    cpu, flags = "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and cpu == "unknown":
                cpu = line.split(":", 1)[1].strip()
            elif line.startswith(("flags", "Features")) and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    facts = {"hostname": platform.node(), "cpu_model": cpu, "cores": os.cpu_count(),
             "cpu_flags": [f for f in CPU_FLAGS if f in flags],
             "kernel": platform.release(), "python": platform.python_version()}
    facts.update(rt.host_facts())
    if os.environ.get("SLURM_JOB_ID"):      # a queue's batch job: which job, on which node
        facts["slurm"] = {"job_id": os.environ["SLURM_JOB_ID"], "node": os.environ.get("SLURMD_NODENAME", ""),
                          "partition": os.environ.get("SLURM_JOB_PARTITION", "")}
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
