"""What a runtime gives a round: builds from scratch and isolated, timed runs.

Two implementations: ``docker`` (containers; the default) and ``local`` (plain
processes, for nodes that forbid Docker). The round only talks to this
interface, so both produce the same events and the same receipt fields.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

# the lines of a build's or run's log a receipt keeps (the engine's readers cut to the same)
LOG_TAIL_LINES = 40

# Inside a build or run, the engine's tree is at SRC_ROOT and its installed
# binaries under ENGINE_ROOT. Profiles use these fixed paths; the local runtime
# maps them to per-build temporary directories.
SRC_ROOT = "/src"
ENGINE_ROOT = "/engine"
INPUTS_ROOT = "/inputs"
OUT_ROOT = "/out"
MODEL_ROOT = "/model"       # model files, each mounted read-only under its profile name
HARNESS_ROOT = "/harness"   # the profile's harness source, built after the engine
HANDOVER_ROOT = "/handover"  # a bench run's two FIFOs (runtime.handover), mounted read-only



@dataclass
class BuildResult:
    build: str
    image_id: str           # docker image ID, or a content hash of the local install dir
    base_image_id: str      # pinned base image ID, or "host"
    compiler: str           # the asserted compiler string
    seconds: float
    root: str = ""          # local runtime: directory that stands for ENGINE_ROOT / SRC_ROOT
    tools: dict[str, str] | None = None         # asserted build tools besides the compiler
    engine_files: dict[str, str] | None = None  # path under ENGINE_ROOT -> sha256
    key: str = ""                   # engine.buildkey: what went into the build
    reused_from: dict | None = None     # {round, image_id, built_at}: an earlier build of the same key
    reproduced: dict | None = None      # --rebuild of a key built before: how its engine files compare
    compiler_cache: dict | None = None  # {tool, hits, misses, store_bytes, kept} when image.compiler_cache is on
    path: str = ""                      # local runtime: the PATH the build ran with, which its runs get too


@dataclass
class RunResult:
    exit_code: int | None           # None when the run was killed before it exited
    wall_s: float                   # measured by the console from outside
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    peak_mem_bytes: int | None = None
    out_bytes: int = 0
    killed_reason: str | None = None    # "timeout" | "output limit" | "aborted"
    cpu_s: float | None = None          # the engine's CPU time, measured from outside
    telemetry: dict | None = None       # the watch's summary over the engine's own run
    handover: "Handover | None" = None  # noqa: F821  the section the console timed (runtime.handover)


@dataclass
class Served:
    """An engine's server, started by a runtime for a serving round: reachable at ``url`` from the
    console only (an internal network, or loopback), stopped by ``stop`` or the round's cleanup."""
    build: str
    url: str                                # http://host:port, no trailing slash
    label: str
    alive: Callable[[], bool]               # the server's process still runs
    logs: Callable[[], str]                 # its output so far (for a failure's message)
    cpu_s: Callable[[], float | None]       # its CPU seconds so far, from outside
    pids: Callable[[], set[int]]            # its processes as host PIDs (for telemetry)
    stop: Callable[[], None]                # ends it, paused or not
    # Freeze and thaw every process of the server: an idle server must not run (nor load the other
    # build's) during a block timed through the other. Paused, it is still ``alive``.
    pause: Callable[[], None]
    resume: Callable[[], None]


LogSink = Callable[[str], None]

Watch = Callable[..., "RepMonitor"]  # noqa: F821
"""Starts telemetry the moment the engine runs: ``watch(own_pids=callable)``.

The runtime calls it after the engine has started and stops the monitor when it
has exited, so container or process start and teardown (the daemon's work, not a
neighbour's) stay out of the rep's telemetry window. ``own_pids`` names the
engine's processes, which GPU telemetry must not mistake for foreign ones.
"""


class Runtime(Protocol):
    kind: str
    engine_outside: bool    # the engine runs outside the console's process tree (Docker)
    journaled_images: bool  # a journal's recorded images are what a resumed round must find again
    isolation: list[str]    # what this runtime enforces, for the receipt
    lacks: list[str]        # what it does not, said plainly

    def host_facts(self) -> dict: ...
    def has_gpu_runtime(self, run: "RunSpec | None" = None) -> bool: ...  # noqa: F821
    def image_exists(self, image_id: str) -> bool: ...
    def cleanup_leftovers(self, stale_after_s: float = 3600.0) -> int: ...   # what crashed rounds left
    def cleanup_round(self) -> int: ...
    def recipe(self, image: "ImageSpec") -> dict[str, str]: ...  # noqa: F821
    def find_build(self, build: str, key: str, image: "ImageSpec",  # noqa: F821
                   not_id: str = "") -> BuildResult | None: ...
    def build(self, build: str, src_dir: Path, image: "ImageSpec", on_log: LogSink,  # noqa: F821
              harness: "HarnessSpec | None" = None, key: str = "", origin: str = "",  # noqa: F821
              keep_cache: bool = False) -> BuildResult: ...  # keep_cache: may write the node's compiler cache
    def run(self, built: BuildResult, argv: list[str], *, src_dir: Path, inputs_dir: Path,
            out_dir: Path, run: "RunSpec", label: str, gpus: bool = False,  # noqa: F821
            watch: Watch | None = None, models: dict[str, str] | None = None,
            handover: "Driver | None" = None) -> RunResult: ...  # noqa: F821
    def serve_address(self, port: int) -> tuple[str, int]: ...   # (host, port) a server listens on
    # a server sees its own tree, the model and its own output directory: never the round's inputs
    def serve(self, built: BuildResult, argv: list[str], *, port: int, src_dir: Path,
              out_dir: Path, run: "RunSpec", label: str, gpus: bool = False,  # noqa: F821
              models: dict[str, str] | None = None) -> Served: ...
    def abort(self) -> None: ...


def dir_bytes(path: Path) -> int:
    """Total size of regular files under ``path`` (no symlink following)."""
    total = 0
    for root, _dirs, files in os.walk(path, followlinks=False):
        for f in files:
            try:
                st = os.lstat(os.path.join(root, f))
            except OSError:
                continue
            total += st.st_size
    return total


def parse_size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    return int(text[:-1]) * units[text[-1].lower()]


class Watchdog:
    """Polls a running job: peak memory and the output directory's size.

    Runs in a thread so the main thread can block in ``wait``. ``on_overflow`` is
    called once when the output directory passes its limit (the caller kills).
    """

    def __init__(self, read_peak: Callable[[], int | None], out_dir: Path, out_limit: int,
                 on_overflow: Callable[[], None], interval_s: float = 0.05,
                 read_cpu: Callable[[], float | None] = lambda: None):
        self.read_peak, self.out_dir, self.out_limit = read_peak, out_dir, out_limit
        self.on_overflow, self.interval_s, self.read_cpu = on_overflow, interval_s, read_cpu
        self.peak: int | None = None
        self.cpu_s: float | None = None     # the job's CPU seconds at the last poll
        self.overflowed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> "Watchdog":
        self._thread.start()
        return self

    def _poll_peak(self) -> None:
        v = self.read_peak()
        if v is not None:
            self.peak = v if self.peak is None else max(self.peak, v)
        c = self.read_cpu()
        if c is not None:
            self.cpu_s = c

    def _loop(self) -> None:
        tick = 0
        while not self._stop.wait(self.interval_s):
            self._poll_peak()
            tick += 1
            if tick % 5 == 0 and not self.overflowed and dir_bytes(self.out_dir) > self.out_limit:
                self.overflowed = True
                self.on_overflow()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._poll_peak()
