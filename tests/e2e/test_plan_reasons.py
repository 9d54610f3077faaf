"""`jointer plan` says why a pod gets no capacity: the NodePool and what about it (issue 17.7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from provisioner.app.cli import main

NODECLASS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: JointerNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""


def _nodepool(
    name: str,
    *,
    nodeclass: str = "default",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    limits: dict[str, str] | None = None,
    weight: int | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    template: dict[str, Any] = {
        "spec": {
            "nodeClassRef": {
                "group": "karpenter.k8s.aws",
                "kind": "EC2NodeClass",
                "name": nodeclass,
            },
            "requirements": [
                {
                    "key": "karpenter.k8s.aws/instance-category",
                    "operator": "In",
                    "values": ["c", "m"],
                },
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            ],
        }
    }
    if labels:
        template["metadata"] = {"labels": labels}
    if taints:
        template["spec"]["taints"] = taints
    spec: dict[str, Any] = {"template": template}
    if limits:
        spec["limits"] = limits
    if weight is not None:
        spec["weight"] = weight
    body: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": spec,
    }
    if status:
        body["status"] = status
    return body


def _pods(prefix: str, count: int, *, cpu: str = "1", **spec: Any) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{prefix}-{i}", "namespace": "default"},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "x",
                        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                    }
                ],
                **spec,
            },
        }
        for i in range(count)
    ]


def _plan(
    tmp_path: Path, objects: list[dict[str, Any]], capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[str, str]:
    path = tmp_path / "input.yaml"
    path.write_text(NODECLASS + "---\n" + yaml.safe_dump_all(objects), encoding="utf-8")
    status = main(["plan", "-f", str(path), "--time-limit", "1", *extra])
    out, err = capsys.readouterr()
    assert status == 0, err
    return out, err


def _reasons(out: str) -> dict[str, str]:
    return {u["pod"]: u["reason"] for u in json.loads(out)["unschedulable"]}


NOT_FOUND = 'NodePool "gpu" not ready: NodeClassReady=False: EC2NodeClass "gpu" not found'


def test_missing_nodeclass_is_named_with_its_nodepool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = [
        _nodepool("general"),
        _nodepool("gpu", nodeclass="gpu", labels={"team": "ml"}),
        *_pods("train", 2, nodeSelector={"team": "ml"}),
        *_pods("web", 2),
    ]
    out, err = _plan(tmp_path, objects, capsys, "-o", "json")
    reasons = _reasons(out)
    assert set(reasons) == {"default/train-0", "default/train-1"}
    reason = reasons["default/train-0"]
    assert reason.startswith(NOT_FOUND), reason
    # the ready pool is named with what rules it out (Karpenter's wording)
    assert 'incompatible with nodepool "general", incompatible requirements' in reason
    assert "team" in reason
    # the planner did not fall back to default node settings for a pool it cannot use
    assert "using the default node settings" not in err


def test_missing_nodeclass_reason_in_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = [
        _nodepool("gpu", nodeclass="gpu"),
        *_pods("web", 1),
    ]
    out, _ = _plan(tmp_path, objects, capsys, "-o", "table")
    assert (
        "unschedulable default/web-0: no NodePool is ready to provision capacity: " + NOT_FOUND
    ) in out


def test_nodepool_status_not_ready_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = "2024-01-01T00:00:00Z"
    message = 'EC2NodeClass "default" not ready, SubnetsNotFound: no subnets'
    status = {
        "conditions": [
            {
                "type": "ValidationSucceeded",
                "status": "True",
                "reason": "ValidationSucceeded",
                "lastTransitionTime": now,
            },
            {
                "type": "NodeClassReady",
                "status": "False",
                "reason": "NodeClassNotReady",
                "message": message,
                "lastTransitionTime": now,
            },
            {
                "type": "Ready",
                "status": "False",
                "reason": "NodeClassNotReady",
                "message": "NodeClassReady=False, " + message,
                "lastTransitionTime": now,
            },
        ]
    }
    objects = [_nodepool("general", status=status), *_pods("web", 1)]
    out, _ = _plan(tmp_path, objects, capsys, "-o", "json")
    assert _reasons(out) == {
        "default/web-0": "no NodePool is ready to provision capacity: "
        f'NodePool "general" not ready: NodeClassReady=False: {message}'
    }


def test_the_limit_that_ran_out_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = [
        _nodepool("on-demand", limits={"cpu": "8", "memory": "400Gi"}),
        *_pods("web", 12),
    ]
    out, _ = _plan(tmp_path, objects, capsys, "-o", "json")
    reasons = _reasons(out)
    assert reasons, "8 CPUs cannot hold 12 pods of 1 CPU"
    assert set(reasons.values()) == {
        'all available instance types exceed limits for nodepool: "on-demand" (cpu limit 8 reached)'
    }


def test_the_requirement_no_offering_meets_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = [
        _nodepool("general", weight=10),
        _nodepool("tainted", taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]),
        *_pods("odd", 1, nodeSelector={"node.kubernetes.io/instance-type": "c5.9000xlarge"}),
    ]
    out, _ = _plan(tmp_path, objects, capsys, "-o", "table")
    assert (
        'unschedulable default/odd-0: incompatible with nodepool "general", no instance type '
        "offering satisfies node.kubernetes.io/instance-type In [c5.9000xlarge]; "
        'incompatible with nodepool "tainted", did not tolerate taint dedicated=ml:NoSchedule'
    ) in out


def test_without_any_nodeclass_plan_keeps_the_default_node_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all([_nodepool("general"), *_pods("web", 1)]), encoding="utf-8")
    status = main(["plan", "-f", str(path), "--time-limit", "1", "-o", "json"])
    out, err = capsys.readouterr()
    assert status == 0
    assert "using the default node settings" in err
    assert json.loads(out)["unschedulable"] == []
