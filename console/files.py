"""Reading a file a person may have given or changed: a profile, a workload, a receipt, a lock.

Every layer reads such files (the profile loader and the serving workloads as much as the results
store), so the one capped, regular-files-only read lives here, below them all.
"""
from __future__ import annotations

import os
import stat

from console.errors import UsageError

# what a reader takes at the most: a receipt with every request of a long serving round is tens
# of MB; more is not a file the console wrote
MAX_FILE_BYTES = 256 << 20


def read_capped(path: str | os.PathLike[str], limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file ``path``; ValueError says why not: unreadable, a device,
    pipe or directory (``/dev/zero`` would read forever), or larger than ``limit`` bytes."""
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ValueError("not a regular file (a directory, device or pipe)")
            data = f.read(limit + 1)
    except OSError as e:
        raise ValueError(e.strerror or str(e)) from None
    if len(data) > limit:
        raise ValueError(f"larger than {limit >> 20} MiB, more than the console reads")
    return data


def read_file(path: str | os.PathLike[str], what: str, hint: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """``read_capped``, a refusal being a usage error that names the file and what it should be."""
    try:
        return read_capped(path, limit)
    except ValueError as e:
        raise UsageError(f"cannot read {path} as {what}: {e}", hint) from None

