"""Non-preemptibility (KAI, Volcano, Workload API, operator list), reservations, do-not-disrupt."""

from datetime import UTC, datetime

import pytest

from provisioner.podgroups import (
    has_active_do_not_disrupt,
    is_gpu_reservation_pod,
    is_non_preemptible,
)
from tests.unit.podgroups import builders as b

NONE: frozenset[str] = frozenset()
PG = {"pod-group-name": "pg"}


def _check(
    manifest: b.Manifest, *objects: b.Manifest, classes: frozenset[str] = NONE
) -> str | None:
    return is_non_preemptible(b.parse(manifest), b.context(manifest, *objects), classes)


def test_kai_pod_group_preemptibility_comes_first():
    pod = b.pod_manifest(annotations=PG, labels={"kai.scheduler/preemptibility": "preemptible"})
    pg = b.kai_pod_group("pg", preemptibility="non-preemptible")
    assert _check(pod, pg) == "pod group default/pg is non-preemptible (spec.preemptibility)"


def test_kai_pod_group_preemptible_overrides_high_priority():
    pod = b.pod_manifest(annotations=PG, priority_class="inference")
    assert _check(pod, b.kai_pod_group("pg", preemptibility="preemptible")) is None


def test_kai_label_comes_before_priority():
    pod = b.pod_manifest(
        annotations=PG,
        labels={"kai.scheduler/preemptibility": "non-preemptible"},
        priority_class="train",
    )
    assert _check(pod, b.kai_pod_group("pg")) == (
        "pod is non-preemptible (label kai.scheduler/preemptibility)"
    )
    preemptible = b.pod_manifest(
        annotations=PG,
        labels={"kai.scheduler/preemptibility": "preemptible"},
        priority_class="build",
    )
    assert _check(preemptible, b.kai_pod_group("pg")) is None


@pytest.mark.parametrize(
    ("priority_class", "protected"),
    [("train", False), ("build-preemptible", False), ("build", True), ("inference", True)],
)
def test_kai_default_priority_classes(priority_class, protected):
    pod = b.pod_manifest(annotations=PG, priority_class=priority_class)
    assert (_check(pod, b.kai_pod_group("pg")) is not None) is protected


def test_kai_priority_class_label_comes_before_spec():
    pod = b.pod_manifest(
        annotations=PG, labels={"priorityClassName": "inference"}, priority_class="train"
    )
    assert _check(pod, b.kai_pod_group("pg")) == (
        "pod is non-preemptible in KAI: priority 125 (priority class inference) is >= 100"
    )


def test_kai_cluster_priority_class_value_wins_over_defaults():
    pod = b.pod_manifest(annotations=PG, priority_class="train")
    assert _check(pod, b.kai_pod_group("pg"), b.priority_class("train", 200)) is not None


def test_kai_unknown_class_uses_the_pod_priority():
    pod = b.pod_manifest(annotations=PG, priority_class="custom", priority=150)
    assert _check(pod, b.kai_pod_group("pg")) == (
        "pod is non-preemptible in KAI: priority 150 (priority class custom) is >= 100"
    )


def test_kai_kind_default_deployment_is_inference():
    pod = b.pod_manifest(annotations=PG, owner=("apps/v1", "ReplicaSet", "web"))
    assert _check(pod, b.kai_pod_group("pg")) is not None
    job = b.pod_manifest(annotations=PG, owner=("batch/v1", "Job", "train"))
    assert _check(job, b.kai_pod_group("pg")) is None


def test_priority_is_not_read_for_non_kai_pods():
    assert _check(b.pod_manifest(priority_class="inference", priority=1000)) is None


def test_volcano_preemptable_false_on_the_pod():
    pod = b.pod_manifest(
        annotations={"scheduling.k8s.io/group-name": "vg", "volcano.sh/preemptable": "false"}
    )
    assert _check(pod) == 'pod is non-preemptible (volcano.sh/preemptable: "false")'


def test_volcano_preemptable_false_on_the_pod_group():
    pod = b.pod_manifest(annotations={"scheduling.k8s.io/group-name": "vg"})
    pg = b.volcano_pod_group("vg", annotations={"volcano.sh/preemptable": "false"})
    assert (
        _check(pod, pg)
        == 'pod group default/vg is non-preemptible (volcano.sh/preemptable: "false")'
    )


def test_volcano_default_is_preemptible():
    pod = b.pod_manifest(annotations={"scheduling.k8s.io/group-name": "vg"})
    assert _check(pod, b.volcano_pod_group("vg")) is None


def test_workload_api_disruption_mode_all_protects_the_group():
    pod = b.pod_manifest(spec={"schedulingGroup": {"podGroupName": "pg"}})
    assert _check(pod, b.kube_pod_group("pg", min_count=2, disruption_mode="All")) == (
        "pod group default/pg has disruptionMode All (its members go together)"
    )
    assert _check(pod, b.kube_pod_group("pg", min_count=2, disruption_mode="Single")) is None


def test_operator_listed_priority_classes():
    pod = b.pod_manifest(priority_class="critical-training")
    assert _check(pod, classes=frozenset({"critical-training"})) == (
        "pod priority class critical-training is configured as non-preemptible"
    )
    assert _check(pod) is None


@pytest.mark.parametrize(
    ("namespace", "labels", "expected"),
    [
        ("kai-resource-reservation", {}, True),
        ("runai-reservation", {}, True),
        ("other", {"app": "kai-resource-reservation"}, True),
        ("default", {"app": "web"}, False),
    ],
)
def test_is_gpu_reservation_pod(namespace, labels, expected):
    assert (
        is_gpu_reservation_pod(b.pod("gpu-reservation-n1-abcde", namespace, labels=labels))
        is expected
    )


NOW = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "start", "active"),
    [
        pytest.param(None, "2026-08-01T11:00:00Z", False, id="absent"),
        pytest.param("true", "2026-08-01T00:00:00Z", True, id="true"),
        pytest.param("false", "2026-08-01T11:00:00Z", False, id="false"),
        pytest.param("2h", "2026-08-01T11:00:00Z", True, id="within-duration"),
        pytest.param("30m", "2026-08-01T11:00:00Z", False, id="duration-elapsed"),
        pytest.param("1h", "2026-08-01T11:00:00Z", False, id="exactly-elapsed"),
        pytest.param("1h0m1s", "2026-08-01T11:00:00Z", True, id="compound"),
        pytest.param("1.5h", "2026-08-01T10:31:00Z", True, id="fractional"),
        pytest.param("0s", "2026-08-01T11:59:00Z", False, id="zero"),
        pytest.param("-5m", "2026-08-01T11:59:00Z", False, id="negative"),
        pytest.param("forever", "2026-08-01T11:59:00Z", False, id="invalid"),
        pytest.param("10m", None, True, id="not-started"),
    ],
)
def test_has_active_do_not_disrupt(value, start, active):
    annotations = {"karpenter.sh/do-not-disrupt": value} if value is not None else {}
    p = b.pod(annotations=annotations, start_time=start, reason=None, phase="Running")
    assert has_active_do_not_disrupt(p, NOW) is active
