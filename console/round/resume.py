"""Continuing an interrupted round from its journal: its plan, its finished reps, its images."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..results import journal
from ..core.records.untrusted import safe_name
from ..core.records.receipt import Rep, RepKey
from ..errors import InfraError, UsageError
from ..profile import Source
from ..runtime.base import BuildResult


# what a resumed round reads from the plan, and the type it must have
_PLAN_KEYS = {"round_id": str, "out_dir": str, "profile_path": str, "runtime": str, "kind": str,
              "main": dict, "candidate": dict}


def spec_from_plan(d: dict) -> Source | tuple[str, str]:
    """A build's spec read back from the plan a round journaled (``plan.spec_text`` wrote it)."""
    if "patch" in d:
        return ("patch", d["patch"])
    return Source(**d)


def _check_plan(plan: dict[str, Any]) -> None:
    """The round_started plan holds what resuming reads, each of the type written."""
    for k, t in _PLAN_KEYS.items():
        if not isinstance(plan.get(k), t):
            raise ValueError(f"its plan's '{k}' is {plan.get(k)!r}, expected a {t.__name__}")
    if not safe_name(plan["round_id"]):
        raise ValueError(f"its plan's 'round_id' {plan['round_id']!r} is not a round id")
    if not (plan.get("reps") is None or type(plan["reps"]) is int):
        raise ValueError(f"its plan's 'reps' is {plan['reps']!r}, expected a whole number")
    for k in ("main", "candidate"):
        spec_from_plan(plan[k])


@dataclass
class Resume:
    plan: dict[str, Any]
    events: list[dict[str, Any]]
    reps: list[Rep]

    @classmethod
    def read(cls, path: str | Path) -> "Resume":
        jr = journal.read_journal(path)
        if jr.damaged_line is not None:
            raise UsageError(f"{path}: line {jr.damaged_line} is unreadable but is not the last line",
                             "The journal was damaged after the fact; it cannot be resumed. Run the round again.")
        try:
            plan = journal.round_plan(jr.events)
            if plan is None:
                raise UsageError(f"{path} has no round_started event", "Is this a console journal?")
            _check_plan(plan)
            reps = [Rep.from_dict(r) for r in journal.completed_reps(jr.events)]
        except (KeyError, TypeError, ValueError) as e:     # ReceiptError is a ValueError
            raise UsageError(f"{path}: not a journal this console can resume: {e}",
                             "The journal was changed after the fact; run the round again.") from None
        return cls(plan=plan, events=jr.events, reps=reps)

    def ended_status(self) -> str | None:
        ended = [e for e in self.events if e.get("kind") == "round_ended"]
        return ended[-1].get("status") if ended else None

    def done_reps(self) -> dict[RepKey, list[Rep]]:
        """Reps already measured, by identity; the ones to run again are left out."""
        out: dict[RepKey, list[Rep]] = {}
        for rep in self.reps:
            if rep.status == "aborted":
                continue    # interrupted, not measured: it runs again
            out.setdefault(rep.key, []).append(rep)
        # a rep whose last attempt was suspect was waiting for its retry
        return {k: v for k, v in out.items() if v[-1].status != "suspect"}

    def _last(self, kind: str, build: str) -> dict[str, Any] | None:
        found = [e for e in self.events if e.get("kind") == kind and e.get("build") == build]
        return found[-1] if found else None

    def recorded_image(self, build: str) -> str | None:
        done = self._last("build_done", build)
        return done["image_id"] if done else None

    def recorded_build(self, build: str, tree_sha256: str | None, rt: Any) -> BuildResult | None:
        """The image the journal recorded, if it still exists and the source is still the tree
        it was built from; None when it must be rebuilt."""
        started = self._last("build_started", build)
        was = (started.get("source") or {}).get("tree_sha256") if started else None
        if was and was != tree_sha256:
            raise InfraError(f"cannot resume: {build}'s source changed since the interrupted round "
                             f"(tree {was[:12]} then, {(tree_sha256 or '')[:12]} now)",
                             "Restore the source, or run the round again from the start.")
        d = self._last("build_done", build)
        if d and rt.image_exists(d["image_id"]):
            return BuildResult(build=build, image_id=d["image_id"], base_image_id=d["base_image_id"],
                               compiler=d["compiler"], seconds=d["seconds"])
        if self.reps and rt.journaled_images:
            raise InfraError(f"cannot resume: the {build} image recorded by the journal is gone",
                             "Run the round again from the start.")
        return None
