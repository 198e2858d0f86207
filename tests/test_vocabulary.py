"""Which ids a drawn prompt may use: read from the model's own GGUF token table."""
from pathlib import Path

import pytest

from console.engine.vocabulary import VocabularyError, streams_whole, text_ids
from console.profile import load_profile
from console.paths import SERVER_PROFILE


def test_a_token_streams_whole_when_its_text_is_printable_ascii():
    assert streams_whole("\u2581exceeds".encode()) and streams_whole(b"]^{+}$")
    assert not streams_whole("\u2581r\u00eave".encode())       # another script: left out
    assert not streams_whole(b"") and not streams_whole(b"a\nb")


def test_a_model_that_is_not_a_gguf_file_draws_from_every_id(tmp_path):
    assert text_ids(None, 7) == tuple(range(7)) and text_ids(tmp_path / "m.bin", 3) == (0, 1, 2)
    with pytest.raises(VocabularyError, match="the model file is missing"):
        text_ids(tmp_path / "absent.gguf", 3)
    bad = tmp_path / "m.gguf"
    bad.write_bytes(b"not a gguf file")
    with pytest.raises(VocabularyError, match="m.gguf"):
        text_ids(bad, 3)


def test_gemma_3_draws_from_its_ascii_text_tokens_across_the_vocabulary():
    p = load_profile(SERVER_PROFILE)
    model = Path(p.model[0].path)
    if not model.is_file():
        pytest.fail(f"the model file {model} is missing: run `make llama-setup`", pytrace=False)
    ids = text_ids(model, p.parity.vocab)
    assert len(ids) == 143866 and sum(i >= 72000 for i in ids) == 95210
    assert 2 not in ids and 106 not in ids        # <bos>, <end_of_turn>: control tokens are left out
