"""The scenario file of `jointer simulate`: reading, validation, and messages naming the step."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from provisioner.app.cli import main
from provisioner.simulation.scenario import (
    ApplyStep,
    CapacityOutageStep,
    DeleteStep,
    KarpenterNodesStep,
    RestartControllerStep,
    ScaleStep,
    ScenarioError,
    SpotInterruptionStep,
    load_scenario,
    parse_scenario,
)
from tests.e2e.conftest import SCENARIOS

BASE: dict[str, Any] = {
    "apiVersion": "jointer.dev/v1alpha1",
    "kind": "Scenario",
    "metadata": {"name": "t"},
    "spec": {"duration": "1h", "steps": []},
}
POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec: {containers: []}\n"


def scenario(*steps: dict[str, Any], **spec: Any) -> dict[str, Any]:
    body = copy.deepcopy(BASE)
    body["spec"]["steps"] = list(steps)
    body["spec"].update(spec)
    return body


SCENARIO_FILES = sorted(p for p in SCENARIOS.glob("*.yaml") if p.name != "nodeclass.yaml")


def test_the_acceptance_scenarios_are_bundled() -> None:
    assert [p.stem for p in SCENARIO_FILES] == [
        "adopt-from-karpenter",
        "controller-restart",
        "deployment-0-to-200",
        "gang-on-reservation",
        "gpu-inference-walkthrough",
        "headroom",
        "kai-gang-8-gpus",
        "kai-over-quota",
        "kueue-provisioning-request",
        "llmaz-flavors",
        "malformed-nodepool",
        "missing-nodeclass",
        "protected-workloads",
        "runai-friction",
        "spot-drought-and-headroom",
        "spot-outage",
        "weighted-pools",
    ]


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=lambda p: p.stem)
def test_bundled_scenarios_parse(path: Path) -> None:
    parsed = load_scenario(path)
    assert parsed.name == path.stem
    assert [s.at for s in parsed.steps] == sorted(s.at for s in parsed.steps)


def test_every_step_kind_is_read() -> None:
    parsed = parse_scenario(
        scenario(
            {"at": "0s", "apply": POD},
            {
                "at": "1m",
                "delete": [{"kind": "Pod", "namespace": "default", "labelSelector": "a=b"}],
            },
            {
                "at": "2m",
                "scale": {"kind": "Deployment", "namespace": "web", "name": "f", "replicas": 3},
            },
            {
                "at": "3m",
                "capacityOutage": {
                    "capacityType": "spot",
                    "instanceTypes": ["*"],
                    "zones": ["us-east-1a"],
                    "for": "20m",
                },
            },
            {"at": "4m", "spotInterruption": {"nodeSelector": {"a": "b"}, "count": 2}},
            {"at": "5m", "restartController": {}},
            {
                "at": "6m",
                "karpenterNodes": {
                    "nodePool": "general",
                    "nodes": [{"instanceType": "c6a.xlarge", "zone": "us-west-2a", "count": 2}],
                },
            },
            region="us-west-2",
            clusterName="c1",
            nodeStartup="1m30s",
        )
    )
    assert parsed.region == "us-west-2"
    assert parsed.cluster_name == "c1"
    assert parsed.duration == 3600
    assert parsed.node_startup == 90
    kinds = [type(s.action) for s in parsed.steps]
    assert kinds == [
        ApplyStep,
        DeleteStep,
        ScaleStep,
        CapacityOutageStep,
        SpotInterruptionStep,
        RestartControllerStep,
        KarpenterNodesStep,
    ]
    seeded = parsed.steps[6].action
    assert isinstance(seeded, KarpenterNodesStep)
    assert seeded.nodes[0].count == 2
    assert seeded.nodes[0].capacity_type == "on-demand"
    assert parsed.steps[6].kind == "karpenterNodes"
    outage = parsed.steps[3].action
    assert isinstance(outage, CapacityOutageStep)
    assert outage.instance_types == frozenset()  # "*" means every type
    assert outage.duration == 1200
    assert parsed.steps[1].kind == "delete"


def test_steps_are_sorted_by_time_keeping_file_order_for_ties() -> None:
    parsed = parse_scenario(
        scenario(
            {"at": "5m", "apply": POD},
            {"at": "1m", "apply": POD},
            {"at": "1m", "restartController": {}},
        )
    )
    assert [(s.at, s.index) for s in parsed.steps] == [(60, 1), (60, 2), (300, 0)]


def test_apply_file_is_relative_to_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "pods").mkdir()
    (tmp_path / "pods" / "p.yaml").write_text(POD)
    (tmp_path / "s.yaml").write_text(
        "apiVersion: jointer.dev/v1alpha1\nkind: Scenario\nmetadata: {name: s}\n"
        "spec:\n  duration: 10m\n  steps:\n  - {at: 0s, applyFile: pods/p.yaml}\n"
    )
    step = load_scenario(tmp_path / "s.yaml").steps[0].action
    assert isinstance(step, ApplyStep)
    assert step.documents[0]["kind"] == "Pod"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(
            {**BASE, "apiVersion": "v9"},
            "apiVersion: must be jointer.dev/v1alpha1",
            id="api-version",
        ),
        pytest.param(
            {**BASE, "spec": {"steps": []}}, "spec.duration: required value", id="no-duration"
        ),
        pytest.param(
            scenario(duration="2 hours"), "spec.duration: invalid duration", id="bad-duration"
        ),
        pytest.param(
            scenario(region=""), "spec.region: must be a non-empty string", id="empty-region"
        ),
        pytest.param(scenario(steps="x"), "spec.steps: must be a list", id="steps-not-list"),
        pytest.param(
            scenario({"at": "1m", "scael": {}}),
            "spec.steps[0]: scael: unknown field",
            id="unknown-step-field",
        ),
        pytest.param(scenario({"apply": POD}), "spec.steps[0]: at: required value", id="no-at"),
        pytest.param(
            scenario({"at": "5x", "apply": POD}), "spec.steps[0]: at: invalid duration", id="bad-at"
        ),
        pytest.param(
            scenario({"at": "2h", "apply": POD}),
            "spec.steps[0] (at 2h): at: is after the end of the scenario",
            id="after-end",
        ),
        pytest.param(
            scenario({"at": "1m"}), "spec.steps[0] (at 1m): needs exactly one of", id="no-action"
        ),
        pytest.param(
            scenario({"at": "1m", "apply": POD, "restartController": {}}),
            "(found: apply, restartController)",
            id="two-actions",
        ),
        pytest.param(
            scenario(
                {"at": "1m", "apply": POD},
                {"at": "15m", "capacityOutage": {"capacityType": "spot"}},
            ),
            "spec.steps[1] (at 15m): capacityOutage.for: required value",
            id="outage-without-for",
        ),
        pytest.param(
            scenario({"at": "1m", "capacityOutage": {"capacityType": "reserved", "for": "1m"}}),
            "capacityOutage.capacityType: must be spot or on-demand",
            id="outage-capacity-type",
        ),
        pytest.param(
            scenario({"at": "1m", "capacityOutage": {"zones": "us-east-1a", "for": "1m"}}),
            "capacityOutage.zones: must be a list",
            id="outage-zones",
        ),
        pytest.param(
            scenario({"at": "1m", "scale": {"kind": "StatefulSet", "name": "x", "replicas": 1}}),
            "spec.steps[0] (at 1m): scale.kind: must be one of Deployment, Job, ReplicaSet",
            id="scale-kind",
        ),
        pytest.param(
            scenario({"at": "1m", "scale": {"kind": "Deployment", "name": "x", "replicas": -1}}),
            "scale.replicas: must be a non-negative integer",
            id="scale-replicas",
        ),
        pytest.param(
            scenario({"at": "1m", "spotInterruption": {"count": 0}}),
            "spotInterruption.count: must be a positive integer",
            id="interruption-count",
        ),
        pytest.param(
            scenario(
                {"at": "1m", "delete": [{"kind": "Pod", "name": "a", "labelSelector": "x=y"}]}
            ),
            "spec.steps[0] (at 1m): delete[0]: needs exactly one of name and labelSelector",
            id="delete-both",
        ),
        pytest.param(
            scenario({"at": "1m", "delete": [{"kind": "Gadget", "name": "a"}]}),
            "delete[0].kind: Gadget is not a kind the simulated cluster understands",
            id="delete-kind",
        ),
        pytest.param(
            scenario({"at": "1m", "apply": {"kind": "Pod"}}),
            "apply: must be a multi-document YAML string",
            id="apply-not-text",
        ),
        pytest.param(
            scenario(
                {
                    "at": "1m",
                    "apply": POD
                    + "---\napiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n",
                }
            ),
            "spec.steps[0] (at 1m): apply document 1.kind: example.com/v1 Gadget is not a kind",
            id="apply-unknown-kind",
        ),
        pytest.param(
            scenario({"at": "1m", "apply": "apiVersion: v1\nkind: Pod\nmetadata: {}\n"}),
            "apply document 0.metadata.name: required value",
            id="apply-no-name",
        ),
        pytest.param(
            scenario({"at": "1m", "apply": "kind: [unclosed"}),
            "apply: not valid YAML",
            id="apply-yaml",
        ),
        pytest.param(
            scenario({"at": "1m", "applyFile": "missing.yaml"}),
            "applyFile: cannot read",
            id="apply-file-missing",
        ),
        pytest.param(
            scenario({"at": "1m", "restartController": {"now": True}}),
            "restartController.now: unknown field",
            id="restart-fields",
        ),
    ],
)
def test_invalid_scenarios_name_the_step_and_field(
    body: dict[str, Any], message: str, tmp_path: Path
) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(body, source="s.yaml", base=tmp_path)
    assert message in str(caught.value)
    assert str(caught.value).startswith("s.yaml: ")


def test_cli_exits_2_naming_the_step_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: jointer.dev/v1alpha1\nkind: Scenario\nmetadata: {name: bad}\nspec:\n"
        "  duration: 1h\n  steps:\n  - at: 15m\n    capacityOutage: {capacityType: spot}\n"
    )
    assert main(["simulate", str(path)]) == 2
    error = capsys.readouterr().err
    assert "jointer simulate: error:" in error
    assert "spec.steps[0] (at 15m): capacityOutage.for: required value" in error


def test_cli_exits_2_for_a_file_that_is_not_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("spec: [unclosed\n")
    assert main(["simulate", str(path)]) == 2
    assert "not valid YAML: line 2" in capsys.readouterr().err


def test_cli_exits_2_for_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err
