"""Which machine measured a number: a node's fingerprint, from the host facts a round gathers. (pure)

A profile's ``node`` names a class of machine; nothing stops a round on another machine
from running under that name. The fingerprint is what the round can see of the machine
itself: the CPU model and core count, the GPU model and count, and the GPU driver's major
version. Its digest is a short hash of exactly those facts, so two rounds share one only
when every fact matches, and ``differences`` names the facts that do not. Hostname, kernel,
Python and Docker versions are left out: they change under a machine without changing
what it measures.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from console.core.records.facts import Gpu, HostFacts
from console.core.records.receipt import Receipt

FACTS = ("cpu_model", "cores", "gpu_model", "gpus", "driver_major")
DIGEST_CHARS = 12


@dataclass(frozen=True)
class Fingerprint:
    digest: str
    facts: Mapping[str, Any] = field(default_factory=dict)     # empty when only the digest is known

    def to_dict(self) -> dict[str, Any]:
        return {"digest": self.digest, "facts": dict(self.facts)}


def _text(x: Any) -> str:
    return " ".join(x.split()) if isinstance(x, str) else ""


def _count(x: Any) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) and x > 0 else 0


def driver_major(version: Any) -> str:
    """``"550.54.15"`` -> ``"550"``; "" when there is no driver version."""
    return _text(version).split(".", 1)[0] if _text(version) else ""


def node_facts(host: HostFacts, driver: Any = None) -> dict[str, Any]:
    """The facts a fingerprint is made of, from a receipt's ``host`` and the GPU driver's version
    (``host.gpu_driver`` unless given)."""
    gpus = [g for g in host.gpus if isinstance(g, Gpu)]
    names = sorted({_text(g.name) for g in gpus} - {""})
    return {"cpu_model": _text(host.cpu_model), "cores": _count(host.cores),
            "gpu_model": " + ".join(names), "gpus": len(gpus),
            "driver_major": driver_major(driver if driver is not None else host.gpu_driver)}


def of_facts(facts: Mapping[str, Any]) -> Fingerprint:
    """The fingerprint of ``facts`` (only the keys in ``FACTS`` count; a missing one counts as None)."""
    kept = {k: facts.get(k) for k in FACTS}
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return Fingerprint(hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS], kept)


def of_host(host: HostFacts, driver: Any = None) -> Fingerprint:
    return of_facts(node_facts(host, driver))


def of_receipt(receipt: Receipt) -> Fingerprint:
    """A receipt's node, re-derived from its host facts; a receipt sealed before the host recorded
    the driver gives it from its preflight. Receipts without host facts share one 'unknown' node."""
    host, driver = receipt.host, receipt.host.gpu_driver
    if driver is None and host.gpus:
        pre = receipt.preflight if isinstance(receipt.preflight, Mapping) else {}
        driver = (pre.get("driver") or {}).get("driver_version") if isinstance(pre.get("driver"), Mapping) else None
    return of_host(host, driver)


def differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of the facts that differ between two fingerprints' facts, in ``FACTS`` order."""
    return tuple(k for k in FACTS if a.get(k) != b.get(k))


def differences(recorded: Fingerprint, here: Fingerprint) -> str:
    """Which facts differ, as a sentence: what the pin's node had against what this node has."""
    if recorded.digest == here.digest:
        return ""
    if not recorded.facts:
        return f"node {recorded.digest}'s facts are not recorded (this node is {here.digest})"
    names = differing(recorded.facts, here.facts)
    return "; ".join(f"{k} {recorded.facts.get(k)!r} there, {here.facts.get(k)!r} here" for k in names)


def describe(fp: Fingerprint) -> str:
    """One line: the digest and the facts it was made from."""
    if not fp.facts:
        return f"{fp.digest} (facts not recorded)"
    f = fp.facts
    gpu = f"{f.get('gpus')} x {f.get('gpu_model')}, driver {f.get('driver_major') or '?'}" if f.get("gpus") else "no GPU"
    return f"{fp.digest}: {f.get('cpu_model') or 'unknown CPU'} x{f.get('cores')} cores, {gpu}"
