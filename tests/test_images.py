"""Reading the package mirror from apt's own configuration (never a hard-coded host); the archive
components debootstrap reads; a base loaded from a `docker save` archive pinned by image ID."""
from __future__ import annotations

import dataclasses
import io
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from console.errors import CompilerMismatch, InfraError, UsageError
from console.engine import images
from console.engine.images import find_mirror, parse_apt_sources
from console.profile import ProfileError, Tool, load_profile
from console.profile.spec import BaseArchive

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "profiles" / "demo.toml"

DEB822 = """Types: deb
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""


def test_deb822_and_one_line_formats(tmp_path):
    assert parse_apt_sources(DEB822, deb822=True)[0].uri == "http://mirror.example/debian"
    one = parse_apt_sources("deb [arch=amd64 signed-by=/k.gpg] http://m.example/debian trixie main contrib\n"
                            "# deb http://commented.example/debian bookworm main\n", deb822=False)
    assert [(s.uri, s.suites) for s in one] == [("http://m.example/debian", ("trixie",))]


def test_find_mirror_prefers_the_suite_then_the_archive(tmp_path):
    f = tmp_path / "debian.sources"
    f.write_text(DEB822)
    assert find_mirror("bookworm", [str(f)]) == "http://mirror.example/debian"
    assert find_mirror("trixie", [str(f)]) == "http://mirror.example/debian"  # not the security one


def test_no_apt_configuration_says_how_to_pass_a_mirror(tmp_path):
    with pytest.raises(InfraError) as e:
        find_mirror("bookworm", [str(tmp_path / "missing.list")])
    assert "--mirror" in e.value.hint


def test_this_machines_apt_configuration_names_a_mirror():
    assert find_mirror("bookworm").startswith(("http://", "https://", "file:"))


# --- archive components -------------------------------------------------------------------------

def test_debootstrap_reads_the_profiles_components_and_the_image_lists_them():
    cuda = load_profile(ROOT / "profiles" / "llama-cpp-cuda.toml").image
    argv = images.debootstrap_argv(cuda, Path("/r"), "http://m.example/debian")
    assert "--components=main,contrib,non-free" in argv and argv[-3:] == ["bookworm", "/r", "http://m.example/debian"]
    assert {"g++-11", "nvidia-cuda-toolkit"} <= set(argv[argv.index("--components=main,contrib,non-free") + 1]
                                                   .removeprefix("--include=").split(","))
    line = images.apt_sources_line("http://m.example/debian", "bookworm", cuda.components)
    assert [(s.uri, s.suites, s.components) for s in parse_apt_sources(line, deb822=False)] == [
        ("http://m.example/debian", ("bookworm",), ("main", "contrib", "non-free"))]
    assert "--components=main" in images.debootstrap_argv(load_profile(DEMO).image, Path("/r"), "http://m")


def _variant(tmp_path: Path, edit) -> Path:
    """The demo profile, edited, with its relative paths kept."""
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "demo").symlink_to(ROOT / "profiles" / "demo")
    (tmp_path / "images").symlink_to(ROOT / "images")
    p = tmp_path / "profiles" / "demo.toml"
    p.write_text(edit(DEMO.read_text()))
    return p


PIN = "sha256:" + "a" * 64
DEBOOTSTRAP_KEYS = 'suite = "bookworm"\npackages = ["gcc", "libc6-dev", "make"]\n'
ARCHIVE = f'base_archive = {{ path = "cuda.tar", id = "{PIN}" }}\n'


@pytest.mark.parametrize("edit, key, says", [
    (lambda t: t.replace("suite =", 'components = ["main", "Non-Free"]\nsuite ='), "image.components", "'Non-Free'"),
    (lambda t: t.replace("suite =", 'components = ["contrib"]\nsuite ='), "image.components", "'main'"),
    (lambda t: t.replace("suite =", ARCHIVE + "suite ="), "image.suite", "base_archive"),
    (lambda t: t.replace(DEBOOTSTRAP_KEYS, ARCHIVE.replace(PIN, "sha256:abc")), "image.base_archive.id", "64"),
    (lambda t: t.replace(DEBOOTSTRAP_KEYS, ARCHIVE).replace('base = "bench-console/base:bookworm-gcc"',
                                                            f'base = "{PIN}"'), "image.base", "tag"),
    (lambda t: t.replace("pids = 32", 'pids = 32\ncdi_devices = ["nvidia.com/gpu=all"]'), "run.cdi_devices", "gpus"),
    (lambda t: t.replace("pids = 32", 'pids = 32\ngpus = "optional"\ncdi_devices = ["gpu0"]'), "run.cdi_devices",
     "'gpu0'"),
])
def test_components_archives_and_cdi_devices_are_checked_naming_the_key(tmp_path, edit, key, says):
    path = _variant(tmp_path, edit)
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    assert e.value.key == key and str(path) in str(e.value) and says in str(e.value)


def test_an_archive_base_is_pinned_by_its_id_and_found_beside_the_profile(tmp_path):
    path = _variant(tmp_path, lambda t: t.replace(DEBOOTSTRAP_KEYS, ARCHIVE).replace(
        "pids = 32", 'pids = 32\ngpus = "required"\ncdi_devices = ["nvidia.com/gpu=all"]'))
    p = load_profile(path)
    assert p.image.base_archive == BaseArchive(path=str(path.parent / "cuda.tar"), id=PIN)
    assert p.image.base_ref == PIN and p.run.cdi_devices == ("nvidia.com/gpu=all",)
    assert load_profile(DEMO).image.base_ref == "bench-console/base:bookworm-gcc"


# --- loading an archive (a stand-in daemon) ------------------------------------------------------

class _Image:
    def __init__(self, image_id: str, daemon: "_Daemon"):
        self.id, self._daemon = image_id, daemon
        self.attrs, self.labels = {}, {}

    def tag(self, repo: str, tag: str) -> bool:
        self._daemon.tags[f"{repo}:{tag}"] = self.id
        return True


class _Daemon:
    """Just enough of docker-py for load_archive: the images on the node, the IDs an archive holds,
    and what every probe prints."""

    def __init__(self, have=(), holds=(), prints=b"tinycc 1.0\n"):
        self.have, self.holds, self.prints = set(have), list(holds), prints
        self.tags: dict[str, str] = {}
        self.loads, self.runs = 0, []
        self.images = self
        self.containers = self

    def get(self, ref: str) -> _Image:
        ref = self.tags.get(ref, ref)
        if ref not in self.have:
            raise LookupError(f"No such image: {ref}")
        return _Image(ref, self)

    def load(self, f) -> list[_Image]:
        f.read()
        self.loads += 1
        self.have.update(self.holds)
        return [_Image(i, self) for i in self.holds]

    def run(self, image: str, argv: list[str], **kw) -> bytes:
        self.runs.append((image, argv, kw))
        return self.prints


def _archive_profile(archive: Path, pin: str = PIN, tools=()):
    p = load_profile(DEMO)
    image = dataclasses.replace(p.image, base="bench-console-test/archive:t", compiler="tinycc 1.0",
                                compiler_probe=("/tiny", "--version"), tools=tuple(tools),
                                base_archive=BaseArchive(path=str(archive), id=pin))
    return dataclasses.replace(p, image=image)


def test_an_archive_is_loaded_tagged_and_asserted_once(tmp_path):
    (tmp_path / "cuda.tar").write_bytes(b"tar")
    d = _Daemon(holds=[PIN])
    p = _archive_profile(tmp_path / "cuda.tar", tools=[Tool(name="tiny", probe=("/tiny", "--version"),
                                                            expect="tinycc 1.0")])
    r = images.bootstrap(d, p, lambda line: None)
    assert r == {"image_id": PIN, "compiler": "tinycc 1.0", "made": True, "archive": str(tmp_path / "cuda.tar")}
    assert d.tags == {"bench-console-test/archive:t": PIN} and d.loads == 1
    assert all(kw["entrypoint"] == [] and kw["network_mode"] == "none" for _, _, kw in d.runs) and len(d.runs) == 2
    assert images.base_status(d, p)["image_id"] == PIN
    again = images.bootstrap(d, p, lambda line: None)      # the pinned ID is here: nothing is read
    assert again["made"] is False and d.loads == 1


def test_an_archive_that_holds_another_image_is_refused_naming_both(tmp_path):
    (tmp_path / "cuda.tar").write_bytes(b"tar")
    other = "sha256:" + "b" * 64
    with pytest.raises(UsageError) as e:
        images.load_archive(_Daemon(holds=[other]), _archive_profile(tmp_path / "cuda.tar"), lambda line: None)
    assert PIN in str(e.value) and other in str(e.value) and "image.base_archive" in str(e.value)


def test_a_missing_archive_or_a_moved_tool_is_said(tmp_path):
    with pytest.raises(UsageError, match=r"image\.base_archive\.path: .*cuda\.tar does not exist"):
        images.load_archive(_Daemon(), _archive_profile(tmp_path / "cuda.tar"), lambda line: None)
    p = _archive_profile(tmp_path / "cuda.tar", tools=[Tool(name="nvcc", probe=("nvcc", "--version"),
                                                             expect="Cuda compilation tools, release 11.8")])
    with pytest.raises(CompilerMismatch) as e:
        images.load_archive(_Daemon(have=[PIN]), p, lambda line: None)
    assert e.value.tool == "nvcc" and e.value.found == "tinycc 1.0"


# --- a real archive on the real daemon -------------------------------------------------------------

TINY_C = r"""
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    /* as an entrypoint it prints a banner first, as nvidia/cuda's does */
    puts(argc > 1 && strcmp(argv[1], "banner") == 0 ? "== BANNER ==" : "tinycc (bench-console test) 1.0");
    return 0;
}
"""


def _tiny_archive(client, tmp_path: Path) -> tuple[Path, str]:
    """A one-file image (a static binary, with an entrypoint), saved by ID and removed again."""
    (tmp_path / "tiny.c").write_text(TINY_C)
    subprocess.run(["gcc", "-static", "-O1", "-o", str(tmp_path / "tiny"), str(tmp_path / "tiny.c")], check=True)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(tmp_path / "tiny"), arcname="tiny")
    (tmp_path / "rootfs.tar").write_bytes(buf.getvalue())
    repo = "bench-console-test/archive-src"
    tag = uuid.uuid4().hex[:12]
    client.api.import_image_from_file(str(tmp_path / "rootfs.tar"), repository=repo, tag=tag,
                                      changes=['ENTRYPOINT ["/tiny", "banner"]'])
    image = client.images.get(f"{repo}:{tag}")
    with open(tmp_path / "tiny-image.tar", "wb") as f:
        for chunk in image.save(named=False):
            f.write(chunk)
    client.images.remove(image.id, force=True)
    return tmp_path / "tiny-image.tar", image.id


@pytest.mark.docker
def test_a_saved_image_is_loaded_as_the_pinned_base_and_builds_start_from_it(docker_client, tmp_path):
    from console.runtime.docker import DockerRuntime
    archive, image_id = _tiny_archive(docker_client, tmp_path)
    tag = "bench-console-test/archive:" + uuid.uuid4().hex[:12]
    tiny = Tool(name="tiny", probe=("/tiny", "--version"), expect="tinycc (bench-console test) 1.0")
    p = _archive_profile(archive, image_id, tools=[tiny])
    p = dataclasses.replace(p, image=dataclasses.replace(p.image, base=tag, compiler="tinycc (bench-console test) 1.0"))
    try:
        wrong = _archive_profile(archive, "sha256:" + "0" * 64)
        with pytest.raises(UsageError, match=image_id):
            images.bootstrap(docker_client, wrong, lambda line: None)
        docker_client.images.remove(image_id, force=True)
        r = images.bootstrap(docker_client, p, lambda line: None)
        assert r["image_id"] == image_id and r["made"] is True
        assert docker_client.images.get(tag).id == image_id
        assert images.bootstrap(docker_client, p, lambda line: None)["made"] is False
        assert DockerRuntime().recipe(p.image)["base_image_id"] == image_id
    finally:
        for ref in (tag, image_id):
            try:
                docker_client.images.remove(ref, force=True)
            except Exception:
                pass
