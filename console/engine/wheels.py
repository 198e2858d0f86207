"""Wheels of the console and every runtime dependency, for a node that installs with
``pip install --no-index --find-links DIR/wheels bench-console``.

The node may run another Python than the machine that gathers them (3.12 there, 3.11 here):
pip downloads the dependencies' wheels for a named target (``--python-version``, ``--platform``).
Only wheels are taken, never an sdist: a node without an index could not fetch an sdist's build
dependencies. The console's own wheel is pure Python, so one wheel serves every target.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import UsageError

DIST = "bench-console"
PROJECT_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Target:
    """Which interpreter the wheels are for; empty: this one."""
    python_version: str = ""            # "3.12"
    platforms: tuple[str, ...] = ()     # "manylinux2014_x86_64", …
    implementation: str = ""            # "cp"
    abi: str = ""                       # "cp312"

    def pip_args(self) -> list[str]:
        args = ["--python-version", self.python_version] if self.python_version else []
        for tag in self.platforms:
            args += ["--platform", tag]
        args += ["--implementation", self.implementation] if self.implementation else []
        return args + (["--abi", self.abi] if self.abi else [])

    def record(self) -> dict[str, object]:
        here = f"{sys.version_info.major}.{sys.version_info.minor}"
        return {"python_version": self.python_version or here, "platforms": list(self.platforms) or ["this machine's"],
                "implementation": self.implementation or "this machine's", "abi": self.abi or "derived"}


def gather(dest: Path, target: Target, log: Callable[[str], None], console_wheel: Path | None = None) -> list[Path]:
    """The console's wheel and its dependencies' wheels for ``target`` in ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    own = _own_wheel(dest, log, console_wheel)
    log(f"downloading the wheels {own.name} depends on"
        + (f" for Python {target.python_version}" if target.python_version else ""))
    _pip(["download", "--only-binary=:all:", "--dest", str(dest), *target.pip_args(), str(own)],
         f"the dependencies of {own.name}",
         "A dependency with no wheel for the target cannot be installed without an index: choose "
         "--python-version/--platform that it has wheels for.")
    return sorted(dest.glob("*.whl"))


def _own_wheel(dest: Path, log: Callable[[str], None], given: Path | None) -> Path:
    """The console's wheel: the one given, else built from this checkout's sources."""
    if given is not None:
        if not (given.is_file() and given.name.startswith(DIST.replace("-", "_") + "-") and given.suffix == ".whl"):
            raise UsageError(f"--console-wheel {given} is not a {DIST} wheel",
                             "Give the file `pip wheel --no-deps .` made from the console's checkout.")
        shutil.copy2(given, dest / given.name)
        return dest / given.name
    if not _is_checkout(PROJECT_ROOT):
        raise UsageError(f"this {DIST} is installed from a wheel, and a wheel cannot be rebuilt from it",
                         "Give the wheel it was installed from with --console-wheel FILE (or make the "
                         "bundle from a checkout of the console).")
    log(f"building the {DIST} wheel from {PROJECT_ROOT}")
    with tempfile.TemporaryDirectory(prefix="bench-console-wheel-") as tmp:
        # built from a copy: setuptools writes build/ and egg-info beside the sources it builds
        src = Path(tmp) / "src"
        src.mkdir()
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(PROJECT_ROOT / name, src / name)
        shutil.copytree(PROJECT_ROOT / "console", src / "console",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "build"))
        _pip(["wheel", "--no-deps", "--wheel-dir", str(Path(tmp) / "out"), str(src)], f"the {DIST} wheel",
             "Building it needs setuptools from the package index (build isolation).")
        built = next((Path(tmp) / "out").glob("*.whl"))
        shutil.copy2(built, dest / built.name)
    return dest / built.name


def _is_checkout(root: Path) -> bool:
    try:
        return tomllib.loads((root / "pyproject.toml").read_text())["project"]["name"] == DIST
    except (OSError, KeyError, ValueError):
        return False


def _pip(args: list[str], what: str, hint: str) -> None:
    r = subprocess.run([sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        why = (r.stderr.strip().splitlines() or ["pip failed"])[-1][:400]
        raise UsageError(f"cannot gather {what} with pip: {why}", hint)
