import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from console.core.decisions import accuracy as acc
from console.core.records.rules import GateRules

RULES = GateRules()


def test_an_answer_is_right_when_the_first_line_is_it():
    assert acc.is_correct(" Paris.\n", "Paris")
    assert acc.is_correct("paris, the capital", "Paris")
    assert acc.is_correct(" New Delhi.", "New Delhi")
    assert acc.is_correct("\n 83\nQ:", "83")            # a leading blank line is skipped
    assert not acc.is_correct(" Parisian", "Paris")
    assert not acc.is_correct(" 830", "83")
    assert not acc.is_correct(" 8", "83")
    assert not acc.is_correct("", "83")


def test_identical_answers_pass_with_zero_tolerance():
    g = acc.grade([True, False] * 50, [True, False] * 50, RULES)
    assert g.passed and g.delta == 0 and g.tolerance == 0 and g.estimator == acc.ESTIMATOR
    assert (g.reference_score, g.candidate_score) == (0.5, 0.5)


def test_a_few_flips_pass_and_a_systematic_loss_does_not():
    ref = [True] * 100 + [False] * 58
    one = list(ref)
    one[0] = False
    assert acc.grade(ref, one, RULES).passed                 # one item lost: 0.6 points, tolerance 1.3
    lost = [False] * 10 + ref[10:]
    g = acc.grade(ref, lost, RULES)
    assert not g.passed and g.only_reference == 10 and g.only_candidate == 0
    assert g.delta == pytest.approx(-10 / 158)


def test_the_tolerance_is_the_paired_t_interval():
    ref = [True, True, False, False, True, False, True, False, True, True]
    cand = [True, False, True, False, True, False, False, False, True, True]
    d = [int(c) - int(r) for r, c in zip(ref, cand)]
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    from scipy import stats
    want = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    assert acc.grade(ref, cand, RULES).tolerance == pytest.approx(want, rel=1e-12)


def test_without_pairs_the_fixed_five_points_apply():
    g = acc.grade([True] * 10, [True] * 9 + [False] * 2, RULES)      # not the same items
    assert g.estimator == acc.FALLBACK and g.tolerance == 0.05
    assert not g.passed      # 81.8 % against 100 %


@settings(max_examples=200)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=2, max_size=300))
def test_grade_is_symmetric_and_consistent(pairs):
    ref, cand = [a for a, _ in pairs], [b for _, b in pairs]
    g, h = acc.grade(ref, cand, RULES), acc.grade(cand, ref, RULES)
    assert g.passed == h.passed and g.tolerance == pytest.approx(h.tolerance)
    assert g.only_candidate == h.only_reference
    assert g.delta == pytest.approx((g.only_candidate - g.only_reference) / len(pairs))
    if g.only_candidate == g.only_reference:
        assert g.passed


def test_prompts_round_trip_through_the_escapes():
    text = "a\\b\n\tc\\n"
    assert acc.unescape(acc.escape(text)) == text
    assert "\n" not in acc.escape(text)


def test_generated_lines_are_parsed_and_checked():
    assert acc.parse_generated("1 2\t Paris.\\n\n3\t 83\n", 2) == [" Paris.\n", " 83"]
    with pytest.raises(acc.TaskSetError, match="expected 3 continuations, got 2"):
        acc.parse_generated("1\ta\n2\tb\n", 3)
    with pytest.raises(acc.TaskSetError, match="no tab"):
        acc.parse_generated("1 2 3\n", 1)


def test_a_broken_task_set_names_the_line_and_field():
    good = json.dumps({"id": "a", "prompt": "p", "answer": "x"})
    with pytest.raises(acc.TaskSetError, match="line 2: 'answer' must be a non-empty string"):
        acc.parse_tasks(good + "\n" + json.dumps({"id": "b", "prompt": "p", "answer": ""}))
    with pytest.raises(acc.TaskSetError, match="line 2: id 'a' appears twice"):
        acc.parse_tasks(good + "\n" + good)
    with pytest.raises(acc.TaskSetError, match="line 1: not JSON"):
        acc.parse_tasks("{")
    with pytest.raises(acc.TaskSetError, match="no items"):
        acc.parse_tasks("\n")


def test_the_shipped_task_set_is_what_its_generator_makes():
    from console.paths import LLAMA_PROFILE
    from console.profile import load_profile
    p = load_profile(LLAMA_PROFILE)
    tasks = acc.parse_tasks(open(p.accuracy.tasks).read())
    assert len(tasks) == 158 and {t.kind for t in tasks} == {"add", "sub", "mul", "capital", "antonym", "plural",
                                                             "sequence"}
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_tasks", p.dir / "llama-cpp" / "accuracy" / "make_tasks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import random
    assert [acc.Task(**r) for r in mod.items(random.Random(20261204))] == tasks
