"""The typed receipt and verdict: one to_dict/from_dict each, old receipts still read and re-derive."""
import json
from pathlib import Path

import pytest

from console.results import store
from console.core.decisions import counting, gate
from console.core.provenance import ledger
from console.core.records.facts import HostFacts
from console.core.records.receipt import SCHEMA, FrozenReceiptError, Receipt, ReceiptError, Rep, RepKey
from console.core.statistics.sizing import Sizing, size_repeats
from console.core.records.verdict import OUTCOMES, NoiseReport, Verdict, VerdictRecord

from .receipts import default_rules, make_receipt

SEALED_V1 = Path(__file__).resolve().parents[1] / "data" / "receipts-v1"


def _subset(small, big, path="receipt"):
    """Every key of ``small`` is in ``big`` with the same value (``big`` may add defaults)."""
    if isinstance(small, dict):
        assert isinstance(big, dict), path
        for k, v in small.items():
            assert k in big, f"{path}.{k} was dropped"
            _subset(v, big[k], f"{path}.{k}")
    elif isinstance(small, list):
        assert isinstance(big, list) and len(small) == len(big), path
        for i, (a, b) in enumerate(zip(small, big)):
            _subset(a, b, f"{path}[{i}]")
    else:
        assert small == big, f"{path}: {small!r} != {big!r}"


@pytest.mark.parametrize("kind", ["round", "noise"])
def test_a_receipt_round_trips_through_its_type(kind):
    d = json.loads(json.dumps(make_receipt(kind=kind)))   # as a sealed receipt reads back
    r = Receipt.from_dict(d)
    assert Receipt.from_dict(r.to_dict()) == r
    _subset(d, json.loads(json.dumps(r.to_dict())))
    assert all(isinstance(x, Rep) for x in r.reps) and r.rules == default_rules()


def test_a_rep_is_identified_by_build_phase_and_index_across_retries():
    a = Rep(build="main", phase="timed", index=2, position=5, attempt=0, status="suspect")
    b = Rep(build="main", phase="timed", index=2, position=5, attempt=1)
    assert a.key == b.key == RepKey.of(b.to_dict()) == RepKey("main", "timed", 2)
    assert a.excluded and not b.excluded


@pytest.mark.parametrize("doc, says", [
    ({"schema": "bench-console/receipt/9", "profile": {"rules": {}}}, "unknown receipt schema"),
    ({"schema": SCHEMA, "kind": "party", "profile": {"rules": {}}}, "unknown receipt kind"),
    ({"schema": SCHEMA, "profile": {}}, "no gate rules"),
    ({"schema": SCHEMA, "profile": {"rules": {"no_such_rule": 1}}}, "not a readable receipt"),
    ([1, 2], "expected a receipt object"),
])
def test_what_is_not_a_receipt_is_refused_with_a_reason(doc, says):
    with pytest.raises(ReceiptError, match=says):
        Receipt.from_dict(doc)


def test_every_verdict_round_trips_through_its_type():
    seen = set()
    for r in (make_receipt(), make_receipt(kind="noise"), make_receipt(cand=(150.0,) * 5)):
        v = gate.decide(Receipt.from_dict(r), default_rules())
        assert Verdict.from_dict(v.to_dict()).to_dict() == v.to_dict()
        seen.add(v.outcome)
    assert seen <= set(OUTCOMES)


def test_a_sealed_verdict_and_noise_report_write_back_as_the_gate_wrote_them():
    for r in (make_receipt(), make_receipt(kind="noise"), make_receipt(cand=(150.0,) * 5),
              make_receipt(kind="noise", main=(200.0, 201.0), cand=(200.5, 199.5))):
        v = gate.decide(Receipt.from_dict(r), default_rules())
        sealed = json.loads(json.dumps(v.to_dict()))
        assert VerdictRecord.of(v).to_dict() == VerdictRecord.from_dict(sealed).to_dict() == sealed
        if v.noise is not None:
            assert NoiseReport.from_dict(v.noise.to_dict()) == v.noise
            assert NoiseReport.from_dict(json.loads(json.dumps(v.noise.to_dict()))).to_dict() == v.noise.to_dict()
    sized = size_repeats(2.0, [("main", 0.08)])
    assert Sizing.from_dict(sized.to_dict()) == sized


@pytest.mark.parametrize("path", sorted(SEALED_V1.rglob("*.json")), ids=lambda p: p.name[:12])
def test_the_typed_verdict_noise_and_sizing_write_back_every_fixture_exactly(path):
    d = json.loads(path.read_text())
    out = Receipt.from_dict(d).to_dict()
    for key in ("verdict", "noise", "sizing"):
        assert (key in out) == (key in d) and out.get(key) == d.get(key), key
    assert isinstance(Receipt.from_dict(d).verdict, VerdictRecord)


def _sealed_v1():
    return sorted((SEALED_V1 / "receipts").glob("*.json"))


def test_receipts_sealed_before_the_typed_model_still_verify():
    assert len(_sealed_v1()) >= 4
    assert store.verify_dir(SEALED_V1) == []


@pytest.mark.parametrize("path", _sealed_v1(), ids=lambda p: p.stem[:12])
def test_receipts_sealed_before_the_typed_model_re_derive_the_same_verdict(path):
    d = json.loads(path.read_text())
    r = Receipt.from_dict(d)
    _subset(d, json.loads(json.dumps(r.to_dict())))   # nothing the old receipt holds is lost or changed
    v = gate.decide(r, r.rules).to_dict()
    assert as_sealed_then(v) == close_to(d["verdict"])
    assert {b: f.to_dict() for b, f in counting.summarize(r, r.rules).items()} == d["summary"]


def close_to(x):
    """``x`` with every float compared to 12 digits: the Student t quantile now comes from
    scipy, which agrees with the hand-written one it replaced to the last bit or two."""
    if isinstance(x, dict):
        return {k: close_to(v) for k, v in x.items()}
    if isinstance(x, list):
        return [close_to(v) for v in x]
    return pytest.approx(x, rel=1e-12) if isinstance(x, float) else x


def as_sealed_then(v: dict) -> dict:
    """A schema-1 verdict re-derived today, less what today's verdict adds: it says it was
    judged by the rules it was sealed under (a ``legacy-rules`` caveat, first) and has no span."""
    v = dict(v)
    assert v["warnings"][0]["code"] == "legacy-rules" and "schema-1" in v["warnings"][0]["message"]
    v["warnings"] = v["warnings"][1:]
    assert v.pop("tier_span") is None
    return v


def test_the_cli_verifies_and_re_derives_the_old_receipts(capsys):
    from console.cli import main
    assert main(["ledger", "verify", str(SEALED_V1)]) == 0
    assert "0 problem(s)" in capsys.readouterr().out
    for path in _sealed_v1():
        stored = json.loads(path.read_text())["verdict"]
        code = main(["verdict", str(path), "--json"])
        out = capsys.readouterr()
        doc = json.loads(out.out)
        assert doc.pop("file")["status"] == "sealed"        # each is a receipt its ledger sealed
        assert as_sealed_then(doc) == close_to(stored) and code == stored["exit_code"]
        assert "differs" not in out.err
    demo = Path(__file__).resolve().parents[2] / "profiles" / "demo.toml"
    assert main(["ledger", "rescore", str(SEALED_V1), "--profile", str(demo)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("(schema 1: fixed-reps rules)") == len(_sealed_v1()) - 1    # every round, not the noise one


def _sealed_on_disk(tmp_path) -> tuple[dict, Receipt]:
    """A receipt sealed into a ledger and read back from its file, as every reader reads it."""
    built = Receipt.from_dict(make_receipt())
    built.verdict = VerdictRecord.of(gate.decide(built, built.rules))
    rid = store.seal_into(tmp_path, built.to_dict())
    d = json.loads((tmp_path / "receipts" / f"{rid}.json").read_text())
    return d, Receipt.from_dict(d)


def test_a_sealed_receipt_read_from_disk_refuses_every_change(tmp_path):
    d, r = _sealed_on_disk(tmp_path)
    assert r.frozen and r.seal is not None
    with pytest.raises(FrozenReceiptError, match="sealed"):
        r.status = "infra"
    with pytest.raises(AttributeError):      # FrozenReceiptError is one
        r.verdict = None
    with pytest.raises(FrozenReceiptError):
        r.reps[0].value = 1.0
    with pytest.raises(FrozenReceiptError):
        r.builds["main"].image_id = "sha256:other"
    with pytest.raises(FrozenReceiptError):
        del r.round_id
    with pytest.raises(FrozenReceiptError):
        r.profile.rules = default_rules()
    for change in (lambda: r.reps.append(r.reps[0]), lambda: r.builds.pop("main"),
                   lambda: r.builds.__setitem__("x", r.builds["main"]), lambda: r.host.update(hostname="elsewhere"),
                   lambda: r.builds["main"].source.__setitem__("path", "/elsewhere"),
                   lambda: r.reps[0].refusals.append("x"), lambda: r.profile.bench.clear(),
                   lambda: r.parity.reference.__setitem__("sha256", "x"), lambda: r.lock.guards.clear()):
        with pytest.raises((TypeError, AttributeError)):
            change()
    # it still writes exactly the document it was read from
    assert json.dumps(r.to_dict(), sort_keys=True) == json.dumps(d, sort_keys=True)
    assert ledger.canonical_json(r.to_dict()) == ledger.canonical_json(d)


def test_a_sealed_receipt_re_derives_the_verdict_it_would_unfrozen(tmp_path):
    d, r = _sealed_on_disk(tmp_path)
    unsealed = Receipt.from_dict({k: v for k, v in d.items() if k != "seal"})
    assert not unsealed.frozen
    assert gate.decide(r, r.rules).to_dict() == gate.decide(unsealed, unsealed.rules).to_dict()
    assert counting.summarize(r, r.rules) == counting.summarize(unsealed, unsealed.rules)
    assert gate.decide(r, r.rules).outcome == d["verdict"]["outcome"]
    json.dumps(gate.decide(r, r.rules).to_dict())      # the verdict holds no read-only part of the receipt


@pytest.mark.parametrize("path", _sealed_v1(), ids=lambda p: p.stem[:12])
def test_every_sealed_fixture_reads_frozen_and_re_derives_as_unfrozen(path):
    d = json.loads(path.read_text())
    r, unsealed = Receipt.from_dict(d), Receipt.from_dict({k: v for k, v in d.items() if k != "seal"})
    assert r.frozen and not unsealed.frozen
    assert gate.decide(r, r.rules).to_dict() == gate.decide(unsealed, unsealed.rules).to_dict()
    assert ledger.canonical_json(r.to_dict()) == ledger.canonical_json({**unsealed.to_dict(), "seal": d["seal"]})


def test_a_receipt_being_built_is_filled_in_until_the_round_freezes_it():
    r = Receipt.from_dict(json.loads(json.dumps(make_receipt())))     # no seal: the round's own receipt
    assert not r.frozen
    r.reps.append(Rep(build="main", phase="timed", index=99, position=99, value=200.0))
    r.builds["main"].image_id = "sha256:rebuilt"
    r.host = HostFacts.from_dict({**r.host.to_dict(), "hostname": "node-1"})
    r.verdict = VerdictRecord.of(gate.decide(r, r.rules))
    before = r.to_dict()
    r.freeze()
    assert r.frozen and isinstance(r.reps, tuple) and r.to_dict() == before
    with pytest.raises(FrozenReceiptError):
        r.ended_at = "later"
    with pytest.raises(FrozenReceiptError):
        r.host = HostFacts.from_dict({"hostname": "node-2"})
