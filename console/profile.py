"""TOML profile -> typed, validated configuration.

A profile says how to build an engine, how to run its bench and logits
commands, and which rules the gate applies. Every error names the file, the
key (dotted path) and what was expected, and is raised before anything is
built. Relative paths are resolved against the profile file's directory.
"""
from __future__ import annotations

import hashlib
import tomllib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from .core.health import HealthRules, PreflightRules
from .core.queue import QueueRules
from .core.receipt import ProfileRecord
from .core.rules import Bands, GateRules, Guard, rules_from_dict  # noqa: F401 - re-exported for callers


class ProfileError(Exception):
    def __init__(self, path: Path | str, key: str, expected: str):
        self.path, self.key, self.expected = str(path), key, expected
        super().__init__(f"{path}: key '{key}': {expected}")


# --- typed sections --------------------------------------------------------

@dataclass(frozen=True)
class Source:
    """Where an engine's source comes from: a local directory, a git repo + ref, or a
    pinned sdist on the package index (``pypi`` = "name==version") and a directory in it."""
    path: str | None = None
    git: str | None = None
    ref: str | None = None
    pypi: str | None = None
    subtree: str | None = None


@dataclass(frozen=True)
class Tool:
    """A build tool besides the compiler, asserted in the image like the compiler is."""
    name: str
    probe: tuple[str, ...]
    expect: str                     # exact first line the probe must print


@dataclass(frozen=True)
class HarnessSpec:
    """The measuring program the profile owns: built in each engine's image, never taken
    from a candidate's tree."""
    path: str                       # absolute directory (beside the profile)
    build: str                      # shell command run in /harness after the engine's build


@dataclass(frozen=True)
class ModelFile:
    """A weights file every run reads, mounted read-only at /model/<name>."""
    name: str
    path: str                       # absolute path after loading (may not exist yet)
    sha256: str
    package: str = ""               # the pip requirement that provides it, for the hint
    how: str = ""                   # the command that makes the file, for the hint


@dataclass(frozen=True)
class ImageSpec:
    base: str                       # image tag/ID made by `console images bootstrap`, or a digest
    suite: str                      # Debian suite the bootstrap uses
    packages: tuple[str, ...]       # packages the base includes
    compiler: str                   # exact first line the probe must print
    compiler_probe: tuple[str, ...] # command that prints the compiler version
    build: str                      # shell command run in /src at build time
    workdir: str = "/src"
    tools: tuple[Tool, ...] = ()    # cmake and the like, asserted like the compiler


@dataclass(frozen=True)
class RunSpec:
    cpus: float = 1.0
    memory: str = "1g"
    pids: int = 64
    timeout_s: float = 120.0
    gpus: str = "none"              # "none" | "optional" | "required"
    env: tuple[str, ...] = ()       # names of host variables passed through (nothing else is)
    user: str = "65534:65534"       # non-root by default
    output_limit_mb: int = 64       # the output directory may hold at most this much

    @property
    def threads(self) -> int:
        """What ``{threads}`` becomes: the whole cores ``cpus`` allows (at least one)."""
        return max(1, int(self.cpus))


@dataclass(frozen=True)
class BenchSpec:
    command: tuple[str, ...]
    metric: str
    depth: int
    tokens: int
    short_tokens: int
    reps: int                       # pairs of a noise round (a round's timed pairs are the gate's budget)
    warmup: int = 1
    short_reps: int = 4             # short runs per build: the wall-clock differential's sample
    shortcut: str = "none"          # "none" | "seek"
    seek_bytes_per_position: int = 0
    fill: str = "decode"            # the context before the timed section: "decode" (token by token)
                                    # or "prefill" (the engine's batched prompt path)
    adapter: str = "bench_result"   # how stdout is read: "bench_result" | "llama-bench"


@dataclass(frozen=True)
class ParitySpec:
    command: tuple[str, ...]
    output: str                     # file the logits command writes in {out}
    document: str                   # absolute path after loading
    document_sha256: str
    reference: str                  # absolute path of reference logits (.npy)
    reference_sha256: str
    depths: tuple[int, ...]
    rows: int
    vocab: int
    scored_path_depth: int
    scored_path_tokens: int
    text: str = ""                  # the text the document is tokenised from ("" = ids given)
    tokenize: tuple[str, ...] = ()  # the harness command that tokenises it (reference image)


@dataclass(frozen=True)
class ReferenceSpec:
    """How `console reference capture` produces the reference logits."""
    runtime: str                    # "local" (trusted host command) or "docker"
    command: tuple[str, ...]
    engine: str = ""                # e.g. "numpy float64 reference of the demo model"
    commit: str = ""
    weights_sha256: str = ""
    source: Source | None = None    # docker: the pinned reference build (default: the profile's main)


@dataclass(frozen=True)
class AccuracySpec:
    """The task accuracy stage: a task set in the repo, answered greedily through the harness."""
    tasks: str                      # absolute path of the JSON-lines task set
    tasks_sha256: str
    command: tuple[str, ...]        # placeholders: {prompts} {tokens} {out} {threads} {model}
    tokens: int                     # at most this many generated tokens per item
    chunk: int                      # items per run (progress is shown between runs)


@dataclass(frozen=True)
class AdjudicationSpec:
    """How borderline KL is settled (console.core.adjudication): the reference build's alternative
    kernel settings, and the completions from the document."""
    variants: tuple[tuple[str, tuple[str, ...]], ...]   # (name, extra harness arguments)
    command: tuple[str, ...]        # completions: {doc} {positions} {tokens} {out} {threads} {model}
    follow: tuple[str, ...]         # arguments added to force the reference's tokens: {follow}
    completions: int                # how many, evenly placed over the parity depths
    tokens: int                     # tokens per completion


@dataclass(frozen=True)
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

    @property
    def dir(self) -> Path:
        return Path(self.path).parent

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def record(self) -> ProfileRecord:
        """What a receipt keeps of the profile: its hash and the rules and specs in force."""
        return ProfileRecord(name=self.name, path=self.path, sha256=self.sha256, node=self.node,
                             rules=self.gate, bench=asdict(self.bench), parity=asdict(self.parity))

    def metric_of(self, guard: Guard | None) -> str:
        return (guard.metric if guard is not None and guard.metric else "") or self.bench.metric


# --- the loader ------------------------------------------------------------

_SECTIONS = {
    "name", "description", "node", "source", "engine", "image", "run", "bench",
    "parity", "reference", "gate", "health", "preflight", "harness", "model", "queue", "accuracy",
    "adjudication",
}


class _Reader:
    """Reads typed values from a TOML table, naming the dotted key on error."""

    def __init__(self, path: Path, table: dict[str, Any], prefix: str, known: set[str]):
        self.path, self.table, self.prefix = path, table, prefix
        for k in table:
            if k not in known:
                raise ProfileError(path, self._key(k), "unknown key; expected one of " + ", ".join(sorted(known)))

    def _key(self, k: str) -> str:
        return f"{self.prefix}.{k}" if self.prefix else k

    def get(self, k: str, kind: type | tuple[type, ...], default: Any = ..., what: str = "") -> Any:
        if k not in self.table:
            if default is ...:
                raise ProfileError(self.path, self._key(k), f"missing; expected {what or _kind_name(kind)}")
            return default
        v = self.table[k]
        if isinstance(v, bool) and bool not in _as_tuple(kind):
            raise ProfileError(self.path, self._key(k), f"expected {what or _kind_name(kind)}, got {v!r}")
        if not isinstance(v, kind):
            raise ProfileError(self.path, self._key(k), f"expected {what or _kind_name(kind)}, got {type(v).__name__} {v!r}")
        return v

    def num(self, k: str, default: Any = ..., lo: float | None = None, hi: float | None = None,
            integer: bool = False) -> Any:
        kind: tuple[type, ...] = (int,) if integer else (int, float)
        v = self.get(k, kind, default, "an integer" if integer else "a number")
        if v is default:
            return v
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            rng = f"{'' if lo is None else lo} .. {'' if hi is None else hi}"
            raise ProfileError(self.path, self._key(k), f"expected a value in [{rng}], got {v!r}")
        return float(v) if not integer else int(v)

    def rate(self, k: str, default: Any = ...) -> float:
        """An error rate: strictly between 0 and 0.5 (0 decides nothing; 0.5 is a coin)."""
        v = self.num(k, default)
        if not 0.0 < v < 0.5:
            raise ProfileError(self.path, self._key(k), f"expected an error rate in (0, 0.5), got {v!r}")
        return float(v)

    def strs(self, k: str, default: Any = ..., nonempty: bool = False) -> tuple[str, ...]:
        v = self.get(k, list, default, "a list of strings")
        if v is default:
            return tuple(v) if isinstance(v, (list, tuple)) else v
        if not all(isinstance(x, str) for x in v):
            raise ProfileError(self.path, self._key(k), "expected a list of strings")
        if nonempty and not v:
            raise ProfileError(self.path, self._key(k), "expected a non-empty list")
        return tuple(v)

    def sub(self, k: str, known: set[str], required: bool = True) -> "_Reader":
        v = self.get(k, dict, ... if required else {}, "a table")
        return _Reader(self.path, v, self._key(k), known)


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", float: "a number", dict: "a table",
             list: "a list", bool: "true or false"}
    return " or ".join(names.get(t, t.__name__) for t in _as_tuple(kind))


def _file(path: Path, base: Path, key: str, value: str, must_exist: bool = True) -> str:
    p = (base / value).resolve()
    if must_exist and not p.exists():
        raise ProfileError(path, key, f"expected an existing file, but {p} does not exist")
    return str(p)


def _source(path: Path, r: _Reader, base: Path) -> Source:
    kinds = [k for k in ("path", "git", "pypi") if k in r.table]
    if len(kinds) > 1:
        raise ProfileError(path, r.prefix, "expected one of 'path', 'git' (+ 'ref') or 'pypi' (+ 'subtree'), "
                           "not " + " and ".join(kinds))
    if "git" in r.table:
        return Source(git=r.get("git", str), ref=r.get("ref", str, what="a branch, tag or commit"))
    if "pypi" in r.table:
        req = r.get("pypi", str, what="a pinned requirement, 'name==version'")
        if req.count("==") != 1 or not all(req.split("==")):
            raise ProfileError(path, r._key("pypi"), f"expected a pinned requirement 'name==version', got {req!r}")
        return Source(pypi=req, subtree=r.get("subtree", str, "") or None)
    if "path" in r.table:
        # a directory may be made later (a checkout): the round checks it exists
        return Source(path=_file(path, base, r._key("path"), r.get("path", str), must_exist=False))
    raise ProfileError(path, r.prefix, "expected 'path' (a local directory), 'git' and 'ref', or 'pypi'")


def _model_files(path: Path, top: "_Reader", base: Path) -> tuple[ModelFile, ...]:
    m = top.sub("model", {"files"}, required=False)
    out = []
    for i, f in enumerate(m.get("files", list, [], "a list of tables ([[model.files]])")):
        key = f"model.files[{i}]"
        if not isinstance(f, dict):
            raise ProfileError(path, key, "expected a table")
        r = _Reader(path, f, key, {"name", "path", "sha256", "package", "module", "how"})
        name = r.get("name", str, what="the file's name under /model")
        if "/" in name or name in ("", ".", ".."):
            raise ProfileError(path, f"{key}.name", f"expected a plain file name, got {name!r}")
        sha = r.get("sha256", str, what="the file's sha256 (64 hex digits)")
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise ProfileError(path, f"{key}.sha256", f"expected 64 lowercase hex digits, got {sha!r}")
        rel = r.get("path", str, what="the file's path (absolute, ~/…, or relative to the profile)")
        if "module" in r.table:      # a file inside an installed Python package
            found = _in_module(r.get("module", str), rel)
            where = found or f"<module {r.get('module', str)} is not installed>/{rel}"
        else:
            where = str((base / Path(rel).expanduser()).resolve())
        out.append(ModelFile(name=name, path=where, sha256=sha, package=r.get("package", str, ""),
                             how=r.get("how", str, "")))
    if len({f.name for f in out}) != len(out):
        raise ProfileError(path, "model.files", "expected distinct names")
    return tuple(out)


def _in_module(module: str, rel: str) -> str | None:
    import importlib.util
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(Path(list(spec.submodule_search_locations)[0]) / rel)


def _placeholders_ok(path: Path, key: str, cmd: tuple[str, ...], allowed: set[str]) -> None:
    import string
    for part in cmd:
        for _, name, _, _ in string.Formatter().parse(part):
            if name is not None and name not in allowed:
                raise ProfileError(path, key, f"unknown placeholder {{{name}}}; allowed: "
                                   + ", ".join("{" + a + "}" for a in sorted(allowed)))


COMMON_PLACEHOLDERS = {"threads", "model"}
BENCH_PLACEHOLDERS = {"depth", "tokens", "context", "doc", "out", "metric", "fill"} | COMMON_PLACEHOLDERS
PARITY_PLACEHOLDERS = {"doc", "depths", "rows", "out"} | COMMON_PLACEHOLDERS
TOKENIZE_PLACEHOLDERS = {"text", "out"} | COMMON_PLACEHOLDERS
REFERENCE_PLACEHOLDERS = PARITY_PLACEHOLDERS | {"python", "profile_dir"}


def load_profile(path: str | Path) -> Profile:
    path = Path(path).resolve()
    try:
        raw_bytes = path.read_bytes()
    except OSError as e:
        raise ProfileError(path, "(file)", f"a readable TOML file ({e.strerror})") from None
    try:
        data = tomllib.loads(raw_bytes.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ProfileError(path, "(syntax)", f"valid TOML: {e}") from None
    base = path.parent
    top = _Reader(path, data, "", _SECTIONS)

    eng = top.sub("engine", {"source", "protected", "exclude", "candidate"})
    source = _source(path, eng.sub("source", {"path", "git", "ref", "pypi", "subtree"}), base)
    protected = eng.strs("protected", ())
    exclude = eng.strs("exclude", ())

    im = top.sub("image", {"base", "suite", "packages", "compiler", "compiler_probe", "build", "workdir", "tools"})
    tools = []
    for i, t in enumerate(im.get("tools", list, [], "a list of tables ([[image.tools]])")):
        if not isinstance(t, dict):
            raise ProfileError(path, f"image.tools[{i}]", "expected a table")
        tr = _Reader(path, t, f"image.tools[{i}]", {"name", "probe", "expect"})
        tools.append(Tool(name=tr.get("name", str), probe=tr.strs("probe", nonempty=True),
                          expect=tr.get("expect", str, what="the exact first line the probe prints")))
    image = ImageSpec(
        base=im.get("base", str, what="a local image tag, an image ID or a digest (sha256:…)"),
        suite=im.get("suite", str, "bookworm"),
        packages=im.strs("packages", ("gcc", "libc6-dev", "make")),
        compiler=im.get("compiler", str, what="the exact first line of the compiler's version output"),
        compiler_probe=im.strs("compiler_probe", ("gcc", "--version"), nonempty=True),
        build=im.get("build", str, what="a shell command that builds the engine in the source directory"),
        workdir=im.get("workdir", str, "/src"), tools=tuple(tools),
    )
    hr = top.sub("harness", {"path", "build"}, required=False)
    harness = None
    if hr.table:
        harness = HarnessSpec(path=_file(path, base, "harness.path", hr.get("path", str, what="a directory beside the profile"),
                                         must_exist=False),
                              build=hr.get("build", str, what="a shell command that builds the harness in /harness"))
    model = _model_files(path, top, base)

    ru = top.sub("run", {"cpus", "memory", "pids", "timeout_s", "gpus", "env", "user", "output_limit_mb"},
                 required=False)
    gpus = ru.get("gpus", str, "none")
    if gpus not in ("none", "optional", "required"):
        raise ProfileError(path, "run.gpus", f"expected 'none', 'optional' or 'required', got {gpus!r}")
    memory = ru.get("memory", str, "1g")
    if not memory[:-1].isdigit() or memory[-1].lower() not in "kmg":
        raise ProfileError(path, "run.memory", f"expected a size like '512m' or '2g', got {memory!r}")
    run = RunSpec(
        cpus=ru.num("cpus", 1.0, lo=0.1), memory=memory, pids=ru.num("pids", 64, lo=8, integer=True),
        timeout_s=ru.num("timeout_s", 120.0, lo=1), gpus=gpus, env=ru.strs("env", ()),
        user=ru.get("user", str, "65534:65534"), output_limit_mb=ru.num("output_limit_mb", 64, lo=1, integer=True),
    )

    be = top.sub("bench", {"command", "metric", "depth", "tokens", "short_tokens", "reps", "warmup",
                           "shortcut", "seek_bytes_per_position", "fill", "adapter", "short_reps"})
    bench = BenchSpec(
        command=be.strs("command", nonempty=True),
        metric=be.get("metric", str, what="the metric name the bench result line carries"),
        depth=be.num("depth", lo=0, integer=True),
        tokens=be.num("tokens", lo=2, integer=True),
        short_tokens=be.num("short_tokens", lo=1, integer=True),
        reps=be.num("reps", 8, lo=1, hi=1000, integer=True),
        short_reps=be.num("short_reps", 4, lo=2, hi=100, integer=True),
        warmup=be.num("warmup", 1, lo=0, hi=10, integer=True),
        shortcut=be.get("shortcut", str, "none"),
        seek_bytes_per_position=be.num("seek_bytes_per_position", 0, lo=0, integer=True),
        fill=be.get("fill", str, "decode"), adapter=be.get("adapter", str, "bench_result"),
    )
    if bench.fill not in ("decode", "prefill"):
        raise ProfileError(path, "bench.fill", f"expected 'decode' or 'prefill', got {bench.fill!r}")
    from .engine.adapters import ADAPTERS
    if bench.adapter not in ADAPTERS:
        raise ProfileError(path, "bench.adapter", f"expected one of {', '.join(sorted(ADAPTERS))}, got {bench.adapter!r}")
    if bench.shortcut not in ("none", "seek"):
        raise ProfileError(path, "bench.shortcut", f"expected 'none' or 'seek', got {bench.shortcut!r}")
    if bench.shortcut == "seek" and bench.seek_bytes_per_position <= 0:
        raise ProfileError(path, "bench.seek_bytes_per_position",
                           "expected a positive byte count when bench.shortcut = 'seek' "
                           "(it is how the console checks the seek really allocated its cache)")
    if bench.short_tokens >= bench.tokens:
        raise ProfileError(path, "bench.short_tokens", f"expected fewer than bench.tokens ({bench.tokens})")
    _placeholders_ok(path, "bench.command", bench.command, BENCH_PLACEHOLDERS)

    pa = top.sub("parity", {"command", "output", "document", "document_sha256", "reference",
                            "reference_sha256", "depths", "rows", "vocab", "scored_path_depth",
                            "scored_path_tokens", "text", "tokenize"})
    depths = pa.get("depths", list, [4, 128, 256, 512, 1024, 2048, 4096], "a list of positive integers")
    if not depths or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in depths) \
            or list(depths) != sorted(set(depths)):
        raise ProfileError(path, "parity.depths", "expected a non-empty, strictly increasing list of positive integers")
    rows = pa.num("rows", 1, lo=1, integer=True)
    if rows > depths[0]:
        raise ProfileError(path, "parity.rows", f"expected at most the smallest depth ({depths[0]})")
    parity = ParitySpec(
        command=pa.strs("command", nonempty=True),
        output=pa.get("output", str, "logits.npy"),
        # made by `console reference capture` when parity.text is given: the round checks it
        document=_file(path, base, "parity.document", pa.get("document", str), must_exist="text" not in pa.table),
        document_sha256=pa.get("document_sha256", str, what="the sha256 of the token-id document"),
        reference=_file(path, base, "parity.reference", pa.get("reference", str), must_exist=False),
        reference_sha256=pa.get("reference_sha256", str, ""),
        depths=tuple(depths), rows=rows, vocab=pa.num("vocab", lo=2, integer=True),
        scored_path_depth=pa.num("scored_path_depth", depths[0], lo=1, integer=True),
        scored_path_tokens=pa.num("scored_path_tokens", 1, lo=1, integer=True),
        text=_file(path, base, "parity.text", pa.get("text", str)) if "text" in pa.table else "",
        tokenize=pa.strs("tokenize", ()),
    )
    if "output_limit_mb" not in ru.table:
        # sized from what the logits command must write: depths x rows x vocabulary float32s
        need = len(parity.depths) * parity.rows * parity.vocab * 4
        run = replace(run, output_limit_mb=max(run.output_limit_mb, -(-need * 5 // 4 >> 20) + 8))
    if parity.text and not parity.tokenize:
        raise ProfileError(path, "parity.tokenize", "expected the command that tokenises parity.text")
    _placeholders_ok(path, "parity.tokenize", parity.tokenize, TOKENIZE_PLACEHOLDERS)
    if parity.scored_path_depth not in parity.depths:
        raise ProfileError(path, "parity.scored_path_depth", f"expected one of parity.depths {list(parity.depths)}")
    if parity.scored_path_tokens >= parity.scored_path_depth:
        raise ProfileError(path, "parity.scored_path_tokens", "expected fewer than parity.scored_path_depth")
    _placeholders_ok(path, "parity.command", parity.command, PARITY_PLACEHOLDERS)

    rf = top.sub("reference", {"runtime", "command", "engine", "commit", "weights_sha256", "source"},
                 required=False)
    reference = ReferenceSpec(
        runtime=rf.get("runtime", str, "docker"),
        command=rf.strs("command", parity.command),
        engine=rf.get("engine", str, ""), commit=rf.get("commit", str, ""),
        weights_sha256=rf.get("weights_sha256", str, ""),
        source=_source(path, rf.sub("source", {"path", "git", "ref", "pypi", "subtree"}), base)
        if "source" in rf.table else None,
    )
    if model and reference.weights_sha256 and reference.weights_sha256 not in {f.sha256 for f in model}:
        raise ProfileError(path, "reference.weights_sha256",
                           "expected the sha256 of one of model.files: the reference must read the same weights")
    if reference.runtime not in ("local", "docker"):
        raise ProfileError(path, "reference.runtime", f"expected 'local' or 'docker', got {reference.runtime!r}")
    _placeholders_ok(path, "reference.command", reference.command, REFERENCE_PLACEHOLDERS)

    ga = top.sub("gate", {f for f in GateRules.__dataclass_fields__}, required=False)
    bands_r = ga.sub("bands", {"s", "m", "l", "xl"}, required=False)
    bands = Bands(**{k: bands_r.num(k, getattr(Bands(), k), lo=0.0) for k in ("s", "m", "l", "xl")})
    if not (bands.s < bands.m < bands.l < bands.xl):
        raise ProfileError(path, "gate.bands", "expected strictly increasing bands s < m < l < xl")
    guards = []
    for i, g in enumerate(ga.get("guards", list, [], "a list of tables ([[gate.guards]])")):
        if not isinstance(g, dict):
            raise ProfileError(path, f"gate.guards[{i}]", "expected a table")
        gr = _Reader(path, g, f"gate.guards[{i}]", {"name", "depth", "tokens", "reps", "max_drop", "metric"})
        guards.append(Guard(name=gr.get("name", str), depth=gr.num("depth", lo=0, integer=True),
                            tokens=gr.num("tokens", lo=1, integer=True), reps=gr.num("reps", 5, lo=2, integer=True),
                            max_drop=gr.num("max_drop", 0.01, lo=0.0, hi=1.0), metric=gr.get("metric", str, "")))
    d = GateRules()
    gate = GateRules(
        top1_min=ga.num("top1_min", d.top1_min, lo=0.0, hi=1.0),
        kl_max=ga.num("kl_max", d.kl_max, lo=0.0),
        ratchet=ga.num("ratchet", d.ratchet, lo=1.0),
        drift_floor=ga.num("drift_floor", d.drift_floor, lo=0.0),
        borderline_kl=ga.num("borderline_kl", d.borderline_kl, lo=0.0),
        spread_factor=ga.num("spread_factor", d.spread_factor, lo=1.0),
        agreement_factor=ga.num("agreement_factor", d.agreement_factor, lo=1.0),
        accuracy_alpha=ga.num("accuracy_alpha", d.accuracy_alpha, lo=1e-6, hi=0.5),
        accuracy_fallback=ga.num("accuracy_fallback", d.accuracy_fallback, lo=0.0, hi=1.0),
        uncheckable_entropy=ga.num("uncheckable_entropy", d.uncheckable_entropy, lo=0.0, hi=1.0),
        significance=ga.num("significance", d.significance, lo=0.0),
        confidence=ga.num("confidence", d.confidence, lo=0.5, hi=0.999),
        anchor=ga.num("anchor", d.anchor, lo=0.0),
        bands=bands,
        plausibility=ga.num("plausibility", d.plausibility, lo=1.0),
        wall_margin=ga.num("wall_margin", d.wall_margin, lo=0.0),
        differential_margin=ga.num("differential_margin", d.differential_margin, lo=0.0),
        overhead_margin=ga.num("overhead_margin", d.overhead_margin, lo=0.0),
        seek_memory_fraction=ga.num("seek_memory_fraction", d.seek_memory_fraction, lo=0.0, hi=1.0),
        guards=tuple(guards),
        false_accept=ga.rate("false_accept", d.false_accept),
        miss=ga.rate("miss", d.miss),
        false_slower=ga.rate("false_slower", ga.table.get("false_accept", d.false_accept)),
        step_level=ga.rate("step_level", d.step_level),
        settle_pairs=ga.num("settle_pairs", d.settle_pairs, lo=0, hi=10_000, integer=True),
        min_gain=ga.num("min_gain", bands.s, lo=0.0),
        min_pairs=ga.num("min_pairs", d.min_pairs, lo=2, hi=10_000, integer=True),
        max_pairs=ga.num("max_pairs", d.max_pairs, lo=2, hi=10_000, integer=True),
        max_minutes=ga.num("max_minutes", d.max_minutes, lo=0.0),
        mixture=ga.num("mixture", d.mixture, lo=1e-3, hi=1e3),
        planning_noise=ga.num("planning_noise", d.planning_noise, lo=1e-4, hi=2.0),
        slower=ga.get("slower", str, d.slower),
        claim_false_refusal=ga.num("claim_false_refusal", d.claim_false_refusal, lo=1e-9, hi=0.2),
    )
    if gate.borderline_kl and gate.borderline_kl <= gate.kl_max:
        raise ProfileError(path, "gate.borderline_kl", f"expected 0 (no band) or more than gate.kl_max "
                           f"({gate.kl_max}): the band is the KL over the bar that is adjudicated")
    if gate.slower not in ("reject", "record"):
        raise ProfileError(path, "gate.slower", f"expected 'reject' or 'record', got {gate.slower!r}")
    if gate.settle_pairs > gate.max_pairs:
        raise ProfileError(path, "gate.settle_pairs", f"expected at most gate.max_pairs ({gate.max_pairs}): "
                           f"settling a tier is part of the pair budget, got {gate.settle_pairs}")
    if gate.min_pairs > gate.max_pairs:
        raise ProfileError(path, "gate.min_pairs", f"expected at most gate.max_pairs ({gate.max_pairs})")
    if gate.min_gain < gate.significance:
        raise ProfileError(path, "gate.min_gain", f"expected at least gate.significance ({gate.significance}): "
                           "a gain the profile cares about must be one it can accept")

    health = _rules(top, "health", HealthRules)
    queue = _rules(top, "queue", QueueRules)
    if not 0.0 < queue.copy_review <= queue.copy_refuse <= 1.0:
        raise ProfileError(path, "queue.copy_review", "0 < copy_review ≤ copy_refuse ≤ 1 (shares of a diff "
                           f"contained in a merged one); got {queue.copy_review} and {queue.copy_refuse}")
    preflight = _rules(top, "preflight", PreflightRules)
    accuracy = _accuracy(path, base, top) if "accuracy" in top.table else None
    adjudication = _adjudication(path, top) if "adjudication" in top.table else None
    if gate.borderline_kl and adjudication is None:
        raise ProfileError(path, "gate.borderline_kl", "expected an [adjudication] table that says how "
                           "borderline KL is settled (the reference's kernel variants, the completions)")

    return Profile(
        name=top.get("name", str, what="the profile's name"),
        path=str(path), sha256=hashlib.sha256(raw_bytes).hexdigest(),
        description=top.get("description", str, ""), node=top.get("node", str, "local"),
        source=source, protected=protected, image=image, run=run, bench=bench,
        parity=parity, reference=reference, gate=gate, health=health, preflight=preflight,
        harness=harness, model=model, exclude=exclude, candidate=eng.get("candidate", str, ""),
        queue=queue, accuracy=accuracy, adjudication=adjudication,
    )


ACCURACY_PLACEHOLDERS = {"prompts", "tokens", "out"} | COMMON_PLACEHOLDERS
COMPLETION_PLACEHOLDERS = {"doc", "positions", "tokens", "out"} | COMMON_PLACEHOLDERS


def _accuracy(path: Path, base: Path, top: "_Reader") -> AccuracySpec:
    from .core.accuracy import TaskSetError, parse_tasks
    r = top.sub("accuracy", {"tasks", "tasks_sha256", "command", "tokens", "chunk"})
    spec = AccuracySpec(tasks=_file(path, base, "accuracy.tasks", r.get("tasks", str, what="the task set's path")),
                        tasks_sha256=r.get("tasks_sha256", str, what="the sha256 of the task set"),
                        command=r.strs("command", nonempty=True), tokens=r.num("tokens", 8, lo=1, integer=True),
                        chunk=r.num("chunk", 25, lo=1, integer=True))
    _placeholders_ok(path, "accuracy.command", spec.command, ACCURACY_PLACEHOLDERS)
    data = Path(spec.tasks).read_bytes()
    if hashlib.sha256(data).hexdigest() != spec.tasks_sha256:
        raise ProfileError(path, "accuracy.tasks_sha256", f"expected the sha256 of {spec.tasks}; the file has "
                           f"{hashlib.sha256(data).hexdigest()} (the task set changed: pin it deliberately)")
    try:
        parse_tasks(data.decode("utf-8"))
    except (TaskSetError, UnicodeDecodeError) as e:
        raise ProfileError(path, "accuracy.tasks", f"expected a JSON-lines task set: {spec.tasks}: {e}") from None
    return spec


def _adjudication(path: Path, top: "_Reader") -> AdjudicationSpec:
    r = top.sub("adjudication", {"variants", "command", "follow", "completions", "tokens"})
    variants = []
    for i, v in enumerate(r.get("variants", list, what="a list of {name, args} tables")):
        if not isinstance(v, dict):
            raise ProfileError(path, f"adjudication.variants[{i}]", "expected a table {name, args}")
        vr = _Reader(path, v, f"adjudication.variants[{i}]", {"name", "args"})
        variants.append((vr.get("name", str), vr.strs("args", nonempty=True)))
    if not variants:
        raise ProfileError(path, "adjudication.variants", "expected at least one kernel variant of the reference")
    spec = AdjudicationSpec(variants=tuple(variants), command=r.strs("command", nonempty=True),
                            follow=r.strs("follow", nonempty=True),
                            completions=r.num("completions", 40, lo=1, integer=True),
                            tokens=r.num("tokens", 32, lo=1, integer=True))
    _placeholders_ok(path, "adjudication.command", spec.command, COMPLETION_PLACEHOLDERS)
    _placeholders_ok(path, "adjudication.follow", spec.follow, {"follow"})
    return spec


def _rules(top: _Reader, section: str, cls: type) -> Any:
    """A rules table: every key optional, defaults and kinds from the dataclass."""
    d, r = cls(), top.sub(section, set(cls.__dataclass_fields__), required=False)

    def read(k: str) -> Any:
        v = getattr(d, k)
        if isinstance(v, bool):
            return r.get(k, bool, v)
        if isinstance(v, (int, float)):
            return r.num(k, v, lo=0, integer=isinstance(v, int))
        if isinstance(v, tuple):
            return r.strs(k, v)
        return r.get(k, type(v), v)
    return cls(**{k: read(k) for k in cls.__dataclass_fields__})
