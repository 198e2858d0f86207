"""The ids a drawn prompt may use: the whole vocabulary, as far as a server streams it back whole.

A served workload draws ids from the whole vocabulary, so a server that computes its output over
part of it departs. Two kinds of id are left out. A control token (a chat turn's marks, an image's
placeholders) or a raw byte is not text, and a server may stream it as other bytes than the grading
build detokenizes. And a token outside printable ASCII invites the model to continue in its script,
where it may answer with raw bytes of a character that the answer's last token leaves unfinished: a
server holds those back from the stream (llama-server does), and an honest answer would then stream
fewer ids than it reports. The GGUF file says each token's type and text: the pool is the normal
tokens whose text (SentencePiece's "▁" read as a space) is printable ASCII (Gemma 3 270M: 143,866 of
262,144 ids, 95,210 of them above id 72,000). A model that is not a GGUF file draws from every id.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

NORMAL = 1      # llama.cpp's LLAMA_TOKEN_TYPE_NORMAL, as GGUF writes it
SPACE = "\u2581".encode()   # SentencePiece's word boundary


class VocabularyError(ValueError):
    pass


def text_ids(model: Path | None, vocab: int) -> tuple[int, ...]:
    """The ids a drawn prompt may use (every id below ``vocab`` when ``model`` is not a GGUF file)."""
    if model is None or model.suffix != ".gguf":
        return tuple(range(vocab))
    if not model.is_file():
        raise VocabularyError(f"{model}: the model file is missing (`make llama-setup` assembles the shipped one)")
    st = model.stat()
    return _gguf_text_ids(str(model), st.st_size, st.st_mtime_ns, vocab)


def streams_whole(text: bytes) -> bool:
    """A token's text that a server streams as it is: printable ASCII, its word boundary a space."""
    return bool(text) and all(32 <= c < 127 for c in text.replace(SPACE, b" "))


@functools.lru_cache(maxsize=4)
def _gguf_text_ids(path: str, size: int, mtime_ns: int, vocab: int) -> tuple[int, ...]:
    import gguf     # only a GGUF model needs it
    try:
        fields = gguf.GGUFReader(path).fields
        types, texts = fields["tokenizer.ggml.token_type"], fields["tokenizer.ggml.tokens"]
    except KeyError as e:
        raise VocabularyError(f"{path}: no {e.args[0]} in the GGUF file") from None
    except (OSError, ValueError) as e:
        raise VocabularyError(f"{path}: not a readable GGUF file: {e}") from None
    kind = np.array([int(types.parts[i][0]) for i in types.data])
    if len(kind) != vocab or len(texts.data) != vocab:
        raise VocabularyError(f"{path}: {len(kind)} token types, but parity.vocab is {vocab}")
    return tuple(int(i) for i in np.flatnonzero(kind == NORMAL) if streams_whole(bytes(texts.parts[texts.data[i]])))
