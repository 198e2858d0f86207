"""Profile errors name the file, the key and what was expected — before anything is built."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from console.cli import main
from console.profile import ProfileError, load_profile, rules_from_dict

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "profiles" / "demo.toml"


def _variant(tmp_path: Path, edit) -> Path:
    text = edit(DEMO.read_text())
    # the demo's relative paths point at profiles/demo and images/: mirror that layout
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "demo").symlink_to(ROOT / "profiles" / "demo")
    (tmp_path / "images").symlink_to(ROOT / "images")
    p = tmp_path / "profiles" / "demo.toml"
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
    (lambda t: t.replace('"--out", "{out}"]\nmetric', '"--out", "{outdir}"]\nmetric'), "bench.command", "unknown placeholder {outdir}"),
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
    with pytest.raises(argparse.ArgumentTypeError, match="shipped: demo, llama-cpp"):
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
    path = _llama_variant(tmp_path, edit)
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    assert e.value.key == key, e.value
    assert expected in e.value.expected


def test_the_llama_profile_declares_accuracy_and_adjudication():
    p = load_profile(LLAMA)
    assert p.accuracy.tokens == 8 and p.accuracy.chunk == 40 and Path(p.accuracy.tasks).is_file()
    assert [name for name, _ in p.adjudication.variants] == ["flash-attn", "batch-64", "threads-2"]
    assert (p.gate.borderline_kl, p.gate.spread_factor, p.gate.agreement_factor) == (0.10, 2.0, 2.0)
    assert (p.adjudication.completions, p.adjudication.tokens) == (40, 32)
