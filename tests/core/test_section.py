"""What a handed-over section computes: drawn from a seed, re-derivable, whole-vocabulary ids."""
from hypothesis import given, settings, strategies as st

from console.core.records.section import (RUN_MIN_TOKENS, SectionDraw, chunks_of, commitment_of, run_length,
                                          section_tokens)

DOC = [(7 * i) % 500 for i in range(1200)]     # a document that only uses ids below 500
VOCAB = 262144


def test_the_same_seed_gives_the_same_section_and_another_seed_another():
    a = section_tokens("ab" * 16, DOC, VOCAB, 512)
    assert a == section_tokens("ab" * 16, DOC, VOCAB, 512)
    assert a != section_tokens("cd" * 16, DOC, VOCAB, 512)


@settings(max_examples=200, deadline=None)
@given(seed=st.text(alphabet="0123456789abcdef", min_size=32, max_size=32),
       tokens=st.integers(1, 800), repeat=st.integers(1, 3))
def test_a_section_has_its_length_ids_in_the_vocabulary_and_ends_on_its_drawn_run(seed, tokens, repeat):
    sections = section_tokens(seed, DOC, VOCAB, tokens, repeat)
    assert len(sections) == repeat and all(len(s) == tokens for s in sections)
    assert all(0 <= t < VOCAB for s in sections for t in s)
    n = run_length(tokens)
    for s in sections:
        if n:
            # the run sits in the first half and the section ends on all of it but its last id, so a
            # model that copies must predict that last id next
            starts = [i for i in range(tokens // 2) if s[i:i + n - 1] == s[tokens - (n - 1):]]
            assert starts, s
        else:
            assert tokens < RUN_MIN_TOKENS


def test_a_section_uses_ids_the_document_never_does():
    # 16 drawn ids from 262,144: the chance that all fall below the document's 500 is (500/262144)**16
    s = section_tokens("01" * 16, DOC, VOCAB, 512)[0]
    assert max(s) >= 500 and len({t for t in s if t >= 500}) >= 8


def test_repeats_are_drawn_apart():
    a, b = section_tokens("ef" * 16, DOC, VOCAB, 64, repeat=2)
    assert a != b


def test_a_decode_section_goes_one_id_per_chunk_and_a_prefill_whole():
    sections = [[1, 2, 3], [4, 5, 6]]
    assert chunks_of("decode_tok_s", sections) == [[1], [2], [3], [4], [5], [6]]
    assert chunks_of("prefill_tok_s", sections) == sections


def test_a_draw_holds_its_commitment_only_with_its_own_seed():
    d = SectionDraw("timed", 3, "aa" * 16, commitment_of("aa" * 16))
    assert d.holds() and SectionDraw.from_dict(d.to_dict()) == d
    assert not SectionDraw("timed", 3, "bb" * 16, d.commitment).holds()
