"""One round of the console, in the order it runs.

- ``plan``: the config, the pinned inputs and the interleaved schedule, decided up front;
- ``node``: the runtime, host facts, telemetry and the GPU decision;
- ``reps``: running one rep (quiet start, timing from outside, retries of suspect reps);
- ``parity``: the logits at each depth, the scored path and the timed path;
- ``resume``: continuing an interrupted round from its journal;
- ``after``: sealing the receipt, the reports and the lock update;
- ``runner``: ``Round``, which calls them top to bottom and streams events.
"""
from .plan import RoundConfig, make_schedule, spec_from_plan
from .resume import Resume
from .runner import Round

__all__ = ["Round", "RoundConfig", "Resume", "make_schedule", "spec_from_plan"]
