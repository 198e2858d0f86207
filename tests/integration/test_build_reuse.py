"""Builds keyed by their inputs, on the real daemon: a round reuses an image of the same build
key, `--rebuild` builds again and checks that the rebuild reproduced the recorded engine
files, and names the files when it did not (the `unreproducible` demo candidate keeps its
compile time in the binary).

The rounds stop once both builds are done: what is tested here ends there.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from console import events as ev
from console.engine import sources
from console.paths import DEMO_CANDIDATES, DEMO_MAIN, DEMO_PROFILE
from console.profile import load_profile
from console.results import lockfile
from console.round import Round, RoundConfig

pytestmark = [pytest.mark.docker]


def builds_only(out: Path, rebuild: bool = False) -> list[ev.Event]:
    """A demo round of `unreproducible`, aborted as parity starts: its build events and notices."""
    profile = load_profile(DEMO_PROFILE)
    main = sources.parse_spec(str(DEMO_MAIN))
    cfg = RoundConfig(profile=profile, main=main, candidate=("patch", str(DEMO_CANDIDATES / "unreproducible.patch")),
                      out_dir=out, reps=2, lock_path=lockfile.ensure(out / "reference.lock", profile),
                      rebuild=rebuild)
    rnd = Round(cfg)
    events = []
    for e in rnd.events():
        events.append(e)
        if isinstance(e, ev.PhaseStarted) and e.phase == "parity":
            rnd.abort()
    assert isinstance(events[-1], ev.RoundEnded) and events[-1].status == "incomplete", events[-1]
    return events


def done(events) -> dict[str, ev.BuildDone]:
    return {e.build: e for e in events if isinstance(e, ev.BuildDone)}


def notices(events, code: str) -> list[str]:
    return [e.message for e in events if isinstance(e, ev.Notice) and e.code == code]


@pytest.mark.untimed
@pytest.mark.xdist_group("demo")     # one worker builds demo main, once
def test_same_inputs_reuse_the_image_and_a_rebuild_is_checked_against_it(tmp_path, base_image):
    first = done(builds_only(tmp_path / "a"))
    again = builds_only(tmp_path / "b")
    reused = done(again)
    # the same key, the same images, nothing built
    assert not [e for e in again if isinstance(e, ev.BuildStarted)]
    for b in ("main", "candidate"):
        assert reused[b].reused_from and reused[b].key == first[b].key, (b, reused[b])
        assert reused[b].image_id == first[b].image_id
    assert reused["main"].key != reused["candidate"].key

    rebuilt = builds_only(tmp_path / "c", rebuild=True)
    assert {e.build for e in rebuilt if isinstance(e, ev.BuildStarted)} == {"main", "candidate"}
    assert all(not d.reused_from for d in done(rebuilt).values())
    # main's build is reproducible; the candidate's binary carries its compile time
    [same] = notices(rebuilt, "build-reproduced")
    assert same.startswith("main: the rebuild reproduced the engine files"), same
    [differ] = notices(rebuilt, "build-not-reproduced")
    assert differ.startswith("candidate: a rebuild with the same inputs") and "differ: engine" in differ, differ
