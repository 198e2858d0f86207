"""Reruns of one candidate: which sealed rounds pool, and what the ledger checks about them."""
import copy

from console.core.provenance.ledger import Receipts
from console.core.provenance import identity
from console.core.provenance import ledger as L
from console.core.provenance import reruns
from console.core.records.facts import HostFacts, RuntimeFacts
from console.core.records.receipt import ProfileRecord, Receipt

from .receipts import make_receipt

TREES = {"main": "m" * 64, "candidate": "c" * 64}
RUN = {"cpus": 4.0, "memory": "1g", "pids": 64, "timeout_s": 120.0, "gpus": "none"}
IMAGE = {"base": "bench-console/base:bookworm", "compiler": "gcc (Debian 12.2.0-14+deb12u1) 12.2.0",
         "build": "make", "host": {"compiler": "", "path": []}}


def sealed(r, prev=None):
    s = L.seal(r, prev, "2026-12-03T00:00:00Z")
    return s.id, s.receipt


def with_experiment(r, exp="e1", prior=()):
    r["sequential"] = {"prior": list(prior), "experiment": exp, "preview": None, "stopped": "decided"}
    return r


def _profile(**run):
    return ProfileRecord(name="demo", node="cpu-2core", bench={"metric": "decode_tok_s", "depth": 4096, "tokens": 192},
                         run={**RUN, **run}, image=IMAGE)


def _ident(p, runtime="docker"):
    return identity.of(p, RuntimeFacts(kind=runtime), HostFacts(), None)


def test_the_experiment_is_the_profile_node_metric_both_trees_and_what_is_measured():
    p = _profile()
    a = reruns.experiment(p, TREES, _ident(p))
    assert a == reruns.experiment(p, TREES, _ident(p))
    assert a != reruns.experiment(p, {"main": "m" * 64, "candidate": "d" * 64}, _ident(p))
    other = ProfileRecord(name="demo", node="h200", bench=p.bench, run=p.run, image=p.image)
    assert a != reruns.experiment(other, TREES, _ident(other))
    assert a != reruns.experiment(p, TREES, _ident(p, "local"))                  # the runtime
    threads = _profile(cpus=2.0)
    assert a != reruns.experiment(threads, TREES, _ident(threads))              # a measured section
    rules = ProfileRecord(name="demo", node="cpu-2core", bench=p.bench, run=p.run, image=p.image, sha256="f" * 64,
                          parity={"depths": [4, 8]}, rules=p.rules)
    assert a == reruns.experiment(rules, TREES, _ident(rules))     # the file's hash and [parity] are not measured
    more_reps = ProfileRecord(name="demo", node="cpu-2core", bench={**p.bench, "reps": 40}, run=p.run, image=p.image)
    assert a == reruns.experiment(more_reps, TREES, _ident(more_reps))           # how many runs, not what one measures


def test_a_round_sealed_before_the_identity_keeps_the_experiment_it_recorded():
    old = ProfileRecord(name="demo", node="cpu-2core", bench={"metric": "decode_tok_s", "depth": 4096, "tokens": 192})
    # the digest such a round recorded: profile, node, metric, depth, tokens and both trees, nothing more
    import hashlib
    import json
    before = {"profile": "demo", "node": "cpu-2core", "metric": "decode_tok_s", "depth": 4096, "tokens": 192, **TREES}
    assert reruns.experiment(old, TREES, _ident(old)) == hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()
    assert reruns.experiment(old, TREES, _ident(old, "local")) == reruns.experiment(old, TREES, _ident(old))


def test_earlier_rounds_of_the_experiment_pool_and_infra_rounds_do_not():
    a_id, a = sealed(with_experiment(make_receipt()))
    b_id, b = sealed(with_experiment(make_receipt(status="infra")), a_id)
    c_id, c = sealed(with_experiment(make_receipt(), exp="other"), b_id)
    prior = reruns.prior_rounds(Receipts.read({a_id: a, b_id: b, c_id: c}), "e1")
    assert [p.receipt for p in prior] == [a_id] and len(prior[0].log_ratios) == 8


def test_the_ledger_checks_every_pooled_round_a_receipt_cites():
    a_id, a = sealed(with_experiment(make_receipt()))
    (pr,) = reruns.prior_rounds(Receipts.read({a_id: a}), "e1")
    b_id, b = sealed(with_experiment(make_receipt(), prior=[pr.to_dict()]), a_id)
    assert reruns.prior_problems(Receipts.read({a_id: a, b_id: b})) == []
    forged = copy.deepcopy(b)
    forged["sequential"]["prior"][0]["log_ratios"][0] += 0.05
    assert [p.code for p in reruns.prior_problems(Receipts.read({a_id: a, b_id: forged}))] == ["prior-pairs-differ"]
    assert [p.code for p in reruns.prior_problems(Receipts.read({b_id: b}))] == ["prior-not-in-ledger"]
    moved = copy.deepcopy(b)
    moved["sequential"]["experiment"] = "e2"
    assert [p.code for p in reruns.prior_problems(Receipts.read({a_id: a, b_id: moved}))] == ["prior-other-experiment"]


def _of(r, trees, prior=(), fresh=False, runtime="docker", current=True, **run):
    """``r`` as a round seals it: its trees, runtime and (``current``) the [run] and [image] it used, and
    the experiment they make."""
    if current:
        r["profile"]["run"], r["profile"]["image"] = {**RUN, **run}, IMAGE
    r["runtime"]["kind"] = runtime
    r["builds"]["main"]["tree_sha256"], r["builds"]["candidate"]["tree_sha256"] = trees["main"], trees["candidate"]
    t = Receipt.from_dict(r)
    r = with_experiment(r, reruns.experiment(t.profile, trees, identity.of_receipt(t), t.kind), prior)
    r["sequential"]["fresh"] = fresh
    return r


def _look(ledger, trees=TREES, fresh=False, kind="round", runtime="docker", current=True, **run):
    """What a round of ``trees`` finds in ``ledger`` before it measures anything."""
    t = Receipt.from_dict(_of(make_receipt(kind=kind), trees, runtime=runtime, current=current, **run))
    return reruns.look_back(Receipts.read(ledger), t.profile, trees, identity.of_receipt(t), fresh=fresh, kind=kind)


def test_a_decided_experiment_says_by_which_round_and_its_exit_code():
    a_id, a = sealed(_of(make_receipt(), TREES))                  # accepted
    look = _look({a_id: a})
    assert look.decided_by[:3] == (a_id, a["round_id"], "accepted") and look.decided_by[3] == 0
    assert "rerun with --fresh" in look.decided_sentence().lower() and len(look.prior) == 1
    assert look.experiment == a["sequential"]["experiment"]
    fresh = _look({a_id: a}, fresh=True)
    assert (fresh.prior, fresh.decided_by, fresh.others, fresh.experiment) == ([], None, [], look.experiment)


def test_an_undecided_round_pools_and_a_fresh_round_starts_the_sequence_again():
    from .receipts import OUTCOME_RECEIPTS
    a_id, a = sealed(_of(OUTCOME_RECEIPTS["undecided"](), TREES))
    look = _look({a_id: a})
    assert look.decided_by is None and [p.receipt for p in look.prior] == [a_id]
    b_id, b = sealed(_of(OUTCOME_RECEIPTS["undecided"](), TREES, fresh=True), a_id)
    look = _look({a_id: a, b_id: b})
    assert [p.receipt for p in look.prior] == [b_id]


def test_rounds_of_another_experiment_pool_nothing_and_say_why():
    other = {"main": "m" * 64, "candidate": "d" * 64}
    a_id, a = sealed(_of(make_receipt(), other))
    look = _look({a_id: a})
    assert look.prior == [] and look.decided_by is None
    assert len(look.others) == 1 and "candidate dddddddddddd not cccccccccccc" in look.others[0]


def test_an_undecided_round_whose_pairs_changed_level_does_not_pool():
    from .receipts import MAIN
    main = MAIN * 2
    wobble = tuple(1 + 0.02 * (-1) ** k for k in range(8))         # too noisy to decide in 16 pairs
    cand = tuple(m * 1.05 * w for m, w in zip(main[:8], wobble)) + tuple(m * 0.95 * w for m, w in zip(main[8:], wobble))
    a_id, a = sealed(_of(make_receipt(main, cand, short_cand=tuple(x * 1.0 for x in MAIN[:3])), TREES))
    look = _look({a_id: a})
    assert look.prior == [] and look.decided_by is None


def _stepped(first: float, then: float):
    """16 pairs, ±2 % around ``first`` times main for 8 pairs, then around ``then``: the step check fires."""
    from .receipts import MAIN, _scaled
    main, wobble = MAIN * 2, tuple(1 + 0.02 * (-1) ** k for k in range(8))
    cand = tuple(m * first * w for m, w in zip(main[:8], wobble)) + tuple(m * then * w for m, w in zip(main[8:], wobble))
    return make_receipt(main, cand, short_cand=_scaled(MAIN[:3], 0.8),
                        guards={"decode_ctx128": (_scaled(MAIN[:3], 1.3), _scaled(MAIN[:3], 1.3))})


def test_a_round_decided_slower_beside_a_step_change_still_decides_its_reruns():
    from console.core.decisions.gate import decide
    from console.core.records.receipt import Receipt
    a_id, a = sealed(_of(_stepped(0.85, 0.72), TREES))
    r = Receipt.from_dict(a)
    v = decide(r, r.rules)
    assert v.outcome == "slower" and v.exit_code == 1 and "step-change" in {w.code for w in v.warnings}
    look = _look({a_id: a})
    assert look.decided_by == (a_id, a["round_id"], "slower", 1)
    assert look.prior == [] and reruns.prior_rounds(Receipts.read({a_id: a}), a["sequential"]["experiment"]) == []
    assert "its own pairs changed level mid-round" in look.decided_sentence()



def test_a_bisection_step_and_an_ordinary_round_of_the_same_trees_are_two_experiments():
    p = _profile()
    assert reruns.experiment(p, TREES, _ident(p)) == reruns.experiment(p, TREES, _ident(p), "round")
    assert reruns.experiment(p, TREES, _ident(p), "bisect") != reruns.experiment(p, TREES, _ident(p))
    a_id, a = sealed(_of(make_receipt(kind="bisect"), TREES))
    # an ordinary round of the same two trees is neither decided by the step nor pools with it
    look = _look({a_id: a})
    assert (look.prior, look.decided_by, look.others) == ([], None, [])
    # a second step of the same range reads the first one's decision
    look = _look({a_id: a}, kind="bisect")
    assert look.decided_by[:3] == (a_id, a["round_id"], "accepted") and len(look.prior) == 1


# --- the experiment identity: what is measured keys pooling -----------------------------------

def test_a_local_round_after_a_docker_round_of_the_same_trees_is_not_decided_by_it():
    a_id, a = sealed(_of(make_receipt(), TREES, runtime="docker"))         # accepted under Docker
    assert _look({a_id: a}, runtime="docker").decided_by is not None
    look = _look({a_id: a}, runtime="local")
    assert look.prior == [] and look.decided_by is None and look.experiment != a["sequential"]["experiment"]
    (why,) = look.others
    assert "runtime docker not local" in why and "candidate" not in why


def test_an_edited_profile_pools_nothing_with_its_old_rounds_and_names_the_change():
    a_id, a = sealed(_of(make_receipt(), TREES))                           # 4 threads
    look = _look({a_id: a}, cpus=2.0)
    assert look.prior == [] and look.decided_by is None
    (why,) = look.others
    assert "profile's measured sections" in why and "(run.cpus 4.0 not 2.0)" in why
    # the same edit again pools with the edited round
    b_id, b = sealed(_of(make_receipt(), TREES, cpus=2.0), a_id)
    assert [p.receipt for p in _look({a_id: a, b_id: b}, cpus=2.0).prior] == [b_id]


def test_rounds_sealed_before_the_identity_pool_with_their_like_not_with_rounds_now():
    a_id, a = sealed(_of(make_receipt(), TREES, current=False))
    old = _look({a_id: a}, current=False)
    assert old.decided_by is not None and [p.receipt for p in old.prior] == [a_id]
    look = _look({a_id: a})
    assert look.prior == [] and look.decided_by is None
    assert look.others == [f"round {a['round_id']} ({a_id[:12]}): sealed under an older experiment identity"]
    # and the ledger still vouches for an old round that pooled an older one
    (pr,) = reruns.prior_rounds(Receipts.read({a_id: a}), a["sequential"]["experiment"])
    b_id, b = sealed(_of(make_receipt(), TREES, current=False, prior=[pr.to_dict()]), a_id)
    assert reruns.prior_problems(Receipts.read({a_id: a, b_id: b})) == []


def test_the_gpu_model_and_files_are_part_of_the_identity():
    p = _profile()
    bare = identity.of(p, RuntimeFacts(kind="docker"), HostFacts(), None)
    h200 = identity.of(p, RuntimeFacts(kind="docker"), HostFacts.from_dict({"gpus": [{"name": "NVIDIA H200"}]}), None)
    assert h200.parts["gpu"] == "1 x NVIDIA H200" and bare.parts["gpu"] == ""
    assert bare.differences(h200) == ["gpu 1 x NVIDIA H200 not (none)"]
    from console.core.records.receipt import Inputs
    m1 = identity.of(p, RuntimeFacts(kind="docker"), HostFacts(), Inputs(model=[{"name": "m.gguf", "path": "/a", "sha256": "1" * 64}]))
    m2 = identity.of(p, RuntimeFacts(kind="docker"), HostFacts(), Inputs(model=[{"name": "m.gguf", "path": "/b", "sha256": "1" * 64}]))
    m3 = identity.of(p, RuntimeFacts(kind="docker"), HostFacts(), Inputs(model=[{"name": "m.gguf", "path": "/a", "sha256": "2" * 64}]))
    assert m1.digest == m2.digest != m3.digest        # where the file lies is not what it holds
    assert [d.split()[0] for d in m1.differences(m3)] == ["model"]
