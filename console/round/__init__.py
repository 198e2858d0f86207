"""One round of the console, in the order it runs.

- ``plan``: the config, the pinned inputs and the interleaved schedule, decided up front;
- ``node``: the runtime, host facts, telemetry and the GPU decision;
- ``inputs``: the model files, the harness and the reference, checked before anything is built;
- ``builds``: each build as the journal recorded it, reused by its build key, or built;
- ``parity``, ``adjudicate``, ``accuracy``: the logits at each depth, the scored path, borderline
  depths settled, task accuracy;
- ``reps``: running one rep (quiet start, timing from outside, retries of suspect reps);
- ``speed``: the plan, warm-up, timed pairs until decided, the guards, the timed path;
- ``resume``: continuing an interrupted round from its journal;
- ``after``: sealing the receipt and the lock update (reports are exports of the sealed receipt);
- ``kinds``: what differs between kinds of round (``compare``, ``noise``, ``sweep``), one module each;
- ``measure``: how builds are timed (the harness, or each build's server): the one place a round
  asks whether its profile serves;
- ``serving``: the serving stage: each build's server, the server check, the timed blocks, what
  they leave behind and the grading of what they served;
- ``reference``: capturing the parity reference (a small round of its own);
- ``runner``: ``Round``, which calls the stages top to bottom;
- ``lifecycle``: how a round runs as a worker thread, its events queued and journaled, its end sure;
- ``follow``: a round followed to its end from a terminal or a batch job, under signals.
"""
from .plan import RoundConfig
from .schedule import make_schedule
from .resume import Resume, spec_from_plan
from .runner import Round

__all__ = ["Round", "RoundConfig", "Resume", "make_schedule", "spec_from_plan"]
