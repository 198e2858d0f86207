"""What a round measured, apart from the two trees: its experiment identity. (pure)

Two rounds measure the same thing only when everything that changes the measured number is equal.
This is that, defined once: reruns pool only within it (with both trees, ``core.reruns``), a pin is
read only by rounds of it (``core.lock``), and main's history runs one series per identity
(``core.history``). Its parts, each named so that a difference can be said:

- ``runtime``: ``docker`` (the image's pinned toolchain) or ``local`` (the host's); a receipt that
  records none ran under Docker.
- ``sections``: a digest of the profile's measured sections (``measured_sections``).
- ``model``: a digest over the model files' names and sha256, as the round hashed them.
- ``harness``: a digest of the profile's harness tree and its build command, as the round copied it.
- ``gpu``: the GPUs the runs saw, as telemetry names them ("" when none).

The profile's measured sections are what sets up the timed runs: ``[bench]`` but for its counts
(``reps``, ``short_reps``: how many runs, not what one run measures), ``[run]`` (cpus and so
``{threads}``, memory, pids, timeout, GPUs, environment, user, output limit), ``[image]`` with its
host toolchain (base, packages, compiler and tools asserted, build command, compiler cache),
``[server]`` but for its check, grading and targets (``check``, ``grade``, ``slo``: they judge the
served load, they do not shape it) and ``[matrix]``. Where a file lives is left out (a base
archive's path: its image id stays; a workload file's path). Not measured, so not here: the
gate's rules and guards, ``[parity]``, ``[reference]``, ``[health]``, ``[preflight]``, ``[queue]``,
``[accuracy]``, ``[adjudication]``, the name, description and comments: a change there judges
differently, it does not measure differently. The machine is keyed beside it: pooling by the
profile's node name (and the GPU part here), the lock and history by the node's fingerprint
(``core.fingerprint``).

A receipt sealed before the profile's ``[run]`` and ``[image]`` were recorded has no identity of
these parts (``recorded`` is False): its parts are what it was told apart by then (its runtime and
its profile file's hash), and it never shares an identity with a round sealed since.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from console.core.provenance.fingerprint import DIGEST_CHARS, node_facts
from console.core.records.facts import HostFacts, RuntimeFacts
from console.core.records.recorded import plain
from console.core.records.receipt import Inputs, ProfileRecord, Receipt

PARTS = ("runtime", "sections", "model", "harness", "gpu")
UNMEASURED = frozenset({"bench.reps", "bench.short_reps",          # how many runs, not what one measures
                        "image.base_archive.path", "server.workload.file"})   # where a file lives
UNMEASURED_UNDER = ("server.check.", "server.grade.", "server.slo.")   # what judges a served load
SHOWN = 3                   # differing sections named, at most


def _digest(x: Any) -> str:
    text = json.dumps(plain(x), sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


@dataclass(frozen=True)
class Identity:
    """One round's experiment identity: its parts (what is compared and digested) and the measured
    sections the ``sections`` part digests (what names a change in them)."""
    parts: Mapping[str, str]                                    # part -> value, in ``PARTS`` order
    sections: Mapping[str, Any] = field(default_factory=dict)   # "run.cpus" -> 2.0: what ``sections`` digests
    recorded: bool = True       # False: sealed before the identity (see the module's note)

    @property
    def digest(self) -> str:
        return _digest(dict(self.parts))

    def differences(self, theirs: "Identity") -> list[str]:
        """Each part in which ``theirs`` (another round's, a pin's) differs from this one, as
        "<part> <theirs> not <ours>"; the measured sections name the keys that differ."""
        if self.recorded != theirs.recorded:
            return ["sealed under an older experiment identity" if self.recorded else
                    "sealed under a newer experiment identity than this round's"]
        out = []
        for k in sorted(set(self.parts) | set(theirs.parts), key=lambda k: (k not in PARTS, k)):
            mine, other = self.parts.get(k, ""), theirs.parts.get(k, "")
            if mine != other:
                out.append(f"{_NAMES.get(k, k)} {other or '(none)'} not {mine or '(none)'}"
                           + (_sections_said(theirs.sections, self.sections) if k == "sections" else ""))
        return out


_NAMES = {"sections": "profile's measured sections", "profile_sha256": "profile file"}


def _sections_said(theirs: Mapping[str, Any], mine: Mapping[str, Any]) -> str:
    keys = [k for k in sorted(set(theirs) | set(mine)) if theirs.get(k) != mine.get(k)]
    if not keys:
        return ""
    said = [f"{k} {_short(theirs.get(k))} not {_short(mine.get(k))}" for k in keys[:SHOWN]]
    return f" ({'; '.join(said)}{f'; {len(keys) - SHOWN} more' if len(keys) > SHOWN else ''})"


def _short(v: Any) -> str:
    text = json.dumps(plain(v), default=str) if not isinstance(v, str) else v
    return text if len(text) <= 40 else text[:39] + "…"


def _flat(prefix: str, x: Any) -> dict[str, Any]:
    """``{"run": {"cpus": 2}}`` -> ``{"run.cpus": 2}``: objects flattened, lists kept whole."""
    if isinstance(x, Mapping):
        return {k: v for key, sub in x.items() for k, v in _flat(f"{prefix}.{key}", sub).items()}
    return {prefix: plain(x)}


def measured_sections(profile: ProfileRecord) -> dict[str, Any]:
    """The profile's measured sections, flattened to dotted keys (the module's note says which)."""
    out = {}
    for name, section in (("bench", profile.bench), ("run", profile.run), ("image", profile.image),
                          ("server", profile.server),
                          ("matrix", profile.matrix.to_dict() if profile.matrix is not None else {})):
        out.update(_flat(name, section) if section else {})
    return {k: v for k, v in out.items() if k not in UNMEASURED and not k.startswith(UNMEASURED_UNDER)}


def of(profile: ProfileRecord, runtime: RuntimeFacts, host: HostFacts, inputs: Inputs | None) -> Identity:
    """The identity of a round of ``profile`` under ``runtime`` on ``host`` reading ``inputs``
    (a receipt's parts of those names)."""
    kind = str(runtime.kind or "docker")
    if not profile.run:
        return Identity({"runtime": kind, "profile_sha256": profile.sha256}, recorded=False)
    model = sorted((str(m.get("name") or ""), str(m.get("sha256") or "")) for m in (inputs.model if inputs else []))
    harness = (inputs.harness or {}) if inputs else {}
    facts = node_facts(host)
    sections = measured_sections(profile)
    parts = {"runtime": kind, "sections": _digest(sections), "model": _digest(model) if model else "",
             "harness": _digest([harness.get("tree_sha256"), harness.get("build")]) if harness else "",
             "gpu": f"{facts['gpus']} x {facts['gpu_model']}" if facts["gpus"] else ""}
    return Identity(parts, sections)


def of_receipt(r: Receipt) -> Identity:
    return of(r.profile, r.runtime, r.host, r.inputs)


def recorded_parts(entry: Mapping[str, Any]) -> Identity:
    """The identity a pin records (``identity_parts``); one written before identities records none."""
    parts = entry.get("identity_parts")
    if not isinstance(parts, Mapping) or not entry.get("identity"):
        return Identity({}, recorded=False)
    return Identity({str(k): str(v) for k, v in parts.items()})
