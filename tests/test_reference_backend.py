"""A round refuses, before anything is built, a reference computed on another backend than its builds
would run on; the check it passed is in the receipt. Demo rounds in-process under the local runtime,
with the node's GPU facts from the fake NVML: nothing is built, nothing runs."""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from console import events as ev
from console.core.provenance.backend import Backend, compare
from console.engine import sources
from console.errors import InfraError, UsageError
from console.paths import DEMO_CANDIDATES, DEMO_MAIN, DEMO_PROFILE
from console.profile import load_profile
from console.round import Round, RoundConfig
from console.round import node
from console.round import parity as checks
from console.telemetry.host import HostTelemetry
from console.telemetry.nvml import NvmlTelemetry

from fake_nvml import FakeGPU, FakeNvml


class QuietHost(HostTelemetry):
    """This node's own facts, and no finding: the test is about the reference, not the load."""

    def preflight(self, window_s=0.5, rules=None):
        return {**self.preflight_facts(0.0), "findings": []}


class QuietGpu(NvmlTelemetry):
    def preflight(self, window_s=0.5, rules=None):
        return {**self.preflight_facts(0.0), "findings": []}


def gpu_node(name="NVIDIA H100 80GB HBM3") -> QuietGpu:
    return QuietGpu(FakeNvml([FakeGPU(name=name)]), host=QuietHost())


def demo_copy(tmp_path: Path, edit=lambda t: t):
    """The demo profile in a layout of its own (its reference's record is ours to write)."""
    src = DEMO_PROFILE.parent / "demo"
    (tmp_path / "demo").mkdir()
    for f in src.iterdir():      # copies: a path is resolved, and the record goes beside the reference
        if f.suffix != ".json":
            shutil.copyfile(f, tmp_path / "demo" / f.name)
    path = tmp_path / "demo.toml"
    path.write_text(edit(DEMO_PROFILE.read_text()).replace('path = "../images/demo-engine"',
                                                           f'path = "{DEMO_MAIN}"'))
    p = load_profile(path)
    assert Path(p.parity.reference).parent == tmp_path / "demo"
    return p


def record_backend(p, backend: Backend) -> None:
    (Path(p.parity.reference).with_suffix(".json")).write_text(json.dumps(
        {"runtime": "docker", "reference_sha256": p.parity.reference_sha256, "backend": backend.to_dict()}))


def run_round(p, tmp_path: Path, tele) -> tuple[Round, list[ev.Event]]:
    cfg = RoundConfig(profile=p, main=sources.parse_spec(str(DEMO_MAIN)),
                      candidate=("patch", str(DEMO_CANDIDATES / "fast.patch")), out_dir=tmp_path / "results",
                      runtime="local", reps=2, telemetry=tele)
    rnd = Round(cfg)
    return rnd, list(rnd.events())


def here(p, tele, gpus: bool) -> Backend:
    return node.backend(p, "local", node.node_facts(None, tele), tele.preflight_facts(0.0), gpus)


def assert_refused_before_building(rnd, events, tmp_path, *words):
    assert rnd.exit_code == 3 and rnd.receipt is None
    assert not any(isinstance(e, (ev.BuildStarted, ev.RepStarted, ev.DepthGraded)) for e in events)
    [end] = [e for e in events if isinstance(e, ev.RoundEnded)]
    assert end.status == "infra" and end.receipt_path is None
    for w in words:
        assert w in end.message, (w, end.message)
    assert not list((tmp_path / "results").glob("receipts/*.json"))


def test_a_cuda_reference_refuses_a_cpu_round_before_anything_is_built(tmp_path):
    p = demo_copy(tmp_path)
    tele = QuietHost()
    cuda = dataclasses.replace(here(p, tele, False), kind="cuda", offload="required", gpu_name="NVIDIA H200",
                               compute_capability="9.0", driver_version="550.54.15", cuda_version="12.4")
    record_backend(p, cuda)
    rnd, events = run_round(p, tmp_path, tele)
    assert_refused_before_building(rnd, events, tmp_path, "another backend", "kind: reference 'cuda', this round 'cpu'",
                                   "capture a reference on this backend")


def test_a_reference_from_another_gpu_refuses_a_gpu_round(tmp_path):
    p = demo_copy(tmp_path, lambda t: t.replace("[run]\n", '[run]\ngpus = "optional"\n', 1))
    tele = gpu_node()
    ref = dataclasses.replace(here(p, tele, True), gpu_name="NVIDIA H200")
    record_backend(p, ref)
    rnd, events = run_round(p, tmp_path, tele)
    assert_refused_before_building(rnd, events, tmp_path,
                                   "gpu_name: reference 'NVIDIA H200', this round 'NVIDIA H100 80GB HBM3'")
    assert "kind:" not in [e for e in events if isinstance(e, ev.RoundEnded)][0].message


def test_a_reference_without_a_backend_refuses_a_gpu_round_and_says_why(tmp_path):
    p = demo_copy(tmp_path, lambda t: t.replace("[run]\n", '[run]\ngpus = "optional"\n', 1))
    rnd, events = run_round(p, tmp_path, gpu_node())
    assert_refused_before_building(rnd, events, tmp_path, "captured before backends were recorded",
                                   "nothing says it was computed on this GPU")


def test_a_reference_without_a_backend_is_accepted_for_a_cpu_round_with_a_notice():
    p = load_profile(DEMO_PROFILE)
    said = []
    rec = here(p, QuietHost(), False)
    check = node.check_backend(p, rec, {}, lambda level, code, msg: said.append((level, code, msg)))
    assert check.ok and check.reference is None
    [(level, code, msg)] = said
    assert code == "reference-backend" and "captured before backends were recorded" in msg


def test_allowed_differences_are_said_and_the_check_goes_into_the_receipt():
    p = load_profile(DEMO_PROFILE)
    rec = here(p, QuietHost(), False)
    ref = dataclasses.replace(rec, cpu_model="Some other CPU", threads=16)
    said = []
    check = node.check_backend(p, rec, {"backend": ref.to_dict()}, lambda *a: said.append(a))
    assert check.ok and {d.key for d in check.differences} == {"cpu_model", "threads"}
    assert "cpu_model: reference 'Some other CPU'" in said[0][2]
    record = checks.new_record(SimpleNamespace(profile=p), {"backend": ref.to_dict()}, check).reference
    # re-derivable: the rule over the two recorded sides gives the recorded differences
    again = compare(Backend.from_dict(record.backend["reference"]), Backend.from_dict(record.backend["round"]))
    assert again.to_dict() == record.backend and record.backend["refused"] is False
    assert record.captured["backend"] == ref.to_dict()


def test_an_unreadable_backend_record_is_a_usage_error():
    p = load_profile(DEMO_PROFILE)
    with pytest.raises(UsageError, match="record of its backend is unreadable"):
        node.check_backend(p, here(p, QuietHost(), False), {"backend": {"kind": "tpu"}}, lambda *a: None)


def test_a_legacy_reference_refuses_a_gpu_backend_with_exit_3():
    p = load_profile(DEMO_PROFILE)
    rec = dataclasses.replace(here(p, QuietHost(), False), kind="cuda", gpu_name="NVIDIA H200")
    with pytest.raises(InfraError) as e:
        node.check_backend(p, rec, {}, lambda *a: None)
    assert e.value.exit_code == 3


def test_the_node_reads_the_gpus_compute_capability_from_nvml():
    facts = gpu_node().preflight_facts(0.0)
    assert facts["gpus"][0]["compute_capability"] == "9.0" and facts["driver"]["cuda_driver_version"] == "12.4"
    fake = FakeNvml([FakeGPU(unsupported={"nvmlDeviceGetCudaComputeCapability"})])
    assert QuietGpu(fake, host=QuietHost()).preflight_facts(0.0)["gpus"][0]["compute_capability"] == "not supported"


def test_the_demo_copy_is_the_demo_and_the_shipped_demo_records_no_backend(tmp_path):
    p = demo_copy(tmp_path)
    assert p.parity.reference_sha256 == load_profile(DEMO_PROFILE).parity.reference_sha256
    assert not (DEMO_PROFILE.parent / "demo" / "reference.json").exists()


# --- the capture: the profile's format, the backend beside it --------------------------------

def test_a_capture_stores_the_top_k_form_pins_it_and_records_its_backend(tmp_path):
    import numpy as np
    from console.engine import reffile
    from console.round import reference
    from console.round.schedule import DOC_NAME
    p = demo_copy(tmp_path, lambda t: t.replace('reference = "demo/reference.npy"',
                                                'reference = "demo/reference.npz"\nreference_format = "topk"\n'
                                                'top_k = 64'))
    arr = np.load(tmp_path / "demo" / "reference.npy")
    rec = here(p, QuietHost(), False)
    said: list[str] = []
    sha = reference._store(p, arr, said.append, True, {"runtime": "local", "backend": rec.to_dict()}).sha256
    assert (tmp_path / "demo" / "reference.npz").stat().st_size < arr.nbytes / 5
    again = load_profile(p.path)
    assert again.parity.reference_sha256 == sha and "topk format" in said[0]
    meta = json.loads((tmp_path / "demo" / "reference.json").read_text())
    assert meta["reference_sha256"] == sha and Backend.from_dict(meta["backend"]) == rec
    # what the round reads: the compact form, of the round's document
    (tmp_path / "inputs").mkdir()
    shutil.copyfile(again.parity.document, tmp_path / "inputs" / DOC_NAME)
    ref = checks.read_reference(SimpleNamespace(profile=again, inputs=tmp_path / "inputs"))
    assert isinstance(ref, reffile.topk.TopK) and ref.shape == (7, 64, 64)
    # the same logits again: the same bytes, so the pin holds and the file is kept
    same = reference._store(again, arr, said.append, False, {})
    assert same.sha256 == sha and same.reproduces_pin
    assert not list((tmp_path / "demo").glob("*.captured.*"))
    # other logits land beside the pinned file, which stays; the capture says how they differ
    other = reference._store(again, arr * 1.01, said.append, False, {})
    assert other.sha256 != sha and not other.reproduces_pin
    assert other.compared_with == Path(again.parity.reference) and other.difference.grading_can_change
    assert other.difference.max_logp > 1e-4 and not other.difference.argmax_moved   # a sharper row, same order
    assert (tmp_path / "demo" / "reference.captured.npz").is_file()
    assert reffile.read_topk(again.parity.reference, depths=7, rows=64, vocab=2048, k=64, max_bytes=1 << 30)
    # a node that never held the pinned file compares with the pin's digest, written beside it
    digest = reference.digest_path(again, sha)
    assert digest.is_file() and digest.name == f"reference.{sha[:12]}.digest.npz"
    Path(again.parity.reference).unlink()
    fresh = reference._store(again, arr * 1.01, said.append, False, {})
    assert fresh.compared_with == digest and fresh.difference.changed == other.difference.changed
    digest.unlink()
    assert reference._store(again, arr * 1.01, said.append, False, {}).digest_missing == digest


def test_a_round_refuses_a_top_k_reference_of_another_document(tmp_path):
    import numpy as np
    from console.round import reference
    from console.round.schedule import DOC_NAME
    p = demo_copy(tmp_path, lambda t: t.replace('reference = "demo/reference.npy"',
                                                'reference = "demo/reference.npz"\nreference_format = "topk"\n'
                                                'top_k = 64'))
    reference._store(p, np.load(tmp_path / "demo" / "reference.npy"), lambda line: None, True, {})
    (tmp_path / "inputs").mkdir()
    words = Path(p.parity.document).read_text().split()
    (tmp_path / "inputs" / DOC_NAME).write_text(" ".join(words[1:] + words[:1]))
    with pytest.raises(UsageError, match="captured over another document"):
        checks.read_reference(SimpleNamespace(profile=load_profile(p.path), inputs=tmp_path / "inputs"))


def test_capture_if_needed_leaves_a_node_that_holds_the_pin_alone_and_recaptures_other_bytes(tmp_path, capsys):
    """`make llama-setup` runs `capture --if-needed`: a node with the pinned bytes captures nothing;
    one holding other bytes (an old pin's file, say) captures again rather than failing its rounds."""
    from console.cli import main
    p = demo_copy(tmp_path)
    assert main(["reference", "capture", "--profile", p.path, "--if-needed"]) == 0
    assert "nothing to capture" in capsys.readouterr().out
    ref = Path(p.parity.reference)
    ref.write_bytes(ref.read_bytes()[:-4] + b"\0\0\0\0")
    # the demo's numpy reference may differ here in a last float32 bit (its BLAS picks kernels by
    # CPU): either way it was captured, and said against the pin
    code = main(["reference", "capture", "--profile", p.path, "--if-needed"])
    said = capsys.readouterr().out
    assert "reference captured: sha256" in said and "nothing to capture" not in said
    assert ("identical to the pinned reference" in said) == (code == 0)


def test_each_capture_labels_its_containers_apart(monkeypatch):
    """A capture removes its own containers at its end: another capture beside it (a queue's worker,
    a parallel test run) must not be among them, so each capture has a label of its own."""
    from console.paths import LLAMA_PROFILE
    from console.profile import load_profile
    from console.round import reference as ref
    labels: list[str] = []

    def runtime(kind, label, work):
        labels.append(label)
        raise RuntimeError("stop before anything runs")
    monkeypatch.setattr(ref, "make_runtime", runtime)
    monkeypatch.setattr(ref, "check_model", lambda profile: [])     # the model file is not what this is about
    profile = load_profile(LLAMA_PROFILE)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            ref.capture(profile, lambda line: None)
    assert len(set(labels)) == 2 and all(x.startswith("reference-") for x in labels)
