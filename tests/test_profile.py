"""Profile errors name the file, the key and what was expected — before anything is built."""
from __future__ import annotations

import json
from dataclasses import asdict
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.cli import main
from console.profile import Bands, GateRules, Guard, ProfileError, load_profile, rules_from_dict

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "profiles" / "demo.toml"


def _variant(tmp_path: Path, edit, source: Path = DEMO) -> Path:
    text = edit(source.read_text())
    # the demo's relative paths point at profiles/demo and images/: mirror that layout
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "demo").symlink_to(ROOT / "profiles" / "demo")
    (tmp_path / "images").symlink_to(ROOT / "images")
    p = tmp_path / "profiles" / source.name
    p.write_text(text)
    return p


def test_demo_profile_loads_with_defaults_from_the_seeds():
    p = load_profile(DEMO)
    assert p.parity.depths == (64, 128, 256, 512, 1024, 2048, 4096) and p.parity.rows == 64
    assert (p.gate.top1_min, p.gate.kl_max, p.gate.significance, p.gate.plausibility) == (0.95, 0.05, 0.02, 5.0)
    assert (p.gate.bands.s, p.gate.bands.m, p.gate.bands.l, p.gate.bands.xl) == (0.035, 0.06, 0.10, 0.18)
    assert p.bench.shortcut == "seek" and p.bench.seek_bytes_per_position > 0
    assert len(p.sha256) == 64


def test_rules_round_trip_through_a_receipt_table():
    from dataclasses import asdict
    rules = load_profile(DEMO).gate
    assert rules_from_dict(asdict(rules)) == rules


@pytest.mark.parametrize("edit, key, expected", [
    (lambda t: t.replace("reps = 10", "repz = 10"), "bench.repz", "unknown key"),
    (lambda t: t.replace("reps = 10", 'reps = "ten"'), "bench.reps", "expected an integer"),
    (lambda t: t.replace("top1_min = 0.95", "top1_min = 1.5"), "gate.top1_min", "expected a value in"),
    (lambda t: t.replace('shortcut = "seek"', 'shortcut = "teleport"'), "bench.shortcut", "expected 'none' or 'seek'"),
    (lambda t: t.replace("depths = [64, 128", "depths = [128, 64"), "parity.depths", "strictly increasing"),
    (lambda t: t.replace("rows = 64", "rows = 65"), "parity.rows", "at most the smallest depth (64)"),
    (lambda t: t.replace('memory = "512m"', 'memory = "lots"'), "run.memory", "a size like"),
    (lambda t: t.replace("scored_path_depth = 1024", "scored_path_depth = 1000"), "parity.scored_path_depth", "one of parity.depths"),
    (lambda t: t.replace('"--out", "{out}", "--handover"', '"--out", "{outdir}", "--handover"'), "bench.command", "unknown placeholder {outdir}"),
    (lambda t: t.replace('[image]\nbase = "bench-console/base:bookworm-gcc"\n', "[image]\n"), "image.base", "missing"),
    (lambda t: t.replace("bands = { s = 0.035, m = 0.06", "bands = { s = 0.07, m = 0.06"), "gate.bands", "strictly increasing"),
    (lambda t: t + "\n[extra]\nx = 1\n", "extra", "unknown key"),
    (lambda t: t.replace("false_accept = 0.01", "false_accept = 0.5"), "gate.false_accept", "error rate in (0, 0.5)"),
    (lambda t: t.replace("miss = 0.05", "miss = 0"), "gate.miss", "error rate in (0, 0.5)"),
    (lambda t: t.replace("false_slower = 0.01", "false_slower = 0.7"), "gate.false_slower", "error rate"),
    (lambda t: t.replace("min_gain = 0.035", "min_gain = 0.01"), "gate.min_gain", "at least gate.significance"),
    (lambda t: t.replace("settle_pairs = 4", "settle_pairs = 40"), "gate.settle_pairs",
     "at most gate.max_pairs (32)"),
    (lambda t: t.replace("name = \"demo\"", "name = "), "(syntax)", "valid TOML"),
])
def test_bad_profiles_name_file_key_and_expectation(tmp_path, edit, key, expected):
    path = _variant(tmp_path, edit)
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    assert e.value.key == key
    assert expected in e.value.expected
    assert str(path) in str(e.value)


def test_missing_file_is_a_profile_error(tmp_path):
    with pytest.raises(ProfileError) as e:
        load_profile(tmp_path / "nope.toml")
    assert "nope.toml" in str(e.value)


def test_cli_exits_2_on_a_typo_before_building(tmp_path, capsys):
    path = _variant(tmp_path, lambda t: t.replace("warmup = 1", "warmpu = 1"))
    code = main(["run", "--profile", str(path), "--candidate", str(ROOT / "images" / "demo-engine"), "--headless"])
    err = capsys.readouterr().err
    assert code == 2
    assert re.search(r"demo\.toml: key 'bench\.warmpu': unknown key", err)
    assert "nothing was built" in err


def test_profile_names_resolve_to_the_shipped_files_and_anything_else_is_a_path(tmp_path, capsys):
    import argparse

    from console.paths import DEMO_PROFILE, LLAMA_PROFILE, profile_arg, shipped_profiles
    assert profile_arg("demo") == DEMO_PROFILE and profile_arg("llama-cpp") == LLAMA_PROFILE
    assert {"demo", "llama-cpp", "llama-cpp-bench", "llama-cpp-cuda"} <= set(shipped_profiles())
    mine = tmp_path / "mine.toml"
    assert profile_arg(str(mine)) == mine           # a file path stays a path, even before it exists
    with pytest.raises(argparse.ArgumentTypeError, match="shipped: demo, demo-matrix, llama-cpp"):
        profile_arg("no-such-profile")
    assert main(["profiles"]) == 0
    listed = capsys.readouterr().out
    assert str(DEMO_PROFILE) in listed and "does not load" not in listed


LLAMA = ROOT / "profiles" / "llama-cpp.toml"


def _llama_variant(tmp_path: Path, edit) -> Path:
    (tmp_path / "llama-cpp").symlink_to(ROOT / "profiles" / "llama-cpp")
    p = tmp_path / "llama-cpp.toml"
    p.write_text(edit(LLAMA.read_text()))
    return p


@pytest.mark.parametrize("edit, key, expected", [
    (lambda t: re.sub(r'tasks_sha256 = "\w+"', 'tasks_sha256 = "' + "0" * 64 + '"', t), "accuracy.tasks_sha256",
     "the task set changed"),
    (lambda t: t.replace('tasks = "llama-cpp/accuracy/tasks.jsonl"', 'tasks = "llama-cpp/accuracy/nope.jsonl"'),
     "accuracy.tasks", "expected an existing file"),
    (lambda t: t.replace('"--prompts", "{prompts}"', '"--prompts", "{prompt}"'), "accuracy.command",
     "unknown placeholder {prompt}"),
    (lambda t: t.replace("borderline_kl = 0.10", "borderline_kl = 0.04"), "gate.borderline_kl",
     "more than gate.kl_max"),
    (lambda t: t.replace('variants = [{ name = "flash-attn", args = ["--flash-attn", "1"] },',
                         'variants = [{ name = "flash-attn" },'), "adjudication.variants[0].args", "missing"),
    (lambda t: t.split("# Borderline KL")[0] + "[reference]" + t.split("[reference]", 1)[1], "gate.borderline_kl",
     "an [adjudication] table"),
])
def test_bad_accuracy_and_adjudication_tables_name_the_key(tmp_path, edit, key, expected):
    _refused(_llama_variant(tmp_path, edit), key, expected)


def _refused(path: Path, key: str, expected: str) -> None:
    """Loading ``path`` fails naming the file, the key and what was expected."""
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    assert e.value.key == key, e.value
    assert expected in e.value.expected and str(path) in str(e.value)


def test_the_llama_profile_declares_accuracy_and_adjudication():
    p = load_profile(LLAMA)
    assert p.accuracy.tokens == 8 and p.accuracy.chunk == 40 and Path(p.accuracy.tasks).is_file()
    assert [name for name, _ in p.adjudication.variants] == ["flash-attn", "batch-64", "threads-2"]
    assert (p.gate.borderline_kl, p.gate.spread_factor, p.gate.agreement_factor) == (0.10, 2.0, 2.0)
    assert (p.adjudication.completions, p.adjudication.tokens) == (40, 32)


# --- the declared schema: defaults, ranges, the JSON Schema, `console profile check` ---------------

MINIMAL = """
name = "minimal"
[engine]
source = { path = "src" }
[image]
base = "img"
compiler = "cc 1"
build = "make"
[bench]
command = ["bench", "{depth}"]
metric = "tok_s"
depth = 64
tokens = 16
short_tokens = 4
[parity]
command = ["logits", "{doc}", "{out}"]
document = "doc.tok"
document_sha256 = "x"
reference = "ref.npy"
vocab = 100
"""


def _minimal(tmp_path: Path, extra: str = "") -> Path:
    (tmp_path / "doc.tok").write_text("1 2 3\n")
    p = tmp_path / "minimal.toml"
    p.write_text(MINIMAL + extra)
    return p


def test_a_profile_of_required_keys_only_gets_the_declared_defaults(tmp_path):
    from console.profile import HealthRules, PreflightRules, QueueRules, RunSpec
    from console.profile.spec import DEPTHS
    p = load_profile(_minimal(tmp_path))
    assert p.source.path == str(tmp_path / "src") and p.parity.document == str(tmp_path / "doc.tok")
    assert (p.node, p.description, p.candidate, p.protected, p.model, p.harness) == ("local", "", "", (), (), None)
    assert (p.image.suite, p.image.packages, p.image.compiler_probe, p.image.workdir, p.image.tools) == (
        "bookworm", ("gcc", "libc6-dev", "make"), ("gcc", "--version"), "/src", ())
    # the output limit is sized from what the logits command writes, never below the declared 64 MB
    assert p.run == RunSpec(output_limit_mb=p.run.output_limit_mb) and p.run.output_limit_mb >= 64
    assert (p.bench.reps, p.bench.warmup, p.bench.short_reps, p.bench.shortcut, p.bench.fill, p.bench.adapter) == (
        8, 1, 4, "none", "decode", "bench_result")
    assert p.parity.depths == DEPTHS and p.parity.rows == 1 and p.parity.output == "logits.npy"
    assert p.parity.scored_path_depth == DEPTHS[0]          # the smallest depth, unless given
    assert p.reference.command == p.parity.command and p.reference.runtime == "docker"
    assert p.gate == GateRules() and p.gate.false_slower == p.gate.false_accept
    assert (p.health, p.preflight, p.queue) == (HealthRules(), PreflightRules(), QueueRules())


def test_a_busy_gpu_is_refused_unless_the_profile_says_warn(tmp_path):
    assert load_profile(_minimal(tmp_path)).preflight.busy_gpu == "refuse"
    assert load_profile(_minimal(tmp_path, '[preflight]\nbusy_gpu = "warn"\n')).preflight.busy_gpu == "warn"
    with pytest.raises(ProfileError) as e:
        load_profile(_minimal(tmp_path, '[preflight]\nbusy_gpu = "ignore"\n'))
    assert e.value.key == "preflight.busy_gpu" and "refuse" in e.value.expected and "warn" in e.value.expected


def test_derived_defaults_follow_the_keys_they_come_from(tmp_path):
    p = load_profile(_minimal(tmp_path, "[gate]\nfalse_accept = 0.02\nbands = { s = 0.04, m = 0.06, l = 0.1, "
                                        "xl = 0.2 }\n[run]\noutput_limit_mb = 3\n"))
    assert (p.gate.false_slower, p.gate.min_gain, p.run.output_limit_mb) == (0.02, 0.04, 3)


def test_each_core_rules_type_has_every_field_declared_as_a_key():
    from dataclasses import fields

    from console.profile import HealthRules, PreflightRules, QueueRules
    from console.profile import tables as T
    for table, rules in ((T.GateTable, GateRules), (T.HealthTable, HealthRules), (T.PreflightTable, PreflightRules),
                         (T.QueueTable, QueueRules), (T.BandsTable, Bands), (T.GuardTable, Guard)):
        assert sorted(table.model_fields) == sorted(f.name for f in fields(rules)), table


def _ranged_keys() -> list[tuple[str, str, dict]]:
    from console.profile import json_schema
    from console.profile.doc import sections
    return [(t, k, s) for t, table in sections(json_schema()) for k, s in table.get("properties", {}).items()
            if "minimum" in s or "maximum" in s]


def _write(path: Path, doc: dict) -> Path:
    import tomlkit
    path.write_text(tomlkit.dumps(doc))
    return path


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_value_out_of_its_declared_range_names_the_key_and_the_range(tmp_path, data):
    import tomllib
    tables = ("run", "bench", "parity", "gate", "health", "queue", "preflight")   # the others need more keys
    table, key, s = data.draw(st.sampled_from([r for r in _ranged_keys() if r[0] in tables]))
    step = 1 if s["type"] == "integer" else 1e-3
    outside = [s[k] + sign * step for k, sign in (("minimum", -1), ("maximum", 1)) if k in s]
    value = data.draw(st.sampled_from(outside))
    doc = tomllib.loads(MINIMAL)
    doc.setdefault(table, {})[key] = value
    path = _write(_minimal(tmp_path), doc)
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    assert (e.value.key, e.value.path) == (f"{table}.{key}", str(path))
    assert e.value.expected.startswith("expected a value in [") and repr(value) in e.value.expected


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_value_at_any_key_loads_or_is_a_profile_error_naming_a_key(tmp_path_factory, data):
    import tomllib

    from console.profile.doc import keys
    d = tmp_path_factory.mktemp("p")
    doc = tomllib.loads(DEMO.read_text())
    dotted = data.draw(st.sampled_from([k for k in keys() if "." in k and k.count(".") == 1]))
    table, key = dotted.split(".")
    value = data.draw(st.one_of(st.integers(-10, 10**6), st.floats(-1, 2, allow_nan=False), st.booleans(),
                                st.text(max_size=8), st.lists(st.integers(0, 9), max_size=3),
                                st.lists(st.text(max_size=4), max_size=3)))
    doc.setdefault(table, {})[key] = value
    (d / "profiles").mkdir()
    (d / "profiles" / "demo").symlink_to(ROOT / "profiles" / "demo")
    (d / "images").symlink_to(ROOT / "images")
    path = d / "profiles" / "demo.toml"
    _write(path, doc)
    try:
        load_profile(path)
    except ProfileError as e:
        assert e.key and e.expected and str(path) in str(e)


def _console(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console.cli", *args], capture_output=True, text=True, cwd=ROOT)


def test_the_schema_command_prints_a_json_schema_of_every_table():
    from console.profile.tables import ProfileFile
    out = _console("profile", "schema")
    assert out.returncode == 0, out.stderr
    schema = json.loads(out.stdout)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema" and schema["type"] == "object"
    assert set(schema["properties"]) == set(ProfileFile.model_fields)
    assert schema["additionalProperties"] is False and "name" in schema["required"]
    types = {"object", "array", "string", "integer", "number", "boolean", "null"}

    def walk(node):
        if isinstance(node, dict):
            if "$ref" in node:
                assert node["$ref"].split("/")[-1] in schema["$defs"], node["$ref"]
            if "type" in node:
                assert node["type"] in types, node
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(schema)
    gate = schema["$defs"]["GateTable"]["properties"]
    assert gate["top1_min"] == {**gate["top1_min"], "minimum": 0.0, "maximum": 1.0, "default": 0.95}
    assert gate["false_accept"]["exclusiveMaximum"] == 0.5 and "default" not in gate["false_slower"]
    assert all(p.get("description") for d in schema["$defs"].values() for p in d.get("properties", {}).values())


def test_check_passes_a_good_profile_and_names_file_and_key_of_a_broken_one(tmp_path):
    good = _console("profile", "check", str(DEMO))
    assert good.returncode == 0 and good.stdout.count("\n") == 1, good
    assert good.stdout.startswith(f"{DEMO.resolve()}: ok: profile 'demo'")
    path = _variant(tmp_path, lambda t: t.replace("max_drop = 0.10", "max_drop = 2"))
    bad = _console("profile", "check", str(path))
    assert bad.returncode == 2 and bad.stdout == ""
    assert f"{path}: key 'gate.guards[0].max_drop': expected a value in [0.0 .. 1.0], got 2" in bad.stderr


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "console" / "assets" / "profiles").glob("*.toml")))
def test_every_shipped_profile_passes_check(name, capsys):
    assert main(["profile", "check", str(ROOT / "console" / "assets" / "profiles" / f"{name}.toml")]) == 0
    assert ": ok: profile" in capsys.readouterr().out


def test_every_key_of_the_schema_is_documented_in_its_table_of_profiles_md():
    from console.profile.doc import DOC, sections
    text = DOC.read_text()
    for table, s in sections():
        heading = "### top level" if not table else (f"### `[[{table}]]`" if f"### `[[{table}]]`" in text
                                                     else f"### `[{table}]`")
        assert heading in text, table
        section = text.split(heading, 1)[1].split("\n### ", 1)[0]
        for key in s.get("properties", {}):
            assert f"| `{key}` |" in section, f"{table}.{key} is not in {DOC.name}"


# --- [matrix] -------------------------------------------------------------------------------------

DEMO_MATRIX = ROOT / "profiles" / "demo-matrix.toml"


def _matrix_variant(tmp_path: Path, edit) -> Path:
    return _variant(tmp_path, edit, DEMO_MATRIX)


AXES = 'axes = [{ name = "depth", values = [1024, 4096] }]'


def test_a_matrix_is_every_combination_of_its_axes_and_its_home_is_the_bench_shape(tmp_path):
    path = _matrix_variant(tmp_path, lambda t: t.replace(AXES, 'axes = [{ name = "depth", values = [1024, 4096] },\n'
                                                          '        { name = "tokens", values = [96, 192] }]\n'
                                                          'guarded = [{ tokens = 96 }]'))
    m = load_profile(path).matrix
    assert [c.key for c in m.cells] == ["depth=1024,tokens=96", "depth=1024,tokens=192", "depth=4096,tokens=96",
                                        "depth=4096,tokens=192"]
    assert m.home == "depth=4096,tokens=192"
    assert [c.role for c in m.cells] == ["guarded", "scored", "guarded", "scored"]
    llama = load_profile(ROOT / "profiles" / "llama-cpp-matrix.toml").matrix
    assert llama.home == "test=pp512,depth=512" and len(llama.cells) == 6
    assert {c.metric for c in llama.cells} == {"prefill_tok_s", "decode_tok_s"}


@pytest.mark.parametrize("edit, key, expected", [
    (lambda t: t.replace(AXES, 'axes = [{ name = "depth", values = [1024, 2048] }]'), "matrix.axes",
     "a cell of the bench's own shape"),
    (lambda t: t.replace(AXES, 'axes = [{ name = "depth", values = [1024, 4096] }]\nguarded = [{ depth = 1024 }, '
                              '{ depth = 4096 }]'), "matrix.guarded", "at least one scored cell"),
    (lambda t: t.replace(AXES, 'axes = [{ name = "depth", values = [1024, 1024, 4096] }]'), "matrix.axes[0].values",
     "distinct values"),
    (lambda t: t.replace(AXES, 'axes = [{ name = "test", values = ["a", "b"] }]'), "matrix.axes[0].values",
     "tables (with a `label`)"),
    (lambda t: t.replace(AXES, 'axes = [{ name = "depth", values = [4096] }]\nguarded = [{ batch = 2 }]'),
     "matrix.guarded", "axes among depth"),
    (lambda t: t.replace(AXES, 'axes = [{ name = "threads", values = [1, 2] }, { name = "depth", values = [4096] }]'),
     "matrix.axes", "bench.command to take {threads}"),
    (lambda t: t.replace(AXES, 'axes = [{ name = "tokens", values = [48, 192] }, { name = "depth", values = [4096] }]'),
     "matrix.axes", "more tokens than bench.short_tokens"),
    (lambda t: t.replace("[matrix]", '[[gate.guards]]\nname = "g"\ndepth = 128\ntokens = 64\n\n[matrix]'),
     "gate.guards", "guarded cells"),
    (lambda t: t.replace(AXES, 'axes = [{ name = "depth", values = [-1, 4096] }]'), "matrix.axes[0].values",
     "depth to be an integer of at least 0"),
    (lambda t: t.replace(AXES, 'axes = [{ name = "test", values = [{ label = "a", tokens = "many" }] }, '
                              '{ name = "depth", values = [4096] }]'), "matrix.axes[0].values",
     "tokens to be an integer"),
])
def test_a_broken_matrix_names_the_file_the_key_and_what_was_expected(tmp_path, edit, key, expected):
    _refused(_matrix_variant(tmp_path, edit), key, expected)


def _server_variant(tmp_path, extra: str):
    server = ROOT / "profiles" / "llama-server.toml"
    (tmp_path / "llama-server").symlink_to(ROOT / "profiles" / "llama-server")
    (tmp_path / "llama-cpp").symlink_to(ROOT / "profiles" / "llama-cpp")
    p = tmp_path / "llama-server.toml"
    p.write_text(server.read_text() + extra)
    return p


def test_a_serving_matrix_is_a_matrix_of_loads(tmp_path):
    p = load_profile(_server_variant(tmp_path, '\n[matrix]\naxes = [{ name = "concurrency", values = [1, 4] }]\n'))
    cells = p.matrix.cells
    assert [c.key for c in cells] == ["concurrency=1", "concurrency=4"]
    # the round's own load (concurrency 4) is the home cell and sets nothing; the other sets its load
    assert [c.args for c in cells] == [(("concurrency", "1"),), ()] and p.matrix.home == "concurrency=4"
    from console.round.kinds import named
    from console.round.plan import RoundConfig
    kind = RoundConfig(profile=p, main=p.source, candidate=p.source, out_dir=tmp_path).kind
    assert kind.name == "matrix" and kind.slots(p) == 4 and named("matrix").slots(p) == 4


def test_a_serving_matrix_of_rates_has_no_home_and_its_first_cell_stands_in(tmp_path):
    p = load_profile(_server_variant(tmp_path, '\n[matrix]\naxes = [{ name = "rate", values = [0.5, 2] }, '
                                               '{ name = "concurrency", values = [2, 8] }]\n'))
    assert p.matrix.home == "rate=0.5,concurrency=2"
    assert dict(p.matrix.cell("rate=2,concurrency=8").args) == {"concurrency": "8", "rate": "2"}
    from console.round.kinds import named
    assert named("matrix").slots(p) == 8


@pytest.mark.parametrize("extra, key, expected", [
    ('\n[matrix]\naxes = [{ name = "depth", values = [0] }]\n', "matrix.axes",
     "expected a serving cell to set only concurrency, rate"),
    ('\n[matrix]\naxes = [{ name = "concurrency", values = [0, 4] }]\n', "matrix.axes[0].values",
     "expected concurrency to be an integer from 1 to 1024"),
    ('\n[matrix]\naxes = [{ name = "rate", values = [-1] }]\n', "matrix.axes[0].values", "expected rate to be"),
])
def test_a_serving_matrix_refuses_what_a_load_cannot_be(tmp_path, extra, key, expected):
    with pytest.raises(ProfileError) as e:
        load_profile(_server_variant(tmp_path, extra))
    assert e.value.key == key and expected in e.value.expected, (e.value.key, e.value.expected)


def test_a_bench_matrix_refuses_a_load(tmp_path):
    _refused(_matrix_variant(tmp_path, lambda t: t.replace(AXES, 'axes = [{ name = "concurrency", values = [1, 4] }]')),
             "matrix.axes", "a load: only a serving profile has one")


def test_receipts_sealed_before_the_serial_correction_rederive_with_independent_pairs():
    old = {k: v for k, v in asdict(GateRules()).items() if k != "serial"}
    assert rules_from_dict(old).serial == "none" and GateRules().serial == "lag1"
    assert load_profile(DEMO).gate.serial == "lag1"
