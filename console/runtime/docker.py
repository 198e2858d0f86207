"""The Docker runtime: engine images built from scratch, reps in locked-down containers.

Everything the console creates carries the label ``bench-console=1`` so that a
crash can be cleaned up on the next start (``cleanup_leftovers``).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import io
import os
import re
import shlex
import tarfile
import threading
import time
from pathlib import Path

from ..errors import BuildError, CompilerMismatch, InfraError
from ..paths import DOCKERFILE
from ..profile import HarnessSpec, ImageSpec, RunSpec
from . import compiler_cache
from .handover import Driver
from .base import (ENGINE_ROOT, HANDOVER_ROOT, INPUTS_ROOT, LOG_TAIL_LINES, MODEL_ROOT, OUT_ROOT, SRC_ROOT, BuildResult,
                   LogSink, RunResult, Served, Watch, Watchdog, dir_bytes)

LABEL = "bench-console"
# Each server of a serving round gets a network of its own, named from this prefix: internal (no
# gateway, so no route out), reachable from this host by the container's address and from nothing else,
# not even the other build's server.
SERVE_NETWORK = "bench-console-serve"
_MISMATCH = re.compile(r"^bench-console: compiler mismatch: expected '(.*)', found '(.*)'")
_COMPILER_OK = re.compile(r"^bench-console: compiler ok: (.*)")
_TOOL_MISMATCH = re.compile(r"^bench-console: tool mismatch: ([^:]*): expected '(.*)', found '(.*)'")
_TOOL_OK = re.compile(r"^bench-console: tool ok: ([^:]*): (.*)")

NO_DAEMON_HINT = (
    "Start the Docker daemon (for example `sudo systemctl start docker`, or `dockerd &`), "
    "make sure this user may use /var/run/docker.sock, or run with `--runtime local` on a node "
    "that forbids Docker.")


def connect():
    """A Docker client, or an InfraError that says what to do."""
    try:
        import docker
    except ImportError as e:  # pragma: no cover - dependency is declared
        raise InfraError(f"the Docker SDK is not installed ({e})", "Run `make setup`.") from None
    try:
        client = docker.from_env(timeout=120)
        client.ping()
        return client
    except Exception as e:  # docker.errors.DockerException and transport errors
        raise InfraError(f"Docker is not reachable: {_short(e)}.", NO_DAEMON_HINT) from None


STOPPED_GRACE_S = 60.0     # a live round reads and removes a finished run's container within seconds


def is_leftover(status: str, state: dict, created: str, now, stale_after_s: float,
                grace_s: float = STOPPED_GRACE_S) -> bool:
    """Whether a console container (its status, State, Created) is a crashed round's: stopped for
    ``min(grace_s, stale_after_s)`` since it was created or last finished, or running or paused
    for over ``stale_after_s`` (no run lasts that long). A start time that cannot be read never
    makes a running container old; a stopped one with no readable time is old."""
    if status in ("running", "paused"):
        started = _age_s(state.get("StartedAt", ""), now)
        return started is not None and started > stale_after_s
    ages = [a for a in (_age_s(created, now), _age_s(state.get("FinishedAt", ""), now)) if a is not None]
    return min(ages, default=float("inf")) >= min(grace_s, stale_after_s)


def _age_s(stamp: str, now) -> float | None:
    """Seconds since the daemon's RFC 3339 ``stamp``; None when it is missing, the zero time (a
    container never started or never finished) or unreadable."""
    if not stamp or stamp.startswith("0001-"):
        return None
    try:
        then = dt.datetime.fromisoformat(stamp[:26].rstrip("Z") + "+00:00")
    except ValueError:
        return None
    return (now - then).total_seconds()


def remove_engine_images(client, keep_key: str = "", on_kept=lambda image_id, why: None) -> int:
    """Remove the engine images the console built on this node (never a base), except those of
    build key ``keep_key``; a removal the daemon refuses is said through ``on_kept``. The count removed."""
    doomed = [img.id for img in client.images.list(filters={"label": f"{LABEL}.build"})
              if not (keep_key and (img.labels or {}).get(f"{LABEL}.key") == keep_key)]
    kept = remove_images(client, doomed)
    for image_id, why in kept.items():
        on_kept(image_id, why)
    return len(doomed) - len(kept)


def remove_images(client, image_ids: list[str]) -> dict[str, str]:
    """Remove each image (forced); those the daemon kept, with why (in use by a live round, already gone)."""
    kept: dict[str, str] = {}
    for image_id in image_ids:
        try:
            client.images.remove(image_id, force=True)
        except Exception as e:
            kept[image_id] = _short(e)
    return kept


def containers_by_job(client) -> dict[str, list]:
    """The console's run containers that carry a batch job's label, by that job's id."""
    jobs: dict[str, list] = {}
    for c in client.containers.list(all=True, filters={"label": f"{LABEL}.slurm-job"}, ignore_removed=True):
        job = c.labels.get(f"{LABEL}.slurm-job", "")
        if job:
            jobs.setdefault(job, []).append(c)
    return jobs


def remove_container(container) -> str | None:
    """Remove one container (forced); why not, if the daemon refused (gone meanwhile, say)."""
    try:
        container.remove(force=True)
    except Exception as e:
        return _short(e)
    return None


def _short(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__


def _cgroup_peak_reader(container_id: str):
    """Return a function reading the container's peak memory from its cgroup.

    Read on the host, never inside the container, so the engine cannot fake it.
    Covers cgroup v1 (cgroupfs and systemd drivers) and v2.
    """
    candidates = [
        f"/sys/fs/cgroup/memory/docker/{container_id}/memory.max_usage_in_bytes",
        f"/sys/fs/cgroup/memory/system.slice/docker-{container_id}.scope/memory.max_usage_in_bytes",
        f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/memory.peak",
        f"/sys/fs/cgroup/docker/{container_id}/memory.peak",
    ]

    def read() -> int | None:
        for p in candidates:
            try:
                with open(p) as f:
                    return int(f.read().strip())
            except (OSError, ValueError):
                continue
        return None
    return read


def _cgroup_pids_reader(container_id: str):
    """The container's processes as host PIDs (what NVML reports), from its cgroup."""
    candidates = [f"/sys/fs/cgroup/pids/docker/{container_id}/cgroup.procs",
                  f"/sys/fs/cgroup/cpuacct/docker/{container_id}/cgroup.procs",
                  f"/sys/fs/cgroup/memory/docker/{container_id}/cgroup.procs",
                  f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/cgroup.procs",
                  f"/sys/fs/cgroup/docker/{container_id}/cgroup.procs"]

    def read() -> set[int]:
        for p in candidates:
            try:
                with open(p) as f:
                    return {int(x) for x in f.read().split()}
            except (OSError, ValueError):
                continue
        return set()
    return read


def _cgroup_cpu_reader(container_id: str):
    """The container's CPU seconds so far (cgroup v1 cpuacct, or v2 cpu.stat)."""
    v1 = [f"/sys/fs/cgroup/cpuacct/docker/{container_id}/cpuacct.usage",
          f"/sys/fs/cgroup/cpu,cpuacct/docker/{container_id}/cpuacct.usage",
          f"/sys/fs/cgroup/cpuacct/system.slice/docker-{container_id}.scope/cpuacct.usage"]
    v2 = [f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/cpu.stat",
          f"/sys/fs/cgroup/docker/{container_id}/cpu.stat"]

    def read() -> float | None:
        for p in v1:
            try:
                with open(p) as f:
                    return int(f.read().strip()) / 1e9
            except (OSError, ValueError):
                continue
        for p in v2:
            try:
                with open(p) as f:
                    for line in f:
                        if line.startswith("usage_usec "):
                            return int(line.split()[1]) / 1e6
            except (OSError, ValueError):
                continue
        return None
    return read


class _BuildLog:
    """What a build's output stream says: the image, the asserted compiler and tools, the
    compiler cache's statistics, the last lines (for an error), and refusals as they come."""

    def __init__(self, build: str, on_log: LogSink):
        self.build, self.on_log = build, on_log
        self.tail: list[str] = []
        self.image_id: str | None = None
        self.compiler: str | None = None
        self.tools: dict[str, str] = {}
        self.cache_lines: list[str] = []

    def chunk(self, chunk: dict) -> None:
        for line in str(chunk.get("stream", "")).splitlines():
            if line.strip():
                self.line(line)
        if "error" in chunk:
            raise BuildError(self.build, str(chunk["error"]).strip(),
                             "Read the build log above; fix the engine's build command or source.", self.tail)
        aux = chunk.get("aux") or {}
        if "ID" in aux:
            self.image_id = aux["ID"]

    def line(self, line: str) -> None:
        self.tail = (self.tail + [line])[-LOG_TAIL_LINES:]
        if line.startswith(compiler_cache.STATS_PREFIX):
            self.cache_lines.append(line)
            return                  # kept for the receipt, not shown line by line
        self.on_log(line)
        if m := _MISMATCH.match(line):
            raise CompilerMismatch(self.build, m.group(1), m.group(2))
        if m := _COMPILER_OK.match(line):
            self.compiler = m.group(1)
        if m := _TOOL_MISMATCH.match(line):
            raise CompilerMismatch(self.build, m.group(2), m.group(3), tool=m.group(1))
        if m := _TOOL_OK.match(line):
            self.tools[m.group(1)] = m.group(2)

    def check(self, tools) -> None:
        if self.image_id is None or self.compiler is None:
            raise BuildError(self.build, "the build finished without an image or without the compiler check",
                             "Read the build log above.", self.tail)
        missing = [t.name for t in tools if t.name not in self.tools]
        if missing:
            raise BuildError(self.build, "the build did not assert " + ", ".join(missing),
                             "Read the build log above.", self.tail)


class DockerRuntime:
    kind = "docker"
    # the engine runs outside the console's process tree (its CPU time reads as another process's)
    engine_outside = True
    journaled_images = True     # a journal names its builds' images, which a resumed round needs
    isolation = ["no network", "read-only root filesystem", "source mounted read-only",
                 "writable output directory only (size-limited)", "CPU, memory and process limits",
                 "all capabilities dropped", "no new privileges", "non-root user",
                 "environment limited to the profile's names", "wall-clock timeout"]
    lacks: list[str] = []

    def __init__(self, round_label: str = ""):
        self.client = connect()
        self.round_label = round_label
        self._current = None
        self._lock = threading.Lock()
        self._aborted = threading.Event()

    # --- facts and hygiene ---------------------------------------------------

    def host_facts(self) -> dict:
        info = self.client.info()
        ver = self.client.version()
        return {
            "docker": ver.get("Version", "?"),
            "docker_runtimes": sorted((info.get("Runtimes") or {}).keys()),
            "cgroup_version": str(info.get("CgroupVersion", "?")),
            "storage_driver": info.get("Driver", "?"),
            "cdi_spec_dirs": list(info.get("CDISpecDirs") or []),
        }

    def has_gpu_runtime(self, run: RunSpec | None = None) -> bool:
        """Whether the run's device request can work. CDI devices (``run.cdi_devices``): the daemon
        reads CDI specs (it lists their directories; none means CDI is off). `--gpus`: an `nvidia`
        runtime registered with the daemon, the hook the daemon calls for them (the container
        toolkit's default), or CDI with the toolkit's CDI hook (Docker 28.3+ turns `--gpus` into
        `nvidia.com/gpu` CDI devices then)."""
        import shutil
        info = self.client.info()
        cdi = bool(info.get("CDISpecDirs"))
        if run is not None and run.cdi_devices:
            return cdi
        if "nvidia" in (info.get("Runtimes") or {}):
            return True
        return shutil.which("nvidia-container-runtime-hook") is not None or (
            cdi and shutil.which("nvidia-cdi-hook") is not None)

    @staticmethod
    def gpu_request(run: RunSpec) -> dict:
        """The device request a run with GPUs gets (docker-py's DeviceRequest keywords; the receipt
        keeps it): the profile's CDI devices, else the equivalent of `--gpus all`."""
        if run.cdi_devices:
            return {"driver": "cdi", "device_ids": list(run.cdi_devices)}
        return {"count": -1, "capabilities": [["gpu"]]}

    def cleanup_round(self) -> int:
        """Remove every container of this round (the normal end of a round)."""
        return self._remove(self.client.containers.list(
            all=True, filters={"label": f"{LABEL}.round={self.round_label}"}, ignore_removed=True))

    def cleanup_leftovers(self, stale_after_s: float = 3600.0) -> int:
        """Remove what crashed rounds left behind, without touching a live round's run.

        Another round may be live on this node (a queue's worker beside a user's round): a container
        it has just created, or whose run has just ended and is being read, is stopped but not left
        over. So a stopped container is a leftover once it has been stopped a minute; a running or
        paused one once it is older than any run's timeout could allow (its console died with it).
        That other round also removes its own containers while this one lists them: a listed
        container gone before it is read is no longer there to clean (``ignore_removed``), not an error.
        """
        now = dt.datetime.now(dt.timezone.utc)
        stale = [c for c in self.client.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True)
                 if is_leftover(c.status, c.attrs.get("State") or {}, c.attrs.get("Created", ""), now,
                                stale_after_s)]
        return self._remove(stale)

    @staticmethod
    def _remove(containers) -> int:
        n = 0
        for c in containers:
            try:
                c.remove(force=True)
                n += 1
            except Exception:
                pass
        return n

    def abort(self) -> None:
        self._aborted.set()
        with self._lock:
            c = self._current
        if c is not None:
            try:
                c.kill()
            except Exception:
                pass

    # --- builds --------------------------------------------------------------

    def recipe(self, image: ImageSpec) -> dict[str, str]:
        """What this runtime puts into every build besides the trees and commands: the pinned base
        (by ID) and the Dockerfile, by digest. Part of a build's key."""
        return {"runtime": self.kind, "base_image_id": self.base_image_id(image.base_ref),
                "recipe_sha256": hashlib.sha256(DOCKERFILE.read_bytes()).hexdigest()}

    def find_build(self, build: str, key: str, image: ImageSpec, not_id: str = "") -> BuildResult | None:
        """The newest image on this node built from ``key``'s inputs (its label), as a build of
        ``build``; its engine files are read again from the image, not taken from any record."""
        try:
            found = self.client.images.list(filters={"label": f"{LABEL}.key={key}"})
        except Exception as e:
            raise InfraError(f"could not list the engine images: {_short(e)}", "Check the Docker daemon.") from None
        found = sorted((i for i in found if i.id != not_id), key=lambda i: i.attrs.get("Created", ""), reverse=True)
        if not found:
            return None
        img = found[0]
        labels = img.labels or {}
        return BuildResult(build=build, image_id=img.id, base_image_id=self.base_image_id(image.base_ref),
                           compiler=labels.get(f"{LABEL}.compiler", image.compiler), seconds=0.0,
                           tools={t.name: t.expect for t in image.tools}, engine_files=self._engine_files(img.id),
                           key=key, reused_from={"round": labels.get(f"{LABEL}.origin", ""),
                                                 "image_id": img.id, "built_at": img.attrs.get("Created", "")})

    def build(self, build: str, src_dir: Path, image: ImageSpec, on_log: LogSink,
              harness: HarnessSpec | None = None, key: str = "", origin: str = "",
              keep_cache: bool = False) -> BuildResult:
        base_id = self.base_image_id(image.base_ref)
        store = compiler_cache.store_for(base_id, image.compiler) if image.compiler_cache == "ccache" else None
        with compiler_cache.reading(store):
            context = _build_context(src_dir, harness, store)
        t0 = time.monotonic()
        seen = _BuildLog(build, on_log)
        try:
            stream = self.client.api.build(
                fileobj=context, custom_context=True, encoding="gzip", decode=True,
                nocache=True, rm=True, forcerm=True, pull=False,
                buildargs={"BASE": base_id, "COMPILER_EXPECTED": image.compiler,
                           "COMPILER_PROBE": " ".join(image.compiler_probe), "BUILD_CMD": image.build,
                           "HARNESS_BUILD": harness.build if harness else "true", "BUILD_NAME": build,
                           "BUILD_KEY": key, "ORIGIN": origin, "COMPILER_CACHE": image.compiler_cache,
                           "TOOLS": "".join(f"{t.name}\t{t.expect}\t{shlex.join(t.probe)}\n" for t in image.tools)},
                network_mode="none",   # the labels are the Dockerfile's one LABEL: one layer, not five
            )
            for chunk in stream:
                if self._aborted.is_set():
                    raise InfraError("aborted during the build")
                seen.chunk(chunk)
        except (BuildError, InfraError):
            raise
        except Exception as e:
            raise BuildError(build, _short(e), "Check the Docker daemon and disk space, then retry.", seen.tail) from None
        seen.check(image.tools)
        cache = self._keep_cache(seen.image_id, store, seen.cache_lines, keep_cache) if store is not None else None
        return BuildResult(build=build, image_id=seen.image_id, base_image_id=base_id, compiler=seen.compiler,
                           seconds=time.monotonic() - t0, tools=seen.tools,
                           engine_files=self._engine_files(seen.image_id), key=key, compiler_cache=cache)

    def _keep_cache(self, image_id: str, store: Path, lines: list[str], keep: bool) -> dict:
        """What this build got from the node's ccache store; the image's updated store replaces the
        node's only when the build may keep it (a candidate's stays in its image, read by no build)."""
        stats = compiler_cache.parse_stats(lines)
        if not keep:
            return {"tool": "ccache", **stats, "store_bytes": dir_bytes(store), "kept": False}
        c = self.client.containers.create(image_id, ["true"], entrypoint=[], network_mode="none", labels={LABEL: "1"})
        try:
            chunks, _ = c.get_archive(compiler_cache.IN_IMAGE)
            size = compiler_cache.replace_store(store, chunks)
        except Exception as e:
            raise InfraError(f"could not keep the compiler cache: {_short(e)}", "Check free disk space under "
                             f"{store.parent} (or set image.compiler_cache = \"none\").") from None
        finally:
            c.remove(force=True)
        return {"tool": "ccache", **stats, "store_bytes": size, "kept": True}

    def _engine_files(self, image_id: str) -> dict[str, str]:
        """sha256 of every file the build left under the engine root, read in a throwaway
        container of the image (no network, nothing mounted)."""
        script = f"cd {ENGINE_ROOT} && find . -type f -print0 | sort -z | xargs -0 -r sha256sum"
        try:
            out = self.client.containers.run(image_id, ["sh", "-c", script], remove=True, network_mode="none",
                                             entrypoint=[], labels={LABEL: "1"}, stdout=True, stderr=False)
        except Exception as e:
            raise InfraError(f"could not list the built engine files: {_short(e)}", "Check the Docker daemon.") from None
        files = {}
        for line in out.decode("utf-8", "replace").splitlines():
            digest, _, name = line.partition("  ")
            if name:
                files[name[2:] if name.startswith("./") else name] = digest
        return files

    def base_image_id(self, ref: str) -> str:
        try:
            return self.client.images.get(ref).id
        except Exception:
            raise InfraError(
                f"the base image '{ref}' is not on this node.",
                "Make it with `console images bootstrap --profile PROFILE` (no registry is needed), "
                "or name an image that exists here by ID or digest.") from None

    def image_exists(self, image_id: str) -> bool:
        try:
            self.client.images.get(image_id)
            return True
        except Exception:
            return False

    # --- runs ----------------------------------------------------------------

    @staticmethod
    def serve_address(port: int) -> tuple[str, int]:
        """Every address of the container's own network namespace, on the profile's port: the
        namespace has only the internal network, so nothing outside this host reaches it."""
        return "0.0.0.0", port

    def serve(self, built: BuildResult, argv: list[str], **kw) -> Served:
        return serve(self, built, argv, **kw)

    def _create(self, built: BuildResult, kwargs: dict, label: str):
        try:
            return self.client.containers.create(built.image_id, **kwargs)
        except Exception as e:
            raise InfraError(f"could not create a container for {label}: {_short(e)}",
                             "Check the Docker daemon and that the image still exists.") from None

    def _container_config(self, argv: list[str], src_dir: Path, inputs_dir: Path | None, out_dir: Path, run: RunSpec,
                          label: str, gpus: bool, models: dict[str, str] | None,
                          handover_dir: Path | None = None) -> dict:
        """How a rep's container is locked down: what it sees, what it may write, its limits."""
        from docker.types import DeviceRequest, LogConfig, Mount

        env = {k: os.environ[k] for k in run.env if k in os.environ}
        kwargs = dict(
            # the argv is the whole command: a base's entrypoint (nvidia/cuda's prints a banner) is not run
            command=argv, entrypoint=[], detach=True, network_mode="none", read_only=True, user=run.user,
            mounts=[Mount(SRC_ROOT, str(src_dir), type="bind", read_only=True),
                    *([Mount(INPUTS_ROOT, str(inputs_dir), type="bind", read_only=True)] if inputs_dir else []),
                    Mount(OUT_ROOT, str(out_dir), type="bind", read_only=False),
                    # weights: mounted read-only, never copied into a tree or an image
                    *[Mount(f"{MODEL_ROOT}/{name}", path, type="bind", read_only=True)
                      for name, path in (models or {}).items()],
                    # a bench run's FIFOs: read-only keeps the directory, not the FIFOs, from its writes
                    *([Mount(HANDOVER_ROOT, str(handover_dir), type="bind", read_only=True)] if handover_dir else [])],
            tmpfs={"/tmp": "size=16m"}, cap_drop=["ALL"], security_opt=["no-new-privileges"],
            pids_limit=run.pids, mem_limit=run.memory, memswap_limit=run.memory,
            nano_cpus=int(run.cpus * 1e9), environment=env, working_dir=ENGINE_ROOT,
            labels={LABEL: "1", f"{LABEL}.round": self.round_label, f"{LABEL}.run": label,
                    # a batch job killed outright cannot remove its container: the label lets the
                    # node's next job do it once the scheduler says the job has ended
                    **({f"{LABEL}.slurm-job": os.environ["SLURM_JOB_ID"]} if "SLURM_JOB_ID" in os.environ else {})},
            log_config=LogConfig(type="json-file", config={"max-size": "8m", "max-file": "1"}),
        )
        if gpus:
            kwargs["device_requests"] = [DeviceRequest(**self.gpu_request(run))]
        return kwargs

    def run(self, built: BuildResult, argv: list[str], *, src_dir: Path, inputs_dir: Path,
            out_dir: Path, run: RunSpec, label: str, gpus: bool = False,
            watch: Watch | None = None, models: dict[str, str] | None = None,
            handover: Driver | None = None) -> RunResult:
        out_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(out_dir, 0o777)  # the run's non-root user must be able to write here
        kwargs = self._container_config(argv, src_dir, inputs_dir, out_dir, run, label, gpus, models,
                                        handover.directory if handover is not None else None)
        container = self._create(built, kwargs, label)
        with self._lock:
            self._current = container
        killed: list[str] = []

        def kill(reason: str) -> None:
            if not killed:
                killed.append(reason)
            try:
                container.kill()
            except Exception:
                pass

        dog = Watchdog(_cgroup_peak_reader(container.id), out_dir, run.output_limit_mb << 20,
                       lambda: kill("output limit"), read_cpu=_cgroup_cpu_reader(container.id))
        exit_code = None
        monitor = None
        telemetry = None
        try:
            if self._aborted.is_set():
                raise InfraError("aborted")
            t0 = time.monotonic()
            container.start()
            if handover is not None:
                handover.start(run.timeout_s)
            dog.start()
            if watch is not None:
                monitor = watch(own_pids=_cgroup_pids_reader(container.id))
            try:
                exit_code = int(container.wait(timeout=run.timeout_s)["StatusCode"])
            except Exception:
                # requests' ReadTimeout (timeout) or a daemon that went away.
                if self._aborted.is_set():
                    kill("aborted")
                elif time.monotonic() - t0 >= run.timeout_s * 0.99:
                    kill("timeout")
                else:
                    kill("daemon error")
                try:
                    container.wait(timeout=10)
                except Exception:
                    pass
            wall = time.monotonic() - t0
            if monitor is not None:
                telemetry, monitor = monitor.stop(), None
            dog.stop()
            section = handover.finish() if handover is not None else None
            if self._aborted.is_set() and not killed:
                killed.append("aborted")
            try:
                stdout = container.logs(stdout=True, stderr=False)
                stderr = container.logs(stdout=False, stderr=True)
            except Exception:
                stdout, stderr = b"", b""
        finally:
            if monitor is not None:     # an exception left it running
                monitor.stop()
            with self._lock:
                self._current = None
            try:
                container.remove(force=True)
            except Exception:
                pass
        if killed and killed[0] == "daemon error":
            raise InfraError(f"the Docker daemon stopped answering during {label}",
                             "Check `docker info`; the round can be resumed with `console resume`.")
        return RunResult(exit_code=None if killed else exit_code, wall_s=wall, stdout=stdout, stderr=stderr,
                         timed_out=bool(killed and killed[0] == "timeout"), peak_mem_bytes=dog.peak,
                         out_bytes=dir_bytes(out_dir), killed_reason=killed[0] if killed else None,
                         cpu_s=dog.cpu_s, telemetry=telemetry, handover=section)


def _serve_network(rt: "DockerRuntime"):
    """A new internal network for one server. On a shared one the idle server could load the timed
    one, and its CPU would count as the timed server's; on its own it has no route to the other."""
    try:    # what a crashed round left: unused and old, so never a live round's (prune spares used ones)
        rt.client.networks.prune(filters={"label": LABEL, "until": "10m"})
    except Exception:
        pass
    return rt.client.networks.create(f"{SERVE_NETWORK}-{os.urandom(6).hex()}", driver="bridge", internal=True,
                                     labels={LABEL: "1", f"{LABEL}.round": rt.round_label})


def _remove_server(container, net) -> None:
    """Remove the container (paused or not), then its network: nothing is left running or frozen."""
    if container is not None:
        try:
            container.remove(force=True)
        except Exception:
            try:    # a daemon that will not kill a frozen container: thaw it first
                container.unpause()
                container.remove(force=True)
            except Exception:
                pass
    if net is not None:
        try:
            net.remove()
        except Exception:
            pass


def _set_paused(container, paused: bool, label: str) -> None:
    """Freeze (cgroup freezer) or thaw the server. Already so, exited or removed is no error: a dead
    server is found by ``alive``, a removed one was stopped by the round's end."""
    try:
        (container.pause if paused else container.unpause)()
        return
    except Exception as e:
        err = e
    try:
        container.reload()
    except Exception:
        return
    if container.status in ("exited", "dead", "removing") or (container.status == "paused") == paused:
        return
    raise InfraError(f"could not {'pause' if paused else 'resume'} the server {label}: {_short(err)}",
                     "Check the Docker daemon; the idle server must be frozen while the other is timed.")


def serve(rt: "DockerRuntime", built: BuildResult, argv: list[str], *, port: int, src_dir: Path,
          out_dir: Path, run: RunSpec, label: str, gpus: bool = False, models: dict[str, str] | None = None) -> Served:
    """Start a build's server in a container locked down like a rep's, alone on an internal network.
    It sees its own tree, the model and its own output directory, not the round's inputs (the
    document, the reference, the grading's files): nothing it answers may be looked up there."""
    out_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(out_dir, 0o777)
    kwargs = rt._container_config(argv, src_dir, None, out_dir, run, label, gpus, models)
    del kwargs["network_mode"]
    net = container = None
    try:
        net = _serve_network(rt)
        container = rt.client.containers.create(built.image_id, network=net.name, **kwargs)
        container.start()
        container.reload()
        ip = container.attrs["NetworkSettings"]["Networks"][net.name]["IPAddress"]
    except Exception as e:
        _remove_server(container, net)
        raise InfraError(f"could not start the server for {label}: {_short(e)}",
                         "Check the Docker daemon and that the image still exists.") from None
    cpu = _cgroup_cpu_reader(container.id)

    def alive() -> bool:
        try:
            container.reload()
            return container.status in ("created", "running", "paused")
        except Exception:
            return False

    def logs() -> str:
        try:
            return container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        except Exception:
            return ""
    return Served(build=built.build, url=f"http://{ip}:{port}", label=label, alive=alive, logs=logs, cpu_s=cpu,
                  pids=_cgroup_pids_reader(container.id), stop=lambda: _remove_server(container, net),
                  pause=lambda: _set_paused(container, True, label),
                  resume=lambda: _set_paused(container, False, label))


def _build_context(src_dir: Path, harness: HarnessSpec | None, store: Path | None = None) -> io.BytesIO:
    """A tar of the Dockerfile, the engine's tree (as engine/src/), the node's compiler cache (as
    engine/ccache/, empty without one) and the profile's harness (as harness/, empty without one):
    what the engine's build sees arrives in one COPY, the harness after it.
    Level-1 gzip: a 30 MB tree costs seconds, not tens of them, on a small node."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        tar.add(str(DOCKERFILE), arcname="Dockerfile")
        tar.add(str(src_dir), arcname="engine/src", filter=_strip_owner)
        _add_dir(tar, store, "engine/ccache")
        _add_dir(tar, Path(harness.path) if harness is not None else None, "harness")
    buf.seek(0)
    return buf


def _add_dir(tar: tarfile.TarFile, path: Path | None, arcname: str) -> None:
    """``path`` as ``arcname/``, root-owned; an empty directory without one (the Dockerfile
    copies it either way)."""
    if path is not None and any(path.iterdir()):
        tar.add(str(path), arcname=arcname, filter=_strip_owner)
        return
    info = tarfile.TarInfo(arcname)
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    tar.addfile(info)


def _strip_owner(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    if info.name.split("/")[-1] in (".git",):
        return None
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info
