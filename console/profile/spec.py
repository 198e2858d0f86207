"""The profile's typed sections, each declared once: its keys, their defaults, ranges and choices,
and a line on what each means. The JSON Schema, docs/PROFILES.md and the loader's checks all
come from these declarations.

They are dataclasses (pydantic's, so ``dataclasses.replace`` and ``asdict`` work as on any other);
the checks that need the profile's directory, or that only a profile file must pass, run while a
profile is loaded (``loading``), never when a spec is built in code.
"""
from __future__ import annotations

import dataclasses
import hashlib
import sys
from dataclasses import InitVar, asdict, field
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import ConfigDict, ValidationInfo, WithJsonSchema, model_validator
from pydantic.dataclasses import dataclass

from ..core.decisions.health import HealthRules, PreflightRules
from ..core.records.matrix import MatrixSpec
from ..core.decisions.queue import QueueRules
from ..core.records.receipt import ProfileRecord
from ..core.records.rules import GateRules, Guard
from .checks import (Bool, CDI_DEVICES, COMPONENTS, IMAGE_ID, NONEMPTY, SHA256, SIZE, USER, Check, ExistingFile, Int,
                     Num, Place, Str, Strs, argv, increasing, key, loading, refuse, within)

TABLE = ConfigDict(extra="forbid")      # an unknown key is an error that names it


def table(cls: type) -> type:
    return dataclass(frozen=True, config=TABLE)(cls)


# The bench output formats a profile may name, spelled here once: the engine builds its one record
# per format (engine.adapters.ADAPTERS) from these names, so the profile, read first, need not load
# the engine to refuse an unknown one.
BENCH_RESULT, LLAMA_BENCH = "bench_result", "llama-bench"
ADAPTER_NAMES = (BENCH_RESULT, LLAMA_BENCH)
AdapterName = Literal[ADAPTER_NAMES]
COMMON_PLACEHOLDERS = {"threads", "model"}
BENCH_PLACEHOLDERS = {"depth", "tokens", "context", "doc", "out", "metric", "fill", "repeat",
                      "handover"} | COMMON_PLACEHOLDERS
PARITY_PLACEHOLDERS = {"doc", "depths", "rows", "out"} | COMMON_PLACEHOLDERS
TOKENIZE_PLACEHOLDERS = {"text", "out"} | COMMON_PLACEHOLDERS
REFERENCE_PLACEHOLDERS = PARITY_PLACEHOLDERS | {"python", "profile_dir"}
ACCURACY_PLACEHOLDERS = {"prompts", "tokens", "out"} | COMMON_PLACEHOLDERS
COMPLETION_PLACEHOLDERS = {"doc", "positions", "tokens", "out"} | COMMON_PLACEHOLDERS


@table
class Source:
    """Where an engine's source comes from: a local directory, a git repo + ref, or a
    pinned sdist on the package index (``pypi`` = "name==version") and a directory in it."""
    path: Annotated[Place | None, key("a local directory, relative to the profile")] = None
    git: Annotated[Str | None, key("a git repository URL (with ref)")] = None
    ref: Annotated[Str | None, key("with git: a branch, tag or commit")] = None
    pypi: Annotated[Str | None, key("a pinned sdist on the package index, 'name==version'")] = None
    subtree: Annotated[Str | None, key("with pypi: the engine's directory inside the sdist")] = None

    @model_validator(mode="after")
    def _one_kind(self, info: ValidationInfo) -> Source:
        if not loading(info):
            return self
        kinds = [k for k in ("path", "git", "pypi") if getattr(self, k) is not None]
        if len(kinds) > 1:
            raise refuse("expected one of 'path', 'git' (+ 'ref') or 'pypi' (+ 'subtree'), not "
                         + " and ".join(kinds))
        if not kinds:
            raise refuse("expected 'path' (a local directory), 'git' and 'ref', or 'pypi'")
        if self.git is not None and self.ref is None:
            raise refuse("missing; expected a branch, tag or commit", "ref")
        if self.pypi is not None and (self.pypi.count("==") != 1 or not all(self.pypi.split("=="))):
            raise refuse(f"expected a pinned requirement 'name==version', got {self.pypi!r}", "pypi")
        for k, only in (("ref", "git"), ("subtree", "pypi")):
            if getattr(self, k) is not None and getattr(self, only) is None:
                raise refuse(f"expected '{k}' only with '{only}'", k)
        return self


@table
class Tool:
    """A build tool besides the compiler, asserted in the image like the compiler is."""
    name: Annotated[Str, key("the tool's name, for messages")]
    probe: Annotated[Strs, NONEMPTY, key("the command that prints its version")]
    expect: Annotated[Str, key("the exact first line the probe must print")]


@table
class HarnessSpec:
    """The measuring program the profile owns: built in each engine's image, never taken
    from a candidate's tree."""
    path: Annotated[Place, key("its directory, beside the profile")]
    build: Annotated[Str, key("a shell command that builds it in /harness after the engine's build")]


@table
class ModelFile:
    """A weights file every run reads, mounted read-only at /model/<name>."""
    name: Annotated[Str, Check(lambda v: None if "/" not in v and v not in ("", ".", "..")
                               else f"expected a plain file name, got {v!r}"),
                    key("the file's name under /model")]
    path: Annotated[Str, key("absolute, ~/…, relative to the profile, or inside `module`; "
                             "it may not exist yet")]
    sha256: Annotated[Str, SHA256, key("the file's sha256")]
    package: Annotated[Str, key("the pip requirement that provides it, for the hint")] = ""
    how: Annotated[Str, key("the command that makes the file, for the hint")] = ""
    module: InitVar[Annotated[Str, key("an installed Python package `path` is inside")]] = ""

    @model_validator(mode="before")
    @classmethod
    def _locate(cls, data: Any, info: ValidationInfo) -> Any:
        """``path`` becomes absolute: inside ``module`` when it names one, else from the profile."""
        if not (loading(info) and isinstance(data, dict) and isinstance(data.get("path"), str)):
            return data
        rel, module = data["path"], data.get("module")
        if isinstance(module, str):
            if not all(part.isidentifier() for part in module.split(".")):
                raise refuse(f"expected an installed package's dotted name, got {module!r}", "module")
            where = _in_module(module, rel) or f"<module {module} is not installed>/{rel}"
        else:
            where = str((info.context["base"] / Path(rel).expanduser()).resolve())
        return {**data, "path": where}


def _in_module(module: str, rel: str) -> str | None:
    """``rel`` inside the installed package ``module``, found without running any of its code:
    loading (or checking) a profile must not execute what a profile names.
    ``importlib.util.find_spec`` would import a dotted name's parents (running their
    ``__init__``); here each level is looked up by the import system's finders only, a
    parent's search path leading to the next."""
    path: list[str] | None = None
    for i, _part in enumerate(parts := module.split(".")):
        spec = _find(".".join(parts[:i + 1]), path)
        if spec is None or not spec.submodule_search_locations:
            return None
        path = list(spec.submodule_search_locations)
    return str(Path(path[0]) / rel) if path else None


def _find(name: str, path: list[str] | None) -> ModuleSpec | None:
    for finder in sys.meta_path:
        try:
            spec = finder.find_spec(name, path) if hasattr(finder, "find_spec") else None
        except (ImportError, ValueError, OSError):
            continue
        if spec is not None:
            return spec
    return None


@dataclass(frozen=True, config=TABLE, kw_only=True)
class HostToolchain:
    """Under ``--runtime local`` there is no image: the host's own tools build, asserted like the
    image's. Each key left out means the image's value (a Debian 12 host matches the CPU images)."""
    compiler: Annotated[Str, key("the exact first line of the host compiler's version output", "image.compiler")] = ""
    compiler_probe: Annotated[Strs, key("the command that prints it", "image.compiler_probe")] = ()
    tools: Annotated[tuple[Tool, ...] | None, key("the host's tools, asserted", "image.tools")] = None
    path: Annotated[Strs, key("directories put before /usr/local/bin:/usr/bin:/bin for builds and runs "
                              "(e.g. /usr/local/cuda/bin)")] = ()


@table
class BaseArchive:
    """A base made elsewhere (a site's mirror of nvidia/cuda, say): a `docker save` archive, pinned
    by the image ID it must load as. Nothing is installed on it: builds have no network."""
    path: Annotated[Place, key("the archive `docker save` wrote (.tar), relative to the profile")]
    id: Annotated[Str, IMAGE_ID, key("the image ID it must load as (sha256:…); builds start from it")]


@dataclass(frozen=True, config=TABLE, kw_only=True)
class ImageSpec:
    base: Annotated[Str, key("a local image tag, an image ID or a digest (sha256:…), "
                             "made by `console images bootstrap`")]
    suite: Annotated[Str, key("the Debian suite the bootstrap uses")] = "bookworm"
    components: Annotated[Strs, COMPONENTS, key(
        "the archive components debootstrap reads and the image's apt sources name "
        "(e.g. main, contrib, non-free)")] = ("main",)
    packages: Annotated[Strs, key("packages the base includes")] = ("gcc", "libc6-dev", "make")
    base_archive: Annotated[BaseArchive | None, key(
        "instead of debootstrap: load the base from this archive ({path, id}) and tag it as base")] = None
    compiler: Annotated[Str, key("the exact first line of the compiler's version output")]
    compiler_probe: Annotated[Strs, NONEMPTY, key("the command that prints the compiler version")] = (
        "gcc", "--version")
    build: Annotated[Str, key("a shell command that builds the engine in the source directory")]
    workdir: Annotated[Str, key("where the source is in the image")] = "/src"
    tools: Annotated[tuple[Tool, ...], key("cmake and the like, asserted like the compiler")] = ()
    compiler_cache: Annotated[Literal["none", "ccache"], key(
        "reuse compiled objects of identical inputs across builds: ccache, which the base must include "
        "(list it in tools to assert its version), with its store kept on this node per base image and compiler")] = "none"
    host: Annotated[HostToolchain, key("what --runtime local asserts on the host instead of the image",
                                       "the image's compiler and tools")] = HostToolchain()

    @model_validator(mode="before")
    @classmethod
    def _one_base(cls, data: Any, info: ValidationInfo) -> Any:
        """An archive's image is used as it is: the keys that make a base with debootstrap would say
        something the base does not hold, and its tag is the name the loaded image gets."""
        if not (loading(info) and isinstance(data, dict) and data.get("base_archive") is not None):
            return data
        for k in ("suite", "components", "packages"):
            if k in data:
                raise refuse(f"expected no '{k}' with base_archive: the archive's image is used as it is "
                             "(builds have no network to add packages)", k)
        base = data.get("base")
        if isinstance(base, str) and (base.startswith("sha256:") or "@" in base):
            raise refuse("expected a local tag (repository:tag) with base_archive: the loaded image is "
                         "tagged with it", "base")
        return data

    @property
    def base_ref(self) -> str:
        """What builds start from: the archive's pinned ID, else ``base``."""
        return self.base_archive.id if self.base_archive is not None else self.base

    def toolchain(self, runtime: str) -> tuple[str, tuple[str, ...], tuple[Tool, ...]]:
        """The compiler line, its probe and the tools a build under ``runtime`` must find."""
        if runtime != "local":
            return self.compiler, self.compiler_probe, self.tools
        h = self.host
        return (h.compiler or self.compiler, h.compiler_probe or self.compiler_probe,
                self.tools if h.tools is None else h.tools)


@table
class RunSpec:
    cpus: Annotated[Num, within(0.1), key("CPU cores a run may use")] = 1.0
    memory: Annotated[Str, SIZE, key("a run's memory limit")] = "1g"
    pids: Annotated[Int, within(8), key("a run's process limit")] = 64
    timeout_s: Annotated[Num, within(1), key("seconds a run may take")] = 120.0
    gpus: Annotated[Literal["none", "optional", "required"], key("whether runs get the GPUs")] = "none"
    cdi_devices: Annotated[Strs, CDI_DEVICES, key(
        "with gpus: the CDI devices runs get (e.g. 'nvidia.com/gpu=all'), for a Docker daemon that hands "
        "GPUs out by CDI; none: the equivalent of `docker run --gpus all`")] = ()
    env: Annotated[Strs, key("names of host variables passed through (nothing else is)")] = ()
    user: Annotated[Str, USER, key("uid:gid runs are started as (non-root by default)")] = "65534:65534"
    output_limit_mb: Annotated[Int, within(1), key(
        "MB the output directory may hold",
        "64, or more: what the logits command writes (depths x rows x vocab float32s) and a margin")] = 64

    @model_validator(mode="after")
    def _devices_need_gpus(self, info: ValidationInfo) -> RunSpec:
        if loading(info) and self.cdi_devices and self.gpus == "none":
            raise refuse("expected run.gpus = 'optional' or 'required' with cdi_devices: runs without "
                         "GPUs get no device", "cdi_devices")
        return self

    @property
    def threads(self) -> int:
        """What ``{threads}`` becomes: the whole cores ``cpus`` allows (at least one)."""
        return max(1, int(self.cpus))


SERVE = "serve"     # bench.mode of a serving profile


@table
class BenchSpec:
    command: Annotated[argv(BENCH_PLACEHOLDERS, nonempty=False), key(
        "the bench command (argv); not used with mode = 'serve'")] = ()
    metric: Annotated[Str, Check(lambda v: None if v else "expected a metric name"), key(
        "the metric name the bench result line carries (a serving profile: output_tok_s, stream_tok_s or "
        "request_s)")] = ""
    depth: Annotated[Int, within(0), key("positions of context before the timed section")] = 0
    tokens: Annotated[Int, within(2), key("tokens timed per run")] = 2
    short_tokens: Annotated[Int, within(1), key("tokens timed per short run (fewer than tokens)")] = 1
    reps: Annotated[Int, within(1, 1000), key(
        "pairs of a noise round (a round's timed pairs are the gate's budget)")] = 8
    warmup: Annotated[Int, within(0, 10), key("untimed runs per build first")] = 1
    short_reps: Annotated[Int, within(2, 100), key(
        "short runs per build: the wall-clock differential's sample")] = 4
    shortcut: Annotated[Literal["none", "seek"], key("how the context is reached: filled, or seeked")] = "none"
    seek_bytes_per_position: Annotated[Int, within(0), key(
        "cache bytes a seeked position allocates (required with shortcut = 'seek')")] = 0
    fill: Annotated[Literal["decode", "prefill"], key(
        "the context before the timed section: token by token, or the batched prompt path")] = "decode"
    adapter: Annotated[AdapterName, key("how the bench's stdout is read")] = BENCH_RESULT
    mode: Annotated[Literal["harness", SERVE], key(
        "runs of the bench command, or blocks of requests through the engine's server ([server])")] = "harness"
    min_seconds: Annotated[Num, within(0), key(
        "engine seconds each timed run must reach: the console repeats the timed section within the run "
        "({repeat}), sized once per round from full-length warm-ups (for fast devices)", "0: one section per run")] = 0.0
    self_timed_tier: Annotated[Bool, key(
        "a bench that times itself (its command takes no {handover}) may still earn a tier; say why in a "
        "comment: its figure is the engine's own claim", "false: a self-timed round is decided, and earns no tier")] = False

    @property
    def console_timed(self) -> bool:
        """Whether the console's clock times the section (the command takes ``{handover}``), or the
        engine's own report is the figure (a self-timed bench, such as llama-bench)."""
        return any("{handover}" in a for a in self.command)

    @property
    def serves(self) -> bool:
        """Blocks of requests through each build's server, not runs of the bench command: the one
        reading of ``mode`` (``Profile.serving`` is this, tied to a [server] table by the profile's checks)."""
        return self.mode == SERVE

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> BenchSpec:
        if not loading(info):
            return self
        if self.shortcut == "seek" and self.seek_bytes_per_position <= 0:
            raise refuse("expected a positive byte count when bench.shortcut = 'seek' (it is how the "
                         "console checks the seek really allocated its cache)", "seek_bytes_per_position")
        if self.short_tokens >= self.tokens:
            raise refuse(f"expected fewer than bench.tokens ({self.tokens})", "short_tokens")
        if not self.serves and not self.command:
            raise refuse("missing; expected the bench command (argv)", "command")
        if self.min_seconds > 0 and (self.serves or not any("{repeat}" in a for a in self.command)):
            raise refuse("expected a bench command that takes {repeat} (harness mode): without it the console "
                         "cannot lengthen a run", "min_seconds")
        return self


DEPTHS = (4, 128, 256, 512, 1024, 2048, 4096)


@dataclass(frozen=True, config=TABLE, kw_only=True)
class ParitySpec:
    command: Annotated[argv(PARITY_PLACEHOLDERS), key("the logits command (argv)")]
    output: Annotated[Str, key("the file the logits command writes in {out}")] = "logits.npy"
    document: Annotated[Place, key("the token-id document (made by `console reference capture` "
                                   "when text is given)")]
    document_sha256: Annotated[Str, key("the sha256 of the token-id document")]
    reference: Annotated[Place, key("the reference: full logits (.npy), or its top-k form (.npz) with "
                                    "reference_format = 'topk'")]
    reference_sha256: Annotated[Str, key("the sha256 of the reference file")] = ""
    reference_format: Annotated[Literal["full", "topk"], key(
        "'full': every logit of every row (float32 .npy); 'topk': per row the reference's top_k tokens' "
        "log-probabilities and the rest's total (.npz, docs/PROTOCOL.md), KL graded over those k + 1 "
        "outcomes")] = "full"
    top_k: Annotated[Int, within(1), key("with reference_format = 'topk': tokens kept per row (fewer than vocab)")] = 1024
    depths: Annotated[tuple[Int, ...], Check(increasing, {"minItems": 1}), key(
        "the depths parity is checked at (strictly increasing)")] = DEPTHS
    rows: Annotated[Int, within(1), key("logit rows per depth (at most the smallest depth)")] = 1
    vocab: Annotated[Int, within(2), key("the vocabulary size")]
    scored_path_depth: Annotated[Int, within(1), key("the depth of the scored path (one of depths)",
                                                     "the smallest of depths")] = 0
    scored_path_tokens: Annotated[Int, within(1), key("tokens of the scored path")] = 1
    text: Annotated[ExistingFile, key("the text the document is tokenised from (none: ids given)")] = ""
    tokenize: Annotated[argv(TOKENIZE_PLACEHOLDERS, nonempty=False), key(
        "the harness command that tokenises text (reference image)")] = ()

    @model_validator(mode="before")
    @classmethod
    def _default_scored_depth(cls, data: Any) -> Any:
        if isinstance(data, dict) and "scored_path_depth" not in data:
            depths = data.get("depths", DEPTHS)
            if isinstance(depths, (list, tuple)) and depths and isinstance(depths[0], int):
                return {**data, "scored_path_depth": depths[0]}
        return data

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> ParitySpec:
        if not loading(info):
            return self
        if self.rows > self.depths[0]:
            raise refuse(f"expected at most the smallest depth ({self.depths[0]})", "rows")
        if not self.text and not Path(self.document).exists():
            raise refuse(f"expected an existing file, but {self.document} does not exist", "document")
        if self.text and not self.tokenize:
            raise refuse("expected the command that tokenises parity.text", "tokenize")
        if self.reference_format == "topk" and self.top_k >= self.vocab:
            raise refuse(f"expected fewer than parity.vocab ({self.vocab}): the rest of the vocabulary is the "
                         "tail the top-k form keeps one total for", "top_k")
        if self.reference_format == "topk" and not self.reference.endswith(".npz"):
            raise refuse("expected a .npz file with reference_format = 'topk'", "reference")
        if self.scored_path_depth not in self.depths:
            raise refuse(f"expected one of parity.depths {list(self.depths)}", "scored_path_depth")
        if self.scored_path_tokens >= self.scored_path_depth:
            raise refuse("expected fewer than parity.scored_path_depth", "scored_path_tokens")
        return self

    def output_mb(self) -> int:
        """MB the logits command's output needs: depths x rows x vocab float32s, a quarter more, and 8."""
        need = len(self.depths) * self.rows * self.vocab * 4
        return -(-need * 5 // 4 >> 20) + 8


@table
class ReferenceSpec:
    """How `console reference capture` produces the reference logits."""
    runtime: Annotated[Literal["local", "docker"], key(
        "'local' (a trusted host command) or 'docker' (the pinned reference build)")] = "docker"
    command: Annotated[argv(REFERENCE_PLACEHOLDERS, nonempty=False), key(
        "the reference's logits command (argv)", "parity.command")] = ()
    engine: Annotated[Str, key("what the reference is, e.g. 'numpy float64 reference of the demo model'")] = ""
    commit: Annotated[Str, key("the reference engine's commit")] = ""
    weights_sha256: Annotated[Str, key("the sha256 of the weights it reads (one of model.files)")] = ""
    source: Annotated[Source | None, key("with docker: the pinned reference build", "the profile's main")] = None


@table
class AccuracySpec:
    """The task accuracy stage: a task set in the repo, answered greedily through the harness."""
    tasks: Annotated[ExistingFile, key("the JSON-lines task set")]
    tasks_sha256: Annotated[Str, key("the sha256 of the task set")]
    command: Annotated[argv(ACCURACY_PLACEHOLDERS), key("the answering command (argv)")]
    tokens: Annotated[Int, within(1), key("at most this many generated tokens per item")] = 8
    chunk: Annotated[Int, within(1), key("items per run (progress is shown between runs)")] = 25

    @model_validator(mode="after")
    def _pinned(self, info: ValidationInfo) -> AccuracySpec:
        from ..core.decisions.accuracy import TaskSetError, parse_tasks
        if not loading(info):
            return self
        try:
            data = Path(self.tasks).read_bytes()
        except OSError as e:
            raise refuse(f"expected a readable task set: {self.tasks}: {e.strerror}", "tasks") from None
        if (got := hashlib.sha256(data).hexdigest()) != self.tasks_sha256:
            raise refuse(f"expected the sha256 of {self.tasks}; the file has {got} "
                         "(the task set changed: pin it deliberately)", "tasks_sha256")
        try:
            parse_tasks(data.decode("utf-8"))
        except (TaskSetError, UnicodeDecodeError) as e:
            raise refuse(f"expected a JSON-lines task set: {self.tasks}: {e}", "tasks") from None
        return self


class Variant(NamedTuple):
    """A kernel variant of the reference build: its name and the harness arguments that select it."""
    name: Str
    args: Annotated[Strs, NONEMPTY]


# TOML writes a variant as a table; the spec keeps (name, args) pairs
VARIANT_TABLE = WithJsonSchema({
    "type": "object", "additionalProperties": False, "required": ["name", "args"],
    "properties": {"name": {"type": "string", "description": "the variant's name"},
                   "args": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                            "description": "extra harness arguments that select it"}}})


@table
class AdjudicationSpec:
    """How borderline KL is settled (console.core.records.adjudication): the reference build's alternative
    kernel settings, and the completions from the document."""
    variants: Annotated[tuple[Annotated[Variant, VARIANT_TABLE], ...], Check(
        lambda v: None if v else "expected at least one kernel variant of the reference", {"minItems": 1}),
        key("the reference's kernel variants ({name, args} tables)")]
    command: Annotated[argv(COMPLETION_PLACEHOLDERS), key("the completions command (argv)")]
    follow: Annotated[argv({"follow"}), key("arguments added to force the reference's tokens")]
    completions: Annotated[Int, within(1), key("how many, evenly placed over the parity depths")] = 40
    tokens: Annotated[Int, within(1), key("tokens per completion")] = 32


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str
    path: str                       # absolute path of the profile file
    sha256: str                     # of the file's bytes
    description: str
    source: Source                  # default main source
    protected: tuple[str, ...]
    image: ImageSpec
    run: RunSpec
    bench: BenchSpec
    parity: ParitySpec
    reference: ReferenceSpec
    gate: GateRules
    node: str = "local"             # node name used to qualify lock slots
    health: HealthRules = field(default_factory=HealthRules)   # when a rep is suspect
    preflight: PreflightRules = field(default_factory=PreflightRules)   # when the node is unfit to start
    harness: HarnessSpec | None = None
    model: tuple[ModelFile, ...] = ()
    exclude: tuple[str, ...] = ()   # top-level paths of a source left out of its snapshot
    candidate: str = ""             # the default candidate spec (pypi:…, a patch, a directory)
    queue: QueueRules = field(default_factory=QueueRules)     # how the queue books and judges copies
    accuracy: AccuracySpec | None = None            # [accuracy]: the task accuracy stage
    adjudication: AdjudicationSpec | None = None    # [adjudication]: how borderline KL is settled
    server: Any = None              # [server] (profile.serving.ServerSpec): a serving profile's server and load
    matrix: MatrixSpec | None = None    # [matrix]: the cells of a matrix round (core.matrix)

    @property
    def dir(self) -> Path:
        return Path(self.path).parent

    @property
    def serving(self) -> bool:
        """A serving profile times requests through each build's server (bench.mode = 'serve', which
        the profile's checks tie to a [server] table)."""
        return self.server is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def record(self) -> ProfileRecord:
        """What a receipt keeps of the profile: its hash and the rules and specs in force."""
        return ProfileRecord(name=self.name, path=self.path, sha256=self.sha256, node=self.node,
                             rules=self.gate, bench=asdict(self.bench), parity=asdict(self.parity),
                             server=asdict(self.server) if self.server is not None else {},
                             matrix=self.matrix, run=asdict(self.run), image=asdict(self.image))

    def metric_of(self, guard: Guard | None) -> str:
        return (guard.metric if guard is not None and guard.metric else "") or self.bench.metric
