"""The backend a reference was captured on, and whether a round's builds may be graded against it.

A reference is one build's numbers on one kind of hardware. The same llama.cpp source gives
bit-identical logits as a portable CPU build on an AMD and an Intel node, with 1 or 16 threads,
but built with CUDA it moves a CPU reference by up to 0.10 nats of mean KL per depth (and top-1
0.25 at one depth): graded against a CPU reference, main's own CUDA build fails parity. So every
reference records its backend, and a round whose builds would run on another one is refused
before anything is built (``compare``), naming each difference.

Allowed (recorded, never refused):

- the CPU model and the thread count, for a portable build (no ``-march=native``): the same
  binary runs the same kernels on any CPU of the architecture, and ggml splits work across
  threads without changing any sum;
- the CPU's instruction-set flags, for a portable build: it uses only what it was compiled for
  (a node that lacks one fails at its first run, not in parity);
- the runtime (Docker or the host) when the compiler is the same: the same compiler and build
  commands generate the same code in a container or not;
- the driver's minor version and the CUDA version's minor part.

Refused: the backend kind (CPU vs CUDA), the architecture, the GPU model, its compute
capability, the CUDA major version, the driver branch (its first number: it compiles the
kernels' PTX for the device), the compiler, the build (the image's and the harness's build
commands and the logits command, which holds e.g. ``--gpu-layers``), and the CPU flags of a
native build. A value one side could not read counts as a difference.

A reference recorded before backends were (no record) is accepted for a CPU round, as a CPU
reference is portable and every reference so far was captured on a CPU, with a notice; a GPU
round is refused against it, since nothing says it was captured on that GPU.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping, Sequence

from console.core.records.facts import HostFacts

KINDS = ("cpu", "cuda")
RUNTIMES = ("docker", "local")
# Build options that compile for the building node's own instruction set.
NATIVE_MARKERS = ("-march=native", "-mcpu=native", "-mtune=native", "GGML_NATIVE=ON")


class BackendError(ValueError):
    """A backend record that cannot be read."""


@dataclass(frozen=True)
class Backend:
    """Where a build's logits are computed: the hardware, the build, the runtime."""
    kind: str                            # "cpu" | "cuda": where the logits command computes
    runtime: str                         # "docker" | "local"
    arch: str                            # the host's machine: "x86_64", "aarch64"
    cpu_model: str
    cpu_flags: tuple[str, ...]           # the instruction-set flags of console.round.node.CPU_FLAGS it has
    threads: int                         # {threads} of the logits command
    offload: str = "none"                # the profile's run.gpus: "none" | "optional" | "required"
    compiler: str | None = None          # the asserted compiler line; None: not a build (an independent program)
    build_sha256: str | None = None      # digest of the build and logits commands; None: not a build
    native: bool = False                 # the build compiles for the node's own instruction set
    gpu_name: str | None = None          # CUDA only: the first GPU's name, as NVML gives it
    compute_capability: str | None = None   # CUDA only: "9.0"
    driver_version: str | None = None    # CUDA only: "550.54.15"
    cuda_version: str | None = None      # CUDA only: the CUDA version the driver supports, "12.4"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cpu_flags"] = list(self.cpu_flags)
        return d

    @classmethod
    def from_dict(cls, d: Any) -> "Backend":
        if not isinstance(d, Mapping):
            raise BackendError(f"expected an object, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        if unknown := sorted(set(d) - known):
            raise BackendError(f"unknown key(s) {', '.join(unknown)}")
        if d.get("kind") not in KINDS:
            raise BackendError(f"kind {d.get('kind')!r} is not one of {', '.join(KINDS)}")
        if d.get("runtime") not in RUNTIMES:
            raise BackendError(f"runtime {d.get('runtime')!r} is not one of {', '.join(RUNTIMES)}")
        try:
            flags = tuple(str(f) for f in d.get("cpu_flags") or ())
            return cls(**{**d, "cpu_flags": flags, "threads": int(d["threads"]),
                          "arch": str(d["arch"]), "cpu_model": str(d["cpu_model"]),
                          "native": bool(d.get("native", False))})
        except (KeyError, TypeError, ValueError) as e:
            raise BackendError(f"missing or malformed key: {e}") from None


def build_digest(parts: Sequence[str]) -> str:
    """The build's identity for parity: the sha256 of its commands, in order."""
    return hashlib.sha256(json.dumps(list(parts)).encode()).hexdigest()


def is_native(parts: Sequence[str]) -> bool:
    return any(m in p for p in parts for m in NATIVE_MARKERS)


def _text(v: Any) -> str | None:
    return None if v is None else str(v)


def backend_of(*, host: HostFacts, preflight: Mapping[str, Any] | None, gpus: bool, runtime: str,
               threads: int, offload: str, compiler: str | None, build: Sequence[str] | None) -> Backend:
    """A backend from a node's facts (``host``: console.round.node.node_facts; ``preflight``: the
    telemetry's facts), whether the runs get the GPUs, and what builds the engine (``build`` None:
    the logits come from a program that is not a build of the engine)."""
    gpu: Mapping[str, Any] = {}
    driver: Mapping[str, Any] = {}
    if gpus and preflight:
        gpu = (preflight.get("gpus") or [{}])[0] or {}
        driver = preflight.get("driver") or {}
    return Backend(
        kind="cuda" if gpus else "cpu", runtime=runtime, arch=str(host.arch or "unknown"),
        cpu_model=str(host.cpu_model or "unknown"), cpu_flags=tuple(host.cpu_flags or ()),
        threads=int(threads), offload=offload, compiler=compiler if build is not None else None,
        build_sha256=build_digest(build) if build is not None else None,
        native=is_native(build or ()),
        gpu_name=_text(gpu.get("name")) if gpus else None,
        compute_capability=_text(gpu.get("compute_capability")) if gpus else None,
        driver_version=_text(driver.get("driver_version")) if gpus else None,
        cuda_version=_text(driver.get("cuda_driver_version")) if gpus else None)


# --- the rule ------------------------------------------------------------------

@dataclass(frozen=True)
class Difference:
    key: str             # the Backend field, or "backend" when the reference records none
    reference: Any
    round: Any
    allowed: bool
    why: str

    def message(self) -> str:
        return (f"{self.key}: reference {_said(self.reference)}, this round {_said(self.round)} "
                f"({'allowed' if self.allowed else 'refused'}: {self.why})")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _said(v: Any) -> str:
    if v is None:
        return "none recorded"
    if isinstance(v, (tuple, list)):
        return "[" + " ".join(str(x) for x in v) + "]"
    return repr(v) if isinstance(v, str) else str(v)


LEGACY_CPU = ("the reference records no backend (captured before backends were recorded); a CPU "
              "reference is portable across CPUs, and every such reference was captured on a CPU")
LEGACY_GPU = ("the reference records no backend (captured before backends were recorded), so nothing "
              "says it was computed on this GPU, and CUDA and CPU kernels differ by up to 0.10 nats")
WHY = {
    "kind": "CPU and CUDA kernels round differently: main's own CUDA build moved a CPU reference by up "
            "to 0.10 nats of mean KL per depth",
    "arch": "another architecture runs other kernels",
    "cpu_model": "a portable build runs the same code on any CPU of the architecture",
    "cpu_flags": "a portable build uses only the instructions it was compiled for",
    "cpu_flags/native": "a native build (-march=native) compiles for the node's own instruction set",
    "threads": "the kernels split work across threads without changing any sum",
    "runtime": "the same compiler and build commands make the same code in a container or on the host",
    "offload": "what the runs did is the backend kind",
    "compiler": "another compiler generates other code",
    "build_sha256": "other build or logits commands (flags, GPU offload) compute differently",
    "gpu_name": "another GPU model runs other kernels",
    "compute_capability": "another compute capability compiles other kernels",
    "driver_version": "a driver of the same branch: minor versions do not change the kernels",
    "driver_version/major": "another driver branch may compile the kernels' PTX differently",
    "cuda_version": "the same CUDA major version",
    "cuda_version/major": "another CUDA major version",
}


def _major(v: str | None) -> str | None:
    return None if v is None else v.split(".")[0]


def _judge(key: str, ref: Backend, rnd: Backend) -> tuple[bool, str]:
    """Whether one field's difference is allowed, and why."""
    if key in ("cpu_model", "threads", "offload"):
        return True, WHY[key]
    if key == "cpu_flags":
        native = ref.native or rnd.native
        return (not native), WHY["cpu_flags/native" if native else "cpu_flags"]
    if key == "runtime":
        same = ref.compiler is None or ref.compiler == rnd.compiler
        return same, WHY["runtime"] if same else WHY["compiler"]
    if key in ("driver_version", "cuda_version"):
        same = _major(getattr(ref, key)) == _major(getattr(rnd, key)) and getattr(ref, key) is not None \
            and getattr(rnd, key) is not None
        return same, WHY[key if same else f"{key}/major"]
    return False, WHY[key]


def _compared(ref: Backend) -> list[str]:
    """The fields compared against this reference: a reference that is not a build of the engine
    (an independent program) has no compiler or build to match."""
    keys = [f.name for f in fields(Backend) if f.name != "native"]     # native is part of build_sha256
    if ref.compiler is None:
        keys = [k for k in keys if k not in ("compiler", "build_sha256", "runtime")]
    if ref.kind != "cuda":
        keys = [k for k in keys if k not in ("gpu_name", "compute_capability", "driver_version", "cuda_version")]
    return keys


@dataclass(frozen=True)
class BackendCheck:
    """The round's backend against the reference's: every difference, allowed or refused."""
    reference: Backend | None            # None: the reference records no backend
    round: Backend
    differences: tuple[Difference, ...] = ()

    @property
    def refused(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if not d.allowed)

    @property
    def allowed(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if d.allowed)

    @property
    def ok(self) -> bool:
        return not self.refused

    def to_dict(self) -> dict[str, Any]:
        return {"reference": self.reference.to_dict() if self.reference else None, "round": self.round.to_dict(),
                "differences": [d.to_dict() for d in self.differences], "refused": not self.ok}


def compare(ref: Backend | None, rnd: Backend) -> BackendCheck:
    """The rule: each difference between the reference's backend and the round's, and whether it
    refuses the round (module docstring)."""
    if ref is None:
        cpu = rnd.kind == "cpu"
        return BackendCheck(None, rnd, (Difference("backend", None, rnd.kind, cpu, LEGACY_CPU if cpu else LEGACY_GPU),))
    diffs = []
    for key in _compared(ref):
        a, b = getattr(ref, key), getattr(rnd, key)
        if a != b:
            allowed, why = _judge(key, ref, rnd)
            diffs.append(Difference(key, list(a) if isinstance(a, tuple) else a,
                                    list(b) if isinstance(b, tuple) else b, allowed, why))
    return BackendCheck(ref, rnd, tuple(diffs))
