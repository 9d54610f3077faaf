"""build_context: kinds by API group, keys, skipping unknown kinds, validation errors."""

import pytest

from provisioner.apis.errors import ApiValidationError
from provisioner.podgroups import build_context
from tests.unit.podgroups import builders as b


def test_build_context_indexes_each_kind_by_api_group():
    ctx = build_context(
        [
            b.kai_pod_group("pg", "ml"),
            b.kai_queue("q"),
            b.volcano_pod_group("vg", "ml"),
            b.volcano_queue("vq"),
            b.coscheduling_pod_group("cg", "ml", min_member=2),
            b.elastic_quota("eq", "ml", max_={}, used={}),
            b.kueue_workload("kw", "ml"),
            b.kube_pod_group("kpg", "ml"),
            b.kube_workload("kwl", "ml", groups={}),
            b.jobset("js", "ml", replicated_jobs={}),
            b.provisioning_request("pr", "ml"),
            b.priority_class("high", 1000),
            b.pod_manifest("p", "ml"),
            {
                "apiVersion": "leaderworkerset.x-k8s.io/v1",
                "kind": "LeaderWorkerSet",
                "metadata": {"name": "l", "namespace": "ml"},
            },
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "j", "namespace": "ml"},
                "spec": {"parallelism": 3},
            },
            {"apiVersion": "example.com/v1", "kind": "PodGroup", "metadata": {"name": "x"}},
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}},
        ]
    )
    assert list(ctx.kai_pod_groups) == ["ml/pg"]
    assert list(ctx.kai_queues) == ["q"]
    assert list(ctx.volcano_pod_groups) == ["ml/vg"]
    assert list(ctx.volcano_queues) == ["vq"]
    assert list(ctx.coscheduling_pod_groups) == ["ml/cg"]
    assert list(ctx.elastic_quotas) == ["ml/eq"]
    assert list(ctx.kueue_workloads) == ["ml/kw"]
    assert list(ctx.kube_pod_groups) == ["ml/kpg"]
    assert list(ctx.kube_workloads) == ["ml/kwl"]
    assert list(ctx.jobsets) == ["ml/js"]
    assert list(ctx.jobs) == ["ml/j"]
    assert ctx.jobs["ml/j"].spec.parallelism == 3
    assert list(ctx.leader_worker_sets) == ["ml/l"]
    assert list(ctx.provisioning_requests) == ["ml/pr"]
    assert dict(ctx.priority_classes) == {"high": 1000}
    assert [p.key for p in ctx.pods] == ["ml/p"]


def test_build_context_indexes_members_by_group():
    ctx = b.context(b.pods("t", 2, annotations={"pod-group-name": "pg"}), b.pod_manifest("lone"))
    assert [[p.key for p in pods] for pods in ctx.members.values()] == [
        ["default/t-0", "default/t-1"]
    ]


def test_build_context_reports_malformed_objects_by_field():
    bad = b.kai_pod_group("pg", min_member=2)
    bad["spec"]["minMember"] = "many"
    with pytest.raises(ApiValidationError, match=r"PodGroup pg: spec\.minMember"):
        build_context([bad])


def test_later_objects_replace_earlier_ones():
    ctx = build_context([b.kai_pod_group("pg", min_member=2), b.kai_pod_group("pg", min_member=5)])
    assert ctx.kai_pod_groups["default/pg"].spec.min_member == 5
