"""Base images made locally, with the compiler pinned and asserted.

No registry is reachable from the nodes this console targets, so the base is
made here: ``debootstrap`` a Debian minbase with the profile's packages from the
mirror this machine's own apt configuration names, import it as an image, and
assert the compiler inside it. The base is then pinned by its image ID. A site that mirrors a
base instead (nvidia/cuda, say) names its `docker save` archive and the ID it must load as.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import CompilerMismatch, InfraError, UsageError
from ..profile import ImageSpec, Profile

APT_SOURCES = ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list")),
               *sorted(glob.glob("/etc/apt/sources.list.d/*.sources"))]


@dataclass(frozen=True)
class AptSource:
    uri: str
    suites: tuple[str, ...]
    components: tuple[str, ...]


def parse_apt_sources(text: str, deb822: bool) -> list[AptSource]:
    """Binary-package sources from one apt file, in either format."""
    out: list[AptSource] = []
    if deb822:
        for stanza in re.split(r"\n\s*\n", text):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line or line[0].isspace():
                    continue
                k, v = line.split(":", 1)
                fields[k.strip().lower()] = v.strip()
            if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes") == "no":
                continue
            for uri in fields.get("uris", "").split():
                out.append(AptSource(uri, tuple(fields.get("suites", "").split()),
                                     tuple(fields.get("components", "").split())))
    else:
        for line in text.splitlines():
            line = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()  # drop [options]
            if len(line) >= 3 and line[0] == "deb":
                out.append(AptSource(line[1], (line[2],), tuple(line[3:])))
    return out


def find_mirror(suite: str, files: list[str] | None = None) -> str:
    """The mirror this machine's apt uses for ``suite`` (never a hard-coded host)."""
    sources: list[AptSource] = []
    for path in files or APT_SOURCES:
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        sources += parse_apt_sources(text, deb822=path.endswith(".sources"))
    for s in sources:
        if suite in s.suites and "main" in s.components:
            return s.uri
    for s in sources:  # same archive, another suite of it (not a security mirror)
        if "main" in s.components and "security" not in s.uri:
            return s.uri
    raise InfraError(
        f"no Debian package mirror for '{suite}' found in this machine's apt configuration",
        "Pass one explicitly with `console images bootstrap --mirror URL`.")


def probe_compiler(client, image_id: str, probe: tuple[str, ...]) -> str:
    # no entrypoint: an imported base's (nvidia/cuda prints a banner) would come first
    out = client.containers.run(image_id, list(probe), entrypoint=[], remove=True, network_mode="none",
                                stdout=True, stderr=True, labels={"bench-console": "1"})
    return out.decode("utf-8", "replace").splitlines()[0].strip() if out else ""


def assert_compiler(client, image_id: str, profile: Profile) -> str:
    found = probe_compiler(client, image_id, profile.image.compiler_probe)
    if found != profile.image.compiler:
        raise CompilerMismatch("base image", profile.image.compiler, found)
    return found


def assert_tools(client, image_id: str, profile: Profile) -> dict[str, str]:
    """The profile's other tools, asserted in the base as every engine build asserts them: a base
    that lacks one is said now, not at the first build."""
    found = {}
    for t in profile.image.tools:
        found[t.name] = probe_compiler(client, image_id, t.probe)
        if found[t.name] != t.expect:
            raise CompilerMismatch("base image", t.expect, found[t.name], tool=t.name)
    return found


def base_status(client, profile: Profile) -> dict:
    """What `console images` shows for a profile's base (an archive's: its pinned ID)."""
    try:
        img = client.images.get(profile.image.base_ref)
    except Exception:
        return {"base": profile.image.base, "present": False}
    return {"base": profile.image.base, "present": True, "image_id": img.id,
            "created": img.attrs.get("Created", ""), "labels": img.labels}


def save_base(client, profile: Profile, dest: Path) -> str:
    """`docker save` of the profile's base, for a node with Docker but no registry or mirror: its ID."""
    ref = profile.image.base
    try:
        img = client.images.get(ref)
    except Exception:
        raise UsageError(f"the base image '{ref}' is not on this machine, so it cannot be bundled",
                         "Make it first: `console images bootstrap --profile PROFILE`.") from None
    named = ref if not (ref.startswith("sha256:") or "@" in ref) else False     # keep the tag the profile names
    with open(dest, "wb") as f:
        for chunk in img.save(named=named):
            f.write(chunk)
    return img.id


def load_base(client, profile: Profile, archive: Path, image_id: str, log: Callable[[str], None]) -> bool:
    """`docker load` a bundled base unless the node has the profile's base already; the archive
    must hold the image ID it was saved as (so builds keyed by that ID are the same). True: loaded."""
    if base_status(client, profile)["present"]:
        return False
    log(f"loading the base image {profile.image.base} from {archive}")
    with open(archive, "rb") as f:      # streamed: a base is hundreds of MB
        loaded = {img.id for img in client.images.load(f)}
    if image_id not in loaded or not base_status(client, profile)["present"]:
        raise InfraError(f"{archive} did not give the base image '{profile.image.base}' ({image_id})",
                         "Make the bundle again with --image on a machine that has the base.")
    return True


def bootstrap(client, profile: Profile, log: Callable[[str], None], mirror: str | None = None,
              force: bool = False) -> dict:
    """Make the profile's base image unless it exists (or load it from the profile's archive);
    return its ID and compiler."""
    spec = profile.image
    if spec.base_archive is not None:
        return load_archive(client, profile, log)
    if spec.base.startswith("sha256:") or "@" in spec.base:
        raise UsageError(f"image.base '{spec.base}' is a digest: it names an image made elsewhere",
                         "Load that image onto this node (`docker load`, or image.base_archive), "
                         "or use a local tag to bootstrap.")
    if not force:
        st = base_status(client, profile)
        if st["present"]:
            compiler = assert_compiler(client, st["image_id"], profile)
            assert_tools(client, st["image_id"], profile)
            log(f"base {spec.base} already present: {st['image_id']} ({compiler})")
            return {"image_id": st["image_id"], "compiler": compiler, "made": False}
    if shutil.which("debootstrap") is None:
        raise InfraError("debootstrap is not installed", "Install it: `apt-get install debootstrap`.")
    if os.geteuid() != 0:
        raise InfraError("making a base image with debootstrap needs root",
                         "Run `sudo console images bootstrap --profile PROFILE`.")
    mirror = mirror or find_mirror(spec.suite)
    with tempfile.TemporaryDirectory(prefix="bench-console-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        cmd = debootstrap_argv(spec, rootfs, mirror)
        log("$ " + " ".join(cmd))
        _stream(cmd, log, "debootstrap")
        # apt in the image reads the same components (debootstrap lists only those it fetched from)
        (rootfs / "etc/apt/sources.list").write_text(apt_sources_line(mirror, spec.suite, spec.components))
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for p in (rootfs / junk).glob("*"):
                if p.is_file():
                    p.unlink()
        tarball = Path(tmp) / "rootfs.tar"
        _stream(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(tarball), "."], log, "tar")
        shutil.rmtree(rootfs)           # the tree, the tarball and the image at once: three copies of a CUDA base
        repo, tag = _repo_tag(spec.base)
        log(f"importing {spec.base}")
        client.api.import_image_from_file(
            str(tarball), repository=repo, tag=tag,
            changes=["ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                     "LABEL bench-console.base=1", f"LABEL bench-console.suite={spec.suite}",
                     f"LABEL bench-console.components={','.join(spec.components)}",
                     f"LABEL bench-console.mirror={mirror}"])
    image_id = client.images.get(spec.base).id
    compiler = assert_compiler(client, image_id, profile)
    assert_tools(client, image_id, profile)
    log(f"base {spec.base} = {image_id}; compiler: {compiler}")
    return {"image_id": image_id, "compiler": compiler, "made": True, "mirror": mirror}


def debootstrap_argv(spec: ImageSpec, rootfs: Path, mirror: str) -> list[str]:
    return ["debootstrap", "--variant=minbase", "--components=" + ",".join(spec.components),
            "--include=" + ",".join(spec.packages), spec.suite, str(rootfs), mirror]


def apt_sources_line(mirror: str, suite: str, components: tuple[str, ...]) -> str:
    return f"deb {mirror} {suite} {' '.join(components)}\n"


def _repo_tag(ref: str) -> tuple[str, str]:
    """'repo:tag' as the daemon's tag call takes it (a registry's port is not a tag)."""
    repo, _, tag = ref.rpartition(":") if ":" in ref.split("/")[-1] else (ref, "", "latest")
    return repo, tag


def load_archive(client, profile: Profile, log: Callable[[str], None]) -> dict:
    """The base from the profile's archive: `docker load` unless the pinned image is on this node
    already, refused unless the archive held that very ID (an ID is the digest of the image's
    config, which names every layer's digest), tagged as image.base, compiler and tools asserted."""
    spec, arch = profile.image, profile.image.base_archive
    assert arch is not None
    made = not _has_image(client, arch.id)
    if made:
        path = Path(arch.path)
        if not path.is_file():
            raise UsageError(f"{profile.path}: image.base_archive.path: {path} does not exist",
                             "Put the site's archive there (`docker save` of the pinned image), or correct the path.")
        log(f"loading {path}")
        try:
            with open(path, "rb") as f:        # streamed: a CUDA base is gigabytes
                loaded = sorted(img.id for img in client.images.load(f))
        except Exception as e:
            why = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
            raise InfraError(f"`docker load` of {path} failed: {why}",
                             "Check that the file is a `docker save` archive and that the daemon has "
                             "disk space.") from None
        if arch.id not in loaded:
            raise UsageError(f"{profile.path}: image.base_archive: {path} holds {', '.join(loaded) or 'no image'}, "
                             f"not the pinned {arch.id}",
                             "Fetch the archive of the pinned image, or pin the ID this archive holds "
                             "deliberately (image.base_archive.id).")
    repo, tag = _repo_tag(spec.base)
    client.images.get(arch.id).tag(repo, tag)
    compiler = assert_compiler(client, arch.id, profile)
    assert_tools(client, arch.id, profile)
    log(f"base {spec.base} = {arch.id}" + (" (loaded)" if made else " (already present)") + f"; compiler: {compiler}")
    return {"image_id": arch.id, "compiler": compiler, "made": made, "archive": arch.path}


def _has_image(client, ref: str) -> bool:
    try:
        client.images.get(ref)
        return True
    except Exception:
        return False


def _stream(cmd: list[str], log: Callable[[str], None], what: str) -> None:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        tail = (tail + [line])[-20:]
        log(line)
    if proc.wait() != 0:
        raise InfraError(f"{what} failed (exit {proc.returncode}): " + (tail[-1] if tail else ""),
                         "Check the network path to the package mirror and free disk space, then retry.")
