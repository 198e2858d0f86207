"""Errors that reach a person, each with what happened and what to do."""
from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """The console's exit codes (documented in the README)."""
    OK = 0              # round complete: accepted, none or undecided (core/verdict.py Outcome)
    REJECTED = 1        # parity failure, refused claim, guard breach, protected path touched; slower
    USAGE = 2           # bad command line or profile
    INFRA = 3           # Docker missing, build failed, node fault: retry, never a regression
    HELD = 4            # implausible or uncheckable: held for a person to review
    INTERRUPTED = 130   # Ctrl-C / abort; the round is marked incomplete


class ConsoleError(Exception):
    """Base: ``message`` says what happened, ``hint`` what to do."""
    exit_code = ExitCode.INFRA

    def __init__(self, message: str, hint: str = ""):
        self.message, self.hint = message, hint
        super().__init__(message)

    def paragraph(self) -> str:
        return f"{self.message}\n{self.hint}".strip()


class UsageError(ConsoleError):
    exit_code = ExitCode.USAGE


class InfraError(ConsoleError):
    """The node or its tooling failed; the round can be retried."""
    exit_code = ExitCode.INFRA


class BuildError(InfraError):
    def __init__(self, build: str, message: str, hint: str = "", log_tail: list[str] | None = None):
        self.build, self.log_tail = build, log_tail or []
        super().__init__(f"build of {build} failed: {message}", hint)


class CompilerMismatch(BuildError):
    """A pinned compiler or tool is not the one the build found: in the base image (docker), or on
    this host (``host_packages`` given: the local runtime builds with the host's own tools)."""
    def __init__(self, build: str, expected: str, found: str, tool: str = "compiler",
                 host_packages: tuple[str, ...] | None = None):
        self.expected, self.found, self.tool = expected, found, tool
        key = "image.compiler" if tool == "compiler" else f"image.tools ({tool})"
        if host_packages is None:
            hint = ("Either the base image is not the pinned one (run `console images bootstrap` and check "
                    "its ID; `--force` makes it again with the profile's packages, for a base made before a "
                    f"package was added) or the pin is out of date: update {key} in the profile deliberately.")
        else:
            absent = "not runnable on this host" in found
            hint = (f"The local runtime builds with this host's own tools, and {tool} "
                    + ("is not installed here" if absent else "here is another version")
                    + f": install the profile's packages on the host (`sudo apt-get install {' '.join(host_packages)}`, "
                    "or `make setup-local`, which installs them on Debian), or, if this host's version is "
                    f"the one you mean to pin, update {key} (or image.host) in the profile deliberately.")
        super().__init__(build, f"the {tool} moved: expected '{expected}', found '{found}'", hint)


class Interrupted(ConsoleError):
    exit_code = ExitCode.INTERRUPTED
