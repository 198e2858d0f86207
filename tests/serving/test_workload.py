import hashlib
import json
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from console.serving.workload import (ECHO, Request, WorkloadError, copy_length, file_requests, mix_drawn,
                                      plant_copies, poisson_arrivals, prompt_space_log10, random_requests,
                                      shared_prefix_requests, workload_sha256)

DOC = tuple(range(1000, 1500))     # distinct ids, so a slice's place in the document is known


def _is_slice(part: tuple[int, ...]) -> bool:
    return not part or (part[0] >= DOC[0] and DOC[part[0] - DOC[0]:part[0] - DOC[0] + len(part)] == part)


# --- random ----------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 20), lo=st.integers(1, 60), width=st.integers(0, 60), olo=st.integers(1, 30),
       owidth=st.integers(0, 30), seed=st.integers(0, 2**32), bos=st.sampled_from([None, 2]))
def test_random_lengths_lie_in_their_ranges_and_prompts_are_document_slices(n, lo, width, olo, owidth, seed, bos):
    reqs = random_requests(DOC, n, (lo, lo + width), (olo, olo + owidth), seed, bos=bos)
    assert [r.index for r in reqs] == list(range(n))
    for r in reqs:
        assert lo <= r.input_tokens <= lo + width and len(r.prompt) == r.input_tokens
        assert olo <= r.max_tokens <= olo + owidth and r.at_s == 0.0
        body = r.prompt[1:] if bos is not None else r.prompt
        assert bos is None or r.prompt[0] == bos
        assert _is_slice(body)
    assert reqs == random_requests(DOC, n, (lo, lo + width), (olo, olo + owidth), seed, bos=bos)


def test_random_seeds_give_different_work_and_bounds_are_inclusive():
    a = random_requests(DOC, 200, (1, 3), (4, 5), seed=1)
    b = random_requests(DOC, 200, (1, 3), (4, 5), seed=2)
    assert a != b
    assert {r.input_tokens for r in a} == {1, 2, 3} and {r.max_tokens for r in a} == {4, 5}


def test_random_refuses_lengths_longer_than_the_document():
    with pytest.raises(WorkloadError, match="an input of 501 tokens is longer than the document"):
        random_requests(DOC, 1, (10, 501), (1, 1), seed=0)
    # with a BOS, 501 tokens need only 500 from the document
    assert random_requests(DOC, 1, (501, 501), (1, 1), seed=0, bos=7)[0].prompt == (7,) + DOC
    with pytest.raises(WorkloadError, match=r"1 ≤ lo ≤ hi, got \[5, 4\]"):
        random_requests(DOC, 1, (5, 4), (1, 1), seed=0)
    with pytest.raises(WorkloadError, match="output lengths"):
        random_requests(DOC, 1, (1, 1), (0, 3), seed=0)


# --- drawn tokens ----------------------------------------------------------------------

POOL = tuple(range(5000, 5100))      # ids no document slice holds, so a drawn one is seen


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 12), lo=st.integers(2, 40), width=st.integers(0, 40), drawn=st.integers(1, 8),
       seed=st.integers(0, 2**32))
def test_drawn_ids_overwrite_the_last_position_and_others_after_the_bos(n, lo, width, drawn, seed):
    plain = random_requests(DOC, n, (lo, lo + width), (4, 4), seed, bos=2)
    mixed = mix_drawn(plain, POOL, drawn, seed, keep=1)
    for a, b in zip(plain, mixed):
        assert len(a.prompt) == len(b.prompt) and b.input_tokens == a.input_tokens and b.prompt[0] == 2
        changed = [i for i, (x, y) in enumerate(zip(a.prompt, b.prompt)) if x != y]
        assert changed[-1] == len(a.prompt) - 1                        # the last always
        assert len(changed) == min(drawn, len(a.prompt) - 1) and 0 not in changed
        assert all(b.prompt[i] in POOL for i in changed)
    assert mixed == mix_drawn(plain, POOL, drawn, seed, keep=1)         # re-derivable from its seed
    assert mix_drawn(plain, POOL, 0, seed) == plain


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 10), lo=st.integers(2, 80), width=st.integers(0, 60), out=st.integers(1, 40),
       keep=st.integers(1, 12), seed=st.integers(0, 2**32))
def test_a_planted_run_sits_twice_after_the_kept_head_and_the_prompt_ends_on_its_first_ids(n, lo, width, out, keep,
                                                                                           seed):
    plain = random_requests(DOC, n, (lo, lo + width), (out, out), seed, bos=2)
    planted = plant_copies(plain, POOL, seed, keep=keep)
    assert planted == plant_copies(plain, POOL, seed, keep=keep)        # re-derivable from its seed
    for a, b in zip(plain, planted):
        m = copy_length(len(a.prompt), a.max_tokens, keep)
        assert len(b.prompt) == len(a.prompt) and b.prompt[:keep] == a.prompt[:keep]
        if not m:
            assert b == a
            continue
        assert ECHO + 2 <= m <= min(16, out + ECHO)
        at = next(i for i in range(keep, len(b.prompt)) if b.prompt[i] in POOL)
        run = b.prompt[at:at + m]
        # the run twice, then at least one other position, then its first ids again: a model that
        # copies answers with the rest of the run, none of which the document holds
        assert all(t in POOL for t in run) and b.prompt[at + m:at + 2 * m] == run
        assert at + 2 * m <= len(b.prompt) - ECHO - 1 and b.prompt[-ECHO:] == run[:ECHO]


def test_a_shared_prefix_stays_shared_under_drawn_ids():
    reqs = shared_prefix_requests(DOC, 8, 10, (5, 9), (3, 3), seed=3, groups=2, bos=2)
    mixed = mix_drawn(reqs, POOL, 3, 3, keep=10)
    assert all(a.prompt[:10] == b.prompt[:10] and a.prompt != b.prompt for a, b in zip(reqs, mixed))


def test_the_space_of_prompts_is_counted_and_drawn_ids_make_it_too_large_to_answer_in_advance():
    # plain slices: one per place and length (2,397 tokens, 32-128 long: about 220,000)
    assert round(10 ** prompt_space_log10(2397, (32, 128), 0, 656)) == sum(2397 - (n - 1) + 1 for n in range(32, 129))
    assert 10 ** prompt_space_log10(10, (3, 3), 1, 7) == pytest.approx(9 * 7)         # 9 places, last id of 7
    assert 10 ** prompt_space_log10(10, (4, 4), 2, 7) == pytest.approx(8 * 2 * 49)    # + one of 2 other places
    assert prompt_space_log10(2397, (32, 128), 4, 656) > 21


# --- shared prefix ---------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 30), prefix=st.integers(2, 40), groups=st.integers(1, 4), lo=st.integers(1, 20),
       width=st.integers(0, 20), seed=st.integers(0, 2**32), bos=st.sampled_from([None, 2]))
def test_shared_prefixes_group_requests_and_suffixes_differ(n, prefix, groups, lo, width, seed, bos):
    reqs = shared_prefix_requests(DOC, n, prefix, (lo, lo + width), (3, 3), seed, groups=groups, bos=bos)
    heads = {}
    for r in reqs:
        assert r.input_tokens == len(r.prompt) and lo <= r.input_tokens - prefix <= lo + width
        head = heads.setdefault(r.index % groups, r.prompt[:prefix])
        assert r.prompt[:prefix] == head and (bos is None or head[0] == bos)
        assert _is_slice(r.prompt[prefix:])
    assert len({r.prompt[prefix:][:1] for r in reqs}) == n          # distinct suffix starts
    assert len(set(heads.values())) == len(heads)                   # distinct prefixes
    assert reqs == shared_prefix_requests(DOC, n, prefix, (lo, lo + width), (3, 3), seed, groups=groups, bos=bos)


def test_shared_prefix_refuses_what_the_document_cannot_hold():
    with pytest.raises(WorkloadError, match="a prefix of 600 tokens"):
        shared_prefix_requests(DOC, 2, 600, (1, 2), (1, 1), seed=0)
    with pytest.raises(WorkloadError, match="too few places for 500 distinct suffixes of up to 2 tokens"):
        shared_prefix_requests(DOC, 500, 10, (1, 2), (1, 1), seed=0)


# --- file ------------------------------------------------------------------------------

def _file(tmp_path, *lines: str):
    path = tmp_path / "w.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_file_reads_text_and_id_prompts_skipping_blank_lines(tmp_path):
    path = _file(tmp_path, '{"prompt": "Hello", "max_tokens": 5, "input_tokens": 2}', "",
                 '{"prompt": [1, 2, 3]}', "   ", '{"prompt": "x"}')
    assert file_requests(path, default_max_tokens=9) == [
        Request(0, "Hello", 2, 5), Request(1, (1, 2, 3), 3, 9), Request(2, "x", 0, 9)]


@pytest.mark.parametrize("line, expected", [
    ("{not json", "invalid JSON"),
    ("[1, 2]", "not a JSON object (list)"),
    ('{"max_tokens": 3}', "missing prompt"),
    ('{"prompt": ""}', "prompt is empty"),
    ('{"prompt": []}', "prompt is empty"),
    ('{"prompt": [1, -2]}', "prompt token ids must be non-negative integers, got -2"),
    ('{"prompt": [1, 2.5]}', "prompt token ids must be non-negative integers, got 2.5"),
    ('{"prompt": [true]}', "prompt token ids must be non-negative integers, got true"),
    ('{"prompt": 7}', "prompt must be text or a list of token ids, got int"),
    ('{"prompt": "a", "max_tokens": 0}', "max_tokens must be a positive integer, got 0"),
    ('{"prompt": "a", "max_tokens": "8"}', 'max_tokens must be a positive integer, got "8"'),
    ('{"prompt": "a", "input_tokens": -1}', "input_tokens must be a non-negative integer, got -1"),
    ('{"prompt": [1, 2], "input_tokens": 3}', "input_tokens 3 disagrees with the prompt's 2 token ids"),
    ('{"prompt": "a", "temperature": 0, "n": 2}',
     "unknown key(s) 'n', 'temperature' (expected prompt, max_tokens, input_tokens)"),
])
def test_file_errors_name_the_file_the_line_and_what_was_expected(tmp_path, line, expected):
    path = _file(tmp_path, '{"prompt": "fine"}', "", line)
    with pytest.raises(WorkloadError) as e:
        file_requests(path, default_max_tokens=4)
    assert (e.value.path, e.value.line) == (path, 3)
    assert e.value.expected.startswith(expected)
    assert str(e.value).startswith(f"{path}: line 3: {expected}")


def test_an_empty_or_missing_file_is_an_error(tmp_path):
    path = _file(tmp_path, "", "  ")
    with pytest.raises(WorkloadError, match=r"w\.jsonl: line 0: no requests"):
        file_requests(path, 4)
    with pytest.raises(WorkloadError, match="line 0: a readable UTF-8 file"):
        file_requests(tmp_path / "absent.jsonl", 4)


# --- arrivals and hashing --------------------------------------------------------------

def test_poisson_arrivals_have_the_asked_mean_rate_and_keep_the_work():
    reqs = random_requests(DOC, 4000, (2, 4), (1, 2), seed=3)
    timed = poisson_arrivals(reqs, rate=20.0, seed=5)
    ats = [r.at_s for r in timed]
    assert ats == sorted(ats) and ats[0] > 0
    assert ats[-1] / len(ats) == pytest.approx(1 / 20.0, rel=0.05)
    assert [replace(r, at_s=0.0) for r in timed] == reqs
    assert timed == poisson_arrivals(reqs, rate=20.0, seed=5) != poisson_arrivals(reqs, rate=20.0, seed=6)
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(WorkloadError, match="arrival rate must be a positive number"):
            poisson_arrivals(reqs, rate=bad, seed=0)


_request = st.builds(Request, index=st.integers(0, 50),
                     prompt=st.one_of(st.text(min_size=1, max_size=8),
                                      st.lists(st.integers(0, 99), min_size=1, max_size=6).map(tuple)),
                     input_tokens=st.integers(0, 50), max_tokens=st.integers(1, 50),
                     at_s=st.floats(0, 100, allow_nan=False))


@settings(max_examples=80, deadline=None)
@given(reqs=st.lists(_request, min_size=1, max_size=5), which=st.integers(0, 4),
       field=st.sampled_from(["index", "prompt", "input_tokens", "max_tokens", "at_s"]))
def test_the_hash_pins_every_field_of_every_request(reqs, which, field):
    r = reqs[which % len(reqs)]
    changed = {"index": r.index + 1, "input_tokens": r.input_tokens + 1, "max_tokens": r.max_tokens + 1,
               "at_s": r.at_s + 0.001,
               "prompt": (r.prompt + "!") if isinstance(r.prompt, str) else r.prompt + (1,)}[field]
    other = list(reqs)
    other[which % len(reqs)] = replace(r, **{field: changed})
    assert workload_sha256(other) != workload_sha256(reqs)
    assert workload_sha256(list(reqs)) == workload_sha256(reqs)


def test_the_hash_tells_text_from_ids_and_ignores_sub_microsecond_jitter():
    assert workload_sha256([Request(0, "12", 2, 1)]) != workload_sha256([Request(0, (1, 2), 2, 1)])
    jitter = [Request(0, "a", 0, 1, at_s=1.0 + 1e-9)]
    assert workload_sha256([Request(0, "a", 0, 1, at_s=1.0)]) == workload_sha256(jitter)
    canonical = json.dumps([{"at_s": 0.0, "index": 0, "input_tokens": 1, "max_tokens": 2, "prompt": [5]}],
                           sort_keys=True, separators=(",", ":"))
    assert workload_sha256([Request(0, (5,), 1, 2)]) == hashlib.sha256(canonical.encode()).hexdigest()
