"""Reruns of one candidate: which sealed rounds pool, and what the ledger checks about them."""
import copy

from console.core import ledger as L
from console.core import reruns
from console.core.receipt import ProfileRecord

from .receipts import make_receipt


def sealed(r, prev=None):
    s = L.seal(r, prev, "2026-12-03T00:00:00Z")
    return s.id, s.receipt


def with_experiment(r, exp="e1", prior=()):
    r["sequential"] = {"prior": list(prior), "experiment": exp, "preview": None, "stopped": "decided"}
    return r


def test_the_experiment_is_the_profile_node_metric_and_both_trees():
    p = ProfileRecord(name="demo", node="cpu-2core", bench={"metric": "decode_tok_s", "depth": 4096, "tokens": 192})
    a = reruns.experiment(p, {"main": "m" * 64, "candidate": "c" * 64})
    assert a == reruns.experiment(p, {"main": "m" * 64, "candidate": "c" * 64})
    assert a != reruns.experiment(p, {"main": "m" * 64, "candidate": "d" * 64})
    other = ProfileRecord(name="demo", node="h200", bench=p.bench)
    assert a != reruns.experiment(other, {"main": "m" * 64, "candidate": "c" * 64})


def test_earlier_rounds_of_the_experiment_pool_and_infra_rounds_do_not():
    a_id, a = sealed(with_experiment(make_receipt()))
    b_id, b = sealed(with_experiment(make_receipt(status="infra")), a_id)
    c_id, c = sealed(with_experiment(make_receipt(), exp="other"), b_id)
    prior = reruns.prior_rounds({a_id: a, b_id: b, c_id: c}, "e1")
    assert [p.receipt for p in prior] == [a_id] and len(prior[0].log_ratios) == 8


def test_the_ledger_checks_every_pooled_round_a_receipt_cites():
    a_id, a = sealed(with_experiment(make_receipt()))
    (pr,) = reruns.prior_rounds({a_id: a}, "e1")
    b_id, b = sealed(with_experiment(make_receipt(), prior=[pr.to_dict()]), a_id)
    assert reruns.prior_problems({a_id: a, b_id: b}) == []
    forged = copy.deepcopy(b)
    forged["sequential"]["prior"][0]["log_ratios"][0] += 0.05
    assert [p.code for p in reruns.prior_problems({a_id: a, b_id: forged})] == ["prior-pairs-differ"]
    assert [p.code for p in reruns.prior_problems({b_id: b})] == ["prior-not-in-ledger"]
    moved = copy.deepcopy(b)
    moved["sequential"]["experiment"] = "e2"
    assert [p.code for p in reruns.prior_problems({a_id: a, b_id: moved})] == ["prior-other-experiment"]


def _profile():
    return ProfileRecord(name="demo", node="cpu-2core", bench={"metric": "decode_tok_s", "depth": 4096, "tokens": 192})


def _of(r, trees, prior=(), fresh=False):
    r = with_experiment(r, reruns.experiment(_profile(), trees), prior)
    r["profile"] = {**r["profile"], "name": "demo", "node": "cpu-2core", "bench": {**r["profile"]["bench"], **_profile().bench}}
    r["builds"]["main"]["tree_sha256"], r["builds"]["candidate"]["tree_sha256"] = trees["main"], trees["candidate"]
    r["sequential"]["fresh"] = fresh
    return r


TREES = {"main": "m" * 64, "candidate": "c" * 64}


def test_a_decided_experiment_says_by_which_round_and_its_exit_code():
    a_id, a = sealed(_of(make_receipt(), TREES))                  # accepted
    look = reruns.look_back({a_id: a}, _profile(), TREES)
    assert look.decided_by[:3] == (a_id, a["round_id"], "accepted") and look.decided_by[3] == 0
    assert "rerun with --fresh" in look.decided_sentence().lower() and len(look.prior) == 1
    assert reruns.look_back({a_id: a}, _profile(), TREES, fresh=True) == reruns.LookBack([], None, [])


def test_an_undecided_round_pools_and_a_fresh_round_starts_the_sequence_again():
    from .receipts import OUTCOME_RECEIPTS
    a_id, a = sealed(_of(OUTCOME_RECEIPTS["undecided"](), TREES))
    look = reruns.look_back({a_id: a}, _profile(), TREES)
    assert look.decided_by is None and [p.receipt for p in look.prior] == [a_id]
    b_id, b = sealed(_of(OUTCOME_RECEIPTS["undecided"](), TREES, fresh=True), a_id)
    look = reruns.look_back({a_id: a, b_id: b}, _profile(), TREES)
    assert [p.receipt for p in look.prior] == [b_id]


def test_rounds_of_another_experiment_pool_nothing_and_say_why():
    other = {"main": "m" * 64, "candidate": "d" * 64}
    a_id, a = sealed(_of(make_receipt(), other))
    look = reruns.look_back({a_id: a}, _profile(), TREES)
    assert look.prior == [] and look.decided_by is None
    assert len(look.others) == 1 and "candidate dddddddddddd not cccccccccccc" in look.others[0]


def test_an_undecided_round_whose_pairs_changed_level_does_not_pool():
    from .receipts import MAIN
    main = MAIN * 2
    wobble = tuple(1 + 0.02 * (-1) ** k for k in range(8))         # too noisy to decide in 16 pairs
    cand = tuple(m * 1.05 * w for m, w in zip(main[:8], wobble)) + tuple(m * 0.95 * w for m, w in zip(main[8:], wobble))
    a_id, a = sealed(_of(make_receipt(main, cand, short_cand=tuple(x * 1.0 for x in MAIN[:3])), TREES))
    look = reruns.look_back({a_id: a}, _profile(), TREES)
    assert look.prior == [] and look.decided_by is None


def _stepped(first: float, then: float):
    """16 pairs, ±2 % around ``first`` times main for 8 pairs, then around ``then``: the step check fires."""
    from .receipts import MAIN, _scaled
    main, wobble = MAIN * 2, tuple(1 + 0.02 * (-1) ** k for k in range(8))
    cand = tuple(m * first * w for m, w in zip(main[:8], wobble)) + tuple(m * then * w for m, w in zip(main[8:], wobble))
    return make_receipt(main, cand, short_cand=_scaled(MAIN[:3], 0.8),
                        guards={"decode_ctx128": (_scaled(MAIN[:3], 1.3), _scaled(MAIN[:3], 1.3))})


def test_a_round_decided_slower_beside_a_step_change_still_decides_its_reruns():
    from console.core.gate import decide
    from console.core.receipt import Receipt
    a_id, a = sealed(_of(_stepped(0.85, 0.72), TREES))
    r = Receipt.from_dict(a)
    v = decide(r, r.rules)
    assert v.outcome == "slower" and v.exit_code == 1 and "step-change" in {w.code for w in v.warnings}
    look = reruns.look_back({a_id: a}, _profile(), TREES)
    assert look.decided_by == (a_id, a["round_id"], "slower", 1)
    assert look.prior == [] and reruns.prior_rounds({a_id: a}, a["sequential"]["experiment"]) == []
    assert "its own pairs changed level mid-round" in look.decided_sentence()



def test_a_bisection_step_and_an_ordinary_round_of_the_same_trees_are_two_experiments():
    p = _profile()
    assert reruns.experiment(p, TREES) == reruns.experiment(p, TREES, "round")     # a round's identity is unchanged
    assert reruns.experiment(p, TREES, "bisect") != reruns.experiment(p, TREES)
    step = _of(make_receipt(kind="bisect"), TREES)
    step["sequential"]["experiment"] = reruns.experiment(p, TREES, "bisect")
    a_id, a = sealed(step)
    # an ordinary round of the same two trees is neither decided by the step nor pools with it
    assert reruns.look_back({a_id: a}, p, TREES) == reruns.LookBack([], None, [])
    # a second step of the same range reads the first one's decision
    look = reruns.look_back({a_id: a}, p, TREES, kind="bisect")
    assert look.decided_by[:3] == (a_id, a["round_id"], "accepted") and len(look.prior) == 1
