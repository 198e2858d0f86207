"""The tables of a profile file whose shape is not a spec's: [engine], [model], and the rules
tables the core defines ([gate], [health], [preflight], [queue]). The core keeps its rules free of
any validation library, so their keys are declared here, each with its range and its meaning,
and their defaults are the core's own (``GateRules()`` and the like): one source for each.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from ..core.decisions.health import HealthRules, PreflightRules
from ..core.decisions.queue import QueueRules
from ..core.records.rules import Bands, GateRules, Guard, LatencyGuard
from ..core.decisions.serving import LATENCIES
from .checks import RATE, Bool, Int, Num, Str, Strs, Table, key, placeholders, refuse, within
from .matrix import MatrixTable, bench_problem, problem as matrix_problem, serving_problem, spec_of
from .serving import ServerSpec, scored_problem
from .spec import (AccuracySpec, AdjudicationSpec, BenchSpec, HarnessSpec, ImageSpec, ModelFile, ParitySpec,
                   ReferenceSpec, RunSpec, SERVE, Source)


class EngineTable(Table):
    source: Annotated[Source, key("main's source: path, git + ref, or pypi (+ subtree)")]
    protected: Annotated[Strs, key("paths a candidate may not touch (its round is rejected)")] = ()
    exclude: Annotated[Strs, key("top-level paths of a source left out of its snapshot")] = ()
    candidate: Annotated[Str, key("the default candidate (pypi:…, a .patch over main, a directory)")] = ""


class ModelTable(Table):
    files: Annotated[tuple[ModelFile, ...], key("weights files every run reads ([[model.files]])")] = ()

    @model_validator(mode="after")
    def _distinct(self) -> ModelTable:
        if len({f.name for f in self.files}) != len(self.files):
            raise refuse("expected distinct names", "files")
        return self


_B, _Gd, _G = Bands(), Guard("", 0, 0), GateRules()


class BandsTable(Table):
    s: Annotated[Num, within(0.0), key("the smallest gain tier (a share of main's speed)")] = _B.s
    m: Annotated[Num, within(0.0), key("tier m")] = _B.m
    l: Annotated[Num, within(0.0), key("tier l")] = _B.l
    xl: Annotated[Num, within(0.0), key("tier xl")] = _B.xl

    @model_validator(mode="after")
    def _increasing(self) -> BandsTable:
        if not self.s < self.m < self.l < self.xl:
            raise refuse("expected strictly increasing bands s < m < l < xl")
        return self


class GuardTable(Table):
    name: Annotated[Str, key("the guard's name (its lock slot)")]
    depth: Annotated[Int, within(0), key("the context depth it measures at")]
    tokens: Annotated[Int, within(1), key("tokens timed per run")]
    reps: Annotated[Int, within(2), key("runs per build")] = 5
    max_drop: Annotated[Num, within(0.0, 1.0), key("it may fall at most this share below its floor")] = _Gd.max_drop
    metric: Annotated[Str, key("what it measures (empty: the bench's scored metric)")] = _Gd.metric


class LatencyTable(Table):
    metric: Annotated[Literal[tuple(sorted(LATENCIES))], key("a latency percentile of each timed block")]
    max_rise: Annotated[Num, within(0.0, 10.0), key(
        "the candidate's may be at most this share above main's in the same pair")] = 0.25


class GateTable(Table):
    top1_min: Annotated[Num, within(0.0, 1.0), key("top-1 agreement with the reference at least this")] = _G.top1_min
    kl_max: Annotated[Num, within(0.0), key("KL from the reference at most this (nats)")] = _G.kl_max
    ratchet: Annotated[Num, within(1.0), key(
        "legal drift is warned about from this x main's KL up (and over drift_floor)")] = _G.ratchet
    drift_floor: Annotated[Num, within(0.0), key(
        "nats: legal drift against main is reported from this KL up")] = _G.drift_floor
    borderline_kl: Annotated[Num, within(0.0), key(
        "KL over kl_max, up to this, is adjudicated (0: never; needs [adjudication])")] = _G.borderline_kl
    spread_factor: Annotated[Num, within(1.0), key(
        "candidate KL at most this x the reference's own kernel spread")] = _G.spread_factor
    agreement_factor: Annotated[Num, within(1.0), key(
        "completion disagreements at most this x the reference's kernels'")] = _G.agreement_factor
    accuracy_alpha: Annotated[Num, within(1e-6, 0.5), key(
        "task accuracy: the paired interval's level is 1 - alpha (two-sided)")] = _G.accuracy_alpha
    accuracy_fallback: Annotated[Num, within(0.0, 1.0), key(
        "task accuracy: the share it may drop when items cannot be paired")] = _G.accuracy_fallback
    uncheckable_entropy: Annotated[Num, within(0.0, 1.0), key(
        "share of log(V) above which a depth is uncheckable")] = _G.uncheckable_entropy
    significance: Annotated[Num, within(0.0), key(
        "accepted: the gain's lower bound is above this share")] = _G.significance
    confidence: Annotated[Num, within(0.5, 0.999), key("the level of noise reports' intervals")] = _G.confidence
    anchor: Annotated[Num, within(0.0), key("an external reference engine's pinned number (0: off)")] = _G.anchor
    bands: Annotated[BandsTable, key("the gain tiers")] = Field(default_factory=BandsTable)
    plausibility: Annotated[Num, within(1.0), key(
        "a speed over this x the frontier (or the anchor) is held for review")] = _G.plausibility
    wall_margin: Annotated[Num, within(0.0), key(
        "a reported elapsed time may exceed the wall clock by this share")] = _G.wall_margin
    differential_margin: Annotated[Num, within(0.0), key(
        "a reported rate may exceed the long-minus-short wall-clock rate by this share")] = _G.differential_margin
    overhead_margin: Annotated[Num, within(0.0), key(
        "candidate's fixed cost per section over main's, as a share of main's timed section (the console's "
        "clock; a self-timed bench: of main's run)")] = _G.overhead_margin
    clock_margin: Annotated[Num, within(0.0, 1.0), key(
        "the engine's own timing of a section may fall this share under the console's clock (the handover's "
        "cost) before its clock is refused as not the one that timed the work")] = _G.clock_margin
    seek_memory_fraction: Annotated[Num, within(0.0, 1.0), key(
        "a seek's peak memory must cover this share of depth x seek_bytes_per_position")] = _G.seek_memory_fraction
    guards: Annotated[tuple[GuardTable, ...], key("other depths that may not regress ([[gate.guards]])")] = ()
    latency: Annotated[tuple[LatencyTable, ...], key(
        "serving latencies the candidate may not worsen, read from the timed blocks ([[gate.latency]])")] = ()
    false_accept: Annotated[Num, RATE, key(
        "chance of accepting a candidate that is not `significance` faster")] = _G.false_accept
    miss: Annotated[Num, RATE, key("chance of calling `none` on a true gain of `min_gain`")] = _G.miss
    false_slower: Annotated[Num, RATE, key(
        "chance of calling `slower` a candidate that is not slower than main", "gate.false_accept")] = 0.0
    step_level: Annotated[Num, RATE, key(
        "chance that the step-change check ends an honest round `infra`")] = _G.step_level
    settle_pairs: Annotated[Int, within(0, 10_000), key(
        "pairs spent, once accepted, to settle the tier's band")] = _G.settle_pairs
    min_gain: Annotated[Num, within(0.0), key(
        "the smallest gain the profile cares about", "gate.bands.s")] = 0.0
    min_pairs: Annotated[Int, within(2, 10_000), key("pairs before the first look")] = _G.min_pairs
    max_pairs: Annotated[Int, within(2, 10_000), key("budget: pairs of timed reps")] = _G.max_pairs
    max_minutes: Annotated[Num, within(0.0), key("budget: minutes of timed reps (0: pairs only)")] = _G.max_minutes
    mixture: Annotated[Num, within(1e-3, 1e3), key(
        "c² of the t-mixture: where the confidence sequence is tightest")] = _G.mixture
    planning_noise: Annotated[Num, within(1e-4, 2.0), key(
        "pair noise (log SD) assumed for planning when the node has no record")] = _G.planning_noise
    slower: Annotated[Literal["reject", "record"], key(
        "a candidate decided slower than main: rejected (exit 1) or recorded (exit 0)")] = "reject"
    claim_false_refusal: Annotated[Num, within(1e-9, 0.2), key(
        "chance that a claim check refuses an honest build")] = _G.claim_false_refusal
    serial: Annotated[Literal["lag1", "none"], key(
        "lag1: the decision widens for the serial correlation its pairs show; none: pairs taken as "
        "independent")] = "lag1"
    sequence: Annotated[Literal["huber", "t-mixture"], key(
        "huber: each pair's deviation clipped at a scale read from the pairs before it, so a dipped rep "
        "counts as one pair, not as its size; t-mixture: the raw pairs")] = "huber"

    @model_validator(mode="before")
    @classmethod
    def _derived_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        bands = data.get("bands", {})
        s = bands.get("s", _B.s) if isinstance(bands, dict) else _B.s
        return {"false_slower": data.get("false_accept", _G.false_accept), "min_gain": s, **data}

    @model_validator(mode="after")
    def _consistent(self) -> GateTable:
        if self.borderline_kl and self.borderline_kl <= self.kl_max:
            raise refuse(f"expected 0 (no band) or more than gate.kl_max ({self.kl_max}): the band is the KL "
                         "over the bar that is adjudicated", "borderline_kl")
        if self.settle_pairs > self.max_pairs:
            raise refuse(f"expected at most gate.max_pairs ({self.max_pairs}): settling a tier is part of "
                         f"the pair budget, got {self.settle_pairs}", "settle_pairs")
        if len({g.metric for g in self.latency}) != len(self.latency):
            raise refuse("expected each latency guarded once", "latency")
        if self.min_pairs > self.max_pairs:
            raise refuse(f"expected at most gate.max_pairs ({self.max_pairs})", "min_pairs")
        if self.min_gain < self.significance:
            raise refuse(f"expected at least gate.significance ({self.significance}): a gain the profile "
                         "cares about must be one it can accept", "min_gain")
        return self

    def rules(self) -> GateRules:
        return GateRules(**{**self.fields(), "bands": Bands(**self.bands.fields()),
                            "guards": tuple(Guard(**g.fields()) for g in self.guards),
                            "latency": tuple(LatencyGuard(**g.fields()) for g in self.latency)})


_H, _P, _Q = HealthRules(), PreflightRules(), QueueRules()


class HealthTable(Table):
    """When a rep is suspect (console.core.decisions.health)."""
    RULES = HealthRules
    throttle_share: Annotated[Num, within(0), key(
        "a limiting clock-event reason on more than this share of samples")] = _H.throttle_share
    throttle_reasons: Annotated[Strs, key("the clock-event reasons that count as limiting")] = _H.throttle_reasons
    sm_clock_floor: Annotated[Num, within(0), key(
        "busy SM clock median below this x the reference clock")] = _H.sm_clock_floor
    xid: Annotated[Bool, key("any XID critical error during the rep")] = _H.xid
    foreign_process: Annotated[Bool, key("a compute process not ours on the GPU during the rep")] = _H.foreign_process
    gpu_errors: Annotated[Bool, key("a GPU query failing mid-rep (e.g. 'GPU is lost')")] = _H.gpu_errors
    other_cpu_cores: Annotated[Num, within(0), key(
        "other processes' CPU use over the rep, in cores")] = _H.other_cpu_cores
    load_spike: Annotated[Num, within(0), key(
        "1-min load above preflight + engine CPUs by more than this")] = _H.load_spike
    retries: Annotated[Int, within(0), key(
        "suspect reps retried per round before it is an infra failure")] = _H.retries
    settle_cores: Annotated[Num, within(0), key(
        "before a rep, wait until other processes use fewer cores than this")] = _H.settle_cores
    settle_max_s: Annotated[Num, within(0), key(
        "… for at most this long (then run, and let the rep be judged)")] = _H.settle_max_s


class PreflightTable(Table):
    """When the node is unfit to start a round (console.core.decisions.health)."""
    RULES = PreflightRules
    other_cores: Annotated[Num, within(0), key("other processes keeping this many cores busy")] = _P.other_cores
    load_per_core: Annotated[Num, within(0), key("1-min load above this share of the cores")] = _P.load_per_core
    low_memory_share: Annotated[Num, within(0), key("MemAvailable below this share of MemTotal …")] = (
        _P.low_memory_share)
    low_memory_bytes: Annotated[Int, within(0), key("… or below this many bytes")] = _P.low_memory_bytes
    host_hot_c: Annotated[Num, within(0), key("a host sensor this hot (°C)")] = _P.host_hot_c
    governor: Annotated[Str, key("the CPU governor expected (any other is said, info only)")] = _P.governor
    gpu_hot_c: Annotated[Num, within(0), key("an idle GPU this hot (°C)")] = _P.gpu_hot_c
    gpu_free_share: Annotated[Num, within(0), key("less free GPU memory than this share")] = _P.gpu_free_share
    power_limit_share: Annotated[Num, within(0), key("a power limit below this x the default")] = (
        _P.power_limit_share)
    throttle_reasons: Annotated[Strs, key("clock-event reasons that mean the node holds clocks down")] = (
        _P.throttle_reasons)
    busy_gpu: Annotated[Literal["refuse", "warn"], key(
        "a GPU running another compute process, or throttled by one of throttle_reasons, before the round: "
        "refused (exit 3, nothing built) or only said")] = _P.busy_gpu


class QueueTable(Table):
    """How the queue books rounds and judges copies (console.core.decisions.queue)."""
    RULES = QueueRules
    copy_refuse: Annotated[Num, within(0), key(
        "containment in a merged diff at or above this: refused as a copy")] = _Q.copy_refuse
    copy_review: Annotated[Num, within(0), key(
        "at or above this (and below copy_refuse): a person reviews it")] = _Q.copy_review
    min_free_gb: Annotated[Num, within(0), key("a worker books no round with less free disk")] = _Q.min_free_gb
    time_limit_minutes: Annotated[Int, within(0), key("a batch job's time limit")] = _Q.time_limit_minutes
    gpus: Annotated[Int, within(0), key("GPUs a batch job asks for (0 for CPU profiles)")] = _Q.gpus

    @model_validator(mode="after")
    def _ordered(self) -> QueueTable:
        if not 0.0 < self.copy_review <= self.copy_refuse <= 1.0:
            raise refuse("0 < copy_review ≤ copy_refuse ≤ 1 (shares of a diff contained in a merged one); "
                         f"got {self.copy_review} and {self.copy_refuse}", "copy_review")
        return self


class ProfileFile(Table):
    """A profile: how to build an engine, run its bench and logits commands, and the gate's rules."""
    model_config = ConfigDict(title="bench-console profile")

    name: Annotated[Str, key("the profile's name")]
    description: Annotated[Str, key("one line on what it measures")] = ""
    node: Annotated[Str, key("the node class lock slots are qualified with")] = "local"
    engine: Annotated[EngineTable, key("the engine's source and what a candidate may change")]
    image: Annotated[ImageSpec, key("the pinned base image, compiler and build command")]
    harness: Annotated[HarnessSpec | None, key("the measuring program the profile owns")] = None
    model: Annotated[ModelTable, key("weights every run reads")] = Field(default_factory=ModelTable)
    run: Annotated[RunSpec, key("a run's limits")] = Field(default_factory=RunSpec)
    bench: Annotated[BenchSpec, key("the timed bench command and its shape")]
    parity: Annotated[ParitySpec, key("the logits command and the reference it is graded against")]
    reference: Annotated[ReferenceSpec, key("how the reference logits are captured")] = Field(
        default_factory=ReferenceSpec)
    gate: Annotated[GateTable, key("the gate's rules")] = Field(default_factory=GateTable)
    health: Annotated[HealthTable, key("when a rep is suspect")] = Field(default_factory=HealthTable)
    queue: Annotated[QueueTable, key("how the queue books and judges copies")] = Field(default_factory=QueueTable)
    preflight: Annotated[PreflightTable, key("when the node is unfit to start")] = Field(
        default_factory=PreflightTable)
    accuracy: Annotated[AccuracySpec | None, key("the task accuracy stage")] = None
    adjudication: Annotated[AdjudicationSpec | None, key("how borderline KL is settled")] = None
    server: Annotated[ServerSpec | None, key("a serving profile: the engine's server and the load that times it")] = None
    matrix: Annotated[MatrixTable | None, key(
        "a matrix round: the shapes measured and decided together, and the verdict's rule")] = None

    @model_validator(mode="before")
    @classmethod
    def _server_needs_serve(cls, data: Any) -> Any:
        """Said first: without bench.mode = 'serve' the bench table asks for a bench command,
        which is not what a serving profile lacks."""
        bench = data.get("bench") if isinstance(data, dict) else None
        if isinstance(data, dict) and "server" in data and isinstance(bench, dict) and bench.get("mode") != SERVE:
            raise refuse("expected bench.mode = 'serve': a [server] table times requests through the server, "
                         f"not runs of bench.command (bench.mode is {bench.get('mode', 'harness')!r})", "bench.mode")
        return data

    @model_validator(mode="after")
    def _across_tables(self) -> ProfileFile:
        shas = {f.sha256 for f in self.model.files}
        if shas and self.reference.weights_sha256 and self.reference.weights_sha256 not in shas:
            raise refuse("expected the sha256 of one of model.files: the reference must read the same weights",
                         "reference.weights_sha256")
        if self.gate.borderline_kl and self.adjudication is None:
            raise refuse("expected an [adjudication] table that says how borderline KL is settled "
                         "(the reference's kernel variants, the completions)", "gate.borderline_kl")
        if self.bench.serves != (self.server is not None):
            raise refuse("expected a [server] table exactly when bench.mode = 'serve'", "bench.mode")
        if self.server is not None and (bad := scored_problem(self.bench.metric)):
            raise refuse(bad, "bench.metric")
        if self.matrix is not None:
            self._matrix_fits()
        return self

    def _matrix_fits(self) -> None:
        serving = self.server is not None
        if (bad := (serving_problem if serving else bench_problem)(self.matrix)) is not None:
            raise refuse(bad[1], f"matrix.{bad[0]}")
        if self.gate.guards:
            raise refuse("expected no [[gate.guards]] beside a [matrix]: guarded cells (matrix.guarded) "
                         "take their place", "gate.guards")
        spec = matrix_spec(self)
        if (bad := matrix_problem(spec, set(placeholders(self.bench.command)), self.bench.short_tokens,
                                  serving)) is not None:
            raise refuse(bad[1], f"matrix.{bad[0]}")


def matrix_spec(f: ProfileFile) -> Any:
    """The cells of a profile's [matrix] over its bench's own shape (core.matrix.MatrixSpec)."""
    b = f.bench
    defaults = {"depth": b.depth, "tokens": b.tokens, "metric": b.metric, "threads": f.run.threads, "fill": b.fill}
    if f.server is not None:
        defaults.update(concurrency=f.server.concurrency, rate=f.server.rate)
    return spec_of(f.matrix, defaults)
