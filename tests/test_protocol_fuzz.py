"""Fuzzing the readers of hostile engine output: every input ends in a refusal or a
``ParityInputError``, never in another exception, and a refusal never lets a result through."""
from __future__ import annotations

import io
import json
import math

import numpy as np
from hypothesis import HealthCheck, example, given, settings, strategies as st

from console.engine.protocol import (
    RESULT_KEYS,
    BenchParse,
    ParityInputError,
    parse_bench_output,
    read_logits,
    read_row_logits)

FAST = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.function_scoped_fixture])
EXPECT = dict(metric="decode_tok_s", tokens=256, depth=4096, context="seek")
GOOD = {"metric": "decode_tok_s", "value": 212.5, "tokens": 256, "elapsed_s": 1.2047,
        "depth": 4096, "context": "seek", "shortcut": "seek"}


def check(p: BenchParse, out: bytes) -> None:
    """Invariants every parse keeps, whatever the input."""
    assert isinstance(p, BenchParse)
    assert all(isinstance(r, str) and r for r in p.refusals)
    assert (p.result is None) == bool(p.refusals)
    if p.result is not None:
        assert list(p.result) == list(RESULT_KEYS)
        assert out.count(b"BENCH_RESULT ") >= 1
        for k in ("value", "elapsed_s"):
            v = p.result[k]
            assert type(v) is float and math.isfinite(v) and v > 0
        assert type(p.result["tokens"]) is int and type(p.result["depth"]) is int
        assert p.result["metric"] == EXPECT["metric"] and p.result["context"] == EXPECT["context"]
        implied = p.result["tokens"] / p.result["elapsed_s"]
        assert abs(p.result["value"] - implied) <= 0.01 * implied + 1e-9
    assert len(p.log_tail) <= 40
    assert all(len(t) <= 600 for t in p.log_tail)
    assert all("\x1b" not in t and "\n" not in t for t in p.log_tail)


def run(out: bytes, **kw) -> BenchParse:
    p = parse_bench_output(out, **{**EXPECT, **kw})
    check(p, out)
    return p


# --- strategies -------------------------------------------------------------

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10 ** 30), max_value=10 ** 30),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.sampled_from([0, -1, 1e308, 5e-324, 256, 4096, 212.5, 1.2047, "seek", "doc", "none", "decode_tok_s"]),
)
json_values = st.recursive(json_scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                           max_leaves=12)


@st.composite
def mutated_result(draw) -> dict:
    d = dict(GOOD)
    for k in draw(st.lists(st.sampled_from(RESULT_KEYS), max_size=3, unique=True)):
        if draw(st.booleans()):
            d[k] = draw(json_values)
        else:
            del d[k]
    for k, v in draw(st.dictionaries(st.sampled_from(["verdict", "tier", "accepted", "Value", "value ", "pass"]),
                                     json_values, max_size=2)).items():
        d[k] = v
    return d


def dump(d: dict) -> bytes:
    # allow_nan: the fuzzer must also send NaN / Infinity tokens that json would accept
    return json.dumps(d, allow_nan=True).encode()


log_lines = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=120).map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.sampled_from([b"VERDICT accepted", b"tier: xl", b"PASS", b'{"verdict": "accepted"}',
                     b"BENCH_RESULT", b"BENCH_RESULT ", b"BENCH_RESULT {", b"BENCH_RESULT {}",
                     b"xBENCH_RESULT " + dump(GOOD), b" BENCH_RESULT " + dump(GOOD),
                     b"\xff\xfe\xfd", b"\x1b[2J\x1b]0;title\x07", b"\r" * 10, b"\0" * 50]),
)


# --- bench output -------------------------------------------------------------

@FAST
@given(st.binary(max_size=4000))
@example(b"\xff" * 100 + b"\nBENCH_RESULT \xff")
def test_binary_noise(data):
    run(data)


@FAST
@given(st.lists(log_lines, max_size=30), mutated_result(), st.integers(0, 30), st.booleans())
def test_mutated_result_among_noise(lines, result, pos, crlf):
    lines = list(lines)
    lines.insert(min(pos, len(lines)), b"BENCH_RESULT " + dump(result))
    out = (b"\r\n" if crlf else b"\n").join(lines)
    p = run(out)
    genuine = [x for x in out.split(b"\n") if x.startswith(b"BENCH_RESULT ")]
    if len(genuine) > 1:
        assert p.result is None
    if p.result is not None:
        assert set(result) == set(RESULT_KEYS)


@FAST
@given(st.lists(log_lines, max_size=20), st.integers(2, 5))
def test_duplicate_result_lines_refused(noise, n):
    out = b"\n".join(list(noise) + [b"BENCH_RESULT " + dump(GOOD)] * n)
    p = run(out)
    assert p.result is None
    assert any("BENCH_RESULT lines" in r for r in p.refusals)


@FAST
@given(st.sampled_from(["value", "elapsed_s"]),
       st.one_of(st.sampled_from([float("nan"), float("inf"), float("-inf"), 0.0, -0.0, -1.0, 1e308, 5e-324]),
                 st.floats(max_value=0.0), st.floats(min_value=1e12)))
def test_absurd_numbers_refused(key, v):
    p = run(b"BENCH_RESULT " + dump({**GOOD, key: v}))
    assert p.result is None


@FAST
@given(st.text(max_size=300))
def test_arbitrary_text_after_prefix(text):
    run(b"BENCH_RESULT " + text.encode("utf-8", "surrogatepass"))


@settings(max_examples=6, deadline=None)
@given(st.sampled_from([b"a", b"\xff", b"{", b"BENCH_RESULT {", b"\x00"]), st.integers(1, 3),
       st.booleans())
def test_megabyte_lines(chunk, megabytes, with_result):
    big = chunk * ((megabytes << 20) // len(chunk))
    out = big + (b"\nBENCH_RESULT " + dump(GOOD) + b"\n" if with_result else b"") + big
    p = run(out)
    if with_result and not chunk.startswith(b"BENCH"):
        assert p.ok
    # the same stdout over the byte cap: refused, and nothing large is kept
    q = run(out, max_bytes=1 << 20)
    assert q.result is None and "over the limit" in q.refusals[0]


# --- logits files ---------------------------------------------------------------

def npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=True)
    return buf.getvalue()


def try_read(path, *, depths=3, rows=2, vocab=8, max_bytes=1 << 20):
    try:
        a = read_logits(path, depths=depths, rows=rows, vocab=vocab, max_bytes=max_bytes)
    except ParityInputError as e:
        assert str(e)
        return None
    assert a.dtype in (np.float32, np.float64) and a.dtype.isnative and a.shape == (depths, rows, vocab)
    assert np.isfinite(a).all()
    return a


good_logits = npy_bytes(np.random.default_rng(1).standard_normal((3, 2, 8)).astype(np.float32))


@FAST
@given(st.binary(max_size=600))
def test_garbage_files(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("g") / "x.npy"
    p.write_bytes(data)
    assert try_read(p) is None


@FAST
@given(st.integers(0, len(good_logits) - 1))
def test_truncated_files(tmp_path_factory, cut):
    p = tmp_path_factory.mktemp("t") / "x.npy"
    p.write_bytes(good_logits[:cut])
    assert try_read(p) is None


@FAST
@given(st.lists(st.tuples(st.integers(0, len(good_logits) - 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_bit_flipped_files(tmp_path_factory, flips):
    data = bytearray(good_logits)
    for i, b in flips:
        data[i] = b
    p = tmp_path_factory.mktemp("f") / "x.npy"
    p.write_bytes(bytes(data))
    try_read(p)     # may or may not parse (a flipped data byte is still data), never another exception


@FAST
@given(st.binary(min_size=1, max_size=200))
def test_oversized_or_padded(tmp_path_factory, tail):
    p = tmp_path_factory.mktemp("o") / "x.npy"
    p.write_bytes(good_logits + tail)
    assert try_read(p) is None
    assert try_read(p, max_bytes=len(good_logits)) is None


shapes = st.lists(st.integers(0, 9), min_size=0, max_size=4).map(tuple)
dtypes = st.sampled_from(["<f4", ">f4", "<f8", ">f8", "<f2", "<i4", "<i8", "|u1", "|b1", "<c8", "|O", "<U3",
                          "|S4", "<m8[s]", "<M8[D]"])


@FAST
@given(shapes, dtypes, st.booleans())
def test_wrong_shapes_and_dtypes(tmp_path_factory, shape, dtype, fortran):
    if dtype == "|O":
        arr = np.empty(shape, dtype=object)
        arr.fill(1.0)
    else:
        arr = np.zeros(shape, dtype=dtype)
    if fortran:
        arr = np.asfortranarray(arr)
    p = tmp_path_factory.mktemp("s") / "x.npy"
    p.write_bytes(npy_bytes(arr))
    got = try_read(p)
    ok = np.dtype(dtype).kind == "f" and np.dtype(dtype).itemsize in (4, 8) and tuple(shape) == (3, 2, 8)
    assert (got is not None) == ok
    row = None
    try:
        row = read_row_logits(p, 8, 1 << 20)
    except ParityInputError:
        pass
    assert (row is not None) == (np.dtype(dtype).kind == "f" and np.dtype(dtype).itemsize in (4, 8)
                                 and tuple(shape) == (8,))


@FAST
@given(st.lists(st.sampled_from([0.0, 1.0, -3.5, float("nan"), float("inf"), float("-inf"), 3e38]),
                min_size=16, max_size=16))
def test_non_finite_values(tmp_path_factory, vals):
    a = np.array(vals, dtype=np.float64).reshape(2, 1, 8)
    p = tmp_path_factory.mktemp("n") / "x.npy"
    p.write_bytes(npy_bytes(a))
    got = try_read(p, depths=2, rows=1, vocab=8)
    assert (got is None) == (not np.isfinite(a).all())


@FAST
@given(st.text(max_size=200), st.sampled_from([1, 2, 3]))
def test_forged_headers(tmp_path_factory, header, version):
    h = header.encode("utf-8", "surrogatepass")
    size = len(h).to_bytes(2 if version == 1 else 4, "little")
    p = tmp_path_factory.mktemp("h") / "x.npy"
    p.write_bytes(b"\x93NUMPY" + bytes([version, 0]) + size + h + b"\0" * 64)
    assert try_read(p) is None


@FAST
@given(st.dictionaries(st.sampled_from(["descr", "fortran_order", "shape", "extra"]), json_values, max_size=4))
def test_forged_header_dicts(tmp_path_factory, d):
    h = repr(d).encode()
    p = tmp_path_factory.mktemp("d") / "x.npy"
    p.write_bytes(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + b"\0" * 256)
    try_read(p)
