"""Each build's server over the round: started on demand, warmed, frozen while the other build's
runs, stopped at the end. A server that dies or never becomes ready is its build's failure (the
candidate's is rejected through the server check; main's makes the round ``infra``), said with the
tail of its log."""
from __future__ import annotations

import secrets
from pathlib import Path

from ... import events as ev
from ...core.decisions.sweep import Level
from ...core.records.served import WorkloadDraw
from ...engine.vocabulary import text_ids
from ...errors import InfraError, Interrupted
from ...runtime.base import Served
from ...serving import client
from ...serving import workload as wl
from ..schedule import DOC_NAME, fill
from ..reps import Bench
from . import draw as drawing

LOG_LINES = 12


class Servers:
    """The round's servers, one per build, started on demand and stopped at the end."""

    def __init__(self, b: Bench, notice: ev.Notify, slots: int = 0):
        self.b, self.spec, self._notice = b, b.profile.server, notice
        # the load of the next block (a sweep changes it per level), and the server's slots for it
        self.load = Level(self.spec.concurrency, self.spec.rate)
        self.slots = slots or self.spec.concurrency
        self.live: dict[str, Served] = {}
        self.ready_s: dict[str, float] = {}
        self.starts: dict[str, int] = {}
        self.closed = False
        self.dead: set[str] = set()        # builds whose server exited under load
        self.ready_cpu_s: dict[str, float | None] = {}
        self.doc = [int(x) for x in (b.inputs / DOC_NAME).read_text().split()]
        # drawn ids: what the model's tokenizer makes from text, the whole vocabulary but its control
        # tokens and raw bytes (engine.vocabulary)
        model = next((Path(f.path) for f in b.profile.model if f.name.endswith(".gguf")), None)
        self.pool = text_ids(model, b.profile.parity.vocab)
        # the timed workload's seed is drawn when the blocks begin (``draw``); the requests that warm a
        # server after its start are untimed, drawn from a seed of their own that is never recorded
        self.seed: str | None = None
        self._warm_seed = secrets.token_hex(16)

    def draw(self) -> WorkloadDraw:
        """Draw the timed workload's seed now that both servers are ready (``draw.draw``)."""
        drawn = drawing.draw(self.spec, self.doc, self.pool)
        self.seed = drawn.seed
        return drawn

    def start(self, build: str) -> Served:
        """Start ``build``'s server and wait until it answers; InfraError (with its log) if it cannot."""
        if self.closed:
            raise Interrupted("the round was interrupted", "Run it again; its builds are reused by their keys.")
        self.stop(build)
        self._freeze_all_but(build)     # frozen while this one loads and warms up
        p, spec, b = self.b.profile, self.spec, self.b
        n = self.starts[build] = self.starts.get(build, 0) + 1
        host, port = b.rt.serve_address(spec.port)
        argv = fill(spec.command, p, host=host, port=str(port), slots=str(self.slots))
        served = b.rt.serve(b.builds[build], argv, port=port, src_dir=b.src_dirs[build],
                            out_dir=b.work / "servers" / f"{build}-{n}", run=p.run, label=f"{build}/server/{n}",
                            gpus=b.gpus, models=b.models)
        self.live[build] = served
        waited = client.wait_ready(served.url, spec.ready, spec.ready_timeout_s, alive=served.alive)
        if waited is None:
            why = "exited" if not served.alive() else f"did not answer {spec.ready} within {spec.ready_timeout_s:g} s"
            log = tail(served.logs())
            self.stop(build)
            raise ServerDown(build, f"{build}'s server {why}; its log ends: {log}")
        self.ready_s[build] = round(waited, 3)
        cpu = served.cpu_s()
        self.ready_cpu_s[build] = None if cpu is None else round(cpu, 3)
        if spec.warmup:
            self.warm(build, served)
        return served

    def warm(self, build: str, served: Served) -> None:
        """Untimed requests at the load's cap, after every start: the server's first batches are
        not what a block measures."""
        spec = self.spec
        reqs = self.requests("warmup-server", self.starts[build])[:spec.warmup]
        client.drive(served.url, spec.endpoint, reqs, fields=spec.request, concurrency=self.load.concurrency,
                     timeout_s=spec.timeout_s)

    def get(self, build: str) -> Served:
        """``build``'s server for its next block: resumed while the other's is frozen, or started
        (again, where the profile restarts it per block); never one that died under load."""
        if build in self.dead:      # a crash is the build's: starting it again would hide it
            raise ServerDown(build, f"{build}'s server exited during an earlier block; it is not started again")
        served = self.live.get(build)
        if served is None or self.spec.restart == "block":
            return self.start(build)
        self._freeze_all_but(build)
        served.resume()
        if not served.alive():
            raise ServerDown(build, f"{build}'s server exited between blocks; its log ends: {tail(served.logs())}")
        return served

    def _freeze_all_but(self, build: str) -> None:
        """Only ``build``'s server may run: an idle one could load it, and its CPU would count as
        the timed server's. A copy of ``live``: Ctrl-C stops servers from another thread."""
        for other, idle in list(self.live.items()):
            if other != build:
                idle.pause()

    def stop(self, build: str) -> None:
        """Stop ``build``'s server, if it runs."""
        served = self.live.pop(build, None)
        if served is not None:
            served.stop()   # paused or not: the runtime's stop ends it, so nothing stays frozen

    def stop_all(self) -> None:
        """At the round's end or abort: every server stops, and none starts again."""
        self.closed = True
        for build in list(self.live):
            self.stop(build)

    def load_of(self, args: tuple[tuple[str, str], ...]) -> Level:
        """The load of a block: a matrix cell's own (its concurrency and rate), else the current one."""
        own = dict(args)
        if "concurrency" not in own and "rate" not in own:
            return self.load
        return Level(int(own.get("concurrency", self.load.concurrency)), float(own.get("rate", self.load.rate)))

    def requests(self, phase: str, index: int, load: Level | None = None) -> list[wl.Request]:
        """A block's requests at ``load`` (the current one by default): the warm-up's from their own
        seed, the timed ones only once the round has drawn its seed."""
        load = load or self.load
        if phase == "warmup-server":
            return drawing.block_requests(self.spec, self.doc, self._warm_seed, phase, index, load, self.pool)
        if self.seed is None:
            raise RuntimeError("a timed block's requests before the round drew its workload's seed")
        return drawing.block_requests(self.spec, self.doc, self.seed, phase, index, load, self.pool)


class ServerDown(InfraError):
    """A build's server that exited or never answered: named with its build, whose failure it is."""

    def __init__(self, build: str, message: str):
        self.build = build
        super().__init__(message, "Read the server's log above: fix the build or the node, then run the round again.")


def tail(log: str) -> str:
    """A server's log in one line: its last non-empty lines, for the message that names it."""
    lines = [x for x in log.strip().splitlines() if x.strip()]
    return " | ".join(lines[-LOG_LINES:]) or "(empty)"
