"""Which differences between a reference's backend and a round's refuse the round."""
import dataclasses

import pytest
from hypothesis import given, settings, strategies as st

from console.core.provenance import backend as B
from console.core.provenance.backend import Backend, BackendError, compare
from console.core.records.facts import HostFacts

CPU = Backend(kind="cpu", runtime="docker", arch="x86_64", cpu_model="AMD EPYC 7B13", cpu_flags=("avx", "avx2", "fma"),
              threads=1, offload="none", compiler="g++ (Debian 12.2.0-14+deb12u1) 12.2.0",
              build_sha256="a" * 64)
GPU = dataclasses.replace(CPU, kind="cuda", offload="required", gpu_name="NVIDIA H200", compute_capability="9.0",
                          driver_version="550.54.15", cuda_version="12.4")

# Every field of a backend, a value other than the base's, and whether that difference is allowed.
CHANGES = [
    ("kind", "cuda", False),
    ("arch", "aarch64", False),
    ("cpu_model", "Intel Xeon Platinum 8480+", True),
    ("cpu_flags", ("avx", "avx2", "fma", "avx512f"), True),
    ("threads", 16, True),
    ("runtime", "local", True),
    ("offload", "optional", True),
    ("compiler", "g++ (Debian 13.2.0-25) 13.2.0", False),
    ("build_sha256", "b" * 64, False),
]
GPU_CHANGES = [
    ("gpu_name", "NVIDIA H100 80GB HBM3", False),
    ("compute_capability", "8.0", False),
    ("driver_version", "550.90.07", True),
    ("driver_version", "535.104.05", False),
    ("driver_version", None, False),
    ("cuda_version", "12.6", True),
    ("cuda_version", "11.8", False),
    ("kind", "cpu", False),
    ("threads", 4, True),
    ("cpu_model", "Intel Xeon Platinum 8480+", True),
]


def test_the_fields_each_rule_covers_are_every_field_of_a_backend():
    named = {k for k, _, _ in CHANGES + GPU_CHANGES} | {"native"}     # native is part of build_sha256
    assert named == {f.name for f in dataclasses.fields(Backend)}


@pytest.mark.parametrize("base, key, value, allowed",
                         [(CPU, *c) for c in CHANGES] + [(GPU, *c) for c in GPU_CHANGES])
def test_one_difference_is_allowed_or_refused_as_documented(base, key, value, allowed):
    check = compare(base, dataclasses.replace(base, **{key: value}))
    [d] = [d for d in check.differences if d.key == key]
    assert d.allowed is allowed and check.ok is (allowed and all(x.allowed for x in check.differences))
    assert key in d.message() and ("allowed" if allowed else "refused") in d.message()


def test_a_cpu_reference_rejects_main_s_own_cuda_build_naming_each_difference():
    check = compare(GPU, CPU)
    assert not check.ok
    assert {d.key for d in check.refused} == {"kind", "gpu_name", "compute_capability", "driver_version",
                                               "cuda_version"}
    assert "reference 'cuda', this round 'cpu'" in check.refused[0].message()
    assert {d.key for d in compare(CPU, dataclasses.replace(GPU, build_sha256=CPU.build_sha256)).refused} == {"kind"}


def test_the_runtime_is_allowed_only_with_the_same_compiler():
    other = dataclasses.replace(CPU, runtime="local", compiler="gcc (Ubuntu 13.2.0) 13.2.0")
    refused = {d.key for d in compare(CPU, other).refused}
    assert refused == {"runtime", "compiler"}


def test_cpu_flags_matter_only_to_a_native_build():
    native = dataclasses.replace(CPU, native=True)
    more = dataclasses.replace(native, cpu_flags=CPU.cpu_flags + ("avx512f",))
    [d] = compare(native, more).differences
    assert d.key == "cpu_flags" and not d.allowed and "native" in d.why
    assert compare(CPU, dataclasses.replace(CPU, cpu_flags=())).ok


def test_a_reference_that_is_not_a_build_matches_no_compiler_or_build():
    numpy_ref = dataclasses.replace(CPU, runtime="local", compiler=None, build_sha256=None)
    assert compare(numpy_ref, CPU).ok and compare(numpy_ref, CPU).differences == ()
    assert not compare(numpy_ref, GPU).ok


def test_a_reference_without_a_backend_is_accepted_for_a_cpu_round_only():
    cpu = compare(None, CPU)
    assert cpu.ok and cpu.reference is None and "portable" in cpu.differences[0].why
    gpu = compare(None, GPU)
    assert not gpu.ok and "nothing says it was computed on this GPU" in gpu.refused[0].message()


backends = st.builds(
    Backend, kind=st.sampled_from(B.KINDS), runtime=st.sampled_from(B.RUNTIMES),
    arch=st.sampled_from(["x86_64", "aarch64"]), cpu_model=st.sampled_from(["AMD", "Intel"]),
    cpu_flags=st.sampled_from([(), ("avx2",), ("avx2", "avx512f")]), threads=st.integers(1, 64),
    offload=st.sampled_from(["none", "optional", "required"]), compiler=st.sampled_from([None, "gcc 12", "gcc 13"]),
    build_sha256=st.sampled_from([None, "a" * 64, "b" * 64]), native=st.booleans(),
    gpu_name=st.sampled_from([None, "H100", "H200"]), compute_capability=st.sampled_from([None, "8.0", "9.0"]),
    driver_version=st.sampled_from([None, "550.54.15", "550.90.07", "535.1"]),
    cuda_version=st.sampled_from([None, "12.4", "12.6", "11.8"]))

REFUSING = {"kind", "arch", "compiler", "build_sha256", "gpu_name", "compute_capability"}


@settings(max_examples=400, deadline=None)
@given(backends, backends)
def test_the_rule_over_any_two_backends(ref, rnd):
    check = compare(ref, rnd)
    assert compare(ref, ref).differences == ()
    keys = {d.key for d in check.differences}
    # each difference is named once, every refusing field that differs refuses
    assert len(keys) == len(check.differences)
    for d in check.differences:
        assert getattr(ref, d.key) != getattr(rnd, d.key)
        if d.key in REFUSING:
            assert not d.allowed
    assert check.ok == all(d.allowed for d in check.differences)
    if ref.kind != rnd.kind:
        assert not check.ok
    # a record of the check reads back as the same two backends
    d = check.to_dict()
    assert Backend.from_dict(d["reference"]) == ref and Backend.from_dict(d["round"]) == rnd
    assert d["refused"] is (not check.ok)


def test_a_backend_from_the_nodes_facts():
    host = {"cpu_model": "AMD EPYC", "cpu_flags": ["avx2"], "arch": "x86_64", "gpus": [{"name": "NVIDIA H200"}]}
    pre = {"gpus": [{"name": "NVIDIA H200", "compute_capability": "9.0"}],
           "driver": {"driver_version": "550.54.15", "cuda_driver_version": "12.4"}}
    build = ["cmake -DGGML_NATIVE=OFF -DGGML_CUDA=ON", "sh build.sh", "/engine/harness", "--gpu-layers", "99"]
    b = B.backend_of(host=HostFacts.from_dict(host), preflight=pre, gpus=True, runtime="docker", threads=1, offload="required",
                     compiler="g++ 12", build=build)
    assert (b.kind, b.gpu_name, b.compute_capability, b.driver_version, b.cuda_version) == \
        ("cuda", "NVIDIA H200", "9.0", "550.54.15", "12.4")
    assert b.build_sha256 == B.build_digest(build) and not b.native
    cpu = B.backend_of(host=HostFacts.from_dict(host), preflight=pre, gpus=False, runtime="local", threads=2, offload="optional",
                       compiler="g++ 12", build=build)
    assert cpu.kind == "cpu" and cpu.gpu_name is None and cpu.driver_version is None
    assert B.backend_of(host=HostFacts.from_dict(host), preflight=None, gpus=False, runtime="local", threads=1, offload="none",
                        compiler="g++", build=["cmake -DGGML_NATIVE=ON"]).native
    plain = B.backend_of(host=HostFacts(), preflight=None, gpus=False, runtime="local", threads=1, offload="none",
                         compiler="g++", build=None)
    assert plain.compiler is None and plain.build_sha256 is None and plain.cpu_model == "unknown"


@pytest.mark.parametrize("bad, message", [
    ("cuda", "expected an object"),
    ({**CPU.to_dict(), "kind": "rocm"}, "kind 'rocm'"),
    ({**CPU.to_dict(), "runtime": "podman"}, "runtime 'podman'"),
    ({**CPU.to_dict(), "gpu": "H200"}, "unknown key"),
    ({k: v for k, v in CPU.to_dict().items() if k != "threads"}, "missing or malformed"),
])
def test_a_malformed_record_is_refused(bad, message):
    with pytest.raises(BackendError, match=message):
        Backend.from_dict(bad)
