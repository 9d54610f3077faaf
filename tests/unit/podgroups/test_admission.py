"""provisionable_verdict: Karpenter's rules, then admission, quota and gang completeness."""

import pytest

from provisioner.podgroups import (
    Ecosystem,
    Verdict,
    karpenter_ignore_reason,
    provisionable_verdict,
    provisionable_verdicts,
)
from tests.unit.podgroups import builders as b

KAI = "kai-scheduler"
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
PG = {"pod-group-name": "pg-train"}


def _verdict(pod_manifest: b.Manifest, *objects: b.Manifest | list[b.Manifest]) -> Verdict:
    return provisionable_verdict(b.parse(pod_manifest), b.context(pod_manifest, *objects))


# --- Karpenter's IsProvisionable ------------------------------------------------------------


def test_plain_unschedulable_pod_is_provisionable():
    verdict = _verdict(b.pod_manifest())
    assert verdict.provisionable
    assert verdict.reason == ""
    assert verdict.group is None


def test_pod_without_status_is_provisionable():
    assert _verdict(b.pod_manifest(reason=b.NO_STATUS)).provisionable


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        pytest.param({"node_name": "n1"}, "pod is bound to node n1", id="bound"),
        pytest.param(
            {"owner": ("apps/v1", "DaemonSet", "ds")},
            "pod is owned by DaemonSet ds",
            id="daemonset",
        ),
        pytest.param(
            {"owner": ("v1", "Node", "n1")}, "pod is a mirror pod (owned by Node n1)", id="mirror"
        ),
        pytest.param(
            {"nominated": "n2"}, "pod is nominated to node n2 (preempting)", id="nominated"
        ),
        pytest.param(
            {"reason": "SchedulingGated"},
            "pod is not unschedulable (PodScheduled reason SchedulingGated)",
            id="scheduling-gated-reason",
        ),
        pytest.param(
            {"reason": "Schedulable"},
            "pod is already placed by its scheduler (PodScheduled reason Schedulable)",
            id="volcano-schedulable",
        ),
        pytest.param(
            {"gates": ["example.com/a", "example.com/b"]},
            "pod is scheduling-gated (example.com/a, example.com/b)",
            id="any-gate",
        ),
    ],
)
def test_karpenter_rules_ignore(kwargs, reason):
    manifest = b.pod_manifest(**kwargs)
    assert karpenter_ignore_reason(b.parse(manifest)) == reason
    verdict = _verdict(manifest)
    assert not verdict.provisionable
    assert verdict.reason == reason


def test_status_without_pod_scheduled_condition_is_ignored():
    manifest = b.pod_manifest(reason=None, phase="Running")
    manifest["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    assert _verdict(manifest).reason == "pod has no PodScheduled condition"


def test_status_without_conditions_counts_as_no_status():
    manifest = b.pod_manifest(reason=None)
    manifest["status"] = {"phase": "Pending"}
    assert _verdict(manifest).provisionable


@pytest.mark.parametrize(
    "gate",
    [
        "kai.scheduler/queue-admission",
        "scheduling.volcano.sh/queue-allocation-gate",
        "kueue.x-k8s.io/admission",
        "kueue.x-k8s.io/topology",
    ],
)
def test_scheduler_gates_are_not_provisionable(gate):
    verdict = _verdict(b.pod_manifest(gates=[gate], reason="SchedulingGated"))
    assert verdict.reason == f"pod is scheduling-gated ({gate})"


# --- KAI ------------------------------------------------------------------------------------


def test_kai_complete_gang_is_provisionable():
    members = b.pods("t", 8, "ml", scheduler_name=KAI, annotations=PG)
    verdict = _verdict(members[0], members[1:], b.kai_pod_group("pg-train", "ml", min_member=8))
    assert verdict.provisionable
    assert verdict.group is not None
    assert verdict.group.ecosystem == Ecosystem.KAI


def test_kai_non_preemptible_over_quota_is_ignored():
    pg = b.kai_pod_group(
        "job",
        "team-b",
        min_member=1,
        queue="team-b",
        reasons=[
            (
                "NonPreemptibleOverQuota",
                (
                    "Non-preemptible workload is over quota. Workload requested 4 GPUs, but team-b "
                    "quota is 2 GPUs, while 0 GPUs are already allocated for non-preemptible pods."
                ),
            )
        ],
    )
    verdict = _verdict(b.pod_manifest("job-0", "team-b", annotations={"pod-group-name": "job"}), pg)
    assert not verdict.provisionable
    assert verdict.reason == "pod group team-b/job is over its queue quota"


def test_kai_over_quota_is_recognised_by_message_alone():
    pg = b.kai_pod_group(
        "job", reasons=[("", "Non-preemptible workload is over quota. Workload requested 4 GPUs")]
    )
    verdict = _verdict(b.pod_manifest(annotations={"pod-group-name": "job"}), pg)
    assert verdict.reason == "pod group default/job is over its queue quota"


def test_kai_over_limit_is_ignored():
    pg = b.kai_pod_group("job", reasons=[("OverLimit", "q quota has reached the allowable limit")])
    verdict = _verdict(b.pod_manifest(annotations={"pod-group-name": "job"}), pg)
    assert verdict.reason == "pod group default/job is over its queue quota limit"


def test_kai_queue_does_not_exist_from_scheduling_conditions():
    pg = b.kai_pod_group("job", queue="ghost", reasons=[("QueueDoesNotExist", "no queue")])
    verdict = _verdict(b.pod_manifest(annotations={"pod-group-name": "job"}), pg)
    assert verdict.reason == "pod group default/job: queue ghost does not exist"


def test_kai_queue_missing_from_known_queues():
    pg = b.kai_pod_group("job", queue="ghost")
    verdict = _verdict(b.pod_manifest(annotations={"pod-group-name": "job"}), pg, b.kai_queue("a"))
    assert verdict.reason == "pod group default/job: queue ghost does not exist"


def test_kai_pod_schedulable_reason_other_than_quota_is_provisionable():
    pg = b.kai_pod_group("job", reasons=[("PodSchedulingErrors", "no nodes")])
    assert _verdict(b.pod_manifest(annotations={"pod-group-name": "job"}), pg).provisionable


def test_kai_own_check_non_preemptible_over_queue_quota():
    pg = b.kai_pod_group("job", min_member=2, queue="q", preemptibility="non-preemptible")
    members = b.pods(
        "j", 2, annotations={"pod-group-name": "job"}, requests={"nvidia.com/gpu": "1"}
    )
    queue = b.kai_queue("q", gpu_quota=2, gpu_limit=-1, allocated_non_preemptible_gpu="1")
    verdict = _verdict(members[0], members[1], pg, queue)
    assert verdict.reason == "pod group default/job is over its queue quota"


GPU_LIMIT_ONLY = {
    "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
}
"""A container with a GPU limit and no request: Kubernetes makes its request the limit."""


def test_kai_own_check_counts_a_gpu_limit_without_request_as_a_gpu():
    pg = b.kai_pod_group("job", min_member=2, queue="q", preemptibility="non-preemptible")
    members = b.pods("j", 2, annotations={"pod-group-name": "job"}, spec=GPU_LIMIT_ONLY)
    queue = b.kai_queue("q", gpu_quota=2, gpu_limit=-1, allocated_non_preemptible_gpu="1")
    verdict = _verdict(members[0], members[1], pg, queue)
    assert verdict.reason == "pod group default/job is over its queue quota"


def test_kai_own_check_counts_sidecar_gpus_beside_the_containers():
    sidecar = {
        "name": "side",
        "restartPolicy": "Always",
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    spec = {**GPU_LIMIT_ONLY, "initContainers": [sidecar]}
    pg = b.kai_pod_group("job", min_member=1, queue="q", preemptibility="non-preemptible")
    pod = b.pod_manifest(annotations={"pod-group-name": "job"}, spec=spec)
    queue = b.kai_queue("q", gpu_quota=2, gpu_limit=-1, allocated_non_preemptible_gpu="1")
    assert _verdict(pod, pg, queue).reason == "pod group default/job is over its queue quota"
    within = b.kai_queue("q", gpu_quota=3, gpu_limit=-1, allocated_non_preemptible_gpu="1")
    assert _verdict(pod, pg, within).provisionable


def test_kai_own_check_passes_preemptible_work_over_quota_within_limit():
    pg = b.kai_pod_group("job", min_member=2, queue="q", preemptibility="preemptible")
    members = b.pods(
        "j", 2, annotations={"pod-group-name": "job"}, requests={"nvidia.com/gpu": "1"}
    )
    queue = b.kai_queue("q", gpu_quota=0, gpu_limit=-1, allocated_non_preemptible_gpu="1")
    assert _verdict(members[0], members[1], pg, queue).provisionable


def test_kai_own_check_limit_up_the_parent_chain():
    pg = b.kai_pod_group("job", min_member=1, queue="leaf", preemptibility="preemptible")
    pod = b.pod_manifest(annotations={"pod-group-name": "job"}, requests={"nvidia.com/gpu": "2"})
    leaf = b.kai_queue("leaf", gpu_quota=-1, gpu_limit=-1, parent="dept")
    dept = b.kai_queue("dept", gpu_quota=4, gpu_limit=8, allocated_gpu="7")
    verdict = _verdict(pod, pg, leaf, dept)
    assert verdict.reason == "pod group default/job is over its queue quota limit"


def test_kai_own_check_counts_fractions():
    pg = b.kai_pod_group("job", min_member=1, queue="q", preemptibility="non-preemptible")
    pod = b.pod_manifest(annotations={"pod-group-name": "job", "gpu-fraction": "0.5"})
    queue = b.kai_queue("q", gpu_quota=1, gpu_limit=-1, allocated_non_preemptible_gpu="0.6")
    assert _verdict(pod, pg, queue).reason == "pod group default/job is over its queue quota"


def test_kai_incomplete_gang_is_ignored():
    members = b.pods("t", 3, "ml", scheduler_name=KAI, annotations=PG)
    verdict = _verdict(members[0], members[1:], b.kai_pod_group("pg-train", "ml", min_member=8))
    assert verdict.reason == "pod group ml/pg-train is incomplete: 3 of 8 members exist"


def test_kai_incomplete_sub_group_is_ignored():
    pg = b.kai_pod_group(
        "pg", subGroups=[{"name": "leader", "minMember": 1}, {"name": "workers", "minMember": 2}]
    )
    workers = b.pods(
        "w",
        3,
        annotations={"pod-group-name": "pg"},
        labels={"kai.scheduler/subgroup-name": "workers"},
    )
    verdict = _verdict(workers[0], workers[1:], pg)
    assert (
        verdict.reason == "pod group default/pg is incomplete: sub-group leader has 0 of 1 members"
    )


def test_missing_group_object_does_not_hold_the_pod_back():
    assert _verdict(b.pod_manifest(annotations={"pod-group-name": "pg"})).provisionable


# --- Volcano --------------------------------------------------------------------------------


def _volcano(phase: str, *objects: b.Manifest, count: int = 2) -> Verdict:
    members = b.pods("v", count, annotations={"scheduling.k8s.io/group-name": "vg"})
    return _verdict(
        members[0], members[1:], b.volcano_pod_group("vg", min_member=2, phase=phase), *objects
    )


def test_volcano_pending_group_is_ignored():
    assert _volcano("Pending").reason == (
        "pod group default/vg is not admitted by its queue (Volcano phase Pending)"
    )


def test_volcano_inqueue_group_is_provisionable():
    assert _volcano("Inqueue").provisionable


def test_volcano_closed_queue_is_ignored():
    verdict = _volcano("Inqueue", b.volcano_queue("default", "Closed"))
    assert verdict.reason == "pod group default/vg: queue default is Closed, not Open"


def test_volcano_missing_queue_is_ignored():
    verdict = _volcano("Inqueue", b.volcano_queue("other"))
    assert verdict.reason == "pod group default/vg: queue default does not exist"


def test_volcano_incomplete_gang_is_ignored():
    assert _volcano("Inqueue", count=1).reason == (
        "pod group default/vg is incomplete: 1 of 2 members exist"
    )


# --- coscheduling ---------------------------------------------------------------------------

CG = {"scheduling.x-k8s.io/pod-group": "cg"}


def test_coscheduling_complete_group_is_provisionable():
    members = b.pods("c", 2, labels=CG)
    assert _verdict(
        members[0], members[1], b.coscheduling_pod_group("cg", min_member=2)
    ).provisionable


def test_coscheduling_sibling_message_means_wait():
    members = b.pods(
        "c",
        2,
        labels=CG,
        message="pre-filter pod c-0 cannot find enough sibling pods, current pods number: 1, "
        "minMember of group: 2",
    )
    verdict = _verdict(members[0], members[1], b.coscheduling_pod_group("cg", min_member=2))
    assert verdict.reason == (
        "pod group default/cg is waiting for its members "
        "(coscheduling: cannot find enough sibling pods)"
    )


def test_coscheduling_incomplete_group_is_ignored():
    member = b.pod_manifest("c-0", labels=CG)
    verdict = _verdict(member, b.coscheduling_pod_group("cg", min_member=3))
    assert verdict.reason == "pod group default/cg is incomplete: 1 of 3 members exist"


def test_coscheduling_gated_siblings_are_reported():
    members = [b.pod_manifest("c-0", labels=CG), b.pod_manifest("c-1", labels=CG, gates=["x/y"])]
    verdict = _verdict(members[0], members[1], b.coscheduling_pod_group("cg", min_member=2))
    assert verdict.reason == "pod group default/cg is incomplete: 1 of 2 members exist (1 gated)"


def test_coscheduling_elastic_quota_max_is_enforced():
    members = b.pods("c", 2, "team", labels=CG, requests={"cpu": "2"})
    quota = b.elastic_quota("eq", "team", max_={"cpu": "10"}, used={"cpu": "7"})
    verdict = _verdict(
        members[0], members[1], b.coscheduling_pod_group("cg", "team", min_member=2), quota
    )
    assert verdict.reason == (
        "pod group team/cg is over its queue quota (ElasticQuota team/eq max cpu)"
    )


def test_coscheduling_elastic_quota_counts_limits_without_requests():
    spec = {"containers": [{"name": "main", "resources": {"limits": {"cpu": "2"}}}]}
    members = b.pods("c", 2, "team", labels=CG, spec=spec)
    quota = b.elastic_quota("eq", "team", max_={"cpu": "10"}, used={"cpu": "7"})
    verdict = _verdict(
        members[0], members[1], b.coscheduling_pod_group("cg", "team", min_member=2), quota
    )
    assert verdict.reason == (
        "pod group team/cg is over its queue quota (ElasticQuota team/eq max cpu)"
    )


def test_coscheduling_elastic_quota_with_room_is_provisionable():
    members = b.pods("c", 2, "team", labels=CG, requests={"cpu": "1"})
    quota = b.elastic_quota("eq", "team", max_={"cpu": "10"}, used={"cpu": "7"})
    pg = b.coscheduling_pod_group("cg", "team", min_member=2)
    assert _verdict(members[0], members[1], pg, quota).provisionable


# --- Kueue ----------------------------------------------------------------------------------

KG_LABELS = {"kueue.x-k8s.io/pod-group-name": "kg", "kueue.x-k8s.io/managed": "true"}
KG_ANNOTATIONS = {"kueue.x-k8s.io/pod-group-total-count": "2"}


def test_kueue_gated_pod_is_ignored():
    members = b.pods(
        "k",
        2,
        labels=KG_LABELS,
        annotations=KG_ANNOTATIONS,
        gates=["kueue.x-k8s.io/admission"],
        reason="SchedulingGated",
    )
    verdict = _verdict(members[0], members[1])
    assert verdict.reason == "pod is scheduling-gated (kueue.x-k8s.io/admission)"
    assert verdict.group is not None
    assert verdict.group.ecosystem == Ecosystem.KUEUE_POD_GROUP


def test_kueue_admitted_group_is_provisionable():
    members = b.pods("k", 2, labels=KG_LABELS, annotations=KG_ANNOTATIONS)
    wl = b.kueue_workload(
        "kg",
        conditions=[("QuotaReserved", "True", "QuotaReserved"), ("Admitted", "True", "Admitted")],
    )
    assert _verdict(members[0], members[1], wl).provisionable


def test_kueue_workload_not_admitted_is_ignored():
    members = b.pods(
        "k",
        1,
        annotations={"kueue.x-k8s.io/workload": "job-x"},
        labels={"kueue.x-k8s.io/podset": "main"},
    )
    wl = b.kueue_workload(
        "job-x",
        pod_sets=[{"name": "main", "count": 1}],
        conditions=[("QuotaReserved", "False", "WaitingForQuota")],
    )
    verdict = _verdict(members[0], wl)
    assert verdict.reason == (
        "pod group default/job-x is not admitted by its queue "
        "(Kueue Workload job-x: QuotaReserved False: WaitingForQuota)"
    )


def test_kueue_incomplete_pod_group_is_ignored():
    member = b.pod_manifest(
        labels=KG_LABELS, annotations={"kueue.x-k8s.io/pod-group-total-count": "4"}
    )
    assert _verdict(member).reason == "pod group default/kg is incomplete: 1 of 4 members exist"


# --- Workload API ---------------------------------------------------------------------------


def test_workload_api_gang_waits_for_min_count():
    members = b.pods("w", 2, spec={"schedulingGroup": {"podGroupName": "pg"}})
    verdict = _verdict(members[0], members[1], b.kube_pod_group("pg", min_count=3))
    assert verdict.reason == "pod group default/pg is incomplete: 2 of 3 members exist"


def test_workload_api_complete_gang_is_provisionable():
    members = b.pods("w", 3, spec={"schedulingGroup": {"podGroupName": "pg"}})
    verdict = _verdict(members[0], members[1:], b.kube_pod_group("pg", min_count=3))
    assert verdict.provisionable


# --- LWS and JobSet -------------------------------------------------------------------------


def test_lws_leader_alone_is_provisionable():
    leader = b.pod_manifest(
        "lws-0",
        labels={
            "leaderworkerset.sigs.k8s.io/name": "lws",
            "leaderworkerset.sigs.k8s.io/group-index": "0",
            "leaderworkerset.sigs.k8s.io/worker-index": "0",
        },
        annotations={"leaderworkerset.sigs.k8s.io/size": "4"},
    )
    verdict = _verdict(leader)
    assert verdict.provisionable
    assert verdict.group is not None
    assert verdict.group.ecosystem == Ecosystem.LEADER_WORKER_SET


JS_LABELS = {
    "jobset.sigs.k8s.io/jobset-name": "js",
    "jobset.sigs.k8s.io/replicatedjob-name": "workers",
    "jobset.sigs.k8s.io/job-index": "0",
    "jobset.sigs.k8s.io/replicatedjob-replicas": "2",
}


def test_jobset_first_pod_is_provisionable():
    member = b.pod_manifest(labels=JS_LABELS)
    assert _verdict(member, b.jobset("js", replicated_jobs={"workers": (2, 2)})).provisionable


def test_suspended_jobset_is_ignored():
    member = b.pod_manifest(labels=JS_LABELS)
    verdict = _verdict(member, b.jobset("js", replicated_jobs={"workers": (2, 2)}, suspend=True))
    assert verdict.reason == "jobset default/js is suspended"


# --- ProvisioningRequest --------------------------------------------------------------------

PR = {
    "autoscaling.x-k8s.io/consume-provisioning-request": "pr",
    "autoscaling.x-k8s.io/provisioning-class-name": ATOMIC,
}


def test_provisioning_request_consumers_are_provisionable():
    members = b.pods("c", 2, annotations=PR)
    pr = b.provisioning_request("pr", counts=(2,), conditions=[("Accepted", "True")])
    assert _verdict(members[0], members[1], pr).provisionable


def test_provisioning_request_missing_is_ignored():
    verdict = _verdict(b.pod_manifest(annotations=PR))
    assert verdict.reason == "pod consumes provisioning request default/pr, which does not exist"


@pytest.mark.parametrize(
    ("condition", "reason"),
    [
        ("Failed", "provisioning request default/pr has failed"),
        ("BookingExpired", "provisioning request default/pr: its booking expired"),
    ],
)
def test_provisioning_request_failed_or_expired_is_ignored(condition, reason):
    pr = b.provisioning_request("pr", counts=(1,), conditions=[(condition, "True")])
    assert _verdict(b.pod_manifest(annotations=PR), pr).reason == reason


def test_provisioning_request_is_checked_for_kueue_pods_too():
    member = b.pod_manifest(
        annotations={**PR, "kueue.x-k8s.io/workload": "wl"},
        labels={"kueue.x-k8s.io/podset": "main"},
    )
    verdict = _verdict(member)
    assert verdict.group is not None
    assert verdict.group.ecosystem == Ecosystem.KUEUE_WORKLOAD
    assert verdict.reason == "pod consumes provisioning request default/pr, which does not exist"


# --- batches --------------------------------------------------------------------------------


def test_provisionable_verdicts_match_single_verdicts():
    gang = b.pods("t", 8, "ml", scheduler_name=KAI, annotations=PG)
    short = b.pods("s", 2, labels=CG)
    over = b.pod_manifest("job-0", "team-b", annotations={"pod-group-name": "job"})
    objects = [
        b.kai_pod_group("pg-train", "ml", min_member=8),
        b.coscheduling_pod_group("cg", min_member=3),
        b.kai_pod_group("job", "team-b", reasons=[("NonPreemptibleOverQuota", "")]),
        b.pod_manifest("plain"),
        b.pod_manifest("bound", node_name="n1"),
    ]
    ctx = b.context(gang, short, over, objects)
    verdicts = provisionable_verdicts(ctx.pods, ctx)
    assert verdicts == {p.key: provisionable_verdict(p, ctx) for p in ctx.pods}
    assert sorted(k for k, v in verdicts.items() if v.provisionable) == sorted(
        ["default/plain", *(f"ml/t-{i}" for i in range(8))]
    )


def test_provisionable_verdicts_count_batch_pods_missing_from_the_context():
    gang = [b.parse(m) for m in b.pods("t", 3, annotations=PG)]
    ctx = b.context(b.kai_pod_group("pg-train", min_member=3))
    assert all(v.provisionable for v in provisionable_verdicts(gang, ctx).values())
    assert not provisionable_verdict(gang[0], ctx).provisionable
