"""The parity reference on disk: full logits (``parity.reference_format = "full"``, a ``.npy`` that
``protocol.read_logits`` reads) or the compact top-k form (``"topk"``, console.core.records.topk).

The compact file is a ``.npz`` that ``numpy.load`` opens: an uncompressed zip of exactly these
``.npy`` members, little-endian, C order:

    header.npy      int64   [5]                     format version (1), depths, rows, vocab, k
    ids.npy         int32   [depths, rows, k]       each row's k most likely tokens, most likely first
    logp.npy        float64 [depths, rows, k]       their log-probabilities
    log_tail.npy    float64 [depths, rows]          log of every other token's total probability
    entropy.npy     float64 [depths, rows]          the full row's entropy, nats
    next_token.npy  int64   [depths, rows]          the document's next token after the row, -1 where none
    next_logp.npy   float64 [depths, rows]          its log-probability under the reference (0 where none)

Written with fixed zip timestamps, so the same logits give the same bytes (and the same sha256
pin). Read as strictly as an engine's output: a regular file under the size limit, exactly these
members, stored (no decompression), CRCs intact, each member's dtype and shape as above, nothing
unpickled; then ``core.topk.check`` refuses anything that is not a set of distributions.
"""
from __future__ import annotations

import io
import math
import os
import zipfile
from typing import Any

import numpy as np

from ..core.records import topk
from ..core.records.parity import ParityInputError
from . import protocol

FORMATS = ("full", "topk")
# (member, numpy dtype, shape from (depths, rows, k))
MEMBERS: tuple[tuple[str, str, Any], ...] = (
    ("header", "<i8", lambda d, r, k: (5,)),
    ("ids", "<i4", lambda d, r, k: (d, r, k)),
    ("logp", "<f8", lambda d, r, k: (d, r, k)),
    ("log_tail", "<f8", lambda d, r, k: (d, r)),
    ("entropy", "<f8", lambda d, r, k: (d, r)),
    ("next_token", "<i8", lambda d, r, k: (d, r)),
    ("next_logp", "<f8", lambda d, r, k: (d, r)),
)
_EPOCH = (1980, 1, 1, 0, 0, 0)     # the zip format's earliest time: no capture time in the bytes


def topk_bytes(ref: topk.TopK) -> bytes:
    """The compact reference's file, byte-for-byte the same for the same figures."""
    d, r, k = ref.shape
    arrays = {"header": np.array([topk.FORMAT_VERSION, d, r, ref.vocab, k]), "ids": ref.ids,
              "logp": ref.logp, "log_tail": ref.log_tail, "entropy": ref.entropy,
              "next_token": ref.next_token, "next_logp": ref.next_logp}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        for name, dtype, _ in MEMBERS:
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(arrays[name], dtype=dtype), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            info.create_system = 3          # unix, whatever host writes it
            zf.writestr(info, member.getvalue())
    return out.getvalue()


def read_topk(path: str | os.PathLike[str], *, depths: int, rows: int, vocab: int, k: int,
              max_bytes: int) -> topk.TopK:
    """Read and check a compact reference; ``ParityInputError`` names what is wrong."""
    name = os.fspath(path)
    f, _ = protocol.open_regular(name, max_bytes, "reference file")
    with f:
        data = f.read(max_bytes + 1)
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as e:
        raise ParityInputError(f"{name}: not a compact reference (.npz): {e}") from None
    with zf:
        got = _members(name, zf, max_bytes)
    header = got["header"]
    if int(header[0]) != topk.FORMAT_VERSION:
        raise ParityInputError(f"{name}: format version {int(header[0])}, expected {topk.FORMAT_VERSION}")
    want = (depths, rows, vocab, k)
    if tuple(int(x) for x in header[1:]) != want:
        raise ParityInputError(f"{name}: holds {int(header[1])} depths x {int(header[2])} rows of a vocabulary of "
                               f"{int(header[3])}, top-{int(header[4])}; expected {depths} x {rows} of {vocab}, "
                               f"top-{k}")
    _shapes(name, got, depths, rows, k)
    ref = topk.TopK(ids=got["ids"], logp=got["logp"], log_tail=got["log_tail"], entropy=got["entropy"],
                    next_token=got["next_token"], next_logp=got["next_logp"], vocab=vocab)
    try:
        topk.check(ref, depths, rows, vocab, k)
    except ParityInputError as e:
        raise ParityInputError(f"{name}: {e}") from None
    return ref


def _members(name: str, zf: zipfile.ZipFile, max_bytes: int) -> dict[str, np.ndarray]:
    infos = zf.infolist()
    names = [i.filename for i in infos]
    expected = [f"{m}.npy" for m, _, _ in MEMBERS]
    if sorted(names) != sorted(expected):
        raise ParityInputError(f"{name}: members {sorted(names)}, expected exactly {sorted(expected)}")
    out = {}
    for info, (member, dtype, _) in zip(sorted(infos, key=lambda i: expected.index(i.filename)), MEMBERS):
        if info.compress_type != zipfile.ZIP_STORED or info.file_size > max_bytes or info.flag_bits & 0x1:
            raise ParityInputError(f"{name}: member {info.filename} is compressed, encrypted or too large; "
                                   "expected stored")
        try:
            raw = zf.read(info)
        except (zipfile.BadZipFile, OSError, EOFError, RuntimeError) as e:     # a bad CRC, a truncated member
            raise ParityInputError(f"{name}: member {info.filename} is corrupt ({e})") from None
        out[member] = _npy(f"{name}:{info.filename}", raw, np.dtype(dtype))
    return out


def _npy(name: str, raw: bytes, want: np.dtype) -> np.ndarray:
    dtype, shape, fortran, offset = protocol._npy_header(name, raw)
    if dtype != want or fortran:
        raise ParityInputError(f"{name}: dtype {dtype.str}{' (Fortran order)' if fortran else ''}, "
                               f"expected {want.str} in C order")
    need = offset + math.prod(shape) * dtype.itemsize
    if len(raw) != need:
        raise ParityInputError(f"{name}: {len(raw)} bytes, its header promises {need}")
    return np.frombuffer(raw, dtype=dtype, offset=offset).reshape(shape)


def _shapes(name: str, got: dict[str, np.ndarray], depths: int, rows: int, k: int) -> None:
    for member, _, shape in MEMBERS:
        want = shape(depths, rows, k)
        if got[member].shape != want:
            raise ParityInputError(f"{name}: {member}.npy has shape {list(got[member].shape)}, "
                                   f"expected {list(want)}")


def read_reference(path: str | os.PathLike[str], fmt: str, *, depths: int, rows: int, vocab: int, k: int,
                   max_bytes: int) -> "np.ndarray | topk.TopK":
    """The reference in the profile's format: full logits [depths, rows, vocab], or a ``TopK``."""
    if fmt == "topk":
        return read_topk(path, depths=depths, rows=rows, vocab=vocab, k=k, max_bytes=max_bytes)
    return protocol.read_logits(path, depths=depths, rows=rows, vocab=vocab, max_bytes=max_bytes)
