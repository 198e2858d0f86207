"""Bundles for nodes without network: made, checked against their manifest, and a round's inputs
taken from them alone (no pip, no index)."""
from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from console import commands
from console.cli import main
from console.engine import bundle as bundles
from console.engine import sources
from console.engine.wheels import Target
from console.errors import UsageError
from console.paths import ASSETS, DEMO_CANDIDATES
from console.profile import Source, load_profile

FAST = DEMO_CANDIDATES / "fast.patch"
NO_WHEELS = bundles.Options(target=None)


@pytest.fixture()
def offline(monkeypatch, tmp_path):
    """No index reachable, no sdist cached, and pip a trap: any call fails the test."""
    monkeypatch.setenv("PIP_INDEX_URL", "http://192.0.2.1:9/simple")     # TEST-NET-1: routes nowhere
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("BENCH_CONSOLE_CACHE", str(tmp_path / "empty-cache"))
    calls = []

    def trap(cmd, *a, **k):
        calls.append(cmd)
        raise AssertionError(f"a subprocess was started: {cmd}")
    monkeypatch.setattr(subprocess, "run", trap)
    return calls


def _demo_bundle(tmp_path: Path, **opts) -> bundles.Bundle:
    return bundles.make(ASSETS / "profiles" / "demo.toml", tmp_path / "bundle",
                        bundles.Options(target=None, **opts), lambda line: None)


def _site(tmp_path: Path, extra: str = "", source: str = "") -> Path:
    """The demo profile laid out on its own, with ``extra`` appended (a model file, say)."""
    site = tmp_path / "site"
    shutil.copytree(ASSETS / "profiles" / "demo", site / "profiles" / "demo")
    shutil.copytree(ASSETS / "images" / "demo-engine", site / "images" / "demo-engine")
    text = (ASSETS / "profiles" / "demo.toml").read_text()
    if source:
        text = text.replace('source = { path = "../images/demo-engine" }', f'source = {{ path = "{source}" }}')
    (site / "profiles" / "demo.toml").write_text(text + extra)
    return site / "profiles" / "demo.toml"


def _weights(tmp_path: Path) -> tuple[Path, str]:
    w = tmp_path / "elsewhere" / "w.bin"
    w.parent.mkdir(parents=True)
    w.write_bytes(b"weights" * 1000)
    return w, hashlib.sha256(w.read_bytes()).hexdigest()


def _model_table(path: Path, sha: str) -> str:
    return f'\n[[model.files]]\nname = "w.bin"\npath = "{path}"\nsha256 = "{sha}"\n'


# --- making one ------------------------------------------------------------------------------

def test_console_bundle_of_the_demo_profile_lists_every_piece_with_its_hash(tmp_path, capsys):
    dest = tmp_path / "b"
    assert main(["bundle", "--profile", "demo", "--no-wheels", "--candidate", str(FAST), str(dest)]) == 0
    out = capsys.readouterr().out
    b = bundles.open_bundle(dest)
    assert b.manifest_sha256 in out and "MB" in out
    kinds = {p.kind for p in b.manifest.pieces}
    assert {"profile", "source", "reference", "profile-file", "candidate"} <= kinds
    for p in b.manifest.pieces:
        assert hashlib.sha256((dest / p.path).read_bytes()).hexdigest() == p.sha256
        assert (dest / p.path).stat().st_size == p.size and p.stands_for
    # the profile's relative paths hold in the bundle: it loads there and reads only the bundle
    profile = load_profile(b.profile_path)
    assert profile.sha256 == load_profile(ASSETS / "profiles" / "demo.toml").sha256
    assert Path(profile.source.path).is_relative_to(dest) and Path(profile.parity.reference).is_relative_to(dest)
    assert b.manifest.candidate == "candidate/fast.patch"


def test_a_bundle_goes_into_a_new_or_empty_directory(tmp_path, capsys):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "old").write_text("x")
    assert main(["bundle", "--profile", "demo", "--no-wheels", str(tmp_path / "b")]) == 2
    assert "not an empty directory" in capsys.readouterr().err


def test_model_files_are_carried_and_a_round_reads_them_from_the_bundle(tmp_path):
    w, sha = _weights(tmp_path)
    profile_path = _site(tmp_path, _model_table(w, sha))
    b = bundles.make(profile_path, tmp_path / "b", NO_WHEELS, lambda line: None)
    piece = b.manifest.of_kind("model")[0]
    assert piece.path == "model/w.bin" and piece.sha256 == sha and "model.files[0]" in piece.stands_for
    for given in (b.profile_path, profile_path):        # the bundle's profile, or --profile
        routed = bundles.route(load_profile(given), b)
        assert routed.model[0].path == str(b.root / "model" / "w.bin")
        assert Path(routed.parity.reference).is_relative_to(b.root)
    assert b.took == {"model": ["w.bin"], "reference": True}


def test_a_model_file_that_is_not_the_pinned_one_is_not_bundled(tmp_path):
    w, sha = _weights(tmp_path)
    profile_path = _site(tmp_path, _model_table(w, "0" * 64))
    with pytest.raises(UsageError, match=r"model.files\[0\].sha256"):
        bundles.make(profile_path, tmp_path / "b", NO_WHEELS, lambda line: None)
    assert not (tmp_path / "b").exists()        # a bundle that failed half-way is removed


def test_a_path_the_bundle_cannot_carry_is_refused_naming_the_key(tmp_path):
    engine = tmp_path / "outside" / "engine"
    shutil.copytree(ASSETS / "images" / "demo-engine", engine)
    with pytest.raises(UsageError, match="engine.source.path.*outside the profile's tree"):
        bundles.make(_site(tmp_path, source=str(engine)), tmp_path / "b", NO_WHEELS, lambda line: None)


def test_a_route_refuses_a_model_the_bundle_lacks(tmp_path):
    b = _demo_bundle(tmp_path)
    w, sha = _weights(tmp_path)
    with pytest.raises(UsageError, match=r"model.files\[0\].*has no w.bin"):
        bundles.route(load_profile(_site(tmp_path, _model_table(w, sha))), b)


# --- checking one -----------------------------------------------------------------------------

def test_a_missing_piece_is_refused_naming_it(tmp_path):
    b = _demo_bundle(tmp_path)
    (b.root / "profile" / "images" / "demo-engine" / "src" / "bench.c").unlink()
    with pytest.raises(UsageError) as e:
        bundles.open_bundle(b.root)
    assert "profile/images/demo-engine/src/bench.c (source, engine.source.path) is missing" in e.value.message


def test_a_changed_piece_is_refused_naming_it(tmp_path):
    b = _demo_bundle(tmp_path)
    ref = b.root / b.manifest.of_kind("reference")[0].path
    data = bytearray(ref.read_bytes())
    data[-1] ^= 1
    ref.write_bytes(bytes(data))
    with pytest.raises(UsageError, match=r"profile/profiles/demo/reference.npy \(reference, parity.reference\) changed"):
        bundles.open_bundle(b.root)


def test_a_file_the_manifest_does_not_list_is_refused(tmp_path):
    b = _demo_bundle(tmp_path)
    (b.root / "profile" / "profiles" / "demo" / "extra.patch").write_text("x")
    with pytest.raises(UsageError, match="extra.patch is not in the manifest"):
        bundles.open_bundle(b.root)
    with pytest.raises(UsageError, match="has no manifest.json"):
        bundles.open_bundle(tmp_path)


def test_console_run_refuses_a_broken_bundle_before_anything_else(tmp_path, monkeypatch, capsys):
    b = _demo_bundle(tmp_path, candidate=str(FAST))
    (b.root / "candidate" / "fast.patch").write_text("changed\n")
    monkeypatch.setattr(commands, "drive", lambda rnd, args: pytest.fail("a round was started"))
    code = main(["run", "--bundle", str(b.root), "--runtime", "local", "--headless", "--out", str(tmp_path / "out")])
    assert code == 2
    assert "candidate/fast.patch (candidate, the candidate (fast.patch)) changed" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# --- a round from one --------------------------------------------------------------------------

def test_console_run_from_a_bundle_takes_everything_from_it(tmp_path, monkeypatch, offline):
    b = _demo_bundle(tmp_path, candidate=str(FAST))
    started = []
    monkeypatch.setattr(commands, "drive", lambda rnd, args: started.append(rnd) or 0)
    assert main(["run", "--bundle", str(b.root), "--runtime", "local", "--headless", "--out", str(tmp_path / "out")]) == 0
    cfg = started[0].cfg
    assert Path(cfg.profile.path) == b.profile_path
    assert Path(cfg.main.path).is_relative_to(b.root) and cfg.candidate == ("patch", str(b.root / "candidate/fast.patch"))
    assert cfg.bundle.sdists == b.root / "sdists"
    record = cfg.bundle.record()
    assert record["manifest_sha256"] == b.manifest_sha256 and record["took"]["profile"] is True
    from console.round.plan import plan_record
    assert plan_record(cfg, "r", "local", "t")["bundle"] == str(b.root)
    assert offline == []


def test_console_run_needs_a_profile_or_a_bundle_and_keeps_results_out_of_the_bundle(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(commands, "drive", lambda rnd, args: pytest.fail("a round was started"))
    assert main(["run", "--headless"]) == 2
    assert "--profile is needed (or --bundle DIR" in capsys.readouterr().err
    b = _demo_bundle(tmp_path, candidate=str(FAST))
    assert main(["run", "--bundle", str(b.root), "--headless", "--out", str(b.root / "results")]) == 2
    assert "inside the bundle" in capsys.readouterr().err


def test_the_receipt_keeps_the_bundle_it_ran_from():
    from console.core.records.receipt import Receipt
    r = Receipt(round_id="r", bundle={"path": "/b", "manifest_sha256": "c" * 64})
    assert Receipt.from_dict(r.to_dict()).bundle["manifest_sha256"] == "c" * 64
    assert "bundle" not in Receipt(round_id="r").to_dict()     # absent, as before bundles


def _sdist(where: Path, name: str = "fake_engine-1.0") -> Path:
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{name}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for rel, data in (("src/engine.c", b"int main(){return 0;}\n"), ("Makefile", b"all:\n")):
            info = tarfile.TarInfo(f"{name}/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_sources_from_a_bundle_never_call_pip(tmp_path, offline):
    sdists = tmp_path / "bundle" / "sdists"
    sdist = _sdist(sdists)
    snap = sources.snapshot(Source(pypi="fake-engine==1.0"), tmp_path / "work" / "main", sdists=sdists)
    assert (snap.dir / "src" / "engine.c").is_file()
    assert snap.record["sdist_sha256"] == hashlib.sha256(sdist.read_bytes()).hexdigest()
    with pytest.raises(UsageError, match="the bundle has no sdist of fake-engine==2.0"):
        sources.snapshot(Source(pypi="fake-engine==2.0"), tmp_path / "work" / "cand", sdists=sdists)
    assert offline == []
    # the trap is live: without a bundle the same source goes to pip
    with pytest.raises(AssertionError, match="pip"):
        sources.snapshot(Source(pypi="fake-engine==1.0"), tmp_path / "work" / "other")


def test_a_round_from_a_bundle_refuses_sources_that_would_need_the_network(tmp_path):
    b = _demo_bundle(tmp_path)
    with pytest.raises(UsageError, match="no sdist of llama-cpp-python==9.9"):
        bundles.check_specs(b, {"candidate": Source(pypi="llama-cpp-python==9.9")})
    with pytest.raises(UsageError, match="remote repository"):
        bundles.check_specs(b, {"candidate": Source(git="https://example.org/engine.git", ref="main")})
    bundles.check_specs(b, {"main": Source(path=str(tmp_path)), "candidate": ("patch", str(FAST))})
    assert b.took["sdists"] == []


# --- wheels and the base image -------------------------------------------------------------------

def test_the_wheels_target_becomes_pip_options():
    assert Target().pip_args() == []
    t = Target(python_version="3.12", platforms=("manylinux2014_x86_64", "manylinux_2_28_x86_64"), abi="cp312")
    assert t.pip_args() == ["--python-version", "3.12", "--platform", "manylinux2014_x86_64",
                            "--platform", "manylinux_2_28_x86_64", "--abi", "cp312"]
    assert t.record()["python_version"] == "3.12"


def test_console_bundle_refuses_wheel_options_with_no_wheels(tmp_path, capsys):
    assert main(["bundle", "--profile", "demo", "--no-wheels", "--python-version", "3.12", str(tmp_path / "b")]) == 2
    assert "--no-wheels" in capsys.readouterr().err


class _Images:
    def __init__(self, present: bool, loads: str):
        self.present, self.loads, self.loaded = present, loads, []

    def get(self, ref):
        if not self.present:
            raise LookupError(ref)
        return type("Image", (), {"id": self.loads, "attrs": {}, "labels": {}})()

    def load(self, f):
        self.loaded.append(f.read())
        self.present = True
        return [type("Image", (), {"id": self.loads})()]


def test_a_bundled_base_is_loaded_only_when_the_node_lacks_it(tmp_path):
    from console.engine.images import load_base
    from console.errors import InfraError
    profile = load_profile(ASSETS / "profiles" / "demo.toml")
    archive = tmp_path / "base.tar"
    archive.write_bytes(b"tar")
    client = type("Client", (), {})()
    client.images = _Images(present=True, loads="sha256:x")
    assert load_base(client, profile, archive, "sha256:x", lambda line: None) is False and not client.images.loaded
    client.images = _Images(present=False, loads="sha256:x")
    assert load_base(client, profile, archive, "sha256:x", lambda line: None) is True
    assert client.images.loaded == [b"tar"]
    client.images = _Images(present=False, loads="sha256:other")
    with pytest.raises(InfraError, match="did not give the base image"):
        load_base(client, profile, archive, "sha256:x", lambda line: None)


@pytest.mark.slow
@pytest.mark.untimed
def test_the_console_installs_from_a_bundle_with_no_index(tmp_path):
    """Wheels gathered with the index reachable, then installed with nothing else (~1 min)."""
    dest = tmp_path / "b"
    assert main(["bundle", "--profile", "demo", str(dest)]) == 0
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {"PATH": "/usr/bin:/bin", "PIP_NO_INDEX": "1", "PIP_INDEX_URL": "http://192.0.2.1:9/simple"}
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--find-links", str(dest / "wheels"),
                    "bench-console"], check=True, env=env, timeout=600)
    out = subprocess.run([str(venv / "bin" / "console"), "--version"], check=True, capture_output=True, text=True)
    assert out.stdout.startswith("console ")
