import json
import math
import multiprocessing
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from console.core.provenance.ledger import Receipts
from console.results import store
from console.core.provenance import ledger as L
from console.core.records.receipt import Receipt


def receipt(n: int, outcome: str = "accepted", tier: str | None = "s", kind: str = "round") -> dict:
    return {
        "schema": "bench-console/receipt/1", "kind": kind, "round_id": f"R{n:03d}",
        "started_at": "2026-12-02T16:30:00Z", "ended_at": "2026-12-02T16:31:00Z", "status": "complete",
        "profile": {"name": "demo", "node": "cpu-2core", "rules": {"significance": 0.02}},
        "reps": [{"build": "main", "phase": "timed", "value": 200.0 + n, "depth": 4096}],
        "verdict": {"outcome": outcome, "tier": tier},
    }


def sealed_dir(tmp_path: Path, n: int = 4) -> tuple[Path, list[str]]:
    ids = [store.seal_into(tmp_path, receipt(i), sealed_at=f"2026-12-02T16:3{i}:00Z") for i in range(n)]
    return tmp_path, ids


def codes(problems) -> list[str]:
    return [p.code for p in problems]


def ledger_lines(d: Path) -> list[str]:
    return (d / "ledger.jsonl").read_text().splitlines(keepends=True)


def write_lines(d: Path, lines: list[str]) -> None:
    (d / "ledger.jsonl").write_text("".join(lines))


# --- canonical JSON ------------------------------------------------------------

def test_canonical_json_is_sorted_compact_utf8():
    assert L.canonical_json({"b": 1, "a": [1.5, "é", None, True]}) == '{"a":[1.5,"é",null,true],"b":1}'.encode()


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_canonical_json_rejects_non_finite_with_the_path(bad):
    with pytest.raises(L.CanonicalError, match=r"\$\.x\[1\]"):
        L.canonical_json({"x": [0.0, bad]})


@pytest.mark.parametrize("bad", [{1: "a"}, {"a": {1, 2}}, {"a": b"x"}, {"a": "\ud800"}])
def test_canonical_json_rejects_values_without_one_form(bad):
    with pytest.raises(L.CanonicalError):
        L.canonical_json(bad)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
@settings(max_examples=300, deadline=None)
def test_canonical_json_is_deterministic_and_round_trips(obj):
    data = L.canonical_json(obj)
    assert L.canonical_json(obj) == data
    assert L.canonical_json(json.loads(data)) == data


@given(st.dictionaries(st.text(max_size=5), st.integers(), max_size=6))
def test_canonical_json_ignores_insertion_order(d):
    assert L.canonical_json(dict(reversed(list(d.items())))) == L.canonical_json(d)


# --- sealing ---------------------------------------------------------------------

def test_seal_chains_and_writes_receipt_and_line(tmp_path):
    d, ids = sealed_dir(tmp_path, 3)
    lines = [json.loads(x) for x in ledger_lines(d)]
    assert [x["id"] for x in lines] == ids
    assert [x["prev"] for x in lines] == [None, ids[0], ids[1]]
    assert lines[1] == {"id": ids[1], "prev": ids[0], "kind": "round", "profile": "demo", "round_id": "R001",
                        "sealed_at": "2026-12-02T16:31:00Z", "outcome": "accepted", "tier": "s"}
    for rid in ids:
        data = (d / "receipts" / f"{rid}.json").read_bytes()
        assert L.receipt_id(data) == rid and L.canonical_json(json.loads(data)) == data
    assert json.loads((d / "receipts" / f"{ids[2]}.json").read_bytes())["seal"] == {
        "prev": ids[1], "sealed_at": "2026-12-02T16:32:00Z"}
    assert store.verify_dir(d) == []


def test_seal_refuses_an_already_sealed_receipt():
    s = L.seal(receipt(0), None, "t")
    with pytest.raises(ValueError, match="already sealed"):
        L.seal(s.receipt, s.id, "t")


def test_a_round_is_banked_once_even_if_sealed_again(tmp_path):
    d, ids = sealed_dir(tmp_path, 2)
    again = dict(receipt(1), ended_at="2026-12-02T17:00:00Z")     # e.g. a resumed copy of round R001
    with pytest.raises(store.AlreadySealed, match=f"R001 is already sealed .* as receipt {ids[1][:12]}"):
        store.seal_into(d, again)
    assert len(ledger_lines(d)) == 2 and store.verify_dir(d) == []


def test_seal_does_not_mutate_its_input():
    r = receipt(0)
    L.seal(r, None, "t")
    assert "seal" not in r


def _seal_many(args):
    d, start = args
    return [store.seal_into(d, receipt(start + i)) for i in range(5)]


def test_concurrent_sealing_keeps_one_unbroken_chain(tmp_path):
    with multiprocessing.get_context("fork").Pool(3) as pool:
        pool.map(_seal_many, [(str(tmp_path), 0), (str(tmp_path), 100), (str(tmp_path), 200)])
    assert len(ledger_lines(tmp_path)) == 15
    assert store.verify_dir(tmp_path) == []


# --- tampering -------------------------------------------------------------------

def test_a_changed_byte_in_a_receipt_is_named(tmp_path):
    d, ids = sealed_dir(tmp_path)
    f = d / "receipts" / f"{ids[2]}.json"
    f.write_bytes(f.read_bytes().replace(b"202.0", b"212.0"))
    probs = store.verify_dir(d)
    assert codes(probs) == ["receipt-changed"]
    assert probs[0].line == 3 and probs[0].receipt == ids[2] and probs[0].file == str(f)


@pytest.mark.parametrize("offset", [0, 17, -2])
def test_any_byte_flip_is_detected(tmp_path, offset):
    d, ids = sealed_dir(tmp_path, 2)
    f = d / "receipts" / f"{ids[0]}.json"
    b = bytearray(f.read_bytes())
    b[offset] ^= 0x01
    f.write_bytes(bytes(b))
    assert "receipt-changed" in codes(store.verify_dir(d))


def test_a_deleted_line_breaks_the_chain(tmp_path):
    d, ids = sealed_dir(tmp_path)
    lines = ledger_lines(d)
    write_lines(d, lines[:1] + lines[2:])
    probs = [p for p in store.verify_dir(d) if p.fatal]
    assert codes(probs) == ["broken-link"]
    assert probs[0].line == 2 and probs[0].receipt == ids[2]
    # the dropped round's receipt is still on disk: reported, harmless
    assert [p.receipt for p in store.verify_dir(d) if p.code == "orphan"] == [ids[1]]


def test_reordered_lines_are_named(tmp_path):
    d, ids = sealed_dir(tmp_path)
    lines = ledger_lines(d)
    lines[1], lines[2] = lines[2], lines[1]
    write_lines(d, lines)
    probs = store.verify_dir(d)
    assert set(codes(probs)) == {"broken-link"}
    assert {p.line for p in probs} == {2, 3, 4}


def test_an_inserted_line_is_named(tmp_path):
    d, ids = sealed_dir(tmp_path)
    forged = L.seal(receipt(9), ids[0], "t")
    (d / "receipts" / f"{forged.id}.json").write_bytes(forged.data)
    lines = ledger_lines(d)
    write_lines(d, lines[:1] + [forged.entry.to_line().decode()] + lines[1:])
    probs = store.verify_dir(d)
    assert codes(probs) == ["broken-link"] and probs[0].line == 3 and probs[0].receipt == ids[1]


def test_a_duplicated_line_is_named(tmp_path):
    d, ids = sealed_dir(tmp_path, 2)
    lines = ledger_lines(d)
    write_lines(d, lines + lines[1:])
    assert set(codes(store.verify_dir(d))) == {"duplicate", "broken-link"}


def test_an_edited_line_disagrees_with_its_receipt(tmp_path):
    d, ids = sealed_dir(tmp_path)
    lines = ledger_lines(d)
    e = json.loads(lines[1])
    e["tier"] = "xl"
    lines[1] = L.canonical_json(e).decode() + "\n"
    write_lines(d, lines)
    probs = store.verify_dir(d)
    assert codes(probs) == ["line-mismatch"] and probs[0].line == 2 and "'tier'" in probs[0].message


def test_an_edited_prev_link_is_named(tmp_path):
    d, ids = sealed_dir(tmp_path)
    lines = ledger_lines(d)
    e = json.loads(lines[2])
    e["prev"] = ids[0]
    lines[2] = L.canonical_json(e).decode() + "\n"
    write_lines(d, lines)
    assert set(codes(store.verify_dir(d))) == {"broken-link", "seal-mismatch"}


def test_a_resealed_edit_breaks_the_next_link(tmp_path):
    # Re-hash an edited receipt and fix its own line: the next receipt's sealed prev still names the original.
    d, ids = sealed_dir(tmp_path)
    old = json.loads((d / "receipts" / f"{ids[1]}.json").read_bytes())
    del old["seal"]
    old["verdict"]["tier"] = "xl"
    forged = L.seal(old, ids[0], "2026-12-02T16:31:00Z")
    (d / "receipts" / f"{forged.id}.json").write_bytes(forged.data)
    (d / "receipts" / f"{ids[1]}.json").unlink()
    lines = ledger_lines(d)
    lines[1] = forged.entry.to_line().decode()
    write_lines(d, lines)
    probs = store.verify_dir(d)
    assert codes(probs) == ["broken-link"] and probs[0].line == 3


def test_a_missing_receipt_is_named(tmp_path):
    d, ids = sealed_dir(tmp_path)
    (d / "receipts" / f"{ids[3]}.json").unlink()
    probs = store.verify_dir(d)
    assert codes(probs) == ["missing-receipt"] and probs[0].line == 4 and probs[0].receipt == ids[3]


def test_malformed_lines_are_named(tmp_path):
    d, ids = sealed_dir(tmp_path)
    lines = ledger_lines(d)
    lines[1] = "{not json\n"
    write_lines(d, lines)
    probs = store.verify_dir(d)
    assert codes(probs)[:1] == ["malformed-line"] and probs[0].line == 2
    assert "broken-link" in codes(probs)      # the line after it no longer links to anything known


def test_a_non_canonical_receipt_is_named(tmp_path):
    d, ids = sealed_dir(tmp_path, 1)
    data = json.dumps(json.loads((d / "receipts" / f"{ids[0]}.json").read_bytes()), indent=1).encode()
    rid = L.receipt_id(data)
    (d / "receipts" / f"{rid}.json").write_bytes(data)
    (d / "receipts" / f"{ids[0]}.json").unlink()
    e = json.loads(ledger_lines(d)[0])
    e["id"] = rid
    write_lines(d, [L.canonical_json(e).decode() + "\n"])
    assert codes(store.verify_dir(d)) == ["not-canonical"]


# --- crash safety ------------------------------------------------------------------

def test_an_orphan_receipt_is_harmless(tmp_path):
    d, ids = sealed_dir(tmp_path, 2)
    s = L.seal(receipt(7), ids[-1], "t")
    store.atomic_write(d / "receipts" / f"{s.id}.json", s.data)    # crashed before the ledger line
    probs = store.verify_dir(d)
    assert codes(probs) == ["orphan"] and not probs[0].fatal and probs[0].receipt == s.id
    assert list(store.ledger_receipts(d)) == ids


def test_a_torn_ledger_tail_is_reported_then_cut_by_the_next_seal(tmp_path):
    d, ids = sealed_dir(tmp_path, 2)
    s = L.seal(receipt(7), ids[-1], "t")
    store.atomic_write(d / "receipts" / f"{s.id}.json", s.data)
    with open(d / "ledger.jsonl", "ab") as f:
        f.write(s.entry.to_line()[:40])                             # crashed mid-append
    probs = store.verify_dir(d)
    assert "malformed-line" in codes(probs) and "torn" in probs[codes(probs).index("malformed-line")].message
    new = store.seal_into(d, receipt(8))
    assert json.loads(ledger_lines(d)[-1])["prev"] == ids[-1]
    assert [p.code for p in store.verify_dir(d)] == ["orphan"]
    assert list(store.ledger_receipts(d)) == ids + [new]


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    store.atomic_write(tmp_path / "x.json", b"1")
    store.atomic_write(tmp_path / "x.json", b"2")
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"] and (tmp_path / "x.json").read_bytes() == b"2"


def test_verify_dir_of_an_empty_directory(tmp_path):
    assert store.verify_dir(tmp_path) == [] and store.ledger_receipts(tmp_path) == {}


# --- rescoring ---------------------------------------------------------------------

@dataclass
class V:
    outcome: str
    tier: str | None

    def to_dict(self):
        return {"outcome": self.outcome, "tier": self.tier}


def test_rescore_recomputes_and_never_touches_files(tmp_path):
    d = tmp_path
    ids = [store.seal_into(d, receipt(i, "accepted", t)) for i, t in enumerate(["s", "xl", "m"])]
    store.seal_into(d, receipt(9, kind="noise"))
    before = {p: p.read_bytes() for p in d.rglob("*") if p.is_file()}

    def decide(r, rules):
        assert rules == {"cap": True}
        return V("accepted", "xl" if r.round_id == "R001" else "s")

    rows = store.rescore_dir(d, decide, {"cap": True})
    assert [r.id for r in rows] == ids                             # noise receipts give no row
    assert [(r.old_tier, r.new_tier, r.changed) for r in rows] == [("s", "s", False), ("xl", "xl", False),
                                                                   ("m", "s", True)]
    assert rows[2].new_verdict == {"outcome": "accepted", "tier": "s"}
    assert {p: p.read_bytes() for p in d.rglob("*") if p.is_file()} == before


def test_rescore_uses_each_receipts_rules_and_survives_a_failure():
    rs = [("a", receipt(0)), ("b", receipt(1))]

    def decide(r, rules):
        assert isinstance(r, Receipt) and rules == r.rules       # read once, judged by its own rules
        if r.round_id == "R001":
            raise KeyError("reps")
        return V("none", None)

    rows = L.rescore(Receipts.read(rs), decide, rules_of=lambda r: r.rules)
    assert rows[0].new_outcome == "none" and rows[1].error == "KeyError: 'reps'"


def test_a_receipt_without_a_canonical_form_leaves_no_trace(tmp_path):
    with pytest.raises(L.CanonicalError, match="nan"):
        store.seal_into(tmp_path, {**receipt(0), "summary": {"median": math.nan}})
    assert not (tmp_path / "ledger.jsonl").read_bytes() and store.receipt_ids(tmp_path) == []
