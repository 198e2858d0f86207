"""A bundle's manifest: written and read back, and what is wrong with a bundle said piece by piece."""
from __future__ import annotations

import pytest

from console.core.provenance.manifest import FORMAT, Manifest, ManifestError, Piece, digest, problems

A = "a" * 64
B = "b" * 64


def _manifest() -> Manifest:
    return Manifest(profile="profile/demo.toml", profile_name="demo", profile_sha256=A, made_at="2026-01-01T00:00:00Z",
                    console="0.1.0", candidate="pypi:x==1",
                    pieces=[Piece("sdist", "sdists/x-1.tar.gz", B, 10, "x==1 (the candidate)"),
                            Piece("profile", "profile/demo.toml", A, 5, "the profile")])


def test_a_manifest_reads_back_as_written_and_its_digest_is_of_its_bytes():
    m = _manifest()
    text = m.to_json()
    back = Manifest.from_json(text)
    assert back.to_json() == text
    assert back.of_kind("sdist")[0].stands_for == "x==1 (the candidate)"
    assert '"for": "the profile"' in text and f'"format": "{FORMAT}"' in text
    assert digest(text.encode()) != digest(text.replace("x==1", "x==2").encode())


@pytest.mark.parametrize("text", ["{", "[]", '{"format": "something/else"}', f'{{"format": "{FORMAT}"}}'])
def test_a_manifest_this_version_cannot_read_is_refused(text):
    with pytest.raises(ManifestError):
        Manifest.from_json(text)


def test_each_problem_names_the_piece():
    pieces = _manifest().pieces
    ok = {"sdists/x-1.tar.gz": (10, B), "profile/demo.toml": (5, A)}
    assert problems(pieces, ok, set(ok)) == []
    missing = problems(pieces, {**ok, "sdists/x-1.tar.gz": None}, {"profile/demo.toml"})
    assert missing == ["sdists/x-1.tar.gz (sdist, x==1 (the candidate)) is missing"]
    changed = problems(pieces, {**ok, "profile/demo.toml": (5, B)}, set(ok))
    assert len(changed) == 1 and changed[0].startswith("profile/demo.toml (profile, the profile) changed")
    extra = problems(pieces, ok, set(ok) | {"profile/demo/new.patch"})
    assert extra == ["profile/demo/new.patch is not in the manifest"]
    escape = problems([Piece("model", "../etc/passwd", A, 1, "w")], {}, set())
    assert "outside the bundle" in escape[0]
