"""`console reference capture`: run the pinned reference engine once, store its logits.

The reference is what every build's parity is graded against. It is captured
from the profile's reference command (for the demo an independent numpy
implementation of the same model), validated by the same strict reader as any
engine's output, stored in the profile's format (float32 logits, or their top-k form:
console.core.records.topk) and pinned by its sha256. Beside it, its record says how it was made,
including its backend (console.core.provenance.backend): where it was computed, which a round's builds
must match.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..core.records import parity, topk
from ..core.provenance import refdiff
from ..core.provenance.backend import Backend, backend_of
from ..engine import buildkey, protocol, reffile, sources
from ..engine.sources import sha256_path
from ..errors import InfraError
from ..profile import Profile
from ..clock import utc_now
from ..results.store import atomic_write
from ..runtime.base import INPUTS_ROOT, OUT_ROOT
from .inputs import check_model
from ..runtime import make_runtime
from ..telemetry import open_telemetry
from .node import backend, node_facts, use_gpus
from .schedule import DOC_NAME, document_problem, fill, logits_argv


def capture(profile: Profile, log: Callable[[str], None], write_profile: bool = False,
            runtime: str = "docker", sdists: Path | None = None) -> Captured:
    """``runtime`` builds the pinned reference source (docker, or local on nodes without Docker);
    ``sdists``: a bundle's, the only place its sdist is taken from (no pip)."""
    if profile.reference.runtime == "docker":
        return _capture_build(profile, log, write_profile, runtime, sdists)
    p = profile.parity
    with tempfile.TemporaryDirectory(prefix="bench-console-ref-") as tmp:
        out = Path(tmp)
        values = {"doc": p.document, "depths": ",".join(str(d) for d in p.depths), "rows": str(p.rows),
                  "out": str(out), "python": sys.executable, "profile_dir": str(profile.dir)}
        argv = [part.format(**values) for part in profile.reference.command]
        log("$ " + " ".join(argv))
        r = subprocess.run(argv, capture_output=True, text=True, errors="replace", cwd=profile.dir)
        for line in (r.stdout + r.stderr).splitlines()[-20:]:
            log(line)
        if r.returncode != 0:
            raise InfraError(f"the reference command exited with {r.returncode}", "Read its output above.")
        arr = protocol.read_logits(out / p.output, depths=len(p.depths), rows=p.rows, vocab=p.vocab,
                                   max_bytes=1 << 31)
    # an independent program, not a build of the engine: no compiler or build to match
    here = backend_of(host=node_facts(None), preflight=None, gpus=False, runtime="local",
                      threads=profile.run.threads, offload=profile.run.gpus, compiler=None, build=None)
    return _store(profile, arr, log, write_profile, {"runtime": "local", "command": argv,
                                                      "engine": profile.reference.engine,
                                                      "backend": here.to_dict()})


@dataclass(frozen=True)
class Captured:
    """What a capture made, and how it stands against the profile's pin."""
    sha256: str
    reproduces_pin: bool
    difference: refdiff.Difference | None = None   # where it differs and the pin's digest or file is here
    compared_with: Path | None = None              # that digest or file
    digest_missing: Path | None = None             # where the pin's digest was looked for, if absent


def holds_pin(profile: Profile) -> bool:
    """Whether this node holds the pinned reference's bytes."""
    ref = Path(profile.parity.reference)
    return ref.is_file() and sha256_path(ref) == profile.parity.reference_sha256


def digest_path(profile: Profile, sha: str) -> Path:
    """The committed digest of the reference pinned as ``sha``: its first tokens per row
    (core.refdiff), so that a node without the pinned file can say how its capture differs."""
    ref = Path(profile.parity.reference)
    return ref.with_name(f"{ref.name.split('.')[0]}.{sha[:12]}.digest.npz")


def _store(profile: Profile, arr: np.ndarray, log: Callable[[str], None], write_profile: bool,
           meta: dict) -> Captured:
    p = profile.parity
    # The pinned file is replaced only by the pinned bytes, or when the pin is updated with
    # it; otherwise the capture lands beside it, so a stray capture cannot break later rounds.
    pinned = Path(p.reference)
    side = pinned.with_name(f"{pinned.stem}.captured{pinned.suffix}")
    data, digest = _reference_bytes(profile, arr)
    sha = hashlib.sha256(data).hexdigest()
    same = sha == p.reference_sha256
    dest = pinned if (write_profile or same) else side
    atomic_write(dest, data)
    log(f"wrote {dest} ({len(data)} bytes, {p.reference_format} format)")
    if same or write_profile:
        # how it was made, beside it: the round puts this in the receipt
        meta = {**meta, "reference_sha256": sha, "document_sha256": sha256_path(Path(p.document)),
                "captured_at": utc_now()}
        atomic_write(pinned.with_suffix(".json"), json.dumps(meta, indent=2, sort_keys=True).encode())
        mine = digest_path(profile, sha)
        if not mine.exists():
            atomic_write(mine, reffile.topk_bytes(digest))
            log(f"wrote {mine} (the digest to commit beside the pin)")
    if write_profile:
        _pin_in_profile(Path(profile.path), {"reference_sha256": sha})
        log(f"pinned parity.reference_sha256 = {sha} in {profile.path}")
    if same or write_profile:
        return Captured(sha, same)
    return _against_pin(profile, sha, digest)


def _against_pin(profile: Profile, sha: str, digest: topk.TopK) -> Captured:
    """How a capture that missed its pin differs from it: against the pinned file if this node holds
    it, else against the pin's committed digest."""
    p = profile.parity
    pinned, theirs = Path(p.reference), digest_path(profile, p.reference_sha256)
    depths, rows, vocab = len(p.depths), p.rows, p.vocab
    if holds_pin(profile):
        held = reffile.read_reference(pinned, p.reference_format, depths=depths, rows=rows, vocab=vocab,
                                      k=p.top_k, max_bytes=1 << 31)
        base = held if isinstance(held, topk.TopK) else _compact(profile, held, refdiff.DIGEST_K)
        return Captured(sha, False, refdiff.compare(base, digest, p.depths), pinned)
    if theirs.is_file():
        base = reffile.read_topk(theirs, depths=depths, rows=rows, vocab=vocab,
                                 k=min(refdiff.DIGEST_K, vocab - 1), max_bytes=64 << 20)
        return Captured(sha, False, refdiff.compare(base, digest, p.depths), theirs)
    return Captured(sha, False, digest_missing=theirs)


def _compact(profile: Profile, arr: np.ndarray, k: int) -> topk.TopK:
    p = profile.parity
    doc = [int(w) for w in Path(p.document).read_bytes().split()]
    return topk.compress(arr, k, parity.next_token_ids(doc, p.depths, p.rows))


def _reference_bytes(profile: Profile, arr: np.ndarray) -> tuple[bytes, topk.TopK]:
    """The reference file in the profile's format (float32 logits (.npy), or their top-k form (.npz)),
    and its digest."""
    p = profile.parity
    k = min(refdiff.DIGEST_K, p.vocab - 1)
    if p.reference_format == "topk":
        compact = _compact(profile, arr, p.top_k)
        return reffile.topk_bytes(compact), refdiff.truncate(compact, k)
    out = io.BytesIO()
    np.save(out, np.asarray(arr, dtype=np.float32))
    return out.getvalue(), _compact(profile, arr, k)


def _node(profile: Profile, rt, log: Callable[[str], None]) -> tuple[Backend, bool]:
    """Where the reference build computes on this node (core.backend), and whether its logits run
    gets the GPUs, decided as a round decides it."""
    tele = open_telemetry("host" if profile.run.gpus == "none" else "auto")
    try:
        host = node_facts(rt, tele)
        facts = tele.preflight_facts(window_s=0.1) if host.gpus else None
    finally:
        tele.close()
    gpus = use_gpus(profile.run.gpus, rt, host, lambda level, code, message: log(f"{level}: {message}"),
                    profile.run)
    here = backend(profile, rt.kind, host, facts, gpus, command=profile.reference.command)
    log(f"backend: {here.kind} on {here.gpu_name or here.cpu_model} ({here.runtime})")
    return here, gpus


def _capture_build(profile: Profile, log: Callable[[str], None], write_profile: bool, runtime: str,
                   sdists: Path | None) -> Captured:
    """Build the pinned reference source with the profile's harness (in the pinned image, or with the
    host's asserted tools), make the document from its text if the profile gives one, and capture the
    logits through the harness."""
    p = profile.parity
    model = check_model(profile)
    source = profile.reference.source or profile.source
    with tempfile.TemporaryDirectory(prefix="bench-console-ref-") as tmp:
        work = Path(tmp)
        # its own label: the capture removes its containers at the end, and another capture may be
        # running beside it (a queue's worker, the other half of a parallel test run)
        rt = make_runtime(runtime, f"reference-{secrets.token_hex(4)}", work)
        here, gpus = _node(profile, rt, log)
        log(f"reference source: {sources.spec_label(source)}")
        snap = sources.snapshot(source, work / "src", exclude=profile.exclude, sdists=sdists)
        harness_sha = sources.tree_sha256(Path(profile.harness.path)) if profile.harness else None
        built = _reference_build(rt, profile, snap, harness_sha, log)
        models = {f.name: f.path for f in profile.model}
        inputs = work / "inputs"
        inputs.mkdir()
        os.chmod(inputs, 0o755)
        try:
            if p.text:
                _make_document(profile, rt, built, snap.dir, inputs, work, models, write_profile, log)
            doc = Path(p.document)
            if not doc.exists():
                raise InfraError(f"no document at {doc}", "Give parity.text and parity.tokenize, or the document.")
            (inputs / DOC_NAME).write_bytes(doc.read_bytes())
            bad = document_problem(doc.read_bytes(), p.vocab)
            if bad:
                raise InfraError(f"{doc}: {bad}", "Tokenise the document with the model's own tokenizer.")
            argv = logits_argv(profile.reference.command, profile)
            log("$ " + " ".join(argv))
            res = rt.run(built, argv, src_dir=snap.dir, inputs_dir=inputs, out_dir=work / "out",
                         run=profile.run, label="reference/logits", models=models, gpus=gpus)
            for line in protocol.log_tail(res.stderr)[-10:]:
                log(line)
            if res.exit_code != 0:
                raise InfraError(f"the reference logits command failed ({res.killed_reason or res.exit_code})",
                                 "Read its output above.")
            arr = protocol.read_logits(work / "out" / p.output, depths=len(p.depths), rows=p.rows,
                                       vocab=p.vocab, max_bytes=1 << 31)
        finally:
            rt.cleanup_round()
    meta = {"runtime": rt.kind, "source": snap.record, "image_id": built.image_id,
            "base_image_id": built.base_image_id, "compiler": built.compiler, "tools": built.tools,
            "command": argv, "engine": profile.reference.engine, "harness_tree_sha256": harness_sha,
            "model": model, "weights_sha256": model[0]["sha256"] if model else None,
            "backend": here.to_dict()}
    return _store(profile, arr, log, write_profile, meta)


def _reference_build(rt, profile: Profile, snap, harness_sha: str | None, log: Callable[[str], None]):
    """The reference source's build: an image of the same build key if this node has one (a round
    of main built it, say), else a new build labelled with its key for the rounds after it."""
    key = buildkey.key_of(rt.recipe(profile.image), snap.record["tree_sha256"], profile.image,
                          profile.harness, harness_sha)
    built = rt.find_build("reference", key, profile.image)
    if built is not None:
        log(f"reused the reference's build: {built.image_id[:19]}, built by "
            f"{buildkey.built_by(built.reused_from)} from the same inputs (key {key[:12]})")
        return built
    built = rt.build("reference", snap.dir, profile.image, log, harness=profile.harness, key=key,
                     origin="reference capture", keep_cache=True)     # the profile's pinned source
    log(f"built the reference: {built.image_id[:19]} in {built.seconds:.0f} s ({built.compiler})")
    return built


def _make_document(profile: Profile, rt, built, src: Path, inputs: Path, work: Path, models: dict,
                   write_profile: bool, log: Callable[[str], None]) -> None:
    """Tokenise parity.text with the model's own tokenizer (the harness, in the reference image)."""
    p = profile.parity
    text = Path(p.text)
    (inputs / "text.txt").write_bytes(text.read_bytes())
    argv = fill(p.tokenize, profile, text=f"{INPUTS_ROOT}/text.txt", out=OUT_ROOT)
    log("$ " + " ".join(argv))
    res = rt.run(built, argv, src_dir=src, inputs_dir=inputs, out_dir=work / "tok", run=profile.run,
                 label="reference/tokenize", models=models)
    for line in protocol.log_tail(res.stderr)[-5:]:
        log(line)
    made = work / "tok" / "document.tok"
    if res.exit_code != 0 or not made.is_file():
        raise InfraError(f"tokenising {text} failed ({res.killed_reason or res.exit_code})", "Read its output above.")
    data = made.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    doc = Path(p.document)
    if doc.exists() and sha256_path(doc) == sha:
        log(f"document {doc}: identical to the one made from {text.name} ({len(data.split())} tokens)")
        return
    if doc.exists() and not write_profile and sha != p.document_sha256:
        side = doc.with_suffix(".captured.tok")
        atomic_write(side, data)
        raise InfraError(f"tokenising {text.name} gave a document other than the pinned one (written to {side})",
                         "The tokenizer or the text changed: adopt it deliberately with --write-profile.")
    atomic_write(doc, data)
    log(f"wrote {doc} ({len(data.split())} tokens, sha256 {sha})")
    if write_profile and sha != p.document_sha256:
        _pin_in_profile(Path(profile.path), {"document_sha256": sha})
        log(f"pinned parity.document_sha256 = {sha} in {profile.path}")


def _pin_in_profile(path: Path, pins: dict[str, str]) -> None:
    import tomlkit
    doc = tomlkit.parse(path.read_text())
    for k, v in pins.items():
        doc["parity"][k] = v
    path.write_text(tomlkit.dumps(doc))
