"""reference.lock: the pins a round is judged against, and where each came from.

The model is the plain dict that the TOML file parses to, and everything here
is a pure function over it. The file format (a comment-keeping ``tomlkit``
document) is ``console.results.lockfile``'s business.

Rules kept here:
- 0 means "not measured" and is always legal; any other value cites the
  sealed receipt that measured it, and re-computing from that receipt gives
  exactly that value.
- A pin is main's level as a sealed round measured it. From schema-2 receipts
  that is the lower confidence bound of main's geometric mean (one-sided, at
  the round's ``false_accept`` level), not a median: a pin rises only when a
  round's measurement of main *supports* the higher value, never on a lucky
  median. (Schema-1 receipts gave their median and still verify by it.)
- The frontier only rises, and only from main (a candidate becomes main when
  merged, and is measured as main in the next round).
- A guard floor is set when unmeasured, raised when main has clearly
  outgrown it, and never lowered by a program.
- A node's noise pools every sealed noise round it cites (pair-noise SD and
  its degrees of freedom): a quiet round does not replace a louder record.
- Attested figures (seen, not sealed) live under ``attested`` and never move
  a value.
- A pin belongs to the node it was measured on (``core.fingerprint``): a round reads
  and moves only the pins of its own fingerprint. A pin of another node under the same
  name is passed over, with the facts that differ, and this node's pin is kept apart
  under ``<slot>@<fingerprint>``. A pin written before fingerprints is the node's its
  cited receipt's host facts give.
- A pin belongs to the experiment identity it was measured under (``core.identity``:
  runtime, the profile's measured sections, model, harness, GPU) as well: a round reads only
  pins of its own, passes over another's (or one written before identities) with the parts
  that differ, and keeps its own apart under ``<slot>@<fingerprint>+<identity>``.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable, Mapping
from console.core.provenance import identity
from console.core.records.figures import finite
from console.core.provenance.fingerprint import DIGEST_CHARS, Fingerprint, describe, differences, of_receipt
from console.core.decisions.counting import counted, log_ratios
from console.core.provenance.identity import Identity
from console.core.provenance.ledger import Receipts
from console.core.records import kinds
from console.core.records.receipt import Receipt
from console.core.statistics.sequential import pair_noise
from console.core.statistics.stats import geometric_bound, median
from console.core.records.verdict import VerdictRecord

FRONTIER, GUARD, CELL = "frontier", "guard", "cell"   # a matrix round's home cell is its frontier
KINDS = (FRONTIER, GUARD, CELL)
MIN_REPS = 3                # a single rep is not a measurement
SIG_DIGITS = 6              # pins keep 6 significant digits; verification compares after the same rounding
LOCK_FILE = "reference.lock"
# Verdict outcomes after which main's numbers from the round are not trusted to move a pin.
UNUSABLE_OUTCOMES = frozenset({"infra", "incomplete", "invalid", "error", "aborted"})


class LockError(ValueError):
    pass


# --- slots -------------------------------------------------------------------

@dataclass(frozen=True)
class Slot:
    """Every axis a pinned value depends on; two nodes never share a slot. A matrix cell's slot
    names its axes too (``axes``: "depth=1024,test=pp512")."""
    profile: str
    node: str
    variant: str            # the build variant measured ("main", or e.g. a quant label)
    metric: str
    depth: int
    axes: str = ""

    @property
    def name(self) -> str:
        return slot_name(self.profile, self.node, self.variant, self.metric, self.depth, self.axes)


def slot_name(profile: str, node: str, variant: str, metric: str, depth: int, axes: str = "") -> str:
    """``<profile>/<node>/<variant>/<metric>/ctx<depth>``, and ``/<axes>`` for a matrix cell."""
    for what, v in (("profile", profile), ("node", node), ("variant", variant), ("metric", metric)):
        if not v or "/" in v or '"' in v:
            raise LockError(f"slot {what} {v!r} must be non-empty and contain no '/' or '\"'")
    if "/" in axes or '"' in axes:
        raise LockError(f"slot axes {axes!r} must contain no '/' or '\"'")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise LockError(f"slot depth must be a non-negative integer, got {depth!r}")
    return f"{profile}/{node}/{variant}/{metric}/ctx{depth}" + (f"/{axes}" if axes else "")


def parse_slot(name: str) -> Slot:
    parts = name.split("/")
    if len(parts) not in (5, 6) or not parts[4].startswith("ctx") or not parts[4][3:].isdigit():
        raise LockError(f"slot {name!r} is not <profile>/<node>/<variant>/<metric>/ctx<depth>[/<axes>]")
    s = Slot(parts[0], parts[1], parts[2], parts[3], int(parts[4][3:]), parts[5] if len(parts) == 6 else "")
    if s.name != name:
        raise LockError(f"slot {name!r} is not in canonical form ({s.name!r})")
    return s


@dataclass(frozen=True)
class SlotSpec:
    """What a round measures for one slot, and which reps carry it."""
    slot: Slot
    kind: str
    phase: str              # the rep phase whose main reps give the value
    guard: str | None = None
    cell: str | None = None     # a matrix cell's key


def slots_of(profile: Any) -> dict[str, SlotSpec]:
    """The frontier slot and one slot per guard, from a Profile or a receipt's profile table.

    Guards measure main's bench metric at their own depth; a guard sharing
    the frontier's depth (or another guard's) would overwrite it, so it is refused.
    """
    p = _profile_view(profile)
    variant = p.get("variant", "main")
    if p.get("matrix"):
        return _cell_slots(p, variant)
    bench = p["bench"]
    front = Slot(p["name"], p["node"], variant, bench["metric"], int(bench["depth"]))
    specs = {front.name: SlotSpec(front, FRONTIER, "timed")}
    for g in p["rules"].get("guards", ()):
        s = Slot(p["name"], p["node"], variant, bench["metric"], int(g["depth"]))
        if s.name in specs:
            raise LockError(f"guard {g['name']!r} at ctx{s.depth} would share slot {s.name} with "
                            f"{specs[s.name].guard or 'the frontier'}; give it its own depth")
        specs[s.name] = SlotSpec(s, GUARD, f"guard:{g['name']}", g["name"])
    return specs


def _cell_slots(p: Mapping[str, Any], variant: str) -> dict[str, SlotSpec]:
    """A matrix profile: one slot per cell, keyed by every axis; the home cell (the bench's own
    shape) is the frontier."""
    m = p["matrix"]
    specs = {}
    for cell in m["cells"]:
        s = Slot(p["name"], p["node"], variant, str(cell["metric"]), int(cell["depth"]), str(cell["key"]))
        kind = FRONTIER if cell["key"] == m["home"] else CELL
        specs[s.name] = SlotSpec(s, kind, f"cell:{cell['key']}", cell=str(cell["key"]))
    return specs


def frontier_slot(profile: Any) -> str:
    return next(n for n, s in slots_of(profile).items() if s.kind == FRONTIER)


def guard_slots(profile: Any) -> dict[str, str]:
    """Guard name -> slot name."""
    return {s.guard: n for n, s in slots_of(profile).items() if s.kind == GUARD}


def _profile_view(profile: Any) -> dict[str, Any]:
    if hasattr(profile, "to_dict"):         # console.profile.Profile
        d = profile.to_dict()
        return {**d, "rules": d["gate"]}
    return dict(profile)                    # a receipt's "profile" table (rules already under "rules")


# --- nodes: whose pin is it? -------------------------------------------------------

NODE_SEP = "@"
IDENTITY_SEP = "+"


def node_key(base: str, digest: str, ident: str = "") -> str:
    """The key of a pin kept apart for one node: ``<slot>@<digest>`` (``<node>@<digest>`` for noise),
    and ``<slot>@<digest>+<identity>`` for one node and experiment identity."""
    return f"{base}{NODE_SEP}{digest}" + (f"{IDENTITY_SEP}{ident}" if ident else "")


def _is_digest(s: str) -> bool:
    return len(s) == DIGEST_CHARS and all(c in "0123456789abcdef" for c in s)


def split_key(key: str) -> tuple[str, str, str]:
    """(slot or node name, fingerprint digest or "", identity digest or "") of a lock key."""
    base, sep, rest = key.rpartition(NODE_SEP)
    digest, plus, ident = rest.partition(IDENTITY_SEP)
    if sep and _is_digest(digest) and (not plus or _is_digest(ident)):
        return base, digest, ident
    return key, "", ""


def entry_value(entry: Mapping[str, Any]) -> float:
    """A baseline's value or a noise entry's sd (or schema-1 spread); 0 when not measured."""
    for k in ("value", "sd", "spread"):
        if finite(entry.get(k)) and entry[k] > 0:
            return float(entry[k])
    return 0.0


def recorded_node(entry: Mapping[str, Any], receipts: Receipts | None = None
                  ) -> Fingerprint | None:
    """The node an entry was measured on: the fingerprint it records, or for one written before
    fingerprints, the newest receipt it cites that ``receipts`` holds; None when neither is known."""
    digest = entry.get("fingerprint")
    if isinstance(digest, str) and digest:
        facts = entry.get("node_facts")
        return Fingerprint(digest, dict(facts) if isinstance(facts, Mapping) else {})
    cited = [x for x in list(entry.get("receipts") or []) + [entry.get("receipt")]
             if isinstance(x, str) and x in (receipts or {})]
    return of_receipt(receipts[cited[-1]]) if cited and receipts else None


def recorded_identity(entry: Mapping[str, Any], receipts: Receipts | None = None) -> Identity:
    """The experiment identity an entry was measured under: its cited receipt's when ``receipts``
    holds it and it gives the recorded digest (so the measured sections can be named), else the parts
    it records; none for an entry written before identities."""
    rid = entry.get("receipt")
    if entry.get("identity") and isinstance(rid, str) and rid in (receipts or {}):
        got = identity.of_receipt(receipts[rid])     # type: ignore[index]
        if got.digest == entry["identity"]:
            return got
    return identity.recorded_parts(entry)


def wanted_identity(ident: Identity | None) -> str:
    """The identity digest a round's pins record: "" for a round that has none (sealed before them)."""
    return ident.digest if ident is not None and ident.recorded else ""


@dataclass(frozen=True)
class NodePin:
    """Where a node's pin is read and written, and the pins of another node or identity it passed over."""
    key: str
    entry: Mapping[str, Any]
    passed_over: tuple[Mapping[str, Any], ...] = ()

    @property
    def value(self) -> float:
        return entry_value(self.entry)


def node_pin(table: Mapping[str, Any], base: str, node: Fingerprint,
             receipts: Receipts | None = None, ident: Identity | None = None) -> NodePin:
    """This node's entry for ``base`` (a slot, or a node name in ``noise``) under the experiment
    identity ``ident`` (None: a node's noise, or a round sealed before identities).

    Its own ``base@digest[+identity]`` entry first; else the bare ``base`` entry when it is unmeasured
    (the first to measure it records it there) or was measured on this node under this identity; else
    none yet, and the bare entry is passed over with what differs. A bare entry whose node cannot be
    told (no fingerprint, and its receipt not in ``receipts``: a lock read without its ledger) is
    taken as this node's, as before fingerprints; a round always reads its lock with the ledger. A
    pin that records no identity is read only by a round that has none.
    """
    want = wanted_identity(ident)
    own = node_key(base, node.digest, want)
    if isinstance(table.get(own), Mapping):
        return NodePin(own, table[own])
    over = []
    older = table.get(node_key(base, node.digest))      # this node's, kept apart before identities
    if want and isinstance(older, Mapping) and entry_value(older) > 0:
        over.append(_passed(node_key(base, node.digest), older, node, node, ident, receipts))
    bare = table.get(base) if isinstance(table.get(base), Mapping) else {}
    if entry_value(bare) <= 0:
        return NodePin(base, bare, tuple(over))
    there = recorded_node(bare, receipts)
    if (there is None or there.digest == node.digest) and str(bare.get("identity") or "") == want:
        return NodePin(base, bare)
    return NodePin(own, {}, (_passed(base, bare, there, node, ident, receipts), *over))


def _passed(key: str, entry: Mapping[str, Any], there: Fingerprint | None, node: Fingerprint,
            ident: Identity | None, receipts: Receipts | None) -> dict[str, Any]:
    """A pin passed over: its key, value, node and identity, and each fact or part that differs."""
    other_node = there is not None and there.digest != node.digest
    theirs = str(entry.get("identity") or "")
    said = [differences(there, node)] if other_node and there is not None else []
    if theirs != wanted_identity(ident):
        mine = ident if ident is not None else Identity({}, recorded=False)
        said += (["written before experiment identities (it records none)"] if not theirs else
                 [f"measured under experiment identity {theirs}; this round records none"]
                 if not mine.recorded else mine.differences(recorded_identity(entry, receipts)))
    return {"key": key, "value": entry_value(entry), "fingerprint": there.digest if there else "",
            "facts": dict(there.facts) if there else {}, "differs": "; ".join(said),
            "identity": theirs, "why": "node" if other_node else "identity"}


def node_pins(lock: Mapping[str, Any], profile: Any, node: Fingerprint,
              receipts: Receipts | None = None, ident: Identity | None = None) -> dict[str, Any]:
    """The pins this node is judged against under the experiment identity ``ident`` (``receipt.Pins``
    fields), and those it passed over. The node's noise is the node's, whatever the identity."""
    p = _profile_view(profile)
    specs = slots_of(p)
    pins = {n: node_pin(baselines(lock), n, node, receipts, ident) for n in specs}
    noise = node_pin(lock.get("noise") or {}, str(p["node"]), node, receipts)
    front = next(n for n, s in specs.items() if s.kind == FRONTIER)
    guards = {s.guard: n for n, s in specs.items() if s.kind == GUARD}
    e = noise.entry
    cells = {s.cell: n for n, s in specs.items() if s.cell}
    return {"frontier": pins[front].value, "frontier_slot": pins[front].key,
            "guards": {g: pins[n].value for g, n in guards.items()},
            "guard_slots": {g: pins[n].key for g, n in guards.items()},
            "cells": {c: pins[n].value for c, n in cells.items()},
            "cell_slots": {c: pins[n].key for c, n in cells.items()},
            "noise_spread": float(e["spread"]) if finite(e.get("spread")) else None,
            "noise_sd": float(e["sd"]) if finite(e.get("sd")) and e["sd"] > 0 else None,
            "noise_df": int(e["df"]) if isinstance(e.get("df"), int) and e["df"] > 0 else None,
            "passed_over": [x for np in [*pins.values(), noise] for x in np.passed_over]}


def node_lines(lock: Mapping[str, Any], receipts: Receipts | None = None) -> list[str]:
    """Each node the lock's measured pins were measured on (its fingerprint and facts), and its pins."""
    groups: dict[str, list[str]] = {}
    for table in ("baselines", "noise"):
        for key, t in (lock.get(table) or {}).items():
            if not isinstance(t, Mapping) or entry_value(t) <= 0:
                continue
            fp = recorded_node(t, receipts)
            how = ("" if t.get("fingerprint") else " (written before fingerprints: "
                   + ("the node of its receipt)" if fp else "its receipt is not at hand: --ledger DIR names its node)"))
            if parts := identity.recorded_parts(t).parts:     # a node's noise, and pins before identities, have none
                how += f" [experiment identity {t['identity']}: " + ", ".join(f"{k} {v or '(none)'}"
                                                                            for k, v in parts.items()) + "]"
            groups.setdefault(describe(fp) if fp else "unknown", []).append(f"  {table} {key}{how}")
    if not groups:
        return ["no measured pins, so no node fingerprints"]
    return [line for head, pins in groups.items() for line in [f"node {head}", *pins]]


def passed_over_code(x: Mapping[str, Any]) -> str:
    """The warning a round gives for a pin it passed over: another node's, or another identity's."""
    return "pin-other-identity" if x.get("why") == "identity" else "pin-other-node"


def passed_over_sentence(x: Mapping[str, Any], here: str) -> str:
    """What a round says of a pin of another node or identity it did not use (an entry of ``passed_over``)."""
    where = (f"under another experiment identity on this node ({here})" if x.get("why") == "identity" else
             f"on node {x.get('fingerprint') or '(unknown)'}, this is node {here}")
    return (f"{x.get('key')}: pin {x.get('value', 0):g} was measured {where}; not used, so this round has no "
            f"such pin and keeps its own apart: {x.get('differs')}")


# --- measurement from a sealed receipt ----------------------------------------

@dataclass(frozen=True)
class Measured:
    value: float | None     # the pin main's reps support (see ``measure``); None when they support none
    n: int
    reason: str = ""        # why value is None
    bound: bool = False     # value is a lower confidence bound (schema 2), not a median (schema 1)
    level: float = 0.0      # the bound's one-sided error rate


def pin(x: float) -> float:
    """The stored form of a measurement: fixed significant digits, so equality is exact."""
    return float(f"{x:.{SIG_DIGITS}g}")


def measure(r: Receipt, spec: SlotSpec) -> Measured:
    """Recompute what main's reps for ``spec`` support, from the reps that count
    (``counting.counted``), never from the summary: the lower confidence bound of main's
    geometric mean (schema 2), or its median (schema 1)."""
    ok = counted(r, r.rules).valid.get(("main", spec.phase), [])
    for rep in ok:
        if rep.depth != spec.slot.depth:
            return Measured(None, len(ok), f"main's {spec.phase} reps ran at ctx{rep.depth}, "
                                           f"the slot says ctx{spec.slot.depth}")
        metric = (rep.reported or {}).get("metric", spec.slot.metric)
        if metric != spec.slot.metric:
            return Measured(None, len(ok), f"main's {spec.phase} reps report {metric!r}, the slot says {spec.slot.metric!r}")
    if len(ok) < MIN_REPS:
        return Measured(None, len(ok), f"{len(ok)} ok {spec.phase} rep(s) of main; at least {MIN_REPS} needed")
    values = [float(x.value) for x in ok]
    if r.rules_version == 1:        # sealed under fixed reps: its median, as then
        return Measured(pin(median(values)), len(ok))
    level = r.rules.false_accept
    return Measured(pin(lower_bound(values, level)), len(ok), bound=True, level=level)


def lower_bound(values: list[float], level: float) -> float:
    """One-sided lower confidence bound of main's geometric mean: what its reps support."""
    return geometric_bound(values, level, "lower")


def noise_spread_of(r: Receipt) -> float | None:
    """The node's noise spread a sealed noise receipt carries (``noise.spread``)."""
    noise = r.noise
    v = noise.spread if noise else None
    return pin(float(v)) if finite(v) and v >= 0 else None


def _measured_at(r: Receipt) -> str:
    return str(r.ended_at or r.sealed_at or "")


def significance_of(r: Receipt, significance: float | None) -> float:
    # the receipt's rules were read finite (Receipt.from_dict), the default filled in when absent
    return significance if significance is not None else r.rules.significance


# --- updates -------------------------------------------------------------------

@dataclass(frozen=True)
class Change:
    """One decision about one pin. ``hold`` changes nothing and says why."""
    table: str              # "baselines" | "noise"
    key: str                # slot name or node name (``@<fingerprint>`` when kept apart for one node)
    action: str             # "set" | "raise" | "hold" | "replace" (noise only)
    old: float
    new: float | None
    receipt: str
    measured_at: str
    kind: str = ""          # "frontier" | "guard" for baselines
    reason: str = ""
    extra: Mapping[str, Any] | None = None  # further fields a pin records (pooled noise: df, receipts)
    node: Fingerprint | None = None         # the node the receipt measured on, recorded with the pin
    identity: Identity | None = None        # the experiment identity it measured under, recorded with the pin

    @property
    def moves(self) -> bool:
        return self.action != "hold"


def baselines(lock: Mapping[str, Any]) -> dict[str, Any]:
    return dict(lock.get("baselines") or {})


def value_of(lock: Mapping[str, Any], slot: str) -> float:
    v = (baselines(lock).get(slot) or {}).get("value", 0)
    return float(v) if finite(v) else 0.0


def update_from_receipt(lock: Mapping[str, Any], receipt_id: str, r: Receipt,
                        verdict: VerdictRecord | None, significance: float | None = None,
                        ledger: Receipts | None = None) -> list[Change]:
    """Decide what a sealed receipt does to the lock (nothing is modified here).

    ``verdict`` is the verdict the receipt was sealed with; an unusable round moves nothing. ``significance`` (default: the
    receipt's rules) is how far a schema-1 main must outgrow a guard floor before
    the floor follows it. ``ledger`` (id -> sealed receipt) supplies the earlier
    noise rounds a node's noise pools with, and the receipts that tell which node
    measured a pin written before fingerprints.
    Only the pins of the receipt's node move (``node_pin``).
    """
    if r.seal is None:
        raise LockError("only a sealed receipt can move a pin")
    at = _measured_at(r)
    if kinds.of(r.kind).raises == "node-noise":
        return _noise_changes(lock, receipt_id, r, at, verdict, ledger)
    specs = slots_of(r.profile.to_dict())
    unusable = _unusable(r, verdict)
    node, ident = _node_of(r), identity.of_receipt(r)
    changes = []
    for name, spec in specs.items():
        np = node_pin(baselines(lock), name, node, ledger, ident)
        if unusable:
            ch = Change("baselines", np.key, "hold", np.value, None, receipt_id, at, spec.kind, unusable)
        else:
            ch = _decide(np.key, spec.kind, np.value, measure(r, spec), receipt_id, at,
                         significance_of(r, significance))
        changes.append(_on_node(ch, node, np, ident))
    return changes


def _on_node(ch: Change, node: Fingerprint, np: NodePin, ident: Identity | None = None) -> Change:
    """The change, recording the node and experiment identity it measured under; a pin of another
    node or identity it passed over is said."""
    why = ch.reason
    if np.passed_over and ch.moves:
        why += "; kept apart from " + "; ".join(f"{x['key']}, measured on another "
                                                f"{'node' if x.get('why') == 'node' else 'experiment identity'} "
                                                f"({x['differs']})" for x in np.passed_over)
    return dataclasses.replace(ch, node=node, reason=why, identity=ident if wanted_identity(ident) else None)


def _node_of(r: Receipt) -> Fingerprint:
    return of_receipt(r)


def _unusable(r: Receipt, verdict: VerdictRecord | None) -> str:
    if r.status != "complete":
        return f"round status is {r.status!r}, not 'complete'"
    if verdict is None:
        return ""
    if verdict.outcome in UNUSABLE_OUTCOMES:
        return f"verdict outcome {verdict.outcome.value!r} does not vouch for main's measurements"
    # A main that misses the parity bars is not the model the pins are about: a fast
    # but wrong main would raise the frontier and every guard floor for good.
    if any(w.code in ("main-parity-fail", "main-parity-error") for w in verdict.warnings):
        return "main failed or could not run its own parity check this round"
    return ""


def _decide(name: str, kind: str, old: float, m: Measured, rid: str, at: str, sig: float) -> Change:
    def c(action: str, new: float | None, reason: str) -> Change:
        return Change("baselines", name, action, old, new, rid, at, kind, reason)
    if m.value is None:
        return c("hold", None, m.reason)
    what = (f"main's lower bound {m.value:g} ({1 - m.level:.0%} confidence, {m.n} reps)" if m.bound
            else f"main measured {m.value:g}")
    if old <= 0:
        return c("set", m.value, f"unmeasured; {what}")
    if kind in (FRONTIER, CELL):
        if m.value > old:
            return c("raise", m.value, f"{what} > frontier {old:g}")
        return c("hold", None, f"{what} <= frontier {old:g}; the frontier rises only when a round's measurement "
                               "of main supports it; the frontier is raise-only")
    if m.bound:
        if m.value > old:
            return c("raise", m.value, f"{what} > floor {old:g}")
        return c("hold", None, f"{what} does not clear floor {old:g}; a floor is never lowered automatically")
    if m.value > old * (1 + sig):
        return c("raise", m.value, f"main measured {m.value:g}, more than {sig:.1%} over floor {old:g}")
    if m.value < old:
        return c("hold", None, f"main measured {m.value:g} below guard floor {old:g}; a floor is never "
                               "lowered automatically: a person decides, with a note")
    return c("hold", None, f"main measured {m.value:g}, within {sig:.1%} of floor {old:g}")


def _noise_changes(lock: Mapping[str, Any], rid: str, r: Receipt, at: str,
                   verdict: VerdictRecord | None = None,
                   ledger: Receipts | None = None) -> list[Change]:
    node = r.profile.node
    here = _node_of(r)
    np = node_pin(lock.get("noise") or {}, node, here, ledger)
    old_t, at_key = np.entry, np.key
    legacy = r.rules_version == 1
    key = "spread" if legacy else "sd"
    old = float(old_t.get(key, 0)) if finite(old_t.get(key, 0)) else 0.0

    def change(action: str, new: float | None, why: str, extra: Mapping[str, Any] | None = None) -> list[Change]:
        return [_on_node(Change("noise", at_key, action, old, new, rid, at, reason=why, extra=extra), here, np)]
    if not node or r.status != "complete":
        return change("hold", None, "noise receipt is not a complete round on a named node")
    if verdict is not None and verdict.outcome != "noise":
        # a noise round the gate did not accept (claims refused, too few pairs) measures nothing
        return change("hold", None, f"noise verdict is {verdict.outcome.value!r}")
    if legacy:
        spread = noise_spread_of(r)
        if spread is None:
            return change("hold", None, "noise receipt has no usable noise.spread")
        return change("set" if old <= 0 else "replace", spread, f"sealed noise round measured spread {spread:g}")
    cited = [x for x in old_t.get("receipts") or [] if isinstance(x, str)]
    ledger = ledger or Receipts({})
    # only this node's noise pools: an entry written before fingerprints may cite another's
    earlier = [x for x in cited if x in ledger and x != rid and of_receipt(ledger[x]).digest == here.digest]
    pooled = pooled_noise([ledger[x] for x in earlier] + [r])
    if pooled is None:
        return change("hold", None, "noise receipt has fewer than three valid pairs")
    sd, df = pooled
    dropped = len(cited) - len(earlier)
    why = (f"pooled over {len(earlier) + 1} sealed noise round(s): pair SD {sd:g} on {df} degrees of freedom"
           + (f" ({dropped} cited receipt(s) not in the ledger or of another node were dropped)" if dropped else ""))
    return change("set" if old <= 0 else "pool", sd, why, {"df": df, "receipts": earlier + [rid]})


def noise_log_ratios(r: Receipt) -> list[float]:
    """A schema-2 noise receipt's paired log ratios, from the reps that count."""
    return log_ratios(counted(r, r.rules))


def pooled_noise(receipts: list[Receipt]) -> tuple[float, int] | None:
    """(pinned SD, degrees of freedom) of the pair noise pooled over schema-2 noise receipts."""
    found = pair_noise([noise_log_ratios(r) for r in receipts])
    return None if found is None else (pin(found.sd), found.df)


def apply_to_dict(lock: Mapping[str, Any], changes: Iterable[Change]) -> dict[str, Any]:
    """The model after ``changes``: a new dict; holds are skipped."""
    out = copy.deepcopy(dict(lock))
    for ch in changes:
        if not ch.moves:
            continue
        t = out.setdefault(ch.table, {}).setdefault(ch.key, {})
        t.update(pin_fields(ch))
    return out


def pin_fields(ch: Change) -> dict[str, Any]:
    node = {"fingerprint": ch.node.digest, "node_facts": dict(ch.node.facts)} if ch.node is not None else {}
    if ch.identity is not None:
        node.update(identity=ch.identity.digest, identity_parts=dict(ch.identity.parts))
    if ch.table == "noise":
        if ch.extra:        # pooled pair noise (schema 2)
            return {"sd": ch.new, **dict(ch.extra), "measured_at": ch.measured_at, **node}
        return {"spread": ch.new, "receipt": ch.receipt, "measured_at": ch.measured_at, **node}
    return {"value": ch.new, "receipt": ch.receipt, "measured_at": ch.measured_at, "kind": ch.kind, **node}


def fresh_lock(profile: Any) -> dict[str, Any]:
    """The model of a new lock for a profile: every slot present, all unmeasured."""
    p = _profile_view(profile)
    r = p.get("reference", {})
    return {
        "reference": {"engine": r.get("engine", ""), "repo": r.get("repo", ""), "commit": r.get("commit", ""),
                      "weights_sha256": r.get("weights_sha256", ""), "command": list(r.get("command", ()))},
        "parity": {"document_sha256": p["parity"].get("document_sha256", ""),
                   "reference_sha256": p["parity"].get("reference_sha256", "")},
        "baselines": {name: {"kind": spec.kind, "value": 0.0, "receipt": "", "measured_at": ""}
                      for name, spec in slots_of(p).items()},
        "noise": {},
    }


# --- staleness -------------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    code: str               # "pin-stale"
    slot: str
    kind: str
    pinned: float
    measured: float
    by: float               # measured / pinned - 1
    message: str


def stale_findings(lock: Mapping[str, Any], r: Receipt, significance: float,
                   receipts: Receipts | None = None) -> list[Finding]:
    """Pins of the receipt's node that main, in this receipt, measures above by more than
    ``significance`` (``receipts``: the ledger, for pins written before fingerprints)."""
    out = []
    node, ident = _node_of(r), identity.of_receipt(r)
    for name, spec in slots_of(r.profile.to_dict()).items():
        np = node_pin(baselines(lock), name, node, receipts, ident)
        pinned = np.value
        m = measure(r, spec)
        if pinned <= 0 or m.value is None:
            continue
        by = m.value / pinned - 1
        if by > significance:
            role = ("tier basis: gains against it are inflated" if spec.kind == FRONTIER
                    else "regression guard: it admits a drop of up to this much")
            out.append(Finding("pin-stale", np.key, spec.kind, pinned, m.value, by,
                               f"{spec.kind} pin {pinned:g} is stale: main measures {m.value:g} "
                               f"(+{by:.1%}, over the {significance:.1%} threshold); as a {role}"))
    return out
