"""What a round decides about its node: whether it is fit to measure, whether the engine gets the
GPUs, and whether its backend matches the reference's. The node's facts are telemetry's
(``telemetry.facts``) and the runtime is made in ``runtime``."""
from __future__ import annotations

from typing import Any

from .. import events as ev
from ..core.provenance import fingerprint
from ..core.provenance.backend import Backend, BackendCheck, BackendError, backend_of, compare
from ..core.records.facts import HostFacts
from ..core.decisions.health import notice_level
from ..errors import InfraError, UsageError
from ..telemetry.facts import gpu_facts, host_facts


def node_facts(rt, tele=None) -> HostFacts:
    """This node as a receipt records it: the host's and the runtime's facts (``rt`` None: a
    capture that runs no build), the GPUs telemetry watches, and the fingerprint they make (the
    lock's key for this machine)."""
    facts = {**host_facts(rt), **(gpu_facts(tele) if tele is not None else {})}
    facts["fingerprint"] = fingerprint.of_host(HostFacts.from_dict(facts)).to_dict()
    return HostFacts.from_dict(facts)


def refuse_unfit(preflight: dict[str, Any], notice: ev.Notify) -> None:
    """Say every preflight finding at its level; a refusing one ends the round before anything is built."""
    findings = preflight.get("findings", [])
    for f in findings:
        notice(notice_level(f.get("level", "warn")), f.get("code", "preflight"), f.get("message", ""))
    refusing = [f for f in findings if f.get("level") == "refuse"]
    if refusing:
        raise InfraError("the node is not fit to measure: " + "; ".join(f.get("message", "") for f in refusing),
                         "Fix the node (or relax the profile) and retry; nothing was recorded as a regression.")


def use_gpus(want: str, rt, host: HostFacts, notice: ev.Notify, run=None) -> bool:
    """Whether the engine gets the GPUs, as the profile's ``run.gpus`` allows (``run``: the
    profile's RunSpec, whose ``cdi_devices`` say how Docker is asked for them)."""
    if want == "none":
        return False
    have = bool(host.gpus)
    runtime_ok = rt.has_gpu_runtime(run)
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


def backend(p, runtime: str, host: HostFacts, preflight: dict | None, gpus: bool,
            command: tuple[str, ...] | list[str] | None = None) -> Backend:
    """Where the profile's builds compute their logits on this node: its facts, whether the runs
    get the GPUs, the compiler pinned for ``runtime``, and the build and logits commands
    (``command``: the reference's; the profile's logits command by default)."""
    build = [p.image.build, p.harness.build if p.harness else "", *(command or p.parity.command)]
    return backend_of(host=host, preflight=preflight, gpus=gpus, runtime=runtime, threads=p.run.threads,
                      offload=p.run.gpus, compiler=p.image.toolchain(runtime)[0], build=build)


def check_backend(p, here: Backend, ref_meta: dict, notice: ev.Notify) -> BackendCheck:
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
