"""The queue's policy, property by property: order, authors, drafts, conflicts, outcomes, copies."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.core.decisions import queue as q
from console.core.decisions.queue import OPEN, Candidate, QueueRules, State
from console.core.records.verdict import unsealed_status

AUTHORS = ["ada", "bo", "cy"]
FILES = ["src/a.c", "src/b.c", "src/c.c", "Makefile"]


@st.composite
def queues(draw) -> list[Candidate]:
    n = draw(st.integers(0, 12))
    out = []
    for i in range(1, n + 1):
        state = draw(st.sampled_from(list(State)))
        submitted = f"2026-12-04T00:{draw(st.integers(0, 59)):02d}:00Z"
        ready = None if state is State.DRAFT else f"2026-12-04T01:{draw(st.integers(0, 59)):02d}:00Z"
        out.append(Candidate(id=i, author=draw(st.sampled_from(AUTHORS)), state=state, submitted_at=submitted,
                             ready_at=ready, files=tuple(draw(st.sets(st.sampled_from(FILES), max_size=2)))))
    return out


@settings(max_examples=400, deadline=None)
@given(queues())
def test_plan_books_the_oldest_ready_and_one_open_candidate_per_author(cands):
    plan = q.plan(cands)
    by_id = {c.id: c for c in cands}
    booked = [by_id[i] for i in plan.bookable]
    # only queued candidates are booked, oldest ready first, never two of one author
    assert all(c.state is State.QUEUED for c in booked)
    assert [(c.ready_at, c.id) for c in booked] == sorted((c.ready_at, c.id) for c in booked)
    assert len({c.author for c in booked}) == len(booked)
    # a booked candidate is its author's oldest open one: nothing of theirs runs, awaits a merge or review
    for c in booked:
        older = [o for o in cands if o.author == c.author and o.state in OPEN and o.id != c.id
                 and (o.ready_at, o.id) < (c.ready_at, c.id)]
        assert not older, (c, older)
    # every queued, draft or review candidate is booked or waits with a reason; nothing else appears
    waiting = {w.id: w.reason for w in plan.waiting}
    assert set(plan.bookable).isdisjoint(waiting)
    expected = {c.id for c in cands if c.state in (State.QUEUED, State.DRAFT, State.REVIEW)}
    assert set(plan.bookable) | set(waiting) == expected
    assert all(reason for reason in waiting.values())
    for c in cands:
        if c.state is State.DRAFT:
            assert "draft" in waiting[c.id]
        if c.id in waiting and c.state is State.QUEUED:
            assert "same author" in waiting[c.id]


def test_a_draft_made_ready_queues_from_when_it_became_ready():
    early_draft = Candidate(1, "ada", State.QUEUED, "2026-12-04T00:00:00Z", ready_at="2026-12-04T03:00:00Z")
    others = [Candidate(2, "bo", State.QUEUED, "2026-12-04T01:00:00Z", "2026-12-04T01:00:00Z"),
              Candidate(3, "cy", State.QUEUED, "2026-12-04T02:00:00Z", "2026-12-04T02:00:00Z")]
    assert q.plan([early_draft, *others]).bookable == (2, 3, 1)


def test_a_second_candidate_of_an_author_waits_and_says_for_which():
    cands = [Candidate(1, "ada", State.RUNNING, "t1", "t1"), Candidate(2, "ada", State.QUEUED, "t2", "t2"),
             Candidate(3, "bo", State.QUEUED, "t3", "t3")]
    plan = q.plan(cands)
    assert plan.bookable == (3,)
    assert plan.waiting == (q.Waiting(2, "waits for #1 by the same author (running): one open candidate per author"),)
    # once #1 is closed (not mergeable), #2 is ada's open one
    cands[0] = Candidate(1, "ada", State.NOT_MERGEABLE, "t1", "t1")
    assert q.plan(cands).bookable == (2, 3)


@settings(max_examples=300, deadline=None)
@given(queues())
def test_conflicts_are_symmetric_and_only_between_open_candidates_sharing_a_file(cands):
    found = q.conflicts(cands)
    by_id = {c.id: c for c in cands}
    for i, others in found.items():
        for j in others:
            assert i in found[j]
            assert by_id[i].state in OPEN and by_id[j].state in OPEN
            assert set(by_id[i].files) & set(by_id[j].files)
    for a in cands:
        for b in cands:
            if a.id < b.id and a.state in OPEN and b.state in OPEN and set(a.files) & set(b.files):
                assert b.id in found.get(a.id, ())
    assert q.plan(cands).conflicts == found


OUTCOMES = ["accepted", "none", "undecided", "slower", "rejected", "held", "infra", "interrupted"]


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("tier", [None, "xs", "s", "xl"])
@pytest.mark.parametrize("parity", [True, False])
def test_only_an_accepted_tiered_round_that_passed_parity_is_mergeable(outcome, tier, parity):
    out = q.after_round(outcome, tier, parity, "the node ran hot")
    assert (out.state is State.MERGEABLE) == (outcome == "accepted" and tier is not None and parity)
    if outcome in ("infra", "interrupted"):
        assert out.state is State.QUEUED and "requeued" in out.reason and "the node ran hot" in out.reason
    if outcome == "held":
        assert out.state is State.REVIEW
    assert out.reason


def test_merging_sends_the_other_mergeable_candidates_back_to_be_measured_again():
    cands = [Candidate(1, "ada", State.MERGEABLE, "t1", "t1"), Candidate(2, "bo", State.MERGEABLE, "t2", "t2"),
             Candidate(3, "cy", State.QUEUED, "t3", "t3"), Candidate(4, "cy", State.NOT_MERGEABLE, "t0", "t0")]
    assert q.rebased(cands, merged_id=1) == [2]


@pytest.mark.parametrize("state", list(State))
def test_transitions_a_person_may_ask_for(state):
    c = Candidate(7, "ada", state, "t", "t")
    for action, (allowed, to) in q._ALLOWED.items():
        if state in allowed:
            assert q.transition(c, action) is to
        else:
            with pytest.raises(q.Refusal, match=f"#7 is {state.value}"):
                q.transition(c, action)
    if state is not State.MERGEABLE:
        with pytest.raises(q.Refusal, match="did not beat main"):
            q.transition(c, "merged")


# --- copies ---------------------------------------------------------------------------

KERNEL = """
static void dot_rows(const float *w, const float *x, float *y, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        float acc = 0.0f;
        for (int c = 0; c < cols; c += 4) {
            acc += w[r * cols + c] * x[c] + w[r * cols + c + 1] * x[c + 1];
            acc += w[r * cols + c + 2] * x[c + 2] + w[r * cols + c + 3] * x[c + 3];
        }
        y[r] = acc;
    }
}
""".strip().splitlines()

RENAMED = [line.replace("dot_rows", "matvec_fast").replace("acc", "sum").replace("rows", "n_out")
           .replace("cols", "n_in").replace("0.0f", "0.f") + "   // mine" for line in KERNEL]

OTHER = """
int parse_depths(const char *text, int *out, int max) {
    int n = 0;
    while (*text && n < max) {
        out[n++] = (int)strtol(text, (char **)&text, 10);
        if (*text == ',') text++;
    }
    return n;
}
""".strip().splitlines()

RULES = QueueRules()


def test_a_renamed_copy_is_refused_and_independent_code_is_not():
    merged = [(11, q.fingerprint(KERNEL))]
    copy = q.judge_copy(q.fingerprint(RENAMED), merged, RULES)
    assert copy.state is State.REFUSED and copy.of == 11 and copy.containment >= 0.8, copy
    own = q.judge_copy(q.fingerprint(OTHER), merged, RULES)
    assert own.state is None and own.containment < 0.2, own


def test_a_partly_shared_diff_lands_in_review():
    # a contributor who touched the same hot function and added their own code around it
    mixed = RENAMED[:7] + OTHER
    check = q.judge_copy(q.fingerprint(mixed), [(11, q.fingerprint(KERNEL))],
                         QueueRules(copy_review=0.3, copy_refuse=0.8))
    assert check.state is State.REVIEW and 0.3 <= check.containment < 0.8, check


def test_too_small_a_diff_cannot_be_called_a_copy():
    assert q.fingerprint(["x++;"]) == frozenset()
    assert q.judge_copy(frozenset(), [(1, q.fingerprint(KERNEL))], RULES).state is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=60), max_size=30), st.lists(st.text(max_size=60), max_size=30))
def test_containment_is_a_share(a, b):
    fa, fb = q.fingerprint(a), q.fingerprint(b)
    c = q.containment(fa, fb)
    assert 0.0 <= c <= 1.0
    assert q.containment(fa, fa) == (1.0 if fa else 0.0)


def test_a_round_that_sealed_no_verdict_is_named_by_its_exit_code_and_only_interrupts_and_infra_requeue():
    assert [unsealed_status(c) for c in (130, 2, 3, 1, 4, 99)] == \
        ["interrupted", "refused", "infra", "infra", "infra", "infra"]
    assert q.after_round(unsealed_status(130), None, False).state is State.QUEUED
    assert q.after_round(unsealed_status(3), None, False).state is State.QUEUED
