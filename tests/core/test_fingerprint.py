"""A node's fingerprint: a digest of exactly the facts it names, stable, and the facts that differ named."""
from __future__ import annotations

import dataclasses

from hypothesis import given, strategies as st

from console.core.provenance import fingerprint as F
from console.core.records.facts import HostFacts
from console.core.records.receipt import Receipt
from core.receipts import make_receipt

XEON_H200 = {"hostname": "gpu-17", "cpu_model": "Intel(R) Xeon(R) Platinum 8480+", "cores": 16,
             "kernel": "6.8.0", "python": "3.12.3",
             "gpus": [{"index": 0, "uuid": "GPU-1", "name": "NVIDIA H200"}], "gpu_driver": "550.54.15"}
EPYC = {"hostname": "vm", "cpu_model": "AMD EPYC 7763 64-Core Processor", "cores": 2, "kernel": "6.1", "gpus": []}

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
gpus = st.lists(st.fixed_dictionaries({"index": st.integers(0, 7), "uuid": st.text(max_size=8), "name": names}),
                max_size=4)
hosts = st.fixed_dictionaries({"cpu_model": names, "cores": st.integers(0, 512), "gpus": gpus},
                              optional={"hostname": names, "kernel": names,
                                        "gpu_driver": st.from_regex(r"[0-9]{3}\.[0-9]{2}\.[0-9]{2}", fullmatch=True)})


def of_host(facts: dict, driver=None) -> F.Fingerprint:
    """The fingerprint of host facts as a receipt reads them."""
    return F.of_host(HostFacts.from_dict(facts), driver)


def test_the_digest_is_short_hex_and_the_facts_it_was_made_from_come_with_it():
    fp = of_host(XEON_H200)
    assert len(fp.digest) == F.DIGEST_CHARS and all(c in "0123456789abcdef" for c in fp.digest)
    assert dict(fp.facts) == {"cpu_model": "Intel(R) Xeon(R) Platinum 8480+", "cores": 16,
                              "gpu_model": "NVIDIA H200", "gpus": 1, "driver_major": "550"}
    assert F.of_facts(fp.facts) == fp and F.of_facts(fp.to_dict()["facts"]) == fp


def test_the_issue_s_two_machines_differ_and_say_in_what():
    a, b = of_host(EPYC), of_host(XEON_H200)
    assert a.digest != b.digest
    assert F.differing(a.facts, b.facts) == F.FACTS
    said = F.differences(a, b)
    assert "cores 2 there, 16 here" in said and "'AMD EPYC 7763 64-Core Processor' there" in said
    assert F.differences(a, a) == ""


def test_a_receipt_without_the_driver_on_its_host_gives_it_from_its_preflight():
    host = {k: v for k, v in XEON_H200.items() if k != "gpu_driver"}
    old = dataclasses.replace(Receipt.from_dict(make_receipt()), host=host, preflight={"driver": {"driver_version": "550.54.15"}})
    assert F.of_receipt(old) == of_host(XEON_H200)
    assert F.of_receipt(dataclasses.replace(Receipt.from_dict(make_receipt()), host={})) == of_host({})   # no host facts: 'unknown'


@given(hosts, st.randoms())
def test_only_the_named_facts_count_and_gpu_order_does_not(host, rnd):
    shuffled = list(host["gpus"])
    rnd.shuffle(shuffled)
    other = {**host, "gpus": shuffled, "hostname": "elsewhere", "kernel": "9.9", "python": "3.99"}
    assert of_host(other) == of_host(host)


@given(hosts, hosts)
def test_two_fingerprints_share_a_digest_exactly_when_no_fact_differs(a, b):
    fa, fb = of_host(a), of_host(b)
    assert (fa.digest == fb.digest) == (F.differing(fa.facts, fb.facts) == ())
    assert F.differing(fa.facts, fb.facts) == F.differing(fb.facts, fa.facts)
    assert (F.differences(fa, fb) == "") == (fa.digest == fb.digest)


@given(hosts, st.sampled_from(F.FACTS))
def test_changing_any_one_fact_changes_the_digest_and_names_that_fact(host, name):
    fa = of_host(host)
    changed = {**fa.facts, name: ("x" + str(fa.facts[name])) if isinstance(fa.facts[name], str) else fa.facts[name] + 1}
    fb = F.of_facts(changed)
    assert fb.digest != fa.digest and F.differing(fa.facts, fb.facts) == (name,)


def test_whitespace_in_a_model_name_does_not_make_another_node():
    assert of_host({**EPYC, "cpu_model": "AMD  EPYC 7763 64-Core Processor "}) == of_host(EPYC)


def test_describe_says_the_digest_and_the_facts():
    assert F.describe(of_host(XEON_H200)).endswith("Intel(R) Xeon(R) Platinum 8480+ x16 cores, 1 x NVIDIA H200, driver 550")
    assert "no GPU" in F.describe(of_host(EPYC))
    assert F.describe(F.Fingerprint("abc")) == "abc (facts not recorded)"
