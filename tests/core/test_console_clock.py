"""The console's clock decides: a console-timed rep's figure is tokens over the console's section
clock; the engine's own timing is a cross-check that refuses a clock other than the one that timed
the work; the fixed-cost check reads sections; a self-timed bench earns no tier unless it opts in."""
import pytest

from console.core.decisions.counting import counted
from console.core.decisions.gate import decide

from .receipts import default_rules, make_receipt, typed

RULES = default_rules()
HANDOVER = ["/engine/engine", "bench", "--handover", "{handover}"]


def console_timed(r, engine_share: float = 0.98, short_pad: float = 0.0, build: str = "candidate"):
    """Every rep handed over: the console's section clock is tokens / value (the handover's cost
    folded in), and the engine's own clock reads ``engine_share`` of it for ``build``'s reps."""
    r["profile"]["bench"]["command"] = HANDOVER
    r["profile"]["bench"]["self_timed_tier"] = False
    for rep in r["reps"]:
        section = rep["tokens"] / rep["value"]
        if rep["phase"] == "short" and rep["build"] == build:
            section += short_pad
        share = engine_share if rep["build"] == build else 0.98
        rep["section_s"] = section
        rep["value"] = rep["tokens"] / section
        rep["reported"]["elapsed_s"] = section * share
        rep["reported"]["value"] = rep["tokens"] / (section * share)
    return r


def codes(v):
    return v.codes


def test_an_honest_console_timed_round_is_accepted_with_its_tier():
    v = decide(typed(console_timed(make_receipt())), RULES)
    assert v.outcome == "accepted" and v.tier == "s"
    assert "self-timed" not in [w.code for w in v.warnings]


def test_an_engine_clock_that_runs_slow_is_refused_by_name():
    # a library interposing the clock the harness reads: the engine says a third less than the work took
    v = decide(typed(console_timed(make_receipt(), engine_share=2 / 3)), RULES)
    assert v.outcome == "rejected" and set(codes(v)) == {"claim-clock"}
    assert "33% under the console's" in v.reasons[0].message


def test_main_with_a_slow_clock_makes_the_round_infra_not_a_rejection():
    v = decide(typed(console_timed(make_receipt(), engine_share=0.5, build="main")), RULES)
    assert v.outcome == "infra"


def test_an_engine_clock_within_the_handover_margin_stands():
    v = decide(typed(console_timed(make_receipt(), engine_share=1 - RULES.clock_margin + 0.01)), RULES)
    assert v.outcome == "accepted"


def test_an_engine_that_says_its_section_took_longer_than_the_console_saw_is_refused():
    v = decide(typed(console_timed(make_receipt(), engine_share=1.3)), RULES)
    assert v.outcome == "rejected" and set(codes(v)) == {"claim-wall"}


def test_a_value_that_is_not_the_console_clock_is_refused():
    r = console_timed(make_receipt())
    next(x for x in r["reps"] if x["build"] == "candidate" and x["phase"] == "timed")["value"] *= 1.5
    v = decide(typed(r), RULES)
    assert v.outcome == "rejected" and "claim-clock" in codes(v)


def test_short_sections_padded_are_refused_by_their_fixed_cost_per_section():
    r = console_timed(make_receipt(), short_pad=0.5)
    v = decide(typed(r), RULES)
    assert v.outcome == "rejected" and codes(v) == ["claim-overhead"]
    assert "fixed cost per section" in v.reasons[0].message and "main's timed section" in v.reasons[0].message
    # the margin is a share of the timed work (main's sections), not of main's whole run
    c = counted(typed(r), RULES)
    mean_section = sum(x.section_s for x in c.valid[("main", "timed")]) / len(c.valid[("main", "timed")])
    assert c.differential["overhead"]["allowed_s"] == pytest.approx(RULES.overhead_margin * mean_section)


def test_a_self_timed_bench_is_decided_and_earns_no_tier():
    r = make_receipt()
    r["profile"]["bench"]["self_timed_tier"] = False
    v = decide(typed(r), RULES)
    assert v.outcome == "accepted" and v.tier is None and v.would_be_tier == "s"
    assert {"self-timed", "self-timed-no-tier"} <= {w.code for w in v.warnings}


def test_a_self_timed_bench_that_opts_in_keeps_its_tier_and_says_so():
    r = make_receipt()
    r["profile"]["bench"]["self_timed_tier"] = True
    v = decide(typed(r), RULES)
    assert v.tier == "s" and "self-timed" in {w.code for w in v.warnings}


def test_a_receipt_sealed_before_the_handover_is_decided_as_it_was():
    v = decide(typed(make_receipt()), RULES)     # no self_timed_tier key in its profile
    assert v.tier == "s" and not any(w.code.startswith("self-timed") for w in v.warnings)


def test_a_section_whose_seed_is_not_the_committed_one_makes_the_round_infra():
    from console.core.records.section import commitment_of
    r = console_timed(make_receipt())
    r["sections"] = [{"phase": "timed", "index": 0, "seed": "aa" * 16, "commitment": commitment_of("aa" * 16)}]
    assert decide(typed(r), RULES).outcome == "accepted"
    r["sections"][0]["seed"] = "bb" * 16
    v = decide(typed(r), RULES)
    assert v.outcome == "infra" and codes(v) == ["section-commitment"]


def test_handed_over_sections_are_graded_per_phase_as_parity_grades_a_depth():
    from console.core.decisions.parity_grade import handed_over_problems
    from console.core.records.receipt import TimedPathRep
    rules = default_rules(kl_max=0.04, top1_min=0.84)

    def rows(kls, phase="timed", top1=1.0, acks=1.0, chunks=32):
        return [TimedPathRep(index=i, kl=k, top1=top1, phase=phase, acks_agree=acks, chunks=chunks)
                for i, k in enumerate(kls)]

    # 0.3.36 against 0.3.16 on ten drawn sections: one row at 0.24 nats, median 0.014: an honest release
    honest = [0.0277, 0.0, 0.0007, 0.0008, 0.2419, 0.0, 0.0264, 0.0, 0.0488, 0.0611]
    assert handed_over_problems(rows(honest) + rows([0.004, 0.005], "guard:g", acks=0.9), rules) == []
    # something else computed: every row moves, and the phase is named
    [kl] = handed_over_problems(rows([x + 0.3 for x in honest]), rules)
    assert kl.code == "timed-path-kl" and "timed, 10 run(s)" in kl.message
    codes_ = [r.code for r in handed_over_problems(rows(honest[:4], top1=0.0, acks=0.5), rules)]
    assert codes_ == ["timed-path-top1", "timed-path-answers"]
    broken = rows(honest[:3]) + [TimedPathRep(index=3, phase="timed", error="bench_logits.npy: truncated")]
    assert [r.code for r in handed_over_problems(broken, rules)] == ["timed-path-error"]


def test_a_few_runs_of_a_phase_do_not_fail_on_one_near_tie_flip():
    """Four short runs of 0.3.36 against 0.3.16 (under --runtime local): one final row's argmax flipped
    on a near-tie, its one chunk with it. 3 of 4 is under 84 %, but one flip in four is what a build
    flipping 16 % of its rows does half the time: not decided. Every row flipped is; so is a decode
    phase answering 30 % of its 256 chunks as main did."""
    from console.core.decisions.parity_grade import decidedly_under, handed_over_problems
    from console.core.records.receipt import TimedPathRep
    rules = default_rules(kl_max=0.04, top1_min=0.84)
    short = [TimedPathRep(index=i, kl=k, top1=t, phase="short", acks_agree=t, chunks=1)
             for i, (k, t) in enumerate([(0.012, 1.0), (0.31, 0.0), (0.004, 1.0), (0.02, 1.0)])]
    assert handed_over_problems(short, rules) == []
    flipped = [TimedPathRep(index=i, kl=0.01, top1=0.0, phase="short", acks_agree=0.0, chunks=1) for i in range(4)]
    assert [r.code for r in handed_over_problems(flipped, rules)] == ["timed-path-top1", "timed-path-answers"]
    decode = [TimedPathRep(index=i, kl=0.01, top1=1.0, phase="timed", acks_agree=0.3, chunks=64) for i in range(4)]
    [answers] = handed_over_problems(decode, rules)
    assert answers.code == "timed-path-answers" and "77 of 256 chunks" in answers.message
    # the binomial boundary itself: at the bar's rate, P(at least k flips) against 1 %
    assert not decidedly_under(0, 10, 0.84) and not decidedly_under(1, 4, 0.84)
    assert decidedly_under(4, 4, 0.84) and not decidedly_under(3, 4, 0.84)
    assert decidedly_under(11, 32, 0.84) and not decidedly_under(10, 32, 0.84)
