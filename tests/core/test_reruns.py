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
