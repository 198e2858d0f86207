"""The reference file: the compact top-k form written deterministically and read strictly, and the
full float32 form read as before."""
import hashlib
import io
import zipfile

import numpy as np
import pytest

from console.core.records import topk
from console.core.records.parity import ParityInputError
from console.engine import reffile

D, R, V, K = 2, 3, 300, 8


def compact(seed=0):
    rng = np.random.default_rng(seed)
    full = (rng.standard_normal((D, R, V)) * 3).astype(np.float32)
    return full, topk.compress(full, K, rng.integers(-1, V, (D, R)))


def write(tmp_path, data: bytes, name="ref.npz"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def read(path, **kw):
    args = dict(depths=D, rows=R, vocab=V, k=K, max_bytes=1 << 20) | kw
    return reffile.read_topk(path, **args)


def rezip(data: bytes, edit) -> bytes:
    """The same members, passed through ``edit(name, bytes) -> [(name, bytes, compression)]``."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            for name, raw, how in edit(info.filename, src.read(info)):
                dst.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), raw, compress_type=how)
    return out.getvalue()


def member(arr) -> bytes:
    b = io.BytesIO()
    np.lib.format.write_array(b, arr)
    return b.getvalue()


def test_the_compact_file_round_trips_and_numpy_opens_it(tmp_path):
    _, ref = compact()
    path = write(tmp_path, reffile.topk_bytes(ref))
    got = read(path)
    for f in ("ids", "logp", "log_tail", "entropy", "next_token", "next_logp"):
        assert np.array_equal(getattr(got, f), getattr(ref, f))
    assert got.vocab == V and got.shape == (D, R, K)
    with np.load(path) as z:          # a person can look inside with numpy alone
        assert list(z["header"]) == [1, D, R, V, K] and z["ids"].dtype == np.int32


def test_the_same_logits_give_the_same_bytes_and_pin():
    a, b = reffile.topk_bytes(compact()[1]), reffile.topk_bytes(compact()[1])
    assert a == b and hashlib.sha256(a).hexdigest() == hashlib.sha256(b).hexdigest()
    assert a != reffile.topk_bytes(compact(seed=1)[1])


def test_it_is_small():
    full = np.random.default_rng(0).standard_normal((2, 4, 50_000)).astype(np.float32)
    assert len(reffile.topk_bytes(topk.compress(full, 64))) < full.nbytes / 50


def test_the_profile_shape_must_match_the_header(tmp_path):
    path = write(tmp_path, reffile.topk_bytes(compact()[1]))
    with pytest.raises(ParityInputError, match=r"holds 2 depths x 3 rows .* top-8; expected 2 x 4 of 300, top-8"):
        read(path, rows=4)
    with pytest.raises(ParityInputError, match="top-16"):
        read(path, k=16)


@pytest.mark.parametrize("edit, message", [
    (lambda n, raw: [(n, raw, zipfile.ZIP_DEFLATED)], "compressed"),
    (lambda n, raw: [] if n == "entropy.npy" else [(n, raw, zipfile.ZIP_STORED)], "expected exactly"),
    (lambda n, raw: [(n, raw, zipfile.ZIP_STORED)] + ([("extra.npy", raw, zipfile.ZIP_STORED)] if n == "ids.npy" else []),
     "expected exactly"),
    (lambda n, raw: [(n, member(np.zeros((D, R, K), np.float32)) if n == "logp.npy" else raw, zipfile.ZIP_STORED)],
     r"logp.npy: dtype <f4, expected <f8"),
    (lambda n, raw: [(n, member(np.zeros((D, R, K), np.int32).T) if n == "ids.npy" else raw, zipfile.ZIP_STORED)],
     "Fortran order"),
    (lambda n, raw: [(n, member(np.zeros((D, R + 1), np.float64)) if n == "entropy.npy" else raw, zipfile.ZIP_STORED)],
     r"entropy.npy has shape \[2, 4\]"),
    (lambda n, raw: [(n, raw[:-8] if n == "log_tail.npy" else raw, zipfile.ZIP_STORED)], "header promises"),
    (lambda n, raw: [(n, member(np.array([2, D, R, V, K])) if n == "header.npy" else raw, zipfile.ZIP_STORED)],
     "format version 2"),
    (lambda n, raw: [(n, b"\x80\x04pickle" if n == "ids.npy" else raw, zipfile.ZIP_STORED)], "bad magic"),
])
def test_a_broken_file_is_refused_with_what_is_wrong(tmp_path, edit, message):
    path = write(tmp_path, rezip(reffile.topk_bytes(compact()[1]), edit))
    with pytest.raises(ParityInputError, match=message):
        read(path)


def test_a_corrupt_byte_is_caught_by_the_members_crc(tmp_path):
    data = bytearray(reffile.topk_bytes(compact()[1]))
    at = data.index(b"NUMPY", data.index(b"logp.npy")) + 200      # inside logp's data
    data[at] ^= 0xFF
    with pytest.raises(ParityInputError, match="logp.npy is corrupt"):
        read(write(tmp_path, bytes(data)))


def test_a_file_that_is_not_a_distribution_is_refused(tmp_path):
    import dataclasses
    _, ref = compact()
    bad = dataclasses.replace(ref, log_tail=ref.log_tail - 0.5)
    with pytest.raises(ParityInputError, match=r"ref.npz: reference: a row's probabilities sum to"):
        read(write(tmp_path, reffile.topk_bytes(bad)))


def test_not_a_zip_a_truncated_one_a_symlink_and_an_oversized_file_are_refused(tmp_path):
    data = reffile.topk_bytes(compact()[1])
    with pytest.raises(ParityInputError, match=r"not a compact reference \(.npz\)"):
        read(write(tmp_path, b"\x93NUMPY not a zip"))
    with pytest.raises(ParityInputError, match="not a compact reference"):
        read(write(tmp_path, data[: len(data) // 2]))
    real = write(tmp_path, data)
    (tmp_path / "link.npz").symlink_to(real)
    with pytest.raises(ParityInputError, match="symbolic link"):
        read(tmp_path / "link.npz")
    with pytest.raises(ParityInputError, match="over the limit"):
        read(real, max_bytes=100)
    with pytest.raises(ParityInputError, match="reference file does not exist"):
        read(tmp_path / "missing.npz")


def test_the_full_format_is_read_as_before(tmp_path):
    full, _ = compact()
    path = tmp_path / "reference.npy"
    np.save(path, full)
    got = reffile.read_reference(path, "full", depths=D, rows=R, vocab=V, k=K, max_bytes=1 << 30)
    assert isinstance(got, np.ndarray) and np.array_equal(got, full)
    with pytest.raises(ParityInputError, match="not a compact reference"):
        reffile.read_reference(path, "topk", depths=D, rows=R, vocab=V, k=K, max_bytes=1 << 30)
