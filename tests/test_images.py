"""Reading the package mirror from apt's own configuration (never a hard-coded host)."""
from __future__ import annotations

import pytest

from console.errors import InfraError
from console.engine.images import find_mirror, parse_apt_sources

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
