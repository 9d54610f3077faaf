"""The core/v1 helpers shared by every layer."""

from __future__ import annotations

import pydantic
import pytest

from provisioner.apis.base import to_wire
from provisioner.apis.core import NodeSelectorRequirement, Pod, PodStatus, Taint, is_terminal


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


def test_empty_taint_value_and_requirement_values_are_left_out_when_written() -> None:
    taint = Taint.model_validate({"key": "k", "value": None, "effect": "NoSchedule"})
    assert taint.value == ""
    assert to_wire(taint) == {"key": "k", "effect": "NoSchedule"}
    assert to_wire(NodeSelectorRequirement(key="k", operator="Exists")) == {
        "key": "k",
        "operator": "Exists",
    }
    assert to_wire(NodeSelectorRequirement(key="k", operator="In", values=("a",)))["values"] == [
        "a"
    ]


def test_a_taint_is_validated_as_the_nodeclaim_crd_validates_it() -> None:
    with pytest.raises(pydantic.ValidationError, match="not a valid taint key"):
        Taint(key="bad key", effect="NoSchedule")
    with pytest.raises(pydantic.ValidationError, match="must be one of"):
        Taint.model_validate({"key": "k", "effect": "Sometimes"})
