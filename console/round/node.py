"""The node a round runs on: its runtime, its facts, its telemetry, whether it may use a GPU."""
from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any, Callable

from ..core.backend import Backend, BackendCheck, BackendError, backend_of, compare
from ..core.health import notice_level
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
    facts = {"hostname": platform.node(), "cpu_model": cpu, "cores": os.cpu_count(), "arch": platform.machine(),
             "cpu_flags": [f for f in CPU_FLAGS if f in flags],
             "kernel": platform.release(), "python": platform.python_version()}
    if rt is not None:          # None: a capture that runs no build
        facts.update(rt.host_facts())
    if os.environ.get("SLURM_JOB_ID"):      # a queue's batch job: which job, on which node
        facts["slurm"] = {"job_id": os.environ["SLURM_JOB_ID"], "node": os.environ.get("SLURMD_NODENAME", ""),
                          "partition": os.environ.get("SLURM_JOB_PARTITION", "")}
    return facts


def gpu_facts(tele) -> dict:
    """The GPUs telemetry watches and, when there are any, the driver's version: with the CPU
    facts, what the node's fingerprint (``core.fingerprint``) is made of."""
    gpus = tele.gpus() if hasattr(tele, "gpus") else []
    driver = getattr(tele, "driver_version", None)
    version = driver() if gpus and callable(driver) else None
    return {"gpus": gpus, **({"gpu_driver": version} if version else {})}


def refuse_unfit(preflight: dict[str, Any], notice: Callable[[str, str, str], None]) -> None:
    """Say every preflight finding at its level; a refusing one ends the round before anything is built."""
    findings = preflight.get("findings", [])
    for f in findings:
        notice(notice_level(f.get("level", "warn")), f.get("code", "preflight"), f.get("message", ""))
    refusing = [f for f in findings if f.get("level") == "refuse"]
    if refusing:
        raise InfraError("the node is not fit to measure: " + "; ".join(f.get("message", "") for f in refusing),
                         "Fix the node (or relax the profile) and retry; nothing was recorded as a regression.")


def use_gpus(want: str, rt, host: dict, notice: Callable[[str, str, str], None], run=None) -> bool:
    """Whether the engine gets the GPUs, as the profile's ``run.gpus`` allows (``run``: the
    profile's RunSpec, whose ``cdi_devices`` say how Docker is asked for them)."""
    if want == "none":
        return False
    have = bool(host.get("gpus"))
    runtime_ok = rt.kind == "local" or getattr(rt, "has_gpu_runtime", lambda run=None: False)(run)
    if have and runtime_ok:
        return True
    if not have:
        why = "this host has no GPU visible to NVML"
    elif run is not None and run.cdi_devices:
        why = ("Docker reads no CDI specs for run.cdi_devices (enable CDI in daemon.json, Docker 25+, and "
               "write the specs: `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`)")
    else:
        why = "Docker has no NVIDIA runtime (install nvidia-container-toolkit and restart dockerd)"
    if want == "required":
        raise InfraError(f"the profile requires a GPU, but {why}.",
                         "Run on a GPU node, or set run.gpus = \"optional\" to allow CPU runs.")
    notice("warn", "no-gpu", f"{why}; running on CPU as the profile allows")
    return False


def backend(p, runtime: str, host: dict, preflight: dict | None, gpus: bool,
            command: tuple[str, ...] | list[str] | None = None) -> Backend:
    """Where the profile's builds compute their logits on this node: its facts, whether the runs
    get the GPUs, the compiler pinned for ``runtime``, and the build and logits commands
    (``command``: the reference's; the profile's logits command by default)."""
    build = [p.image.build, p.harness.build if p.harness else "", *(command or p.parity.command)]
    return backend_of(host=host, preflight=preflight, gpus=gpus, runtime=runtime, threads=p.run.threads,
                      offload=p.run.gpus, compiler=p.image.toolchain(runtime)[0], build=build)


def check_backend(p, here: Backend, ref_meta: dict, notice: Callable[[str, str, str], None]) -> BackendCheck:
    """The round's backend against the reference's (``core.backend.compare``): a refused difference
    ends the round before anything is built; allowed ones are said."""
    ref = None
    if ref_meta.get("backend") is not None:
        try:
            ref = Backend.from_dict(ref_meta["backend"])
        except BackendError as e:
            raise UsageError(f"{p.path}: key 'parity.reference': the reference's record of its backend is "
                             f"unreadable ({e})", "Recapture the reference (`console reference capture`).") from None
    check = compare(ref, here)
    if not check.ok:
        raise InfraError("the parity reference was computed on another backend than this round's builds would "
                         "run on, so main's own build could fail parity against it: "
                         + "; ".join(d.message() for d in check.refused),
                         "Run on a node like the reference's, or capture a reference on this backend "
                         "(`console reference capture --profile PROFILE` on this node, in a profile of its "
                         "own like llama-cpp-cuda.toml) and pin it.")
    if check.reference is None:
        notice("info", "reference-backend", f"accepted for this CPU round: {check.allowed[0].why}; "
               "recapture it (`console reference capture`) to record its backend")
    elif check.allowed:
        notice("info", "reference-backend", "the reference's backend differs where that is allowed: "
               + "; ".join(d.message() for d in check.allowed))
    return check
