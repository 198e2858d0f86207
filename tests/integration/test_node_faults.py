"""A sick node is not a regression: suspect reps are retried, a spent budget is an infra failure.

Real rounds on the demo engine (local runtime, so no daemon is needed for this part) with GPU
telemetry from the fake NVML — the only fake here, because this machine has no GPU.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from console import events as ev
from console.results import lockfile
from console.engine import sources
from console.paths import DEMO_CANDIDATES, DEMO_MAIN, DEMO_PROFILE
from console.errors import ExitCode
from console.profile import load_profile
from console.round import Round, RoundConfig
from console.telemetry import open_telemetry

from fake_nvml import FakeGPU, FakeNvml, nvmlClocksEventReasonHwThermalSlowdown

pytestmark = pytest.mark.slow


class ThrottleOn:
    """Telemetry that turns thermal throttling on for the given rep monitors (1-based)."""

    def __init__(self, bad: set[int] | None = None, always: bool = False):
        self.fake = FakeNvml([FakeGPU()])
        self.inner = open_telemetry(nvml=self.fake)
        self.bad, self.always, self.calls = bad or set(), always, 0

    def preflight(self, **kw):
        return self.inner.preflight(**kw)

    def gpus(self):
        return self.inner.gpus()

    def settle(self, quiet_cores, max_s):
        return self.inner.settle(quiet_cores, max_s)

    def monitor(self, interval_s=0.25, **kw):
        self.calls += 1
        throttled = self.always or self.calls in self.bad
        self.fake.gpus[0].reasons = nvmlClocksEventReasonHwThermalSlowdown if throttled else 0
        return self.inner.monitor(0.02, **kw)


def _round(tmp_path: Path, telemetry) -> Round:
    profile = load_profile(DEMO_PROFILE)
    out = tmp_path / "out"
    cfg = RoundConfig(profile=profile, main=sources.parse_spec(str(DEMO_MAIN)),
                      candidate=("patch", str(DEMO_CANDIDATES / "noise.patch")), out_dir=out,
                      runtime="local", reps=2, lock_path=lockfile.ensure(out / "reference.lock", profile),
                      telemetry=telemetry)
    return Round(cfg)


def test_a_throttled_rep_is_marked_suspect_retried_and_its_diagnosis_kept(tmp_path):
    # monitors, one per rep: the scored path (both builds), warm-ups and short reps of both
    # builds, then the timed reps: throttle the first timed rep
    bench = load_profile(DEMO_PROFILE).bench
    first_timed = 2 + 2 * bench.warmup + 2 * bench.short_reps + 1
    tele = ThrottleOn(bad={first_timed})
    rnd = _round(tmp_path, tele)
    events = list(rnd.events())
    assert any(isinstance(e, ev.Notice) and e.code == "rep-suspect" for e in events)
    reps = rnd.receipt["reps"]
    suspect = [r for r in reps if r["status"] == "suspect"]
    assert len(suspect) == 1 and suspect[0]["phase"] == "timed"
    assert any(s.startswith("throttle:") and "hw_thermal" in s for s in suspect[0]["suspect"])
    retried = [r for r in reps if (r["build"], r["phase"], r["index"]) ==
               (suspect[0]["build"], "timed", suspect[0]["index"]) and r["attempt"] == 1]
    assert retried and retried[0]["status"] == "ok"          # the retry ran and counted
    assert rnd.receipt["preflight"]["source"] == "nvml"
    # a round, not a regression: two pairs cannot decide at 1 % (nothing is finite before 6)
    assert rnd.receipt["verdict"]["outcome"] == "undecided"


def test_a_node_that_keeps_throttling_ends_as_an_infrastructure_failure(tmp_path):
    rnd = _round(tmp_path, ThrottleOn(always=True))
    events = list(rnd.events())
    end = events[-1]
    assert isinstance(end, ev.RoundEnded) and end.status == "infra" and end.exit_code == ExitCode.INFRA
    assert "node fault, not a regression" in end.message and "throttle" in end.message
    assert not (tmp_path / "out" / "ledger.jsonl").exists()      # nothing sealed, nothing recorded as a regression
    assert not any(isinstance(e, ev.VerdictReady) for e in events)
