"""Base images made locally, with the compiler pinned and asserted.

No registry is reachable from the nodes this console targets, so the base is
made here: ``debootstrap`` a Debian minbase with the profile's packages from the
mirror this machine's own apt configuration names, import it as an image, and
assert the compiler inside it. The base is then pinned by its image ID.
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
from ..profile import Profile

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
    out = client.containers.run(image_id, list(probe), remove=True, network_mode="none",
                                stdout=True, stderr=True, labels={"bench-console": "1"})
    return out.decode("utf-8", "replace").splitlines()[0].strip() if out else ""


def assert_compiler(client, image_id: str, profile: Profile) -> str:
    found = probe_compiler(client, image_id, profile.image.compiler_probe)
    if found != profile.image.compiler:
        raise CompilerMismatch("base image", profile.image.compiler, found)
    return found


def base_status(client, profile: Profile) -> dict:
    """What `console images` shows for a profile's base."""
    try:
        img = client.images.get(profile.image.base)
    except Exception:
        return {"base": profile.image.base, "present": False}
    return {"base": profile.image.base, "present": True, "image_id": img.id,
            "created": img.attrs.get("Created", ""), "labels": img.labels}


def bootstrap(client, profile: Profile, log: Callable[[str], None], mirror: str | None = None,
              force: bool = False) -> dict:
    """Make the profile's base image unless it exists; return its ID and compiler."""
    spec = profile.image
    if spec.base.startswith("sha256:") or "@" in spec.base:
        raise UsageError(f"image.base '{spec.base}' is a digest: it names an image made elsewhere",
                         "Load that image onto this node (`docker load`), or use a local tag to bootstrap.")
    if not force:
        st = base_status(client, profile)
        if st["present"]:
            compiler = assert_compiler(client, st["image_id"], profile)
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
        cmd = ["debootstrap", "--variant=minbase", "--include=" + ",".join(spec.packages),
               spec.suite, str(rootfs), mirror]
        log("$ " + " ".join(cmd))
        _stream(cmd, log, "debootstrap")
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for p in (rootfs / junk).glob("*"):
                if p.is_file():
                    p.unlink()
        tarball = Path(tmp) / "rootfs.tar"
        _stream(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(tarball), "."], log, "tar")
        repo, _, tag = spec.base.rpartition(":") if ":" in spec.base.split("/")[-1] else (spec.base, "", "latest")
        log(f"importing {spec.base}")
        client.api.import_image_from_file(
            str(tarball), repository=repo, tag=tag,
            changes=["ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                     "LABEL bench-console.base=1", f"LABEL bench-console.suite={spec.suite}",
                     f"LABEL bench-console.mirror={mirror}"])
    image_id = client.images.get(spec.base).id
    compiler = assert_compiler(client, image_id, profile)
    log(f"base {spec.base} = {image_id}; compiler: {compiler}")
    return {"image_id": image_id, "compiler": compiler, "made": True, "mirror": mirror}


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
