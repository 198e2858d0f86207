"""`console reference capture`: run the pinned reference engine once, store its logits.

The reference is what every build's parity is graded against. It is captured
from the profile's reference command (for the demo an independent numpy
implementation of the same model), validated by the same strict reader as any
engine's output, stored as float32 and pinned by its sha256.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

from . import protocol
from .errors import InfraError
from .profile import Profile


def capture(profile: Profile, log: Callable[[str], None], write_profile: bool = False) -> str:
    p = profile.parity
    with tempfile.TemporaryDirectory(prefix="bench-console-ref-") as tmp:
        out = Path(tmp)
        values = {"doc": p.document, "depths": ",".join(str(d) for d in p.depths), "rows": str(p.rows),
                  "out": str(out), "python": sys.executable, "profile_dir": str(profile.dir)}
        if profile.reference.runtime != "local":
            raise InfraError("reference capture in a container is not supported yet",
                             "Set reference.runtime = \"local\" with a trusted host command.")
        argv = [part.format(**values) for part in profile.reference.command]
        log("$ " + " ".join(argv))
        r = subprocess.run(argv, capture_output=True, text=True, errors="replace", cwd=profile.dir)
        for line in (r.stdout + r.stderr).splitlines()[-20:]:
            log(line)
        if r.returncode != 0:
            raise InfraError(f"the reference command exited with {r.returncode}", "Read its output above.")
        arr = protocol.read_logits(out / p.output, depths=len(p.depths), rows=p.rows, vocab=p.vocab,
                                   max_bytes=1 << 31)
    # The pinned file is replaced only when the pin is updated with it; otherwise the
    # capture lands beside it, so a stray capture cannot break every later round.
    dest = Path(p.reference) if write_profile else Path(p.reference).with_suffix(".captured.npy")
    tmp_dest = dest.with_suffix(".npy.tmp")
    with open(tmp_dest, "wb") as f:
        np.save(f, arr.astype(np.float32))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp_dest, dest)
    sha = hashlib.sha256(dest.read_bytes()).hexdigest()
    log(f"wrote {dest}")
    if write_profile:
        _pin_in_profile(Path(profile.path), sha)
        log(f"pinned parity.reference_sha256 = {sha} in {profile.path}")
    return sha


def _pin_in_profile(path: Path, sha: str) -> None:
    import tomlkit
    doc = tomlkit.parse(path.read_text())
    doc["parity"]["reference_sha256"] = sha
    path.write_text(tomlkit.dumps(doc))
