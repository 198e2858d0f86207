import copy
import textwrap
from pathlib import Path

import pytest
import tomlkit
from hypothesis import given, settings, strategies as st

from console.core.provenance.ledger import Receipts
from console.results import lockfile as F, store
from console.core.provenance import ledger as L
from console.core.provenance import lock as K
from console.core.provenance.lock_verify import verify_lock
from console.core.provenance.fingerprint import of_receipt
from core.test_fingerprint import of_host
from console.core.records.receipt import SCHEMA, SCHEMA_1, Receipt
from console.core.records.verdict import VerdictRecord

FRONT = "demo/cpu-2core/main/decode_tok_s/ctx4096"
GUARD = "demo/cpu-2core/main/decode_tok_s/ctx128"


def reps(build, phase, values, depth, status="ok", tokens=192):
    # self-consistent figures: the wall clock covers the reported work plus a fixed start-up
    return [{"build": build, "phase": phase, "index": i, "depth": depth, "status": status, "value": v,
             "tokens": tokens, "wall_s": tokens / v + 0.25,
             "reported": {"metric": "decode_tok_s", "value": v, "tokens": tokens, "elapsed_s": tokens / v}}
            for i, v in enumerate(values)]


def round_receipt(main=(200.0, 201.0, 202.0), guard=(300.0, 301.0, 302.0), cand=(210.0, 211.0, 212.0),
                  node="cpu-2core", profile="demo", status="complete", n=0, depth=4096, schema=SCHEMA_1):
    # Schema 1 by default: the median rule these tests pin down still verifies old locks;
    # the schema-2 rule (a lower confidence bound) has its own tests below.
    return {
        "schema": schema, "kind": "round", "round_id": f"R{n}", "status": status, "ended_at": f"2026-12-0{n % 9 + 1}T00:00:00Z",
        "profile": {"name": profile, "node": node,
                    "bench": {"metric": "decode_tok_s", "depth": 4096},
                    "parity": {"document_sha256": "d"},
                    "rules": {"significance": 0.02,
                              "guards": [{"name": "decode_ctx128", "depth": 128, "tokens": 192, "reps": 3,
                                          "max_drop": 0.01}]}},
        "reps": reps("main", "timed", main, depth) + reps("candidate", "timed", cand, depth)
                + reps("main", "guard:decode_ctx128", guard, 128) + reps("candidate", "guard:decode_ctx128", guard, 128),
        "verdict": {"outcome": "accepted", "tier": "s"},
    }


def noise_receipt(spread=0.012, node="cpu-2core"):
    return {"schema": SCHEMA_1, "kind": "noise", "round_id": "N", "status": "complete", "ended_at": "2026-12-01T00:00:00Z",
            "profile": {"name": "demo", "node": node, "bench": {"metric": "decode_tok_s", "depth": 4096},
                        "rules": {"guards": []}},
            "reps": [], "noise": {"spread": spread}}


def sealed(r, prev=None):
    s = L.seal(r, prev, "2026-12-02T00:00:00Z")
    return s.id, s.receipt


NOISE_OK = VerdictRecord.from_dict({"outcome": "noise"})
OK = VerdictRecord.from_dict({"outcome": "accepted"})


LOCK_TEXT = textwrap.dedent('''\
    # reference.lock for the demo: read docs/PROVENANCE.md before touching it.
    [reference]
    engine = "numpy float64"  # the independent implementation
    commit = ""

    [parity]
    document_sha256 = "d"

    # The frontier: best sealed measurement of main.
    [baselines."demo/cpu-2core/main/decode_tok_s/ctx4096"]
    kind = "frontier"
    value = 0.0  # not measured yet
    receipt = ""
    measured_at = ""
    note = "decode at the scored depth"

    [baselines."demo/cpu-2core/main/decode_tok_s/ctx128"]
    kind = "guard"
    # raised by hand once in the source project; here only sealed rounds move it
    value = 0.0
    receipt = ""
    measured_at = ""
    ''')


# --- slots -----------------------------------------------------------------------

def test_slot_names_carry_every_axis_and_parse_back():
    name = K.slot_name("demo", "h200x8", "iq1s", "prefill_tok_s", 32768)
    assert name == "demo/h200x8/iq1s/prefill_tok_s/ctx32768"
    assert K.parse_slot(name) == K.Slot("demo", "h200x8", "iq1s", "prefill_tok_s", 32768)


@pytest.mark.parametrize("bad", ["demo/node/main/m", "a/b/c/d/128", "a/b/c/d/ctx1x", "a/b/c/d/ctx007", "a//c/d/ctx1"])
def test_bad_slot_names_are_refused(bad):
    with pytest.raises(K.LockError):
        K.parse_slot(bad)


def test_slot_parts_may_not_contain_separators():
    with pytest.raises(K.LockError):
        K.slot_name("demo/x", "n", "main", "m", 1)


def test_two_nodes_never_share_a_slot():
    a = K.frontier_slot(round_receipt(node="a")["profile"])
    b = K.frontier_slot(round_receipt(node="b")["profile"])
    assert a != b


def test_slots_from_a_profile_object_match_those_from_its_receipt():
    from console.profile import Bands, BenchSpec, GateRules, Guard

    class P:
        def to_dict(self):
            import dataclasses
            return {"name": "demo", "node": "cpu-2core",
                    "bench": dataclasses.asdict(BenchSpec(("x",), "decode_tok_s", 4096, 192, 48, 5)),
                    "gate": dataclasses.asdict(GateRules(bands=Bands(), guards=(Guard("decode_ctx128", 128, 192),)))}

    assert K.slots_of(P()) == K.slots_of(round_receipt()["profile"])
    assert K.guard_slots(P()) == {"decode_ctx128": GUARD}


def test_a_guard_on_the_frontier_depth_is_refused():
    p = round_receipt()["profile"]
    p["rules"]["guards"][0]["depth"] = 4096
    with pytest.raises(K.LockError, match="share slot"):
        K.slots_of(p)


# --- updates ---------------------------------------------------------------------

def test_unmeasured_slots_are_set_from_main_medians_only():
    rid, r = sealed(round_receipt(main=(200.0, 205.0, 201.0), cand=(900.0, 900.0, 900.0)))
    ch = {c.key: c for c in K.update_from_receipt({}, rid, Receipt.from_dict(r), OK)}
    assert (ch[FRONT].action, ch[FRONT].new, ch[FRONT].receipt) == ("set", 201.0, rid)
    assert (ch[GUARD].action, ch[GUARD].new, ch[GUARD].kind) == ("set", 301.0, "guard")


def test_frontier_rises_on_any_higher_main_and_holds_otherwise():
    lock = {"baselines": {FRONT: {"kind": "frontier", "value": 201.0, "receipt": "x"}}}
    rid, r = sealed(round_receipt(main=(201.5, 201.5, 201.5)))
    assert {c.key: c.action for c in K.update_from_receipt(lock, rid, Receipt.from_dict(r), OK)}[FRONT] == "raise"
    rid, r = sealed(round_receipt(main=(150.0, 150.0, 150.0)))
    c = {c.key: c for c in K.update_from_receipt(lock, rid, Receipt.from_dict(r), OK)}[FRONT]
    assert c.action == "hold" and not c.moves and "raise-only" in c.reason


def test_guard_floor_is_never_lowered_and_follows_only_a_clear_rise():
    lock = {"baselines": {GUARD: {"kind": "guard", "value": 300.0, "receipt": "x"}}}

    def act(vals):
        rid, r = sealed(round_receipt(guard=vals))
        return {c.key: c for c in K.update_from_receipt(lock, rid, Receipt.from_dict(r), OK)}[GUARD]

    low = act((250.0, 250.0, 250.0))
    assert low.action == "hold" and "never lowered" in low.reason
    assert act((303.0, 303.0, 303.0)).action == "hold"           # within 2 %: noise, not a new floor
    assert act((310.0, 310.0, 310.0)).action == "raise"


@pytest.mark.parametrize("mutate, why", [
    (lambda r: r.update(status="infra"), "status"),
    (lambda r: [x.update(status="failed") for x in r["reps"] if x["build"] == "main"], "at least 3"),
    (lambda r: r["reps"].__setitem__(slice(1, None), r["reps"][2:]), "at least 3"),
    (lambda r: [x.update(depth=64) for x in r["reps"] if x["phase"] == "timed"], "ctx64"),
    (lambda r: [x["reported"].update(metric="prefill_tok_s") for x in r["reps"] if x["phase"] == "timed"], "prefill"),
])
def test_rounds_that_cannot_vouch_for_main_move_nothing(mutate, why):
    r = round_receipt()
    mutate(r)
    rid, r = sealed(r)
    ch = {c.key: c for c in K.update_from_receipt({}, rid, Receipt.from_dict(r), OK)}
    assert ch[FRONT].action == "hold" and why in ch[FRONT].reason


def test_an_unusable_verdict_moves_nothing():
    rid, r = sealed(round_receipt())
    assert not any(c.moves for c in K.update_from_receipt({}, rid, Receipt.from_dict(r), VerdictRecord.from_dict({"outcome": "infra"})))


@pytest.mark.parametrize("code", ["main-parity-fail", "main-parity-error"])
def test_a_main_that_fails_its_own_parity_moves_nothing(code):
    rid, r = sealed(round_receipt())
    verdict = VerdictRecord.from_dict({"outcome": "accepted", "warnings": [{"code": code, "message": "…"}]})
    ch = K.update_from_receipt({}, rid, Receipt.from_dict(r), verdict)
    assert ch and not any(c.moves for c in ch) and all("parity" in c.reason for c in ch)


def test_only_sealed_receipts_move_pins():
    with pytest.raises(K.LockError, match="sealed"):
        K.update_from_receipt({}, "x", Receipt.from_dict(round_receipt()), OK)


def test_noise_is_recorded_per_node():
    rid, r = sealed(noise_receipt(0.0123456789))
    (c,) = K.update_from_receipt({}, rid, Receipt.from_dict(r), None)
    assert (c.table, c.key, c.new) == ("noise", "cpu-2core", 0.0123457)
    node = of_receipt(Receipt.from_dict(r))
    assert K.apply_to_dict({}, [c])["noise"]["cpu-2core"] == {"spread": 0.0123457, "receipt": rid,
                                                             "measured_at": "2026-12-01T00:00:00Z",
                                                             "fingerprint": node.digest,
                                                             "node_facts": dict(node.facts)}


def test_attested_figures_never_move_the_value():
    doc = F.loads(LOCK_TEXT)
    F.record_attested(doc, FRONT, 999.0, source="seen on the node, unsealed", at="2026-12-01")
    m = F.model(doc)
    assert K.value_of(m, FRONT) == 0.0 and m["baselines"][FRONT]["attested"]["value"] == 999.0
    rid, r = sealed(round_receipt())
    F.apply_changes(doc, K.update_from_receipt(F.model(doc), rid, Receipt.from_dict(r), OK))
    m = F.model(doc)
    assert m["baselines"][FRONT]["value"] == 201.0 and m["baselines"][FRONT]["attested"]["value"] == 999.0
    assert verify_lock(m, Receipts.read({rid: r})) == []


main_values = st.lists(st.floats(min_value=1.0, max_value=1e4, allow_nan=False), min_size=3, max_size=5)


@given(st.lists(st.tuples(main_values, main_values, st.sampled_from(["complete", "infra"])), min_size=1, max_size=8))
@settings(max_examples=150, deadline=None)
def test_frontier_and_guard_never_decrease(rounds):
    lock: dict = {}
    history = []
    for i, (m, g, status) in enumerate(rounds):
        rid, r = sealed(round_receipt(main=m, guard=g, status=status, n=i))
        lock = K.apply_to_dict(lock, K.update_from_receipt(lock, rid, Receipt.from_dict(r), OK))
        history.append((K.value_of(lock, FRONT), K.value_of(lock, GUARD)))
    for (f0, g0), (f1, g1) in zip(history, history[1:]):
        assert f1 >= f0 and g1 >= g0
    complete = [K.pin(sorted(m)[len(m) // 2] if len(m) % 2 else (sorted(m)[len(m) // 2 - 1] + sorted(m)[len(m) // 2]) / 2)
                for m, _, s in rounds if s == "complete"]
    assert K.value_of(lock, FRONT) == (max(complete) if complete else 0.0)


# --- the TOML text ----------------------------------------------------------------

def test_comments_survive_every_rewrite():
    doc = F.loads(LOCK_TEXT)
    for i, vals in enumerate([(200.0,) * 3, (210.0,) * 3, (190.0,) * 3]):
        rid, r = sealed(round_receipt(main=vals, guard=tuple(v + 200 for v in vals), n=i))
        F.apply_changes(doc, K.update_from_receipt(F.model(doc), rid, Receipt.from_dict(r), OK))
        doc = F.loads(tomlkit.dumps(doc))
    text = tomlkit.dumps(doc)
    for comment in ["# reference.lock for the demo", "# the independent implementation",
                    "# The frontier: best sealed measurement of main.", "# not measured yet",
                    "# raised by hand once in the source project"]:
        assert comment in text, comment
    assert 'note = "decode at the scored depth"' in text
    assert K.value_of(F.model(doc), FRONT) == 210.0
    assert "value = 210.0  # not measured yet" in text    # the trailing comment stays on its line


def test_new_slots_and_noise_tables_are_written_as_quoted_keys(tmp_path):
    doc = F.loads("# top\n")
    rid, r = sealed(round_receipt(node="h200x8"))
    nid, n = sealed(noise_receipt(node="h200x8"))
    F.apply_changes(doc, K.update_from_receipt({}, rid, Receipt.from_dict(r), OK) + K.update_from_receipt({}, nid, Receipt.from_dict(n), None))
    path = tmp_path / "reference.lock"
    store.write_lock(path, doc)
    text = path.read_text()
    assert '[baselines."demo/h200x8/main/decode_tok_s/ctx4096"]' in text and '[noise.h200x8]' in text
    assert verify_lock(F.model(store.read_lock(path)), Receipts.read({rid: r, nid: n})) == []


def test_new_lock_text_lists_every_slot_unmeasured():
    m = F.model(F.loads(F.new_lock_text(round_receipt()["profile"] | {"reference": {"engine": "ref"}})))
    assert m["baselines"][FRONT]["value"] == 0.0 and m["baselines"][GUARD]["kind"] == "guard"
    assert m["reference"]["engine"] == "ref" and m["parity"]["document_sha256"] == "d"
    assert verify_lock(m, Receipts.read({})) == []


def test_invalid_toml_is_a_lock_error():
    with pytest.raises(K.LockError, match="not valid TOML"):
        F.loads("[baselines\n")


# --- staleness ---------------------------------------------------------------------

def test_a_pin_main_outgrows_is_stale_and_says_by_how_much():
    lock = {"baselines": {FRONT: {"kind": "frontier", "value": 100.0}, GUARD: {"kind": "guard", "value": 300.0}}}
    _, r = sealed(round_receipt(main=(115.0,) * 3, guard=(301.0,) * 3))
    (f,) = K.stale_findings(lock, Receipt.from_dict(r), 0.02)
    assert (f.slot, f.pinned, f.measured, round(f.by, 4)) == (FRONT, 100.0, 115.0, 0.15)
    assert "+15.0%" in f.message


def test_unmeasured_pins_are_not_stale():
    _, r = sealed(round_receipt())
    assert K.stale_findings({}, Receipt.from_dict(r), 0.02) == []


# --- verification ------------------------------------------------------------------

@pytest.fixture
def world():
    """A ledger of two rounds on two nodes and one noise round, and the lock they produce."""
    a_id, a = sealed(round_receipt(node="cpu-2core", n=1))
    b_id, b = sealed(round_receipt(node="h200x8", main=(50.0,) * 3, guard=(60.0,) * 3, n=2), a_id)
    n_id, n = sealed(noise_receipt(), b_id)
    receipts = {a_id: a, b_id: b, n_id: n}
    lock: dict = {}
    for rid, r in receipts.items():
        lock = K.apply_to_dict(lock, K.update_from_receipt(lock, rid, Receipt.from_dict(r), NOISE_OK if r["kind"] == "noise" else OK))
    assert verify_lock(lock, Receipts.read(receipts)) == []
    return lock, receipts, (a_id, b_id, n_id)


def test_a_noise_round_the_gate_did_not_accept_moves_no_noise_pin():
    n_id, n = sealed(noise_receipt(spread=0.001))
    ch = K.update_from_receipt({"noise": {"cpu-2core": {"spread": 0.05}}}, n_id, Receipt.from_dict(n), VerdictRecord.from_dict({"outcome": "infra"}))
    assert [c.action for c in ch] == ["hold"] and "infra" in ch[0].reason


def one(problems):
    assert len(problems) == 1, problems
    return problems[0]


def test_a_hand_edited_value_is_named(world):
    lock, receipts, (a_id, _, _) = world
    lock["baselines"][FRONT]["value"] = 250.0
    p = one(verify_lock(lock, Receipts.read(receipts)))
    assert (p.code, p.slot, p.receipt) == ("value-mismatch", FRONT, a_id) and "201" in p.message


def test_a_value_without_a_receipt_is_named(world):
    lock, receipts, _ = world
    lock["baselines"][FRONT]["receipt"] = ""
    assert one(verify_lock(lock, Receipts.read(receipts))).code == "unsourced"


def test_a_slot_citing_a_missing_receipt_is_named(world):
    lock, receipts, (a_id, _, _) = world
    del receipts[a_id]
    probs = verify_lock(lock, Receipts.read(receipts))
    assert {(p.code, p.slot) for p in probs} == {("receipt-not-in-ledger", FRONT), ("receipt-not-in-ledger", GUARD)}


def test_a_slot_citing_another_nodes_receipt_is_named(world):
    lock, receipts, (a_id, b_id, _) = world
    lock["baselines"][FRONT]["receipt"] = b_id
    p = one(verify_lock(lock, Receipts.read(receipts)))
    assert p.code == "axis-mismatch" and "h200x8" in p.message


def test_a_slot_citing_a_receipt_of_another_depth_is_named(world):
    lock, receipts, (a_id, _, _) = world
    lock["baselines"]["demo/cpu-2core/main/decode_tok_s/ctx131072"] = copy.deepcopy(lock["baselines"][FRONT])
    assert one(verify_lock(lock, Receipts.read(receipts))).code == "axis-mismatch"


def test_a_guard_citing_a_frontier_measurement_is_named(world):
    lock, receipts, _ = world
    lock["baselines"][FRONT]["kind"] = "guard"
    assert one(verify_lock(lock, Receipts.read(receipts))).code == "kind-mismatch"


def test_a_slot_citing_a_noise_receipt_is_named(world):
    lock, receipts, (_, _, n_id) = world
    lock["baselines"][FRONT]["receipt"] = n_id
    assert one(verify_lock(lock, Receipts.read(receipts))).code == "wrong-receipt"


def test_noise_provenance_is_checked(world):
    lock, receipts, (a_id, _, _) = world
    lock["noise"]["cpu-2core"]["spread"] = 0.001
    assert one(verify_lock(lock, Receipts.read(receipts))).code == "value-mismatch"
    lock["noise"]["cpu-2core"]["receipt"] = a_id
    assert one(verify_lock(lock, Receipts.read(receipts))).code == "wrong-receipt"
    lock["noise"]["h200x8"] = dict(lock["noise"].pop("cpu-2core"), receipt=[*receipts][2], spread=0.012)
    assert one(verify_lock(lock, Receipts.read(receipts))).code == "axis-mismatch"


@pytest.mark.parametrize("entry, code", [
    ({"kind": "frontier", "value": -1.0}, "bad-value"),
    ({"kind": "frontier", "value": float("nan")}, "bad-value"),
    ({"kind": "basis", "value": 0.0}, "bad-kind"),
    ({"kind": "guard", "value": 0.0, "attested": "lots"}, "bad-attested"),
])
def test_malformed_entries_are_named(entry, code):
    assert one(verify_lock({"baselines": {FRONT: entry}}, Receipts.read({}))).code == code


def test_a_malformed_slot_name_is_named():
    assert one(verify_lock({"baselines": {"LLAMA_128K": {"kind": "frontier", "value": 0}}}, Receipts.read({}))).code == "bad-slot"


def test_zero_is_always_legal():
    assert verify_lock({"baselines": {FRONT: {"kind": "frontier", "value": 0, "receipt": "nowhere"}}}, Receipts.read({})) == []


def test_stale_pins_are_reported_but_not_fatal(world):
    lock, receipts, (_, _, n_id) = world
    c_id, c = sealed(round_receipt(main=(200.0, 201.0, 202.0), guard=(400.0,) * 3, n=3), n_id)
    receipts[c_id] = c
    p = one(verify_lock(lock, Receipts.read(receipts)))
    assert (p.code, p.slot, p.fatal, p.receipt) == ("pin-stale", GUARD, False, c_id)


def test_lock_verify_against_a_real_ledger(tmp_path):
    ids = [store.seal_into(tmp_path, round_receipt(main=(v,) * 3, n=i)) for i, v in enumerate([200.0, 220.0, 210.0])]
    doc = F.loads(LOCK_TEXT)
    for rid, r in store.ledger_receipts(tmp_path).items():
        F.apply_changes(doc, K.update_from_receipt(F.model(doc), rid, r, OK))
    store.write_lock(tmp_path / "reference.lock", doc)
    m = F.model(store.read_lock(tmp_path / "reference.lock"))
    assert m["baselines"][FRONT]["receipt"] == ids[1] and m["baselines"][FRONT]["value"] == 220.0
    assert verify_lock(m, store.ledger_receipts(tmp_path)) == []
    # a byte changed in the cited receipt: the ledger drops it, and the pin loses its source
    f = tmp_path / "receipts" / f"{ids[1]}.json"
    f.write_bytes(f.read_bytes().replace(b"220.0", b"230.0"))
    assert {p.code for p in verify_lock(m, store.ledger_receipts(tmp_path))} == {"receipt-not-in-ledger"}


def test_a_pin_citing_an_infra_round_is_named(world):
    lock, receipts, (a_id, _, _) = world
    receipts[a_id] = dict(receipts[a_id], status="infra")
    assert {p.code for p in verify_lock(lock, Receipts.read(receipts))} == {"wrong-receipt"}


def test_a_round_refuses_a_hand_filled_pin_before_building(tmp_path):
    from console import events as ev
    from console.results import lockfile
    from console.engine import sources
    from console.paths import DEMO_CANDIDATES, DEMO_MAIN, DEMO_PROFILE
    from console.profile import load_profile
    from console.round import Round, RoundConfig
    profile = load_profile(DEMO_PROFILE)
    lock = lockfile.ensure(tmp_path / "reference.lock", profile)
    doc = store.read_lock(lock)
    doc["baselines"][K.guard_slots(profile)["decode_ctx128"]]["value"] = 1.0      # a floor nobody measured
    store.write_lock(lock, doc)
    cfg = RoundConfig(profile=profile, main=sources.parse_spec(str(DEMO_MAIN)),
                      candidate=("patch", str(DEMO_CANDIDATES / "fast.patch")), out_dir=tmp_path,
                      runtime="local", reps=2, lock_path=lock)
    rnd = Round(cfg)
    events = list(rnd.events())
    assert rnd.exit_code == 2
    assert not any(isinstance(e, ev.BuildStarted) for e in events)
    [end] = [e for e in events if isinstance(e, ev.RoundEnded)]
    assert "ctx128" in end.message and "unsourced" in end.message


# --- schema 2: a pin rises only on what main's measurement supports; noise pools ------------

def round_v2(main, n=0, node="cpu-2core"):
    r = round_receipt(main=main, cand=main, guard=(300.0, 301.0, 302.0), n=n, node=node, schema=SCHEMA)
    r["reps"] += reps("main", "short", [v * 1.0 for v in main[:4]], 4096, tokens=48) \
        + reps("candidate", "short", [v * 1.0 for v in main[:4]], 4096, tokens=48)
    return r


def noise_v2(ratios, node="cpu-2core", n=0):
    """A noise round whose k-th candidate rep is the k-th main rep times ratios[k]."""
    main = [200.0 + i for i in range(len(ratios))]
    cand = [m * q for m, q in zip(main, ratios)]
    r = round_receipt(main=main, cand=cand, node=node, n=n, schema=SCHEMA)
    r.update(kind="noise", round_id=f"N{n}")
    r["reps"] = [x for x in r["reps"] if x["phase"] == "timed"] \
        + reps("main", "short", main[:3], 4096, tokens=48) + reps("candidate", "short", cand[:3], 4096, tokens=48)
    return r


def test_a_schema_2_pin_is_main_s_lower_confidence_bound_not_its_median():
    rid, r = sealed(round_v2((200.0, 180.0, 220.0, 205.0, 195.0)))
    m = K.measure(Receipt.from_dict(r), K.slots_of(r["profile"])[FRONT])
    assert m.bound and m.value < 200.0 and m.value == K.pin(K.lower_bound([200.0, 180.0, 220.0, 205.0, 195.0], 0.01))
    (front,) = [c for c in K.update_from_receipt({}, rid, Receipt.from_dict(r), OK) if c.key == FRONT]
    assert front.action == "set" and front.new == m.value and "lower bound" in front.reason


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(50.0, 500.0), min_size=3, max_size=12), st.floats(50.0, 500.0))
def test_a_pin_never_rises_on_a_round_whose_main_measurement_does_not_support_it(values, old):
    rid, r = sealed(round_v2(tuple(values)))
    lock = {"baselines": {FRONT: {"kind": "frontier", "value": K.pin(old), "receipt": "x", "measured_at": ""},
                          GUARD: {"kind": "guard", "value": K.pin(old), "receipt": "x", "measured_at": ""}}}
    bound = {FRONT: K.pin(K.lower_bound(list(values), 0.01)), GUARD: K.pin(K.lower_bound([300.0, 301.0, 302.0], 0.01))}
    for c in K.update_from_receipt(lock, rid, Receipt.from_dict(r), OK):
        if c.moves:
            assert c.new == bound[c.key] > K.pin(old)   # supported: its lower bound clears the old pin
        else:
            assert bound[c.key] <= K.pin(old)           # held: it does not


def test_a_lucky_median_above_the_pin_does_not_raise_it():
    # median 205 > pin 200, but five noisy reps do not support more than ~183
    rid, r = sealed(round_v2((205.0, 170.0, 240.0, 208.0, 190.0)))
    lock = {"baselines": {FRONT: {"kind": "frontier", "value": 200.0, "receipt": "x", "measured_at": ""}}}
    (front,) = [c for c in K.update_from_receipt(lock, rid, Receipt.from_dict(r), OK) if c.key == FRONT]
    assert front.action == "hold" and "supports" in front.reason


def test_node_noise_pools_over_its_noise_rounds_and_a_quiet_round_does_not_replace_a_loud_one():
    loud_id, loud = sealed(noise_v2([1.10, 0.90, 1.12, 0.88, 1.05, 0.95]))
    quiet_id, quiet = sealed(noise_v2([1.001, 0.999, 1.002, 0.998], n=1), loud_id)
    ledger = {loud_id: loud, quiet_id: quiet}
    (c1,) = K.update_from_receipt({}, loud_id, Receipt.from_dict(loud), NOISE_OK, ledger=Receipts.read(ledger))
    lock = K.apply_to_dict({}, [c1])
    (c2,) = K.update_from_receipt(lock, quiet_id, Receipt.from_dict(quiet), NOISE_OK, ledger=Receipts.read(ledger))
    lock = K.apply_to_dict(lock, [c2])
    entry = lock["noise"]["cpu-2core"]
    assert entry["receipts"] == [loud_id, quiet_id] and entry["df"] == 5 + 3
    assert c2.action == "pool" and c1.new * 0.7 < entry["sd"] < c1.new     # diluted, not replaced
    assert verify_lock(lock, Receipts.read(ledger)) == []
    bad = copy.deepcopy(lock)
    bad["noise"]["cpu-2core"]["sd"] = 0.001
    assert [p.code for p in verify_lock(bad, Receipts.read(ledger))] == ["value-mismatch"]
    gone = copy.deepcopy(lock)
    gone["noise"]["cpu-2core"]["receipts"] = [loud_id, "f" * 64]
    assert [p.code for p in verify_lock(gone, Receipts.read(ledger))] == ["receipt-not-in-ledger"]


# --- nodes: a pin is the node's that measured it ----------------------------------------------

V1 = Path(__file__).resolve().parent / "data" / "receipts-v1"      # sealed by an older version
EPYC = {"cpu_model": "AMD EPYC 7763 64-Core Processor", "cores": 2, "gpus": []}
XEON = {"cpu_model": "Intel(R) Xeon(R) Platinum 8480+", "cores": 16,
        "gpus": [{"index": 0, "uuid": "GPU-1", "name": "NVIDIA H200"}], "gpu_driver": "550.54.15"}


def on(host, receipt):
    return {**receipt, "host": dict(host)}


@pytest.fixture
def demo_lock(tmp_path):
    from console.paths import DEMO_PROFILE
    from console.profile import load_profile
    profile = load_profile(DEMO_PROFILE)
    path = tmp_path / "reference.lock"
    store.atomic_write(path, F.new_lock_text(profile).encode())
    return profile, path


def seal_and_update(out, path, profile, receipt):
    verdict = OK if receipt["kind"] == "round" else NOISE_OK
    rid = store.seal_into(out, {**receipt, "verdict": verdict.to_dict()})
    moved, _ = F.update(path, rid, store.ledger_receipts(out)[rid], profile, ledger_dir=out)
    return rid, moved


def test_a_pin_records_the_node_of_the_receipt_that_set_it():
    rid, r = sealed(on(EPYC, round_receipt()))
    lock = K.apply_to_dict({}, K.update_from_receipt({}, rid, Receipt.from_dict(r), OK))
    node = of_host(EPYC)
    assert lock["baselines"][FRONT]["fingerprint"] == node.digest
    assert lock["baselines"][FRONT]["node_facts"] == dict(node.facts)


def test_a_round_on_another_node_passes_the_pin_over_says_why_and_keeps_its_own_apart(tmp_path, demo_lock):
    profile, path = demo_lock
    epyc, xeon = of_host(EPYC), of_host(XEON)
    a_id, _ = seal_and_update(tmp_path, path, profile, on(EPYC, round_receipt(main=(200.0, 201.0, 202.0))))
    pins = F.pins_for(path, profile, xeon, ledger_dir=tmp_path)
    assert pins["frontier"] == 0.0 and pins["guards"] == {"decode_ctx128": 0.0}
    over = {x["key"]: x for x in pins["passed_over"]}
    assert set(over) == {FRONT, GUARD} and over[FRONT]["value"] == 201.0 and over[FRONT]["fingerprint"] == epyc.digest
    assert "cores 2 there, 16 here" in over[FRONT]["differs"] and "gpus 0 there, 1 here" in over[FRONT]["differs"]
    said = K.passed_over_sentence(over[FRONT], xeon.digest)
    assert FRONT in said and "not used" in said and epyc.digest in said and xeon.digest in said
    # the round on the Xeon moves only its own pins, kept apart under <slot>@<fingerprint>
    _, moved = seal_and_update(tmp_path, path, profile, on(XEON, round_receipt(main=(50.0,) * 3, guard=(60.0,) * 3, n=1)))
    assert {c.key for c in moved} == {f"{FRONT}@{xeon.digest}", f"{GUARD}@{xeon.digest}"}
    assert all("kept apart from" in c.reason and "cores 2 there" in c.reason for c in moved)
    m = F.model(store.read_lock(path))
    assert (m["baselines"][FRONT]["value"], m["baselines"][FRONT]["receipt"]) == (201.0, a_id)
    assert m["baselines"][f"{FRONT}@{xeon.digest}"]["value"] == 50.0
    # each node reads its own pins; the lock still traces to the ledger
    assert F.pins_for(path, profile, epyc, ledger_dir=tmp_path)["frontier"] == 201.0
    mine = F.pins_for(path, profile, xeon, ledger_dir=tmp_path)
    assert (mine["frontier"], mine["frontier_slot"], mine["passed_over"]) == (50.0, f"{FRONT}@{xeon.digest}", [])
    assert verify_lock(m, store.ledger_receipts(tmp_path)) == []
    # and the first node's next round raises its own pin, not the other's
    _, moved = seal_and_update(tmp_path, path, profile, on(EPYC, round_receipt(main=(210.0,) * 3, n=2)))
    assert [c.key for c in moved if c.kind == "frontier"] == [FRONT]


def test_a_pin_written_before_fingerprints_belongs_to_the_node_of_its_receipt(tmp_path, demo_lock):
    profile, path = demo_lock
    seal_and_update(tmp_path, path, profile, on(EPYC, round_receipt()))
    doc = store.read_lock(path)
    for entry in doc["baselines"].values():        # as an older version wrote it
        for k in ("fingerprint", "node_facts"):
            entry.pop(k, None)
    store.write_lock(path, doc)
    assert verify_lock(F.model(doc), store.ledger_receipts(tmp_path)) == []
    assert F.pins_for(path, profile, of_host(EPYC), ledger_dir=tmp_path)["frontier"] == 201.0
    other = F.pins_for(path, profile, of_host(XEON), ledger_dir=tmp_path)
    assert other["frontier"] == 0.0 and other["passed_over"][0]["fingerprint"] == of_host(EPYC).digest
    # its node's next round records the fingerprint on the same entry
    _, moved = seal_and_update(tmp_path, path, profile, on(EPYC, round_receipt(main=(220.0,) * 3, n=1)))
    assert FRONT in {c.key for c in moved}
    assert F.model(store.read_lock(path))["baselines"][FRONT]["fingerprint"] == of_host(EPYC).digest


def test_the_committed_older_lock_still_reads_on_its_own_node_and_not_on_another():
    v1 = V1
    receipts = store.ledger_receipts(v1)
    lock = F.model(store.read_lock(v1 / "reference.lock"))
    r = next(iter(receipts.values()))
    here = K.node_pins(lock, r.profile.to_dict(), of_receipt(r), receipts)
    assert here["frontier"] == 115.728 and here["noise_spread"] == 0.12183 and here["passed_over"] == []
    there = K.node_pins(lock, r.profile.to_dict(), of_host(XEON), receipts)
    assert there["frontier"] == 0.0 and there["noise_spread"] is None and len(there["passed_over"]) == 3
    assert verify_lock(lock, Receipts.read(receipts)) == []


def test_noise_of_another_node_is_kept_apart_and_pools_only_with_its_own_node():
    a_id, a = sealed(on(EPYC, noise_v2([1.10, 0.90, 1.12, 0.88, 1.05, 0.95])))
    b_id, b = sealed(on(XEON, noise_v2([1.001, 0.999, 1.002, 0.998], n=1)), a_id)
    ledger = {a_id: a, b_id: b}
    lock = K.apply_to_dict({}, K.update_from_receipt({}, a_id, Receipt.from_dict(a), NOISE_OK, ledger=Receipts.read(ledger)))
    (c,) = K.update_from_receipt(lock, b_id, Receipt.from_dict(b), NOISE_OK, ledger=Receipts.read(ledger))
    assert (c.key, c.action) == (f"cpu-2core@{of_host(XEON).digest}", "set")
    lock = K.apply_to_dict(lock, [c])
    assert lock["noise"]["cpu-2core"]["receipts"] == [a_id] and lock["noise"][c.key]["receipts"] == [b_id]
    assert verify_lock(lock, Receipts.read(ledger)) == []
    profile = a["profile"]
    assert K.node_pins(lock, profile, of_host(XEON), ledger)["noise_sd"] == lock["noise"][c.key]["sd"]
    assert K.node_pins(lock, profile, of_host(EPYC), ledger)["noise_sd"] == lock["noise"]["cpu-2core"]["sd"]


@pytest.mark.parametrize("edit, code", [
    (lambda e, xeon: e.update(fingerprint=xeon.digest, node_facts=dict(xeon.facts)), "fingerprint-mismatch"),
    (lambda e, xeon: e["node_facts"].update(cores=64), "bad-fingerprint"),
    (lambda e, xeon: e.update(fingerprint=""), "bad-fingerprint"),
])
def test_lock_verify_names_a_recorded_node_that_is_not_the_receipt_s(edit, code):
    rid, r = sealed(on(EPYC, round_receipt()))
    lock = K.apply_to_dict({}, K.update_from_receipt({}, rid, Receipt.from_dict(r), OK))
    edit(lock["baselines"][FRONT], of_host(XEON))
    p = [p for p in verify_lock(lock, Receipts.read({rid: r})) if p.slot == FRONT]
    assert [x.code for x in p] == [code]


def test_a_key_kept_apart_for_one_node_must_record_that_node():
    rid, r = sealed(on(EPYC, round_receipt()))
    lock = K.apply_to_dict({}, K.update_from_receipt({}, rid, Receipt.from_dict(r), OK))
    lock["baselines"][f"{FRONT}@{of_host(XEON).digest}"] = lock["baselines"].pop(FRONT)
    p = one([p for p in verify_lock(lock, Receipts.read({rid: r})) if p.fatal])
    assert p.code == "bad-fingerprint" and of_host(XEON).digest in p.message


def test_stale_pins_are_judged_against_rounds_of_their_own_node():
    a_id, a = sealed(on(EPYC, round_receipt(main=(200.0, 201.0, 202.0))))
    b_id, b = sealed(on(XEON, round_receipt(main=(400.0,) * 3, guard=(900.0,) * 3, n=1)), a_id)
    lock = K.apply_to_dict({}, K.update_from_receipt({}, a_id, Receipt.from_dict(a), OK))
    assert verify_lock(lock, Receipts.read({a_id: a, b_id: b})) == []          # the Xeon's faster main says nothing of it
    assert K.stale_findings(lock, Receipt.from_dict(b), 0.02, Receipts.read({a_id: a})) == []


def test_lock_show_lists_each_node_with_its_facts_and_pins(tmp_path, demo_lock, capsys):
    from console.cli import main
    profile, path = demo_lock
    seal_and_update(tmp_path, path, profile, on(EPYC, round_receipt()))
    seal_and_update(tmp_path, path, profile, on(XEON, round_receipt(main=(50.0,) * 3, n=1)))
    assert main(["lock", "show", str(path)]) == 0
    out = capsys.readouterr().out
    tomlkit.parse(out)                                       # the nodes are comments: still the lock
    xeon = of_host(XEON).digest
    assert f"# node {of_host(EPYC).digest}: AMD EPYC 7763 64-Core Processor x2 cores, no GPU" in out
    assert f"# node {xeon}: Intel(R) Xeon(R) Platinum 8480+ x16 cores, 1 x NVIDIA H200, driver 550" in out
    assert f"#   baselines {FRONT}@{xeon}" in out and f"#   baselines {FRONT}\n" in out


def test_lock_show_names_the_node_of_older_pins_from_the_ledger(capsys):
    from console.cli import main
    v1 = V1
    assert main(["lock", "show", str(v1 / "reference.lock")]) == 0
    assert "its receipt is not at hand: --ledger DIR names its node" in capsys.readouterr().out
    assert main(["lock", "show", str(v1 / "reference.lock"), "--ledger", str(v1)]) == 0
    out = capsys.readouterr().out
    assert "# node " in out and "AMD EPYC x2 cores, no GPU" in out and "the node of its receipt" in out


# --- experiment identities: a pin is read only by rounds that measure what it measured ----------

def measured_as(receipt, runtime="docker", **run):
    """``receipt`` as a round seals it now: its runtime and the [run] and [image] it used."""
    r = copy.deepcopy(receipt)
    r["profile"]["run"] = {"cpus": 4.0, "memory": "1g", **run}
    r["profile"]["image"] = {"base": "bench-console/base:bookworm", "compiler": "gcc 12.2.0"}
    r["runtime"] = {"kind": runtime}
    return r


def identity_of(receipt):
    from console.core.provenance import identity
    return identity.of_receipt(Receipt.from_dict(receipt))


def test_a_local_round_does_not_read_a_docker_round_s_pin_and_keeps_its_own_apart(tmp_path, demo_lock):
    profile, path = demo_lock
    epyc = of_host(EPYC)
    docker = on(EPYC, measured_as(round_receipt(main=(200.0, 201.0, 202.0))))
    local = on(EPYC, measured_as(round_receipt(main=(150.0,) * 3, guard=(160.0,) * 3, n=1), runtime="local"))
    d_id, _ = seal_and_update(tmp_path, path, profile, docker)
    ident = identity_of(local)
    pins = F.pins_for(path, profile, epyc, ledger_dir=tmp_path, ident=ident)
    assert pins["frontier"] == 0.0 and pins["frontier_slot"] == f"{FRONT}@{epyc.digest}+{ident.digest}"
    over = {x["key"]: x for x in pins["passed_over"]}
    assert set(over) == {FRONT, GUARD} and over[FRONT]["value"] == 201.0
    assert over[FRONT]["differs"] == "runtime docker not local" and K.passed_over_code(over[FRONT]) == "pin-other-identity"
    assert "another experiment identity" in K.passed_over_sentence(over[FRONT], epyc.digest)
    _, moved = seal_and_update(tmp_path, path, profile, local)
    assert {c.key for c in moved} == {f"{FRONT}@{epyc.digest}+{ident.digest}", f"{GUARD}@{epyc.digest}+{ident.digest}"}
    assert all("kept apart from" in c.reason and "runtime docker not local" in c.reason for c in moved)
    m = F.model(store.read_lock(path))
    assert (m["baselines"][FRONT]["value"], m["baselines"][FRONT]["receipt"]) == (201.0, d_id)
    assert m["baselines"][FRONT]["identity_parts"]["runtime"] == "docker"
    assert verify_lock(m, store.ledger_receipts(tmp_path)) == []
    # each runtime reads its own pin
    assert F.pins_for(path, profile, epyc, ledger_dir=tmp_path, ident=identity_of(docker))["frontier"] == 201.0
    assert F.pins_for(path, profile, epyc, ledger_dir=tmp_path, ident=ident)["frontier"] == 150.0


def test_an_edited_profile_reads_not_the_old_pins_and_says_which_section_changed(tmp_path, demo_lock):
    profile, path = demo_lock
    seal_and_update(tmp_path, path, profile, on(EPYC, measured_as(round_receipt())))
    ident = identity_of(on(EPYC, measured_as(round_receipt(n=1), cpus=2.0)))
    (x, _) = F.pins_for(path, profile, of_host(EPYC), ledger_dir=tmp_path, ident=ident)["passed_over"]
    assert "profile's measured sections" in x["differs"] and "(run.cpus 4.0 not 2.0)" in x["differs"]


def test_an_old_pin_without_an_identity_is_no_frontier_for_a_round_that_has_one(tmp_path, demo_lock):
    profile, path = demo_lock
    seal_and_update(tmp_path, path, profile, on(EPYC, round_receipt()))          # sealed as before identities
    assert "identity" not in F.model(store.read_lock(path))["baselines"][FRONT]
    epyc = of_host(EPYC)
    assert F.pins_for(path, profile, epyc, ledger_dir=tmp_path)["frontier"] == 201.0     # read as before
    new = on(EPYC, measured_as(round_receipt(main=(210.0,) * 3, n=1)))
    pins = F.pins_for(path, profile, epyc, ledger_dir=tmp_path, ident=identity_of(new))
    assert pins["frontier"] == 0.0
    assert {x["differs"] for x in pins["passed_over"]} == {"written before experiment identities (it records none)"}
    _, moved = seal_and_update(tmp_path, path, profile, new)
    assert {c.action for c in moved} == {"set"} and all("+" in c.key for c in moved)
    assert verify_lock(F.model(store.read_lock(path)), store.ledger_receipts(tmp_path)) == []


@pytest.mark.parametrize("edit, code", [
    (lambda e, other: e.update(identity=other.digest, identity_parts=dict(other.parts)), "identity-mismatch"),
    (lambda e, other: e["identity_parts"].update(runtime="local"), "bad-identity"),
    (lambda e, other: e.update(identity=""), "bad-identity"),
])
def test_lock_verify_names_a_recorded_identity_that_is_not_the_receipt_s(edit, code):
    rid, r = sealed(on(EPYC, measured_as(round_receipt())))
    lock = K.apply_to_dict({}, K.update_from_receipt({}, rid, Receipt.from_dict(r), OK))
    assert verify_lock(lock, Receipts.read({rid: r})) == []
    edit(lock["baselines"][FRONT], identity_of(measured_as(round_receipt(), runtime="local")))
    assert [x.code for x in verify_lock(lock, Receipts.read({rid: r})) if x.slot == FRONT] == [code]


def test_a_key_kept_apart_for_one_identity_must_record_it():
    rid, r = sealed(on(EPYC, measured_as(round_receipt())))
    lock = K.apply_to_dict({}, K.update_from_receipt({}, rid, Receipt.from_dict(r), OK))
    other = identity_of(measured_as(round_receipt(), runtime="local"))
    lock["baselines"][f"{FRONT}@{of_host(EPYC).digest}+{other.digest}"] = lock["baselines"].pop(FRONT)
    p = one([p for p in verify_lock(lock, Receipts.read({rid: r})) if p.fatal])
    assert p.code == "bad-identity" and other.digest in p.message


def test_stale_pins_are_judged_against_rounds_of_their_own_identity():
    a_id, a = sealed(on(EPYC, measured_as(round_receipt(main=(200.0, 201.0, 202.0)))))
    b_id, b = sealed(on(EPYC, measured_as(round_receipt(main=(400.0,) * 3, guard=(900.0,) * 3, n=1),
                                          runtime="local")), a_id)
    lock = K.apply_to_dict({}, K.update_from_receipt({}, a_id, Receipt.from_dict(a), OK))
    assert verify_lock(lock, Receipts.read({a_id: a, b_id: b})) == []          # the local round's faster main says nothing of it
    assert K.stale_findings(lock, Receipt.from_dict(b), 0.02, Receipts.read({a_id: a})) == []


def test_lock_keys_split_into_slot_node_and_identity():
    fp, ident = "8aa07922da28", "0123456789ab"
    assert K.split_key(K.node_key(FRONT, fp, ident)) == (FRONT, fp, ident)
    assert K.split_key(K.node_key(FRONT, fp)) == (FRONT, fp, "")
    assert K.split_key(FRONT) == (FRONT, "", "") and K.split_key(f"{FRONT}@{fp}+x") == (f"{FRONT}@{fp}+x", "", "")
