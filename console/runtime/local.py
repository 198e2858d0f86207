"""The local runtime: the same round without containers, for nodes that forbid Docker.

Builds run in a fresh temporary directory with the host compiler (asserted like
the image's); reps run as processes in their own process group with the same
timeouts and output checks. What this does not isolate is listed in ``lacks``
and in LIMITS.md.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from ..errors import BuildError, CompilerMismatch, InfraError
from ..profile import HarnessSpec, ImageSpec, RunSpec
from ..paths import cache_dir
from . import compiler_cache
from .handover import Driver
from .base import (ENGINE_ROOT, HANDOVER_ROOT, HARNESS_ROOT, INPUTS_ROOT, LOG_TAIL_LINES, MODEL_ROOT, OUT_ROOT, SRC_ROOT, BuildResult,
                   LogSink, RunResult, Served, Watch, Watchdog, dir_bytes, parse_size)

_BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"}


class LocalRuntime:
    kind = "local"
    engine_outside = False      # a waited-for child: its CPU time is the console's own
    journaled_images = False    # a resumed round finds its builds by their keys instead
    isolation = ["fresh build directory per build", "own process group (killed as a whole)",
                 "wall-clock timeout", "address-space limit", "output directory size limit",
                 "environment limited to the profile's names"]
    lacks = ["network isolation", "read-only filesystem (the engine can write anywhere the user can)",
             "CPU limits (the engine may use every core)", "a pinned base image: the host compiler "
             "is asserted by its version string only", "protection against processes that leave "
             "their process group", "capability dropping"]

    def __init__(self, workdir: Path | None = None):
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="bench-console-local-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._aborted = threading.Event()
        self._servers: list[subprocess.Popen] = []

    def host_facts(self) -> dict:
        return {"docker": "not used"}

    def has_gpu_runtime(self, run: RunSpec | None = None) -> bool:
        return True     # the host's own processes: they see the host's GPUs

    def cleanup_leftovers(self, stale_after_s: float = 3600.0) -> int:
        return 0        # a local round's processes die with their process group

    def cleanup_round(self) -> int:
        servers, self._servers = self._servers, []
        for proc in servers:
            _kill_group(proc)
            proc.wait()
        return len(servers)

    def abort(self) -> None:
        self._aborted.set()
        with self._lock:
            p = self._proc
        if p is not None:
            _kill_group(p)

    def image_exists(self, image_id: str) -> bool:
        return False

    # --- builds --------------------------------------------------------------

    def recipe(self, image: ImageSpec) -> dict[str, str]:
        """No image: the key names the host's asserted toolchain, its search path and the machine."""
        compiler, _, tools = image.toolchain(self.kind)
        return {"runtime": self.kind, "base_image_id": "host", "compiler": compiler, "machine": platform.machine(),
                "tools": "\n".join(f"{t.name}={t.expect}" for t in tools), "path": _search_path(image.host.path)}

    def find_build(self, build: str, key: str, image: ImageSpec, not_id: str = "") -> BuildResult | None:
        """A finished build of the same key on this node (kept under the node cache, as an image would
        be); its engine files are hashed again, not taken from its record."""
        if not key:
            return None
        kept = _builds_dir() / key
        try:
            meta = json.loads((kept / "build.json").read_text())
        except (OSError, ValueError):
            return None
        engine = kept / "engine"
        image_id = "local:" + tree_digest(engine)
        if image_id == not_id:
            return None
        return BuildResult(build=build, image_id=image_id, base_image_id="host", compiler=meta["compiler"],
                           path=_search_path(image.host.path),     # its runs see a fresh build's tools
                           seconds=0.0, root=str(kept), tools=meta.get("tools") or {}, engine_files=_files(engine),
                           key=key, reused_from={"round": meta.get("origin", ""), "image_id": image_id,
                                                 "built_at": meta.get("built_at", "")})

    def _keep(self, root: Path, key: str, origin: str, compiler: str, tools: dict[str, str]) -> None:
        """Keep a finished build's engine directory under its key (atomically: a crash keeps none)."""
        dest = _builds_dir() / key
        if not key or dest.exists():
            return
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".incoming-", dir=dest.parent))
        shutil.copytree(root / "engine", tmp / "engine", symlinks=True)
        (tmp / "build.json").write_text(json.dumps({"compiler": compiler, "tools": tools, "origin": origin,
                                                    "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))
        try:
            os.replace(tmp, dest)
        except OSError:     # another process kept the same key first
            shutil.rmtree(tmp, ignore_errors=True)

    def build(self, build: str, src_dir: Path, image: ImageSpec, on_log: LogSink,
              harness: HarnessSpec | None = None, key: str = "", origin: str = "",
              keep_cache: bool = False) -> BuildResult:
        root = Path(tempfile.mkdtemp(prefix=f"{build}-", dir=self.workdir))
        t0 = time.monotonic()
        path = _search_path(image.host.path)    # the build's and its runs' PATH
        found, tools = self._assert_toolchain(build, image, path, on_log)
        shutil.copytree(src_dir, root / "src", symlinks=True, ignore=shutil.ignore_patterns(".git"))
        for d in ("engine", "build"):
            (root / d).mkdir()
        # The same contract as the image: install under $PREFIX, scratch in $BUILD_DIR (both this
        # build's own, so no build can reuse another's directory), plus the image's fixed paths.
        env = {"PATH": path, "LC_ALL": "C", "PREFIX": str(root / "engine"), "BUILD_DIR": str(root / "build")}
        store = compiler_cache.store_for("host", found) if image.compiler_cache == "ccache" else None
        # A build that may not keep what it writes (a candidate's) gets a copy of the store: the
        # harness builds with the same ccache settings, so the copy lasts until it is built too.
        with compiler_cache.store_to_write(store, keep_cache, root) as writes:
            cache = self._build_engine(build, image, root, env, writes, on_log)
            if harness is not None:
                shutil.copytree(harness.path, root / "harness", symlinks=True)
                self._sh(build, map_paths(harness.build, root, None, None), root / "harness", on_log, env)
        if cache is not None:
            cache.update(store_bytes=dir_bytes(store), kept=keep_cache)
        files = _files(root / "engine")
        self._keep(root, key, origin, found, tools)
        return BuildResult(build=build, image_id="local:" + tree_digest(root / "engine"),
                           base_image_id="host", compiler=found, seconds=time.monotonic() - t0,
                           root=str(root), tools=tools, engine_files=files, key=key, compiler_cache=cache,
                           path=path)

    def _build_engine(self, build: str, image: ImageSpec, root: Path, env: dict[str, str],
                      store: Path | None, on_log: LogSink) -> dict | None:
        """Run the profile's build (with ccache pointed at ``store`` when there is one, adding its
        settings to ``env``); what it got from the store."""
        if store is not None:
            env.update(compiler_cache.build_env(store, root))
            self._sh(build, "ccache --zero-stats >/dev/null", root, on_log, env)
        self._sh(build, map_paths(image.build, root, None, None), root / "src", on_log, env)
        if store is None:
            return None
        lines: list[str] = []
        self._sh(build, f"ccache --print-stats | sed 's/^/{compiler_cache.STATS_PREFIX}/'", root,
                 lambda line: (lines.append(line), on_log(line)), env)
        return {"tool": "ccache", **compiler_cache.parse_stats(lines)}

    def _assert_toolchain(self, build: str, image: ImageSpec, path: str,
                          on_log: LogSink) -> tuple[str, dict[str, str]]:
        """The host's compiler and tools, each the exact version the profile pins (image.host, else the
        image's), found on ``path``."""
        compiler, probe, pinned = image.toolchain(self.kind)
        found = _probe(probe, path)
        if found != compiler:
            raise CompilerMismatch(build, compiler, found, host_packages=image.packages)
        on_log(f"bench-console: compiler ok: {found}")
        tools = {}
        for t in pinned:
            tools[t.name] = _probe(t.probe, path)
            if tools[t.name] != t.expect:
                raise CompilerMismatch(build, t.expect, tools[t.name], tool=t.name, host_packages=image.packages)
            on_log(f"bench-console: tool ok: {t.name}: {tools[t.name]}")
        return found, tools

    def _sh(self, build: str, cmd: str, cwd: Path, on_log: LogSink, env: dict[str, str] | None = None) -> None:
        on_log(f"$ {cmd}")
        proc = subprocess.Popen(["sh", "-ec", cmd], cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace", env=env or _BASE_ENV,
                                start_new_session=True)
        with self._lock:
            self._proc = proc
        tail: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            tail = (tail + [line])[-LOG_TAIL_LINES:]
            on_log(line)
        rc = proc.wait()
        with self._lock:
            self._proc = None
        if self._aborted.is_set():
            raise InfraError("aborted during the build")
        if rc != 0:
            raise BuildError(build, f"the build command exited with {rc}",
                             "Read the build log above; fix the engine's build command or source.", tail)

    # --- runs ----------------------------------------------------------------

    @staticmethod
    def serve_address(port: int) -> tuple[str, int]:
        """Loopback only, on a port free now (the profile's port may be taken on a shared node)."""
        import socket
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return "127.0.0.1", sock.getsockname()[1]

    def serve(self, built: BuildResult, argv: list[str], *, port: int, src_dir: Path, out_dir: Path,
              run: RunSpec, label: str, gpus: bool = False, models: dict[str, str] | None = None) -> Served:
        """The build's server as a process of its own group, listening on loopback."""
        out_dir.mkdir(parents=True, exist_ok=True)
        root = Path(built.root)
        model_dir = self._model_links(models)
        args = [map_paths(a, root, None, out_dir, model_dir) for a in argv]
        env = _run_env(built, run)
        log = out_dir / "server.log"
        with open(log, "wb") as sink:
            try:
                proc = subprocess.Popen(args, cwd=root / "engine", stdout=sink, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)
            except OSError as e:
                raise InfraError(f"could not start the server for {label}: {e}",
                                 "Check the server command in the profile's [server] table.") from None
        self._servers.append(proc)

        def stop() -> None:
            _kill_group(proc)   # SIGKILL ends a stopped group too
            proc.wait()
        # SIGSTOP/SIGCONT to the group: cannot be caught, and poll() does not see a stopped server as gone
        return Served(build=built.build, url=f"http://127.0.0.1:{port}", label=label,
                      alive=lambda: proc.poll() is None, logs=lambda: log.read_text(errors="replace"),
                      cpu_s=lambda: _cpu_s(proc.pid), pids=lambda: {proc.pid}, stop=stop,
                      pause=lambda: _signal_group(proc, signal.SIGSTOP),
                      resume=lambda: _signal_group(proc, signal.SIGCONT))

    def _model_links(self, models: dict[str, str] | None) -> Path | None:
        if not models:
            return None
        # no mounts here: a directory of links stands for /model (read-only is not enforced)
        model_dir = Path(tempfile.mkdtemp(prefix="model-", dir=self.workdir))
        for name, path in models.items():
            (model_dir / name).symlink_to(path)
        return model_dir

    def run(self, built: BuildResult, argv: list[str], *, src_dir: Path, inputs_dir: Path,
            out_dir: Path, run: RunSpec, label: str, gpus: bool = False,
            watch: Watch | None = None, models: dict[str, str] | None = None,
            handover: Driver | None = None) -> RunResult:
        out_dir.mkdir(parents=True, exist_ok=True)
        root = Path(built.root)
        model_dir = self._model_links(models)
        args = [map_paths(a, root, inputs_dir, out_dir, model_dir,
                          handover.directory if handover is not None else None) for a in argv]
        env = _run_env(built, run)
        mem = parse_size(run.memory)

        def limits() -> None:  # runs in the child before exec
            # A GPU runtime reserves far more address space than it uses, so with GPUs
            # the address-space limit would kill the engine at start; the receipt's
            # peak memory still records what it used.
            if not gpus:
                resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        with tempfile.TemporaryFile() as so, tempfile.TemporaryFile() as se:
            if self._aborted.is_set():
                raise InfraError("aborted")
            t0 = time.monotonic()
            try:
                proc = subprocess.Popen(args, cwd=root / "engine", stdout=so, stderr=se, env=env,
                                        start_new_session=True, preexec_fn=limits)
            except OSError as e:
                return RunResult(exit_code=127, wall_s=0.0, stdout=b"", stderr=str(e).encode())
            with self._lock:
                self._proc = proc
            if handover is not None:
                handover.start(run.timeout_s)
            killed: list[str] = []
            dog = Watchdog(lambda: _vm_hwm(proc.pid), out_dir, run.output_limit_mb << 20,
                           lambda: (killed.append("output limit"), _kill_group(proc))).start()
            # The engine is the console's child: host telemetry counts it as the console's
            # own once reaped, and GPU telemetry finds it by ancestry.
            monitor = watch(own_pids=lambda: {proc.pid}) if watch is not None else None
            status, rusage = 0, None
            while True:
                pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() - t0 > run.timeout_s and not killed:
                    killed.append("timeout")
                    _kill_group(proc)
                if self._aborted.is_set() and not killed:
                    killed.append("aborted")
                    _kill_group(proc)
                time.sleep(0.005)
            wall = time.monotonic() - t0
            telemetry = monitor.stop() if monitor is not None else None
            section = handover.finish() if handover is not None else None
            proc.returncode = os.waitstatus_to_exitcode(status)
            _kill_group(proc)  # children that outlived their parent go too
            dog.stop()
            with self._lock:
                self._proc = None
            so.seek(0)
            se.seek(0)
            stdout, stderr = so.read(8 << 20), se.read(1 << 20)
        # Not rusage's ru_maxrss: Linux carries the forking parent's peak across exec, so a
        # child of this Python process would report at least the console's own size.
        peak = dog.peak
        cpu = rusage.ru_utime + rusage.ru_stime if rusage is not None else None
        return RunResult(exit_code=None if killed else proc.returncode, wall_s=wall, stdout=stdout,
                         stderr=stderr, timed_out=bool(killed and killed[0] == "timeout"),
                         peak_mem_bytes=peak, out_bytes=dir_bytes(out_dir),
                         killed_reason=killed[0] if killed else None, cpu_s=cpu, telemetry=telemetry,
                         handover=section)


def map_paths(text: str, root: Path, inputs: Path | None, out: Path | None, model: Path | None = None,
              handover: Path | None = None) -> str:
    """Rewrite the fixed in-container roots to this build's directories."""
    table = [(ENGINE_ROOT, str(root / "engine")), (SRC_ROOT, str(root / "src")),
             (HARNESS_ROOT, str(root / "harness"))]
    if handover is not None:
        table.append((HANDOVER_ROOT, str(handover)))
    if model is not None:
        table.append((MODEL_ROOT, str(model)))
    if inputs is not None:
        table.append((INPUTS_ROOT, str(inputs)))
    if out is not None:
        table.append((OUT_ROOT, str(out)))
    for old, new in table:
        text = _replace_root(text, old, new)
    return text


def _replace_root(text: str, old: str, new: str) -> str:
    # Only whole path roots: "/engine" or "/engine/..." — not "/engineering".
    out, i = [], 0
    while True:
        j = text.find(old, i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        end = j + len(old)
        boundary_before = j == 0 or text[j - 1] in " =:'\""
        boundary_after = end == len(text) or text[end] in "/ '\""
        out.append(text[i:j] + (new if boundary_before and boundary_after else old))
        i = end


def _run_env(built: BuildResult, run: RunSpec) -> dict[str, str]:
    """What a run of ``built`` sees: the build's own PATH and the variables the profile passes through."""
    return {**_BASE_ENV, "PATH": built.path or _BASE_ENV["PATH"], **{k: os.environ[k] for k in run.env if k in os.environ}}


def _search_path(extra: tuple[str, ...]) -> str:
    """The PATH builds and runs get: the profile's host directories, then the system's."""
    return ":".join([*extra, _BASE_ENV["PATH"]])


def _probe(probe: tuple[str, ...], path: str = _BASE_ENV["PATH"]) -> str:
    """The first line a version probe prints, with the PATH the build runs with."""
    try:
        r = subprocess.run(list(probe), capture_output=True, text=True, errors="replace",
                           env=dict(_BASE_ENV, PATH=path))
        text = r.stdout or r.stderr
    except OSError as e:
        text = f"{probe[0]}: not runnable on this host ({e.strerror})"
    return text.splitlines()[0].strip() if text else ""


def _cpu_s(pid: int) -> float | None:
    """A process's CPU seconds so far (user + system, all its threads), from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _vm_hwm(pid: int) -> int | None:
    """The process's resident high-water mark, reset at exec (so it is the engine's own)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _builds_dir() -> Path:
    return cache_dir() / "local-builds"


def _files(engine: Path) -> dict[str, str]:
    return {str(p.relative_to(engine)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(engine.rglob("*")) if p.is_file()}


def tree_digest(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(path)).encode() + b"\0")
            h.update(p.read_bytes())
    return h.hexdigest()


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
