"""Guards on the project's shape: the core decides and touches no edge; each rule is defined once."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EDGES = ("docker", "textual", "pynvml", "tomlkit", "rich", "console.runtime", "console.telemetry", "console.tui")


def test_importing_the_core_loads_no_edge():
    # A fresh interpreter: the test process has long imported everything.
    code = ("import importlib, pkgutil, sys, console.core as c\n"
            "for m in pkgutil.walk_packages(c.__path__, 'console.core.'): importlib.import_module(m.name)\n"
            "print('\\n'.join(sorted(sys.modules)))")
    loaded = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                            cwd=ROOT).stdout.split()
    leaked = sorted(m for m in loaded if any(m == e or m.startswith(e + ".") for e in EDGES))
    assert not leaked, f"console.core imports edge modules: {leaked}"


def test_the_cli_and_its_commands_do_not_import_each_other_in_a_circle():
    src = (ROOT / "console" / "commands.py").read_text()
    assert "from .cli import" not in src and "from console.cli import" not in src


def _defined(name: str) -> list[str]:
    """Every module under console/ that defines ``name`` at top level (a def, a class or a constant)."""
    out = []
    for path in (ROOT / "console").rglob("*.py"):
        for line in path.read_text().splitlines():
            if line.startswith((f"def {name}(", f"class {name}(", f"class {name}:", f"{name} =", f"{name}:")):
                out.append(str(path.relative_to(ROOT)))
    return out


def test_each_rule_and_shared_helper_is_defined_once():
    for name in ("counted", "counts", "summarize", "grade_depths", "parity_ok", "path_ok", "decide", "band",
                 "log_ratios", "pairs_of", "lower_bound", "linear_bound", "experiment", "pair_noise",
                 "depth_status", "worst_depth", "utc_now", "LOG_TAIL_LINES", "EXIT_CODES", "EXCLUDED",
                 "RepKey", "paired_ratios", "median", "rules_from_dict"):
        assert len(_defined(name)) == 1, (name, _defined(name))


def test_the_receipt_doc_is_generated_from_the_core_types():
    from console import receipt_doc
    assert receipt_doc.render(receipt_doc.DOC.read_text()) == receipt_doc.DOC.read_text(), \
        "docs/RECEIPT.md is out of date: run `python -m console.receipt_doc`"
