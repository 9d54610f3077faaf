"""The detection table (pod-groups.md §8) and the group summaries built from it."""

import pytest

from provisioner.apis.core import Pod
from provisioner.podgroups import Ecosystem, PodGroupRef, detect_group, group_info, pod_groups
from tests.unit.podgroups import builders as b

KAI = "kai-scheduler"
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"


def _ref(pod: Pod) -> PodGroupRef:
    ref = detect_group(pod)
    assert ref is not None
    return ref


@pytest.mark.parametrize(
    ("kwargs", "ecosystem", "name", "sub_group"),
    [
        pytest.param(
            {"spec": {"schedulingGroup": {"podGroupName": "pg"}}},
            Ecosystem.WORKLOAD_API,
            "pg",
            None,
            id="workload-api-scheduling-group",
        ),
        pytest.param(
            {"spec": {"workloadRef": {"name": "wl", "podGroup": "workers"}}},
            Ecosystem.WORKLOAD_API,
            "wl-workers",
            None,
            id="workload-api-workload-ref",
        ),
        pytest.param(
            {
                "annotations": {"pod-group-name": "pg-train"},
                "labels": {"kai.scheduler/subgroup-name": "w"},
            },
            Ecosystem.KAI,
            "pg-train",
            "w",
            id="kai-annotation",
        ),
        pytest.param(
            {"scheduler_name": KAI, "owner": ("batch/v1", "Job", "train")},
            Ecosystem.KAI,
            "pg-train-train-uid",
            None,
            id="kai-scheduler-name-derived",
        ),
        pytest.param(
            {"annotations": {"scheduling.k8s.io/group-name": "vg"}},
            Ecosystem.VOLCANO,
            "vg",
            None,
            id="volcano-annotation",
        ),
        pytest.param(
            {"scheduler_name": "volcano", "owner": ("apps/v1", "ReplicaSet", "rs")},
            Ecosystem.VOLCANO,
            "podgroup-rs-uid",
            None,
            id="volcano-scheduler-name-derived",
        ),
        pytest.param(
            {"labels": {"scheduling.x-k8s.io/pod-group": "cg"}},
            Ecosystem.COSCHEDULING,
            "cg",
            None,
            id="coscheduling-label",
        ),
        pytest.param(
            {"labels": {"kueue.x-k8s.io/pod-group-name": "kg"}},
            Ecosystem.KUEUE_POD_GROUP,
            "kg",
            None,
            id="kueue-pod-group",
        ),
        pytest.param(
            {
                "annotations": {"kueue.x-k8s.io/workload": "job-abc"},
                "labels": {"kueue.x-k8s.io/podset": "main"},
            },
            Ecosystem.KUEUE_WORKLOAD,
            "job-abc",
            "main",
            id="kueue-workload",
        ),
        pytest.param(
            {
                "annotations": {
                    "autoscaling.x-k8s.io/consume-provisioning-request": "pr",
                    "autoscaling.x-k8s.io/provisioning-class-name": "check-capacity",
                }
            },
            Ecosystem.PROVISIONING_REQUEST,
            "pr",
            None,
            id="provisioning-request",
        ),
        pytest.param(
            {
                "labels": {
                    "leaderworkerset.sigs.k8s.io/name": "lws",
                    "leaderworkerset.sigs.k8s.io/group-index": "2",
                    "leaderworkerset.sigs.k8s.io/worker-index": "0",
                }
            },
            Ecosystem.LEADER_WORKER_SET,
            "lws-2",
            "leader",
            id="lws",
        ),
        pytest.param(
            {
                "labels": {
                    "jobset.sigs.k8s.io/jobset-name": "js",
                    "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                    "jobset.sigs.k8s.io/job-index": "1",
                }
            },
            Ecosystem.JOBSET,
            "js-workers",
            "1",
            id="jobset",
        ),
    ],
)
def test_detect_group_finds_each_row(kwargs, ecosystem, name, sub_group):
    ref = detect_group(b.pod("p", "ml", **kwargs))
    assert ref == PodGroupRef(ecosystem=ecosystem, namespace="ml", name=name, sub_group=sub_group)
    assert ref.key == f"ml/{name}"


def test_detect_group_returns_none_for_plain_pods():
    assert detect_group(b.pod(owner=("apps/v1", "ReplicaSet", "web"))) is None


def test_detect_group_first_match_wins():
    # A Volcano-scheduled LWS pod is a Volcano group (row 3 before row 8).
    lws_volcano = b.pod(
        annotations={"scheduling.k8s.io/group-name": "lws-0-abc"},
        labels={
            "leaderworkerset.sigs.k8s.io/name": "lws",
            "leaderworkerset.sigs.k8s.io/group-index": "0",
        },
    )
    assert _ref(lws_volcano).ecosystem == Ecosystem.VOLCANO
    # The Workload API (row 1) wins over KAI (row 2).
    both = b.pod(
        scheduler_name=KAI,
        annotations={"pod-group-name": "pg"},
        spec={"schedulingGroup": {"podGroupName": "kube-pg"}},
    )
    assert _ref(both).ecosystem == Ecosystem.WORKLOAD_API


def test_kai_gang_of_eight_is_one_group_of_min_eight():
    members = b.pods(
        "train", 8, "ml", scheduler_name=KAI, annotations={"pod-group-name": "pg-train"}
    )
    ctx = b.context(b.kai_pod_group("pg-train", "ml", min_member=8), members)
    (info,) = pod_groups(ctx)
    assert (info.key, info.ecosystem, info.min_count) == ("ml/pg-train", Ecosystem.KAI, 8)
    assert len(info.members) == 8
    assert info.is_gang
    assert info.same_zone
    assert info.object_found
    assert info.missing_count == 0


def test_kai_sub_groups_sum_into_min_count_and_leaves_are_checked():
    pg = b.kai_pod_group(
        "pg-lws",
        "ml",
        subGroups=[{"name": "leader", "minMember": 1}, {"name": "workers", "minMember": 3}],
    )
    members = [
        b.pod_manifest(
            f"w-{i}",
            "ml",
            annotations={"pod-group-name": "pg-lws"},
            labels={"kai.scheduler/subgroup-name": "workers"},
        )
        for i in range(3)
    ]
    ctx = b.context(pg, members)
    info = group_info(_ref(b.parse(members[0])), ctx)
    assert info.min_count == 4
    assert [(s.name, s.min_count, len(s.members)) for s in info.sub_groups] == [
        ("leader", 1, 0),
        ("workers", 3, 3),
    ]


def test_kai_min_sub_group_takes_the_smallest_children():
    pg = b.kai_pod_group(
        "pg",
        minSubGroup=2,
        subGroups=[
            {"name": "a", "minMember": 4},
            {"name": "b", "minMember": 2},
            {"name": "c", "minMember": 3},
        ],
    )
    ctx = b.context(pg, b.pod_manifest(annotations={"pod-group-name": "pg"}))
    (info,) = pod_groups(ctx)
    assert info.min_count == 5
    assert info.sub_groups == ()


def test_kai_elastic_group_is_not_a_gang():
    ctx = b.context(
        b.kai_pod_group("pg", min_member=0), b.pod_manifest(annotations={"pod-group-name": "pg"})
    )
    (info,) = pod_groups(ctx)
    assert info.min_count is None
    assert not info.is_gang


def test_volcano_group_uses_min_member():
    members = b.pods("v", 3, annotations={"scheduling.k8s.io/group-name": "vg"})
    ctx = b.context(b.volcano_pod_group("vg", min_member=3, phase="Inqueue"), members)
    (info,) = pod_groups(ctx)
    assert (info.ecosystem, info.min_count, len(info.members)) == (Ecosystem.VOLCANO, 3, 3)


def test_coscheduling_group_uses_min_member():
    members = b.pods("c", 2, labels={"scheduling.x-k8s.io/pod-group": "cg"})
    ctx = b.context(b.coscheduling_pod_group("cg", min_member=4), members)
    (info,) = pod_groups(ctx)
    assert (info.min_count, info.missing_count) == (4, 2)


def test_kueue_pod_group_size_comes_from_total_count():
    members = b.pods(
        "k",
        2,
        labels={"kueue.x-k8s.io/pod-group-name": "kg"},
        annotations={"kueue.x-k8s.io/pod-group-total-count": "3"},
    )
    (info,) = pod_groups(b.context(members))
    assert (info.ecosystem, info.min_count) == (Ecosystem.KUEUE_POD_GROUP, 3)


def test_kueue_workload_size_comes_from_pod_sets():
    members = b.pods(
        "k",
        2,
        annotations={"kueue.x-k8s.io/workload": "wl"},
        labels={"kueue.x-k8s.io/podset": "main"},
    )
    wl = b.kueue_workload(
        "wl", pod_sets=[{"name": "main", "count": 4, "minCount": 2}, {"name": "aux", "count": 1}]
    )
    (info,) = pod_groups(b.context(wl, members))
    assert info.min_count == 3
    assert [(s.name, s.min_count) for s in info.sub_groups] == [("aux", 1), ("main", 2)]


def test_workload_api_gang_min_count_from_pod_group():
    members = b.pods("w", 2, "ml", spec={"schedulingGroup": {"podGroupName": "pg"}})
    (info,) = pod_groups(b.context(b.kube_pod_group("pg", "ml", min_count=4), members))
    assert (info.ecosystem, info.min_count) == (Ecosystem.WORKLOAD_API, 4)


def test_workload_api_basic_policy_is_not_a_gang():
    members = b.pods("w", 2, "ml", spec={"schedulingGroup": {"podGroupName": "pg"}})
    (info,) = pod_groups(b.context(b.kube_pod_group("pg", "ml"), members))
    assert info.min_count is None


def test_workload_api_v1alpha1_workload_ref_min_count():
    members = b.pods("w", 1, spec={"workloadRef": {"name": "wl", "podGroup": "workers"}})
    (info,) = pod_groups(b.context(b.kube_workload("wl", groups={"workers": 6}), members))
    assert (info.name, info.min_count) == ("wl-workers", 6)


def test_lws_size_comes_from_the_first_pod():
    leader = b.pod_manifest(
        "lws-0",
        labels={
            "leaderworkerset.sigs.k8s.io/name": "lws",
            "leaderworkerset.sigs.k8s.io/group-index": "0",
            "leaderworkerset.sigs.k8s.io/worker-index": "0",
        },
        annotations={"leaderworkerset.sigs.k8s.io/size": "4"},
    )
    (info,) = pod_groups(b.context(leader))
    assert (info.ecosystem, info.key, info.min_count) == (
        Ecosystem.LEADER_WORKER_SET,
        "default/lws-0",
        4,
    )
    assert info.size_from_first_pod
    assert info.missing_count == 3


def test_jobset_size_is_parallelism_times_replicas():
    labels = {
        "jobset.sigs.k8s.io/jobset-name": "js",
        "jobset.sigs.k8s.io/replicatedjob-name": "workers",
        "jobset.sigs.k8s.io/job-index": "0",
        "jobset.sigs.k8s.io/replicatedjob-replicas": "2",
    }
    member = b.pod_manifest("js-workers-0-0", labels=labels)
    ctx = b.context(b.jobset("js", replicated_jobs={"workers": (2, 4)}), member)
    (info,) = pod_groups(ctx)
    assert (info.ecosystem, info.min_count, info.size_from_first_pod) == (Ecosystem.JOBSET, 8, True)


def test_jobset_without_objects_defaults_parallelism_to_one():
    labels = {
        "jobset.sigs.k8s.io/jobset-name": "js",
        "jobset.sigs.k8s.io/replicatedjob-name": "workers",
        "jobset.sigs.k8s.io/job-index": "0",
        "jobset.sigs.k8s.io/replicatedjob-replicas": "3",
    }
    (info,) = pod_groups(b.context(b.pod_manifest(labels=labels)))
    assert info.min_count == 3


def test_provisioning_request_size_is_the_pod_set_count():
    annotations = {
        "autoscaling.x-k8s.io/consume-provisioning-request": "pr",
        "autoscaling.x-k8s.io/provisioning-class-name": ATOMIC,
    }
    ctx = b.context(
        b.provisioning_request("pr", counts=(2, 3)), b.pods("c", 5, annotations=annotations)
    )
    (info,) = pod_groups(ctx)
    assert (info.ecosystem, info.min_count) == (Ecosystem.PROVISIONING_REQUEST, 5)


def test_gang_topology_opt_out_on_the_group_object():
    pg = b.kai_pod_group("pg", min_member=2, annotations={"jointer.dev/gang-topology": "none"})
    (info,) = pod_groups(b.context(pg, b.pods("t", 2, annotations={"pod-group-name": "pg"})))
    assert not info.same_zone


def test_gang_topology_opt_out_on_any_member():
    members = b.pods("t", 2, annotations={"pod-group-name": "pg"})
    members[1]["metadata"]["annotations"]["jointer.dev/gang-topology"] = "none"
    (info,) = pod_groups(b.context(b.kai_pod_group("pg", min_member=2), members))
    assert not info.same_zone


def test_finished_pods_are_not_members():
    members = b.pods("t", 2, annotations={"pod-group-name": "pg"})
    done = b.pod_manifest(
        "t-done", annotations={"pod-group-name": "pg"}, reason=None, phase="Succeeded"
    )
    (info,) = pod_groups(b.context(b.kai_pod_group("pg", min_member=3), members, done))
    assert info.members == ("default/t-0", "default/t-1")


def test_gated_members_are_counted_apart():
    members = [
        *b.pods("t", 2, labels={"scheduling.x-k8s.io/pod-group": "cg"}),
        *b.pods("g", 1, labels={"scheduling.x-k8s.io/pod-group": "cg"}, gates=["example.com/wait"]),
    ]
    (info,) = pod_groups(b.context(b.coscheduling_pod_group("cg", min_member=3), members))
    assert (len(info.members), info.gated_members, info.ready_count) == (3, ("default/g-0",), 2)


def test_group_info_counts_a_pod_outside_the_context():
    ref = _ref(b.pod("x", annotations={"pod-group-name": "pg"}))
    info = group_info(ref, b.context(), pods=[b.pod("x", annotations={"pod-group-name": "pg"})])
    assert info.members == ("default/x",)
    assert not info.object_found
