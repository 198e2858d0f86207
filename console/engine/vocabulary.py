"""The ids a model's tokenizer makes from text: what a drawn prompt may use.

A served workload draws ids from the whole vocabulary, so a server that computes its output over
part of it departs; but a control token (a chat turn's marks, an image's placeholders) or a raw
byte is not text, and a server may stream it as other bytes than the grading build detokenizes.
The GGUF file says each token's type; the normal ones are the pool (Gemma 3 270M: 255,474 of
262,144). A model that is not a GGUF file draws from the whole vocabulary.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

NORMAL = 1      # llama.cpp's LLAMA_TOKEN_TYPE_NORMAL, as GGUF writes it


class VocabularyError(ValueError):
    pass


def text_ids(model: Path | None, vocab: int) -> tuple[int, ...]:
    """The ids of ``model``'s normal tokens (every id below ``vocab`` when it is not a GGUF file)."""
    if model is None or model.suffix != ".gguf":
        return tuple(range(vocab))
    st = model.stat()
    return _gguf_normal(str(model), st.st_size, st.st_mtime_ns, vocab)


@functools.lru_cache(maxsize=4)
def _gguf_normal(path: str, size: int, mtime_ns: int, vocab: int) -> tuple[int, ...]:
    import gguf     # only a GGUF model needs it
    try:
        field = gguf.GGUFReader(path).fields["tokenizer.ggml.token_type"]
    except KeyError:
        raise VocabularyError(f"{path}: no tokenizer.ggml.token_type in the GGUF file") from None
    except (OSError, ValueError) as e:
        raise VocabularyError(f"{path}: not a readable GGUF file: {e}") from None
    types = np.array([int(field.parts[i][0]) for i in field.data])
    if len(types) != vocab:
        raise VocabularyError(f"{path}: {len(types)} token types, but parity.vocab is {vocab}")
    return tuple(int(i) for i in np.flatnonzero(types == NORMAL))
