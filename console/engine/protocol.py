"""Strict readers of what an engine produces: its bench output and its logits files.

Everything an engine writes is hostile input. The bench's stdout counts only
through one strictly shaped line (``BENCH_RESULT `` + one JSON object with exactly
the keys of docs/PROTOCOL.md); every other byte is log text, however much it looks
like a result or a verdict. A logits file counts only if it is a plain ``.npy`` of
float32/float64 with the declared shape and finite values; its size is checked
before anything is read, and nothing in it is ever unpickled.

Neither reader raises on bad input other than as documented: the bench parser
returns refusals (plain sentences for the receipt), the logits readers raise
``ParityInputError``.
"""
from __future__ import annotations

import ast
import json
import math
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

# one error type for every malformed parity input, shared with the parity core
from console.core.records.parity import ParityInputError
from console.core.records.untrusted import CONTROL
from console.runtime.base import LOG_TAIL_LINES


RESULT_PREFIX = b"BENCH_RESULT "
RESULT_KEYS = ("metric", "value", "tokens", "elapsed_s", "depth", "context", "shortcut")
CONTEXTS = ("seek", "doc")
SHORTCUTS = ("seek", "none")
RATE_TOLERANCE = 0.01             # value must agree with tokens / elapsed_s within 1 %

DEFAULT_MAX_BYTES = 16 * 1024 * 1024   # stdout beyond this is refused, not scanned
MAX_RESULT_LINE = 4096            # a real result line is ~200 bytes; longer ones are refused unparsed
LOG_LINE_CHARS = 500


@dataclass
class BenchParse:
    """What the console takes from one bench run's stdout.

    ``result`` is set only when exactly one result line passed every check; it then
    holds exactly the protocol keys with Python types (value/elapsed_s float,
    tokens/depth int, the rest str). ``refusals`` are sentences naming each problem.
    """
    result: dict[str, Any] | None
    refusals: list[str] = field(default_factory=list)
    log_tail: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.result is not None and not self.refusals


# --- bench output ----------------------------------------------------------

_RESULT_AT_LINE_START = re.compile(rb"(?:^|\n)BENCH_RESULT ")
_NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five"}


def parse_bench_output(stdout: bytes, *, metric: str, tokens: int, depth: int, context: str,
                       max_bytes: int = DEFAULT_MAX_BYTES) -> BenchParse:
    """Parse a bench run's stdout strictly; never raises on any content of ``stdout``."""
    if isinstance(stdout, str):
        stdout = stdout.encode("utf-8", "surrogateescape")
    data = bytes(stdout)
    tail = log_tail(data)
    if len(data) > max_bytes:
        # a result line past the cap could hide a second one; refuse rather than guess
        return BenchParse(None, [f"output is {len(data)} bytes, over the limit of {max_bytes} bytes"], tail)

    starts = [m.end() - len(RESULT_PREFIX) for m in _RESULT_AT_LINE_START.finditer(data)]
    if not starts:
        return BenchParse(None, ["no BENCH_RESULT line"], tail)
    if len(starts) > 1:
        n = len(starts)
        return BenchParse(None, [f"{_NUMBER_WORDS.get(n, str(n))} BENCH_RESULT lines"], tail)

    start = starts[0]
    end = data.find(b"\n", start)
    line = data[start:] if end < 0 else data[start:end]
    obj, refusals = _decode_result_line(line)
    if obj is None:
        return BenchParse(None, refusals, tail)
    result, more = check_result(obj, metric=metric, tokens=tokens, depth=depth, context=context)
    refusals += more
    return BenchParse(result if not refusals else None, refusals, tail)


def _decode_result_line(line: bytes) -> tuple[dict[str, Any] | None, list[str]]:
    if len(line) > MAX_RESULT_LINE:
        return None, [f"BENCH_RESULT line is {len(line)} bytes long, over the limit of {MAX_RESULT_LINE}"]
    payload = line[len(RESULT_PREFIX):]
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        return None, ["BENCH_RESULT line is not valid UTF-8"]
    if not text.startswith("{"):
        return None, ["BENCH_RESULT is not followed by one JSON object"]

    problems: list[str] = []

    def constant(name: str) -> float:
        # json would otherwise accept NaN / Infinity silently
        problems.append(f"non-standard JSON constant {name}")
        return float("nan") if name == "NaN" else float(name.replace("Infinity", "inf"))

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for k, v in items:
            if k in seen:
                problems.append(f"duplicate key {_short(k)}")
            seen[k] = v
        return seen

    decoder = json.JSONDecoder(parse_constant=constant, object_pairs_hook=pairs)
    try:
        obj, end = decoder.raw_decode(text)
    except (ValueError, RecursionError) as e:   # JSONDecodeError, int-digit limits, deep nesting
        msg = e.msg if isinstance(e, json.JSONDecodeError) else type(e).__name__
        return None, [f"BENCH_RESULT line is not valid JSON ({msg})"]
    if text[end:].strip(" \t\r"):
        return None, ["BENCH_RESULT line has text after its JSON object"]
    if not isinstance(obj, dict):
        return None, ["BENCH_RESULT is not followed by one JSON object"]
    # NaN/Infinity are reported per key below (e.g. "value is NaN"); duplicates here
    return obj, [p for p in problems if p.startswith("duplicate")]


def check_result(obj: dict[str, Any], *, metric: str, tokens: int, depth: int,
                 context: str) -> tuple[dict[str, Any], list[str]]:
    """Check a decoded result object against the protocol and the run's parameters.

    Returns the typed result (only meaningful when the refusal list is empty).
    """
    refusals = [f"unknown key {_short(k)}" for k in obj if k not in RESULT_KEYS]
    refusals += [f"missing key '{k}'" for k in RESULT_KEYS if k not in obj]
    out: dict[str, Any] = {}
    for k in RESULT_KEYS:
        if k in obj:
            value, problem = _FIELD_CHECKS[k](k, obj[k])
            if problem is None:
                out[k] = value
            else:
                refusals.append(problem)
    refusals += _against_run(out, metric=metric, tokens=tokens, depth=depth, context=context)
    return {k: out[k] for k in RESULT_KEYS if k in out}, refusals


# Each field check: (the typed value, None) or (None, why it is refused).

def _text(k: str, v: Any, allowed: tuple[str, ...] | None = None) -> tuple[str | None, str | None]:
    if not isinstance(v, str):
        return None, f"{k} is {_kind(v)}, not a string"
    if allowed is not None and v not in allowed:
        return None, f"{k} {_short(v)} is not one of " + ", ".join(f"'{a}'" for a in allowed)
    return v, None


def _positive(k: str, v: Any) -> tuple[float | None, str | None]:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None, f"{k} is {_kind(v)}, not a number"
    if isinstance(v, float) and math.isnan(v):
        return None, f"{k} is NaN"
    if isinstance(v, float) and math.isinf(v):
        return None, f"{k} is infinite"
    if v <= 0:
        return None, f"{k} {_num(v)} is not > 0"
    try:
        f = float(v)
    except OverflowError:       # an int too large for a float
        return None, f"{k} is too large"
    return (None, f"{k} is too large") if math.isinf(f) else (f, None)


def _integer(k: str, v: Any, lo: int) -> tuple[int | None, str | None]:
    if isinstance(v, float) and math.isfinite(v):
        return None, f"{k} {_num(v)} is not an integer"
    if isinstance(v, bool) or not isinstance(v, int):
        return None, f"{k} is {_kind(v)}, not an integer"
    if v < lo:
        return None, f"{k} {_num(v)} is below {lo}"
    return int(v), None


_FIELD_CHECKS: dict[str, Callable[[str, Any], tuple[Any, str | None]]] = {
    "metric": _text,
    "value": _positive,
    "tokens": lambda k, v: _integer(k, v, 1),
    "elapsed_s": _positive,
    "depth": lambda k, v: _integer(k, v, 0),
    "context": lambda k, v: _text(k, v, CONTEXTS),
    "shortcut": lambda k, v: _text(k, v, SHORTCUTS),
}


def _against_run(out: dict[str, Any], *, metric: str, tokens: int, depth: int, context: str) -> list[str]:
    """What the well-typed fields say that contradicts the run's parameters or each other."""
    refusals = []
    if "metric" in out and out["metric"] != metric:
        refusals.append(f"metric {_short(out['metric'])} != expected {_short(metric)}")
    if "tokens" in out and out["tokens"] != tokens:
        refusals.append(f"tokens {_num(out['tokens'])} != expected {tokens}")
    if "depth" in out and out["depth"] != depth:
        refusals.append(f"depth {_num(out['depth'])} != expected {depth}")
    if "context" in out and out["context"] != context:
        refusals.append(f"context {_short(out['context'])} != expected {_short(context)}")
    if out.get("context") == "doc" and out.get("shortcut") == "seek":
        refusals.append("shortcut 'seek' reported for context 'doc', which fills the cache from the document")
    if all(k in out for k in ("value", "tokens", "elapsed_s")):
        try:
            implied = out["tokens"] / out["elapsed_s"]
        except OverflowError:   # tokens past a float's range: the engine's line must not crash the round
            implied = math.inf
        if not math.isfinite(implied) or abs(out["value"] - implied) > RATE_TOLERANCE * implied:
            refusals.append(f"value {_num(out['value'])} disagrees with tokens/elapsed_s "
                            f"{_num(implied)} by more than {RATE_TOLERANCE:.0%}")
    return refusals


def log_tail(data: bytes, lines: int = LOG_TAIL_LINES, width: int = LOG_LINE_CHARS) -> list[str]:
    """The last ``lines`` lines of ``data`` as safe display text.

    Works backwards from the end so that a huge output costs only its tail; each
    line is decoded with replacement, control characters are shown escaped, and
    a line longer than ``width`` characters is cut and marked with its byte length.
    """
    end = len(data)
    if data.endswith(b"\n"):
        end -= 1
    if end <= 0:
        return []
    out: list[str] = []
    # 4 bytes per character at most, plus slack for replacement characters
    keep = width * 4 + 4
    while len(out) < lines:
        nl = data.rfind(b"\n", 0, end)
        first = nl + 1
        out.append(_display(data[first:min(end, first + keep)], end - first, width))
        if nl < 0:
            break
        end = nl
    out.reverse()
    return out


def _display(head: bytes, length: int, width: int) -> str:
    text = head.decode("utf-8", errors="replace").rstrip("\r").translate(CONTROL)
    if len(text) > width or len(head) < length:
        return text[:width] + f" …[{length} bytes]"
    return text


def _short(v: Any, limit: int = 40) -> str:
    s = repr(v).translate(CONTROL)
    return s if len(s) <= limit else s[: limit - 1] + "…'"


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, (list, dict)):
        return "an array" if isinstance(v, list) else "an object"
    return "a number"


def _num(x: float | int) -> str:
    """Short, stable rendering of a number for refusal sentences (6 significant digits)."""
    if isinstance(x, int) and not isinstance(x, bool):
        s = str(x)
        return s if len(s) <= 20 else f"{s[:6]}…({len(s)} digits)"
    try:
        return repr(float(f"{x:.6g}"))
    except (OverflowError, ValueError):
        return repr(x)


# --- logits files ----------------------------------------------------------

_NPY_MAGIC = b"\x93NUMPY"
_MAX_HEADER = 10000          # numpy's own default cap on header size


def read_logits(path: str | os.PathLike[str], *, depths: int, rows: int, vocab: int,
                max_bytes: int) -> np.ndarray:
    """Read an engine's parity logits, of shape ``[depths, rows, vocab]`` (read-only, as stored).

    The file must be a ``.npy`` holding float32 or float64 (either byte order), of
    shape ``[depths, rows, vocab]`` or, when ``rows == 1``, ``[depths, vocab]``
    (returned with the row axis added), every value finite. Raises
    ``ParityInputError`` for anything else.
    """
    accept = [(depths, rows, vocab)] + ([(depths, vocab)] if rows == 1 else [])
    arr = _read_npy(path, accept, max_bytes)
    return arr.reshape(depths, rows, vocab)


def read_row_logits(path: str | os.PathLike[str], vocab: int, max_bytes: int) -> np.ndarray:
    """Read the bench's ``bench_logits.npy``: shape ``[vocab]`` (read-only, as stored)."""
    return _read_npy(path, [(vocab,)], max_bytes)


def open_regular(name: str, max_bytes: int, what: str = "logits file") -> tuple[Any, int]:
    """(binary file, size) of a regular file no larger than ``max_bytes``, opened without following
    a symbolic link; anything else raises ``ParityInputError``."""
    try:
        # no symlinks (they could point at any host file), and non-blocking so a FIFO
        # planted in the output directory cannot hang the console
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise ParityInputError(f"{name}: {what} does not exist") from None
    except OSError as e:
        if os.path.islink(name):
            raise ParityInputError(f"{name}: is a symbolic link, not a file the engine wrote") from None
        raise ParityInputError(f"{name}: cannot open ({e.strerror})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ParityInputError(f"{name}: not a regular file")
    if st.st_size > max_bytes:
        os.close(fd)
        raise ParityInputError(f"{name}: {st.st_size} bytes, over the limit of {max_bytes} bytes")
    return os.fdopen(fd, "rb"), st.st_size


def _read_npy(path: str | os.PathLike[str], accept: list[tuple[int, ...]], max_bytes: int) -> np.ndarray:
    name = os.fspath(path)
    f, size = open_regular(name, max_bytes)
    with f:
        head = f.read(min(size, len(_NPY_MAGIC) + 2 + 4 + _MAX_HEADER))
        dtype, shape, fortran, offset = _npy_header(name, head)

        if dtype.hasobject:
            raise ParityInputError(f"{name}: holds Python objects (a pickled array); refused")
        if (dtype.kind != "f" or dtype.itemsize not in (4, 8) or dtype.names is not None
                or dtype.subdtype is not None):
            raise ParityInputError(f"{name}: dtype {dtype.str} is not float32 or float64")
        if shape not in accept:
            want = " or ".join(str(list(a)) for a in accept)
            raise ParityInputError(f"{name}: shape {list(shape)} != expected {want}")
        count = math.prod(shape)
        need = offset + count * dtype.itemsize
        if size < need:
            raise ParityInputError(f"{name}: truncated ({size} bytes, the header promises {need})")
        if size > need:
            raise ParityInputError(f"{name}: {size - need} bytes after the array data")
        f.seek(offset)
        body = f.read(count * dtype.itemsize)
    if len(body) != count * dtype.itemsize:   # the file shrank while being read
        raise ParityInputError(f"{name}: truncated while reading")
    # A read-only view of the bytes read, in the file's own precision: the grading widens
    # each row to float64 as it goes, so a large file costs its own size once, not three times.
    flat = np.frombuffer(body, dtype=dtype, count=count)
    if not dtype.isnative:
        flat = flat.astype(dtype.newbyteorder("="))
    _check_finite(name, flat, shape, fortran)
    return flat.reshape(shape, order="F" if fortran else "C")


def _check_finite(name: str, flat: np.ndarray, shape: tuple[int, ...], fortran: bool) -> None:
    """Refuse NaN/inf, naming the first bad index; scanned in chunks, no full-size mask."""
    step = 1 << 20
    if all(np.isfinite(flat[i:i + step]).all() for i in range(0, flat.size, step)):
        return
    arr = flat.reshape(shape, order="F" if fortran else "C")     # the refusal path only
    bad = ~np.isfinite(arr)
    where = [int(i) for i in np.argwhere(bad)[0]]
    raise ParityInputError(f"{name}: {int(bad.sum())} non-finite values ({int(np.isnan(arr).sum())} NaN), "
                           f"first at index {where}")


def _npy_header(name: str, head: bytes) -> tuple[np.dtype, tuple[int, ...], bool, int]:
    """Parse a .npy header without numpy's loader (which could be asked to unpickle)."""
    if len(head) < 10 or not head.startswith(_NPY_MAGIC):
        raise ParityInputError(f"{name}: not a .npy file (bad magic)")
    major = head[6]
    if major == 1:
        hlen, start = int.from_bytes(head[8:10], "little"), 10
    elif major in (2, 3):
        if len(head) < 12:
            raise ParityInputError(f"{name}: truncated .npy header")
        hlen, start = int.from_bytes(head[8:12], "little"), 12
    else:
        raise ParityInputError(f"{name}: unsupported .npy version {major}.{head[7]}")
    if hlen > _MAX_HEADER:
        raise ParityInputError(f"{name}: .npy header of {hlen} bytes is over the limit of {_MAX_HEADER}")
    raw = head[start:start + hlen]
    if len(raw) < hlen:
        raise ParityInputError(f"{name}: truncated .npy header")
    try:
        text = raw.decode("latin1" if major < 3 else "utf-8")
        d = ast.literal_eval(text)
    except Exception as e:   # hostile header text: any parse failure is a refusal
        raise ParityInputError(f"{name}: unreadable .npy header ({type(e).__name__})") from None
    if not isinstance(d, dict) or set(d) != {"descr", "fortran_order", "shape"}:
        raise ParityInputError(f"{name}: .npy header lacks descr/fortran_order/shape")
    shape, fortran, descr = d["shape"], d["fortran_order"], d["descr"]
    if not isinstance(shape, tuple) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                               for x in shape) or len(shape) > 32:
        raise ParityInputError(f"{name}: .npy header has an invalid shape")
    if not isinstance(fortran, bool):
        raise ParityInputError(f"{name}: .npy header has an invalid fortran_order")
    try:
        dtype = np.lib.format.descr_to_dtype(descr)
    except Exception:
        raise ParityInputError(f"{name}: .npy header has an invalid dtype {_short(str(descr))}") from None
    return dtype, shape, fortran, start + hlen
