"""The core/v1 helpers shared by every layer."""

from __future__ import annotations

import pytest

from provisioner.apis.core import Pod, PodStatus, is_terminal


@pytest.mark.parametrize(
    ("phase", "terminal"),
    [("Succeeded", True), ("Failed", True), ("Running", False), ("Pending", False), ("", False)],
)
def test_is_terminal_reads_the_phase_of_a_model_and_of_its_wire_shape(
    phase: str, terminal: bool
) -> None:
    assert is_terminal(Pod(status=PodStatus(phase=phase))) is terminal
    assert is_terminal({"status": {"phase": phase}}) is terminal


def test_a_pod_without_status_is_not_terminal() -> None:
    assert not is_terminal(Pod())
    assert not is_terminal({"metadata": {"name": "p"}})
