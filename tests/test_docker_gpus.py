"""How Docker is asked for the GPUs: the device request in the container config the runtime builds
(`--gpus all`, or the profile's CDI devices), and whether the daemon can serve it. No GPU and no
daemon: the config is checked as docker-py would send it, the daemon's answers are stand-ins."""
from __future__ import annotations

from pathlib import Path

import pytest
from docker.models.containers import _create_container_args
from docker.types import ContainerConfig

from console.errors import InfraError
from console.profile.spec import RunSpec
from console.core.records.facts import HostFacts
from console.round.node import use_gpus
from console.runtime.docker import DockerRuntime

GPUS_ALL = {"Driver": "", "Count": -1, "DeviceIDs": [], "Capabilities": [["gpu"]], "Options": {}}
CDI_ALL = {"Driver": "cdi", "Count": 0, "DeviceIDs": ["nvidia.com/gpu=all"], "Capabilities": [], "Options": {}}


class _Daemon:
    def __init__(self, runtimes=("runc",), cdi_dirs=None):
        self._info = {"Runtimes": {r: {} for r in runtimes}, "CgroupVersion": "2", "Driver": "overlay2",
                      **({"CDISpecDirs": cdi_dirs} if cdi_dirs is not None else {})}

    def info(self) -> dict:
        return self._info

    def version(self) -> dict:
        return {"Version": "28.3.0"}


def _runtime(daemon: _Daemon | None = None) -> DockerRuntime:
    rt = DockerRuntime.__new__(DockerRuntime)     # no daemon to connect to
    rt.client, rt.round_label = daemon, "r1"
    return rt


def _sent(run: RunSpec, gpus: bool) -> dict:
    """The container create body docker-py makes of the runtime's config (API 1.41)."""
    kw = _runtime()._container_config(["/engine/harness", "bench"], Path("/s"), Path("/i"), Path("/o"), run,
                                      "main/timed/0", gpus, None)
    return ContainerConfig("1.41", **_create_container_args({**kw, "image": "sha256:" + "e" * 64, "version": "1.41"}))


@pytest.mark.parametrize("run, gpus, requests", [
    (RunSpec(), False, None),
    (RunSpec(gpus="required"), True, [GPUS_ALL]),
    (RunSpec(gpus="required", cdi_devices=("nvidia.com/gpu=all",)), True, [CDI_ALL]),
    (RunSpec(gpus="optional", cdi_devices=("nvidia.com/gpu=all",)), False, None),   # the node had none to give
])
def test_the_device_request_a_run_sends(run, gpus, requests):
    body = _sent(run, gpus)
    assert body["HostConfig"].get("DeviceRequests") == requests
    assert body["Entrypoint"] == [] and body["Cmd"] == ["/engine/harness", "bench"]   # no image entrypoint first
    assert body["HostConfig"]["NetworkMode"] == "none" and body["HostConfig"]["ReadonlyRootfs"] is True


def test_the_receipt_keeps_the_request_as_docker_py_takes_it():
    assert DockerRuntime.gpu_request(RunSpec(gpus="required")) == {"count": -1, "capabilities": [["gpu"]]}
    assert DockerRuntime.gpu_request(RunSpec(gpus="required", cdi_devices=("nvidia.com/gpu=0", "nvidia.com/gpu=1"))) \
        == {"driver": "cdi", "device_ids": ["nvidia.com/gpu=0", "nvidia.com/gpu=1"]}


@pytest.mark.parametrize("daemon, on_path, cdi, ok", [
    (_Daemon(cdi_dirs=["/etc/cdi", "/var/run/cdi"]), (), True, True),
    (_Daemon(runtimes=("runc", "nvidia"), cdi_dirs=[]), ("nvidia-container-runtime-hook",), True, False),
    (_Daemon(runtimes=("runc", "nvidia")), (), False, True),
    (_Daemon(), ("nvidia-container-runtime-hook",), False, True),
    (_Daemon(cdi_dirs=["/etc/cdi"]), ("nvidia-cdi-hook",), False, True),   # Docker 28.3+: --gpus through CDI
    (_Daemon(cdi_dirs=["/etc/cdi"]), (), False, False),
    (_Daemon(cdi_dirs=[]), ("nvidia-cdi-hook",), False, False),
])
def test_whether_the_daemon_can_serve_the_request(monkeypatch, daemon, on_path, cdi, ok):
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}" if name in on_path else None)
    run = RunSpec(gpus="required", cdi_devices=("nvidia.com/gpu=all",) if cdi else ())
    assert _runtime(daemon).has_gpu_runtime(run) is ok


def test_a_daemon_without_cdi_is_said_before_anything_is_built(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    rt, host = _runtime(_Daemon(runtimes=("runc", "nvidia"))), HostFacts.from_dict({"gpus": [{"index": 0}]})
    cdi = RunSpec(gpus="required", cdi_devices=("nvidia.com/gpu=all",))
    with pytest.raises(InfraError, match="CDI") as e:
        use_gpus("required", rt, host, lambda *a: None, cdi)
    assert "nvidia-ctk cdi generate" in str(e.value)
    said = []
    optional = RunSpec(gpus="optional", cdi_devices=("nvidia.com/gpu=all",))
    assert use_gpus("optional", rt, host, lambda *a: said.append(a), optional) is False
    assert said and "CDI" in said[0][2]
    assert use_gpus("required", rt, host, lambda *a: None, RunSpec(gpus="required")) is True   # --gpus: the runtime
    assert use_gpus("required", rt, host, lambda *a: None) is True                              # no spec: as before


def test_host_facts_name_the_daemons_cdi_directories():
    assert _runtime(_Daemon(cdi_dirs=["/etc/cdi"])).host_facts()["cdi_spec_dirs"] == ["/etc/cdi"]
    assert _runtime(_Daemon()).host_facts()["cdi_spec_dirs"] == []
