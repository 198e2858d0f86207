"""The strict bench-output parser and the safe logits readers."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from console.engine.protocol import (
    BenchParse,
    ParityInputError,
    log_tail,
    parse_bench_output,
    read_logits,
    read_row_logits)

GOOD = {"metric": "decode_tok_s", "value": 212.5, "tokens": 256, "elapsed_s": 1.2047,
        "depth": 4096, "context": "seek", "shortcut": "seek"}
EXPECT = dict(metric="decode_tok_s", tokens=256, depth=4096, context="seek")


def line(obj: dict | None = None, **over) -> bytes:
    d = dict(GOOD if obj is None else obj)
    d.update(over)
    return b"BENCH_RESULT " + json.dumps(d).encode()


def parse(out: bytes, **kw) -> BenchParse:
    return parse_bench_output(out, **{**EXPECT, **kw})


# --- accepted ---------------------------------------------------------------

def test_good_line_among_log_text():
    p = parse(b"loading model\nwarming up\n" + line() + b"\nbye\n")
    assert p.ok and p.refusals == []
    assert p.result == GOOD
    assert list(p.result) == list(GOOD)
    assert isinstance(p.result["value"], float) and isinstance(p.result["tokens"], int)
    assert p.log_tail[-1] == "bye" and p.log_tail[0] == "loading model"


def test_integer_value_is_typed_float():
    p = parse(line(value=200, elapsed_s=1.28))
    assert p.ok and p.result["value"] == 200.0 and type(p.result["value"]) is float


def test_crlf_and_trailing_spaces_accepted():
    assert parse(line() + b" \r\n").ok


def test_doc_context_with_no_shortcut():
    p = parse(line(context="doc", shortcut="none"), context="doc")
    assert p.ok


def test_rate_within_one_percent_accepted():
    # 256 / 1.2047 = 212.50; 0.9 % off is still inside the 1 % band
    assert parse(line(value=212.5 * 1.009)).ok


# --- refused ----------------------------------------------------------------

@pytest.mark.parametrize("out, needle", [
    (b"no result here\n", "no BENCH_RESULT line"),
    (b"", "no BENCH_RESULT line"),
    (line() + b"\n" + line() + b"\n", "two BENCH_RESULT lines"),
    (line() + b"\n" + line() + b"\n" + line(), "three BENCH_RESULT lines"),
    (line(value=float("nan")), "value is NaN"),
    (line(value=float("inf")), "value is infinite"),
    (line(elapsed_s=float("-inf")), "elapsed_s is infinite"),
    (line(value=-212.5), "value -212.5 is not > 0"),
    (line(value=0), "value 0 is not > 0"),
    (line(value=True), "value is a boolean, not a number"),
    (line(value="212.5"), "value is a string, not a number"),
    (line(value=None), "value is null, not a number"),
    (line(tokens=256.0), "tokens 256.0 is not an integer"),
    (line(tokens=True), "tokens is a boolean, not an integer"),
    (line(tokens=128, value=128 / 1.2047), "tokens 128 != expected 256"),
    (line(depth=0), "depth 0 != expected 4096"),
    (line(metric="x"), "metric 'x' != expected 'decode_tok_s'"),
    (line(context="doc", shortcut="none"), "context 'doc' != expected 'seek'"),
    (line(context="warp"), "context 'warp' is not one of 'seek', 'doc'"),
    (line(shortcut="cache"), "shortcut 'cache' is not one of 'seek', 'none'"),
    (line(value=210.0, elapsed_s=2.4381), "value 210.0 disagrees with tokens/elapsed_s 105.0 by more than 1%"),
    (line(verdict="accepted"), "unknown key 'verdict'"),
    (line({k: v for k, v in GOOD.items() if k != "elapsed_s"}), "missing key 'elapsed_s'"),
    (b"BENCH_RESULT [1, 2]", "BENCH_RESULT is not followed by one JSON object"),
    (b"BENCH_RESULT  " + json.dumps(GOOD).encode(), "BENCH_RESULT is not followed by one JSON object"),
    (b"BENCH_RESULT " + json.dumps(GOOD).encode()[:-1], "not valid JSON"),
    (line() + b" {}", "text after its JSON object"),
    (b"BENCH_RESULT " + json.dumps(GOOD).encode()[:-1] + b', "value": 1}', "duplicate key 'value'"),
    (b"BENCH_RESULT \xff\xfe{}", "not valid UTF-8"),
    (b"BENCH_RESULT " + b"[" * 5000, "over the limit"),
    (b"BENCH_RESULT {\"a\":" + b"[" * 1500 + b"]" * 1500 + b"}", "not valid JSON"),
])
def test_refusals(out, needle):
    p = parse(out)
    assert p.result is None and not p.ok
    assert any(needle in r for r in p.refusals), p.refusals


def test_doc_context_cannot_claim_seek_shortcut():
    p = parse(line(context="doc", shortcut="seek"), context="doc")
    assert p.result is None and any("shortcut 'seek'" in r for r in p.refusals)


def test_a_token_count_past_a_floats_range_is_refused_not_a_crash():
    p = parse(line(tokens=10 ** 400))
    assert p.result is None and "tokens 100000…(401 digits) != expected 256" in p.refusals
    assert any("disagrees with tokens/elapsed_s" in r for r in p.refusals)


def test_all_problems_are_listed_not_just_the_first():
    p = parse(line(metric="m", value=float("nan"), verdict="xl"))
    assert {"unknown key 'verdict'", "value is NaN", "metric 'm' != expected 'decode_tok_s'"} <= set(p.refusals)


@pytest.mark.parametrize("text", [
    b"VERDICT accepted",
    b"tier: xl",
    json.dumps(GOOD).encode(),
    b"result BENCH_RESULT " + json.dumps(GOOD).encode(),
    b" BENCH_RESULT " + json.dumps(GOOD).encode(),
    b"\tBENCH_RESULT " + json.dumps(GOOD).encode(),
    b"BENCH_RESULT" + json.dumps(GOOD).encode(),
    b"BENCH_RESULTS " + json.dumps(GOOD).encode(),
    b"bench_result " + json.dumps(GOOD).encode(),
    b"\xef\xbb\xbfBENCH_RESULT " + json.dumps(GOOD).encode(),   # BOM
    "BENCH\u200bRESULT ".encode() + json.dumps(GOOD).encode(),   # zero-width space
    b'{"verdict": "accepted", "tier": "xl"}',
])
def test_lookalikes_are_log_text(text):
    # with the real line present, a lookalike neither counts as a second line nor changes the result
    p = parse(text + b"\n" + line() + b"\n")
    assert p.ok and p.result == GOOD
    assert parse(text + b"\n").refusals == ["no BENCH_RESULT line"]


def test_oversized_output_refused_without_scanning():
    out = line() + b"\n" + b"x" * 2000
    p = parse(out, max_bytes=1000)
    assert p.result is None and "over the limit of 1000 bytes" in p.refusals[0]
    assert p.log_tail[-1].startswith("x" * 100)


def test_megabyte_line_does_not_blow_up_the_tail():
    out = b"a" * (4 << 20) + b"\n" + line()
    p = parse(out)
    assert p.ok
    assert len(p.log_tail) == 2 and len(p.log_tail[0]) < 600 and "bytes]" in p.log_tail[0]


def test_str_input_is_accepted():
    assert parse_bench_output(line().decode(), **EXPECT).ok


# --- log tail ---------------------------------------------------------------

def test_log_tail_keeps_last_40_lines_and_escapes_controls():
    out = b"".join(b"line %d\n" % i for i in range(100)) + b"\x1b[2J\x07bad \xff\xfe end\r\n"
    tail = log_tail(out)
    assert len(tail) == 40
    assert tail[0] == "line 61"
    assert tail[-1] == "\\x1b[2J\\x07bad \ufffd\ufffd end"
    assert all("\x1b" not in t for t in tail)


def test_log_tail_edge_cases():
    assert log_tail(b"") == []
    assert log_tail(b"one") == ["one"]
    assert log_tail(b"\nx") == ["", "x"]
    assert log_tail(b"a\n\n") == ["a", ""]


# --- logits -------------------------------------------------------------------

def save(tmp_path, arr, name="logits.npy") -> str:
    p = tmp_path / name
    np.save(p, arr, allow_pickle=True)
    return str(p)


def test_read_logits_3d_float32(tmp_path):
    a = np.random.default_rng(0).standard_normal((3, 2, 16)).astype(np.float32)
    got = read_logits(save(tmp_path, a), depths=3, rows=2, vocab=16, max_bytes=1 << 20)
    # as stored, read-only: the grading widens row by row, so the file costs its size once
    assert got.dtype == np.float32 and got.shape == (3, 2, 16) and not got.flags.writeable
    np.testing.assert_array_equal(got, a)


def test_read_logits_2d_when_one_row(tmp_path):
    a = np.arange(3 * 8, dtype=np.float64).reshape(3, 8)
    got = read_logits(save(tmp_path, a), depths=3, rows=1, vocab=8, max_bytes=1 << 20)
    assert got.shape == (3, 1, 8)
    np.testing.assert_array_equal(got[:, 0, :], a)


def test_read_logits_big_endian_and_fortran(tmp_path):
    a = np.asfortranarray(np.arange(24, dtype=">f4").reshape(2, 3, 4))
    got = read_logits(save(tmp_path, a), depths=2, rows=3, vocab=4, max_bytes=1 << 20)
    assert got.dtype.isnative
    np.testing.assert_array_equal(got, np.arange(24).reshape(2, 3, 4))


def test_2d_refused_when_rows_above_one(tmp_path):
    with pytest.raises(ParityInputError, match="shape"):
        read_logits(save(tmp_path, np.zeros((3, 8), np.float32)), depths=3, rows=2, vocab=8, max_bytes=1 << 20)


@pytest.mark.parametrize("arr, needle", [
    (np.zeros((3, 2, 9), np.float32), "shape [3, 2, 9] != expected [3, 2, 8]"),
    (np.zeros((2, 2, 8), np.float32), "shape"),
    (np.zeros((3, 2, 8), np.float16), "dtype <f2 is not float32 or float64"),
    (np.zeros((3, 2, 8), np.int32), "is not float32 or float64"),
    (np.zeros((3, 2, 8), np.complex64), "is not float32 or float64"),
    (np.zeros((3, 2, 8), np.longdouble), "is not float32 or float64"),
    (np.zeros((3, 2), dtype=[("a", "<f4", (8,))]), "is not float32 or float64"),
    (np.array([[[1.0] * 8] * 2] * 3, dtype=object), "Python objects"),
    (np.full((3, 2, 8), np.nan, np.float32), "non-finite"),
    (np.where(np.eye(8, dtype=bool)[None, :2], np.inf, 0.0).repeat(3, 0).astype(np.float32), "non-finite"),
])
def test_read_logits_refusals(tmp_path, arr, needle):
    with pytest.raises(ParityInputError, match=None) as ei:
        read_logits(save(tmp_path, arr), depths=3, rows=2, vocab=8, max_bytes=1 << 20)
    assert needle in str(ei.value)


def test_missing_file(tmp_path):
    with pytest.raises(ParityInputError, match="does not exist"):
        read_logits(tmp_path / "nope.npy", depths=1, rows=1, vocab=2, max_bytes=100)


def test_not_npy(tmp_path):
    p = tmp_path / "x.npy"
    p.write_bytes(b"PK\x03\x04 this is a zip, or anything else")
    with pytest.raises(ParityInputError, match="bad magic"):
        read_logits(p, depths=1, rows=1, vocab=2, max_bytes=1000)


def test_npz_refused(tmp_path):
    p = tmp_path / "x.npz"
    np.savez(p, a=np.zeros(4, np.float32))
    with pytest.raises(ParityInputError, match="bad magic"):
        read_row_logits(p, 4, 1 << 20)


def test_truncated(tmp_path):
    path = save(tmp_path, np.zeros((3, 2, 8), np.float32))
    data = open(path, "rb").read()
    open(path, "wb").write(data[:-5])
    with pytest.raises(ParityInputError, match="truncated"):
        read_logits(path, depths=3, rows=2, vocab=8, max_bytes=1 << 20)
    open(path, "wb").write(data[:20])
    with pytest.raises(ParityInputError):
        read_logits(path, depths=3, rows=2, vocab=8, max_bytes=1 << 20)


def test_trailing_bytes(tmp_path):
    path = save(tmp_path, np.zeros((3, 2, 8), np.float32))
    with open(path, "ab") as f:
        f.write(b"\0" * 4)
    with pytest.raises(ParityInputError, match="after the array data"):
        read_logits(path, depths=3, rows=2, vocab=8, max_bytes=1 << 20)


def test_oversized_checked_before_loading(tmp_path, monkeypatch):
    path = save(tmp_path, np.zeros((3, 2, 8), np.float32))
    from console.engine import protocol as proto
    monkeypatch.setattr(proto, "_npy_header", lambda *a: pytest.fail("header read before the size check"))
    with pytest.raises(ParityInputError, match="over the limit"):
        read_logits(path, depths=3, rows=2, vocab=8, max_bytes=100)


def test_sparse_huge_file_refused_by_size(tmp_path):
    p = tmp_path / "huge.npy"
    with open(p, "wb") as f:
        f.truncate(8 << 30)      # 8 GiB sparse: must be refused from its size alone
    with pytest.raises(ParityInputError, match="over the limit"):
        read_logits(p, depths=7, rows=4, vocab=2048, max_bytes=64 << 20)


def test_symlink_and_fifo_refused(tmp_path):
    target = save(tmp_path, np.zeros(4, np.float32), "real.npy")
    link = tmp_path / "link.npy"
    link.symlink_to(target)
    with pytest.raises(ParityInputError, match="symbolic link"):
        read_row_logits(link, 4, 1 << 20)
    fifo = tmp_path / "fifo.npy"
    os.mkfifo(fifo)
    with pytest.raises(ParityInputError, match="not a regular file"):
        read_row_logits(fifo, 4, 1 << 20)     # must not block
    with pytest.raises(ParityInputError, match="not a regular file"):
        read_row_logits(tmp_path, 4, 1 << 20)


def test_header_with_code_is_not_evaluated(tmp_path):
    header = b"{'descr': __import__('os').system('false'), 'fortran_order': False, 'shape': (4,), }"
    header += b" " * (64 - (10 + len(header) + 1) % 64) + b"\n"
    p = tmp_path / "evil.npy"
    p.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\0" * 16)
    with pytest.raises(ParityInputError, match="unreadable .npy header"):
        read_row_logits(p, 4, 1 << 20)


def test_read_row_logits(tmp_path):
    a = np.linspace(-3, 3, 32).astype(np.float32)
    got = read_row_logits(save(tmp_path, a), 32, 1 << 20)
    assert got.shape == (32,) and got.dtype == np.float32
    with pytest.raises(ParityInputError, match="shape"):
        read_row_logits(save(tmp_path, a.reshape(1, 32)), 32, 1 << 20)


def test_parity_input_error_is_a_value_error():
    assert issubclass(ParityInputError, ValueError)
