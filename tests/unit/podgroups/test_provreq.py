"""ProvisioningRequest pure rules: consumers (both spellings), pods from PodTemplates, validity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from provisioner.apis.base import parse_object
from provisioner.apis.core import Pod
from provisioner.podgroups import detect_group, provreq
from provisioner.podgroups.provreq import PodTemplate, ProvisioningRequest, ProvisioningRequestError

ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def request(**spec: Any) -> ProvisioningRequest:
    body = {
        "metadata": {
            "name": "pr",
            "namespace": "ml",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "provisioningClassName": ATOMIC,
            "podSets": [
                {"podTemplateRef": {"name": "a"}, "count": 2},
                {"podTemplateRef": {"name": "b"}, "count": 1},
            ],
            **spec,
        },
    }
    return parse_object(ProvisioningRequest, body, kind="ProvisioningRequest")


def template(name: str, cpu: str = "1", **metadata: Any) -> PodTemplate:
    body = {
        "metadata": {"name": name, "namespace": "ml"},
        "template": {
            "metadata": metadata,
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        },
    }
    return parse_object(PodTemplate, body, kind="PodTemplate")


def pod(annotations: dict[str, str]) -> Pod:
    body = {"metadata": {"name": "p", "namespace": "ml", "annotations": annotations}, "spec": {}}
    return parse_object(Pod, body, kind="Pod")


@pytest.mark.parametrize(
    "prefix", ["autoscaling.x-k8s.io", "cluster-autoscaler.kubernetes.io"], ids=["v1", "older"]
)
def test_consumers_are_read_under_both_annotation_spellings(prefix: str) -> None:
    consumer = pod(
        {
            f"{prefix}/consume-provisioning-request": "pr",
            f"{prefix}/provisioning-class-name": ATOMIC,
        }
    )
    assert provreq.consumed_request(consumer) == "pr"
    ref = detect_group(consumer)
    assert ref is not None
    assert ref.key == "ml/pr"


def test_pods_are_built_from_each_pod_sets_template_as_consumers() -> None:
    templates = {"ml/a": template("a", "2", labels={"app": "x"}), "ml/b": template("b", "500m")}
    pods = provreq.virtual_pods(request(), templates)
    assert [p.metadata.name for p in pods] == ["pr-0-0", "pr-0-1", "pr-1-0"]
    assert all(provreq.consumed_request(p) == "pr" for p in pods)
    assert all(p.metadata.namespace == "ml" for p in pods)
    assert all(provreq.is_virtual(p) for p in pods)
    assert pods[0].metadata.labels["app"] == "x"
    assert len({p.metadata.uid for p in pods}) == 3


def test_a_missing_template_names_the_pod_set_field() -> None:
    with pytest.raises(ProvisioningRequestError, match=r"spec\.podSets\[1\]\.podTemplateRef"):
        provreq.virtual_pods(request(), {"ml/a": template("a")})


def test_valid_until_defaults_to_7_days_and_reads_the_parameter() -> None:
    assert provreq.valid_until(request()) == CREATED + timedelta(days=7)
    shorter = request(parameters={"ValidUntilSeconds": "600"})
    assert provreq.valid_until(shorter) == CREATED + timedelta(seconds=600)
    with pytest.raises(ProvisioningRequestError, match=r"spec\.parameters\.ValidUntilSeconds"):
        provreq.valid_until(request(parameters={"ValidUntilSeconds": "-1"}))


def test_a_booking_lasts_10_minutes_from_provisioned() -> None:
    provisioned = request().model_copy(
        update={
            "status": provreq.ProvisioningRequestStatus.model_validate(
                {
                    "conditions": [
                        {
                            "type": "Provisioned",
                            "status": "True",
                            "lastTransitionTime": "2026-01-01T00:05:00Z",
                        }
                    ]
                }
            )
        }
    )
    at = CREATED + timedelta(minutes=5)
    assert provreq.is_booking(provisioned, at + timedelta(minutes=9))
    assert not provreq.is_booking(provisioned, at + timedelta(minutes=10))
    assert provreq.is_booking(request(), at + timedelta(days=1))  # not provisioned yet


# -- the CRs Jointer ships and writes validate against the CRD --------------------------------

REPO = Path(__file__).resolve().parents[3]


def provisioning_request_validator(shared: Path) -> jsonschema.Draft7Validator:
    """A Draft 7 validator of the ``v1`` ProvisioningRequest CRD schema."""
    crd = yaml.safe_load(
        (
            shared / "batch-apis" / "autoscaler" / "autoscaling.x-k8s.io_provisioningrequests.yaml"
        ).read_text()
    )
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"])


def _shipped() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    plan = REPO / "examples" / "plan" / "kueue-provisioning-request.yaml"
    found.extend(d for d in yaml.safe_load_all(plan.read_text()) if d)
    scenario = yaml.safe_load(
        (REPO / "examples" / "scenarios" / "kueue-provisioning-request.yaml").read_text()
    )
    for step in scenario["spec"]["steps"]:
        found.extend(d for d in yaml.safe_load_all(step.get("apply") or "") if d)
    return [d for d in found if d.get("kind") == "ProvisioningRequest"]


def test_the_shipped_provisioning_requests_validate_against_the_crd(shared: Path) -> None:
    validator = provisioning_request_validator(shared)
    requests = _shipped()
    assert len(requests) == 4
    for document in requests:
        assert list(validator.iter_errors(document)) == [], document["metadata"]["name"]
    broken = {**requests[0], "spec": {"provisioningClassName": ATOMIC}}  # no podSets
    assert list(validator.iter_errors(broken))
