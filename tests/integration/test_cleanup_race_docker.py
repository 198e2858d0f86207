"""Two rounds on one node, against the real daemon: one lists the console's containers to clear
what crashed rounds left while the other removes its own finished run. A container listed and
then removed before it is read is gone, not an error that ends the listing round `infra`."""
from __future__ import annotations

import os

import pytest

from console.runtime.docker import LABEL, DockerRuntime, containers_by_job

pytestmark = [pytest.mark.docker, pytest.mark.untimed]


def test_a_container_removed_while_listed_is_skipped(base_image):
    label = f"test-cleanup-race-{os.urandom(3).hex()}"
    rt = DockerRuntime(round_label=label)
    other = DockerRuntime(round_label=label + "-other")
    theirs = rt.client.containers.create(base_image, ["true"], entrypoint=[], network_mode="none",
                                         labels={LABEL: "1", f"{LABEL}.round": other.round_label,
                                                 f"{LABEL}.slurm-job": label})
    api = rt.client.api
    gone: list[str] = []
    read = api.inspect_container

    def removed_first(container_id, *a, **kw):
        # the other round removes its container between our listing and our reading of it
        if container_id == theirs.id and not gone:
            gone.append(container_id)
            theirs.remove(force=True)
        return read(container_id, *a, **kw)

    api.inspect_container = removed_first
    try:
        rt.cleanup_leftovers()          # the default age: another worker's live containers stay
        assert gone == [theirs.id]      # the race happened, inside the listing
        gone.clear()
        theirs = rt.client.containers.create(base_image, ["true"], entrypoint=[], network_mode="none",
                                             labels={LABEL: "1", f"{LABEL}.slurm-job": label})
        assert label not in containers_by_job(rt.client) and gone == [theirs.id]
        assert rt.cleanup_round() == 0
    finally:
        api.inspect_container = read
        if not gone:
            theirs.remove(force=True)
