"""The docs point at things that exist: commands the README shows, sections the profiles and
docs name, and the outcomes and exit codes `console --help` states."""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
CONSOLE = Path(sys.executable).parent / "console"
PROFILES = sorted((ROOT / "console" / "assets" / "profiles").glob("*.toml"))
MARKDOWN = [ROOT / "README.md", ROOT / "LIMITS.md", *sorted((ROOT / "docs").glob("*.md"))]


# --- sections named from elsewhere ---------------------------------------------------------------

def _headings(md: Path) -> tuple[set[str], set[str]]:
    """A file's section names (backticks dropped) and their GitHub anchors."""
    names, anchors, fenced = set(), set(), False
    for line in md.read_text().splitlines():
        fenced ^= line.startswith("```")
        m = None if fenced else re.match(r"#{1,6}\s+(.*?)\s*$", line)
        if m:
            name = m.group(1).replace("`", "")
            names.add(name)
            anchors.add(re.sub(r"[^\w\- ]", "", name.lower()).replace(" ", "-"))
    return names, anchors


def _references() -> list[tuple[str, Path, str | None, str | None]]:
    """(where, target file, #anchor, "section name") for every pointer into a markdown file:
    links in the docs, and `docs/X.md#a` or `docs/X.md, "Section"` in the profiles' comments."""
    refs = []
    for md in MARKDOWN:
        for n, line in enumerate(md.read_text().splitlines(), 1):
            for target, anchor in re.findall(r"\]\(([^)\s#]*\.md)?(?:#([^)\s]+))?\)", line):
                if target or anchor:
                    path = (md.parent / target).resolve() if target else md
                    refs.append((f"{md.relative_to(ROOT)}:{n}", path, anchor or None, None))
    for toml in PROFILES:
        for n, line in enumerate(toml.read_text().splitlines(), 1):
            for target, anchor, section in re.findall(r"(docs/[\w.-]+\.md)(?:#([\w-]+)|, \"([^\"]+)\")?", line):
                refs.append((f"{toml.relative_to(ROOT)}:{n}", ROOT / target, anchor or None, section or None))
    return refs


def test_every_reference_to_a_doc_names_a_file_and_section_that_exist():
    refs = _references()
    assert any(section for *_, section in refs)     # the profiles name sections: the scan sees them
    broken = []
    for where, path, anchor, section in refs:
        if not path.is_file():
            broken.append(f"{where}: {path.relative_to(ROOT)} does not exist")
            continue
        if path.suffix != ".md" or not (anchor or section):
            continue
        names, anchors = _headings(path)
        if anchor and anchor not in anchors:
            broken.append(f"{where}: {path.name} has no section #{anchor}")
        if section and section not in names:
            broken.append(f"{where}: {path.name} has no section {section!r}")
    assert not broken, "\n".join(broken)


# --- the README's commands ---------------------------------------------------------------------

def _readme_commands() -> list[str]:
    """`console …` as the README shows it: code-block lines and inline code (its command table)."""
    text = (ROOT / "README.md").read_text()
    shown = [m.group(2) for m in re.finditer(r"^(?: {4,}|\t)(\$ )?console (.*)$", text, re.M)]
    shown += [m.group(2).replace("\\|", "|") for m in re.finditer(r"`(\$ )?console ([^`]*)`", text)]
    return [re.sub(r"\s+#.*$", "", s).strip() for s in shown]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _words(parser: argparse.ArgumentParser, tokens: list[str]) -> list[tuple[str, ...]]:
    """The subcommand paths `tokens` begin with; `a|b` names alternatives."""
    if tokens:
        choices, alternatives = _subcommands(parser), tokens[0].split("|")
        if choices and all(a in choices for a in alternatives):
            return [(a, *rest) for a in alternatives for rest in _words(choices[a], tokens[1:])]
    return [()]


def _shown() -> dict[tuple[str, ...], set[str]]:
    """Each subcommand path the README shows, with the options it shows with it."""
    parser, shown = build_parser(), {}
    for command in _readme_commands():
        tokens = command.split()
        for words in _words(parser, tokens):
            assert words or tokens[0].startswith("-"), f"README shows `console {command}`: no such command"
            shown.setdefault(words, set()).update(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", command))
    return shown


def test_the_readme_shows_its_command_table():
    shown = _shown()
    assert ("queue", "submit") in shown and ("ledger", "rescore") in shown and ("verdict",) in shown


@pytest.mark.parametrize("words, options", sorted(_shown().items()), ids=lambda x: " ".join(x) if isinstance(x, tuple) else None)
def test_every_command_the_readme_shows_answers_help(words, options):
    proc = subprocess.run([str(CONSOLE), *words, "--help"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)
    assert proc.returncode == 0, proc.stderr
    missing = [o for o in sorted(options) if o not in proc.stdout]
    assert not missing, f"README shows `console {' '.join(words)}` with {missing}; its --help has no such option"


# --- what --help says the outcomes are ----------------------------------------------------------

def test_help_states_every_outcome_and_its_exit_code():
    from console.core.records.verdict import Outcome
    from console.errors import ExitCode
    parser = build_parser()
    text = " ".join(f"{parser.description} {parser.epilog}".split())
    for outcome in ("accepted", "none", "slower", "rejected", "undecided", "infra"):
        assert re.search(rf"\b{outcome}\b", text), outcome
    assert "noise" not in text            # outcomes are decided at stated error rates, not against noise
    epilog = parser.epilog
    for code in (0, 1, 3):
        said = re.search(rf"(?:^|; |: ){code} ([^;]*)", epilog).group(1)
        for outcome in (o for o in Outcome if o.exit_code == code and o in ("accepted", "none", "undecided",
                                                                                 "rejected", "slower", "infra")):
            assert outcome in said, (code, outcome, said)
    assert all(f"{int(c)} " in epilog for c in ExitCode)
