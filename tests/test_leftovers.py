"""Which console containers a starting round removes: a crashed round's, never a live one's.

Another round may be live on the node (a queue's worker beside a user's round): its containers
between creation and start, or between their run's end and being read, are stopped but not left."""
from __future__ import annotations

import datetime as dt

import pytest

from console.runtime.docker import STOPPED_GRACE_S, is_leftover

NOW = dt.datetime(2026, 12, 6, 12, 0, 0, tzinfo=dt.timezone.utc)
ZERO = "0001-01-01T00:00:00Z"


def ago(seconds: float) -> str:
    """A time as the daemon writes it (nanoseconds, Z)."""
    return (NOW - dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"


@pytest.mark.parametrize("created, finished, left", [
    (ago(2), ZERO, False),                       # created, about to start (or to be read: a cache export)
    (ago(300), ago(5), False),                   # a long run that has just ended, being read
    (ago(300), ago(STOPPED_GRACE_S + 1), True),  # ended a while ago, nobody read it
    (ago(STOPPED_GRACE_S + 1), ZERO, True),      # created and never started
    ("", "", True),                              # nothing readable: a stopped container is old
    ("garbage", ago(1), False),                  # the one readable time decides
])
def test_a_stopped_container_is_left_over_once_stopped_a_while(created, finished, left):
    assert is_leftover("exited", {"FinishedAt": finished}, created, NOW, 1200.0) is left
    assert is_leftover("created", {"FinishedAt": finished}, created, NOW, 1200.0) is left


def test_asked_for_everything_every_stopped_container_goes():
    assert is_leftover("exited", {"FinishedAt": ago(0)}, ago(0), NOW, 0.0)


@pytest.mark.parametrize("status", ["running", "paused"])
@pytest.mark.parametrize("started, stale, left", [
    (ago(500), 1200.0, False),      # a live round's run, or its idle (paused) server
    (ago(1300), 1200.0, True),      # older than any run could be: its console died
    (ago(5), 0.0, True),
    (ZERO, 0.0, False),             # a start time that cannot be read never makes a run old
    ("not a time", 0.0, False),
])
def test_a_running_or_paused_container_is_left_over_only_past_any_runs_timeout(status, started, stale, left):
    assert is_leftover(status, {"StartedAt": started}, ago(2000), NOW, stale) is left
