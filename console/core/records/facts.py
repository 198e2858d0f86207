"""What a receipt records of where it ran and from what, typed: the node's facts
(``console.telemetry.facts``), the runtime the builds ran under, the parity reference the round
graded against, and each build's source.

The gate decides nothing on most of these, but the node's fingerprint, the experiment's identity,
comparability, main's history and every report read them, so they are read here once, as
``recorded.Part``s: each writes back the object it was read from byte for byte (the runtime's own
facts, a Docker daemon's version or a batch job's, ride along unmodelled), and readers read fields,
never the document.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from console.core.records.recorded import Part


def _gpus(xs: Any) -> tuple[Any, ...]:
    """Each GPU as telemetry listed it; an entry that is not an object is kept as written (it names
    no GPU: the fingerprint and the reports skip it)."""
    return tuple(Gpu.from_dict(x) if isinstance(x, Mapping) else x for x in xs)


@dataclass(frozen=True)
class Gpu(Part):
    """One GPU telemetry watched (``NvmlTelemetry.gpus``)."""
    index: int | None = None
    uuid: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class SlurmJob(Part):
    """The batch job a queued round ran in."""
    job_id: str | None = None
    node: str | None = None
    partition: str | None = None


@dataclass(frozen=True)
class HostFacts(Part):
    """The node a round ran on. Any fact may be absent (None) in an older or a hand-made receipt."""
    hostname: str | None = None
    cpu_model: str | None = None
    cores: int | None = None
    arch: str | None = None
    cpu_flags: tuple[str, ...] = ()
    kernel: str | None = None
    python: str | None = None
    gpus: tuple[Gpu, ...] = ()
    gpu_driver: str | None = None
    slurm: SlurmJob | None = None
    fingerprint: Mapping[str, Any] | None = None    # core.provenance.fingerprint's, as sealed
    READ = {"gpus": _gpus, "slurm": SlurmJob.from_dict}

    def gpu_names(self) -> tuple[str, ...]:
        """Each GPU's name ("?" for one telemetry could not name), in telemetry's order."""
        return tuple("?" if g.name is None else str(g.name) for g in self.gpus if isinstance(g, Gpu))

    @property
    def node(self) -> str | None:
        """The machine's name: its batch job's node when it ran in one, else its host name."""
        return (self.slurm.node if self.slurm is not None else None) or self.hostname

    def cpu_line(self) -> str:
        """``"AMD EPYC 7B13 x2"``: what every report and screen calls the node's CPU."""
        return f"{_or_unknown(self.cpu_model)} x{_or_unknown(self.cores)}"


@dataclass(frozen=True)
class RuntimeFacts(Part):
    """Where a round's builds ran: ``docker`` (containers) or ``local`` (the host's own processes),
    with what that isolation gives and lacks, and how Docker was asked for the GPUs."""
    kind: str | None = None
    isolation: tuple[str, ...] = ()
    lacks: tuple[str, ...] = ()
    gpu_request: Mapping[str, Any] | None = None

    @property
    def runs_in_docker(self) -> bool:
        """Receipts sealed before a round could run locally name no runtime: they ran in Docker."""
        return (self.kind or "docker") == "docker"


@dataclass(frozen=True)
class ReferenceFacts(Part):
    """The parity reference a round graded against, as the receipt names it (``round.parity.new_record``):
    its hashes, shape and format, where and how it was captured, and whether that was main's own build."""
    sha256: str | None = None
    document_sha256: str | None = None
    depths: tuple[int, ...] = ()
    rows: int | None = None
    vocab: int | None = None
    format: str | None = None
    top_k: int | None = None
    backend: Mapping[str, Any] | None = None
    captured: Mapping[str, Any] | None = None
    same_as_main: bool = False


def _or_unknown(x: Any) -> str:
    return "?" if x is None else str(x)


@dataclass(frozen=True)
class SourceRecord(Part):
    """Where a build's tree came from, as the round recorded it (``engine.sources.snapshot``): a
    directory, a git commit, a PyPI sdist, or a patch over another source; each with the digest
    of the tree that was built."""
    path: str | None = None
    git: str | None = None
    ref: str | None = None
    commit: str | None = None
    pypi: str | None = None
    sdist: str | None = None
    sdist_sha256: str | None = None
    subtree: str | None = None
    patch: str | None = None
    patch_sha256: str | None = None
    over: "SourceRecord | None" = None
    excluded: tuple[str, ...] = ()
    tree_sha256: str | None = None

    @property
    def ordered(self) -> bool:
        """Whether it has a place in an order a bisection can walk (a commit, a release)."""
        return bool(self.git or self.pypi)

    def identity(self, tree: str | None = None) -> str:
        """What a person names it by: REPO@commit, pypi:NAME==VERSION, a patch over one of those, or
        a directory and its tree digest (a directory's content is only known by its digest)."""
        if self.git:
            return f"{self.git}@{self.commit or self.ref}"
        if self.pypi:
            return f"pypi:{self.pypi}"
        if self.patch:
            return f"{self.patch} over {(self.over or SourceRecord()).identity()}"
        return f"{'?' if self.path is None else self.path} (tree {str(tree or self.tree_sha256 or '?')[:12]})"


SourceRecord.READ = {"over": SourceRecord.from_dict}


@dataclass(frozen=True)
class Seal(Part):
    """What the ledger added when it sealed a receipt (``provenance.ledger.seal``): the id of the
    receipt sealed before it, and when."""
    prev: str | None = None
    sealed_at: str | None = None
