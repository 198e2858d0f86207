"""Guards on the project's shape: the core decides and touches no edge; each rule is defined once."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EDGES = ("docker", "textual", "pynvml", "tomlkit", "rich", "pydantic", "console.runtime", "console.telemetry",
         "console.tui")


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
                 "depth_status", "worst_depth", "utc_now", "LOG_TAIL_LINES", "Outcome", "EXCLUDED",
                 "RepKey", "paired_ratios", "median", "rules_from_dict"):
        assert len(_defined(name)) == 1, (name, _defined(name))


def test_the_receipt_doc_is_generated_from_the_core_types():
    from console.reports import receipt_doc
    assert receipt_doc.render(receipt_doc.DOC.read_text()) == receipt_doc.DOC.read_text(), \
        "docs/RECEIPT.md is out of date: run `python -m console.reports.receipt_doc`"


def test_the_profile_key_reference_is_generated_from_the_declarations():
    from console.profile import doc
    assert doc.render(doc.DOC.read_text()) == doc.DOC.read_text(), \
        "docs/PROFILES.md is out of date: run `python -m console.profile.doc`"


def _import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """console's modules and the console modules each imports (at any depth of the file, so a
    deferred import inside a function counts: it is a dependency all the same)."""
    import ast
    mods = {}
    for path in (root / "console").rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in mods.items():
        here = name.split(".") if is_pkg else name.split(".")[:-1]
        deps = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in mods}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or "" if node.level == 0 else ".".join(
                    here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    deps.add(sub if sub in mods else base)
        deps &= set(mods)
        deps.discard(name)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state and (found := visit(d)):
                return found
        stack.pop()
        state[m] = 2
        return None
    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_no_module_imports_itself_through_others():
    # a package's __init__ re-exports its modules: importing the package is not a cycle of its own
    graph = {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in _import_graph().items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_the_cycle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


# The layers (shared/DESIGN.md): cli -> commands -> (round, queueing, bisect, reports) -> (engine, serving,
# runtime, telemetry, results, profile) -> core. A package imports only lower bands, or a peer in the
# bottom two bands (they share vocabulary); peers above that talk through the layer over them.
BANDS = {"core": 0, "errors": 0, "paths": 0, "events": 0, "clock": 0, "files": 0,
         "profile": 1, "results": 1, "telemetry": 1, "serving": 1,
         "runtime": 2, "engine": 3, "round": 4, "reports": 4, "queueing": 5, "bisect": 5, "tui": 6, "commands": 7, "cli": 8}
# Imports against the layers that stand for now: (importing module, imported package) -> why, and who
# removes the entry. Empty is the goal.
ALLOWED: dict[tuple[str, str], str] = {}


def _package(module: str) -> str:
    """``console.round.after`` -> ``round``; a top-level module is its own package."""
    return module.split(".")[1] if "." in module else module


def _against_the_layers(graph: dict[str, set[str]], allowed=ALLOWED) -> list[str]:
    """Every import from a lower band to a higher one, or sideways between peers of band 2 and up."""
    found = []
    for m, deps in sorted(graph.items()):
        a = _package(m)
        for d in sorted(deps):
            b = _package(d)
            if a == b or a not in BANDS or b not in BANDS or (m, b) in allowed:
                continue
            if BANDS[a] < BANDS[b] or (BANDS[a] == BANDS[b] >= 2):
                found.append(f"{m} -> {d} ({a}, band {BANDS[a]} -> {b}, band {BANDS[b]})")
    return found


def test_every_package_has_a_band():
    # a folder of modules is a package with or without an __init__.py (console/results has none)
    packages = {p.stem for p in (ROOT / "console").iterdir() if p.suffix == ".py" or any(p.glob("*.py"))}
    assert packages - {"__init__"} == set(BANDS), "give each new package its layer in BANDS"


def test_imports_point_down_the_layers():
    found = _against_the_layers(_import_graph())
    assert not found, "move the shared piece down a layer, or pass it in from above:\n" + "\n".join(found)


def test_the_layer_check_finds_an_upward_or_sideways_import():
    graph = {"console.runtime.base": {"console.engine.protocol"},           # up: runtime 2 -> engine 3
             "console.round.after": {"console.reports.text"},               # sideways at band 4
             "console.results.store": {"console.profile", "console.clock"},  # sideways at band 1: allowed
             "console.engine.sources": {"console.paths", "console.runtime.base"}}     # down
    assert [f.split(" (")[0] for f in _against_the_layers(graph)] == [
        "console.round.after -> console.reports.text", "console.runtime.base -> console.engine.protocol"]
    assert len(_against_the_layers(graph, {("console.round.after", "reports"): "why"})) == 1


def test_the_layer_check_reads_an_import_inside_a_function(tmp_path):
    for rel, text in {"console/__init__.py": "", "console/core/__init__.py": "", "console/tui/__init__.py": "",
                      "console/tui/app.py": "",
                      "console/core/pure.py": "def f():\n    from ..tui import app\n    return app\n"}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert [f.split(" (")[0] for f in _against_the_layers(_import_graph(tmp_path))] == [
        "console.core.pure -> console.tui.app"]


def test_the_top_level_holds_only_the_entry_points_and_shared_vocabulary():
    top = sorted(p.stem for p in (ROOT / "console").glob("*.py"))
    assert top == ["__init__", "cli", "clock", "commands", "errors", "events", "files", "paths"], top
    # the profile is a package: its declared tables, the loader, the generated key reference
    assert (ROOT / "console" / "profile" / "__init__.py").is_file()


MAX_FUNCTION_LINES = 80


def test_no_function_is_longer_than_80_lines():
    import ast
    long = []
    for path in sorted((ROOT / "console").rglob("*.py")):
        where = path.relative_to(ROOT)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{where}:{node.lineno} {node.name}: {lines} lines")
    assert not long, "split these into well-named helpers:\n" + "\n".join(long)


# The core's rooms, in the order a newcomer reads them (console/core/__init__.py): a room imports only
# from itself and the rooms before it, so each can be read knowing only what came before.
ROOMS = ("statistics", "records", "decisions", "provenance")


def _rooms_out_of_order(graph: dict[str, set[str]]) -> list[str]:
    def room(m: str) -> str | None:
        parts = m.split(".")
        return parts[2] if len(parts) > 3 and parts[:2] == ["console", "core"] else None
    return [f"{m} -> {d}" for m, deps in sorted(graph.items()) if room(m) in ROOMS
            for d in sorted(deps) if room(d) in ROOMS and ROOMS.index(room(d)) > ROOMS.index(room(m))]


def test_the_core_is_rooms_read_in_order():
    core = ROOT / "console" / "core"
    assert sorted(p.name for p in core.iterdir() if p.suffix == ".py") == ["__init__.py"], \
        "a core module belongs in one of the rooms: " + ", ".join(ROOMS)
    assert sorted(p.name for p in core.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(ROOMS)
    found = _rooms_out_of_order(_import_graph())
    assert not found, "a room imports from a room after it:\n" + "\n".join(found)


def test_the_room_check_finds_an_import_from_a_later_room():
    graph = {"console.core.records.receipt": {"console.core.statistics.stats", "console.core.decisions.gate"},
             "console.core.provenance.lock": {"console.core.decisions.gate"}}
    assert _rooms_out_of_order(graph) == ["console.core.records.receipt -> console.core.decisions.gate"]
