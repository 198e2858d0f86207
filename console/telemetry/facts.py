"""What a node is, as a receipt records it: its CPU, kernel and Python, the runtime's own facts,
the batch job it runs in, and the GPUs telemetry watches. With the preflight these are what the
node's fingerprint (``core.fingerprint``) and the reference's backend are made of."""
from __future__ import annotations

import os
import platform
from pathlib import Path

# The instruction-set extensions a portable x86 build of an engine may rely on (llama.cpp's
# GGML_NATIVE=OFF baseline is AVX2/FMA/F16C; AVX-512 and VNNI change ggml's code paths).
CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw", "avx512vl",
             "avx512_vnni", "avx_vnni", "amx_tile", "asimd", "sve")


def host_facts(rt) -> dict:
    """The host's facts; ``rt`` (a runtime, or None for a capture that runs no build) adds its own."""
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
    if rt is not None:
        facts.update(rt.host_facts())
    if os.environ.get("SLURM_JOB_ID"):      # a queue's batch job: which job, on which node
        facts["slurm"] = {"job_id": os.environ["SLURM_JOB_ID"], "node": os.environ.get("SLURMD_NODENAME", ""),
                          "partition": os.environ.get("SLURM_JOB_PARTITION", "")}
    return facts


def gpu_facts(tele) -> dict:
    """The GPUs telemetry watches and, when there are any, the driver's version."""
    gpus = tele.gpus() if hasattr(tele, "gpus") else []
    driver = getattr(tele, "driver_version", None)
    version = driver() if gpus and callable(driver) else None
    return {"gpus": gpus, **({"gpu_driver": version} if version else {})}
