"""Coverage-guided fuzzing of the engine-output readers (optional; needs ``atheris``).

    .venv/bin/python fuzz/atheris_protocol.py -max_total_time=60
    .venv/bin/python fuzz/atheris_protocol.py -atheris_runs=50000

The first input byte picks the target: even -> bench stdout parser, odd -> logits
reader (the rest of the input is written as the .npy file). Any exception other
than ``ParityInputError`` is a finding.
"""
from __future__ import annotations

import os
import sys
import tempfile

import atheris

with atheris.instrument_imports():
    from console.engine.protocol import ParityInputError, parse_bench_output, read_logits

_DIR = tempfile.mkdtemp(prefix="fuzz-logits-")
_PATH = os.path.join(_DIR, "logits.npy")


def one_input(data: bytes) -> None:
    if not data:
        return
    body = data[1:]
    if data[0] % 2 == 0:
        p = parse_bench_output(body, metric="decode_tok_s", tokens=256, depth=4096, context="seek",
                               max_bytes=1 << 20)
        if p.result is not None and p.refusals:
            raise AssertionError("a result survived a refusal")
        return
    with open(_PATH, "wb") as f:
        f.write(body)
    try:
        a = read_logits(_PATH, depths=2, rows=1, vocab=4, max_bytes=4096)
    except ParityInputError:
        return
    if a.shape != (2, 1, 4):
        raise AssertionError(f"shape {a.shape}")


def main() -> None:
    seeds = os.path.join(os.path.dirname(__file__), "corpus")
    argv = list(sys.argv)
    if os.path.isdir(seeds) and not any(not a.startswith("-") for a in argv[1:]):
        # libFuzzer writes new inputs into the first directory: keep the seeds read-only
        argv += [tempfile.mkdtemp(prefix="fuzz-corpus-"), seeds]
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
