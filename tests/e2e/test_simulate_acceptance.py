"""Issue 5's acceptance, simulated end to end: the production controllers, the AWS provider on
moto, the embedded cluster, virtual time. One test per acceptance criterion (bundled scenarios).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from cloudprovider.aws.tags import (
    TAG_EKS_CLUSTER_NAME,
    TAG_NODECLAIM,
    TAG_NODECLASS,
    TAG_NODEPOOL,
    cluster_tag,
)
from provisioner.controllers.assembly import ControllerSet
from provisioner.kube.resource import NODE_POOLS
from provisioner.simulation.cloud import Launch
from provisioner.simulation.driver import ControllerCrash
from provisioner.simulation.ports import Ports
from provisioner.simulation.report import orphan_instances
from provisioner.simulation.runner import Simulation
from provisioner.simulation.scenario import parse_scenario
from provisioner.simulation.wiring import manager_factory
from tests.e2e.conftest import (
    SCENARIOS,
    bundled,
    bundled_variant,
    events,
    pods_of,
    run,
    shortened,
)
from tests.e2e.fleets import fleet
from tests.interruption_events import INTERRUPTION_EVENTS, SPOT, interruption_events

pytestmark = pytest.mark.usefixtures("test_catalog")

BATCH_MAX = 10.0
"""BATCH_MAX_DURATION: the longest a batch stays open."""


def assert_one_instance_per_claim_and_no_orphan(report: dict[str, Any]) -> None:
    per_claim = Counter(i["nodeClaim"] for i in report["ec2Instances"])
    assert all(count == 1 for count in per_claim.values()), per_claim
    assert None not in per_claim
    launched = {c["name"] for c in report["nodeClaims"] if c["launchedAt"] is not None}
    assert set(per_claim) == launched
    assert orphan_instances(report) == []


def test_a_deployment_scaled_0_to_200_gets_nodes_in_a_batch_window_plus_launch_time() -> None:
    scenario = shortened(bundled("deployment-0-to-200"), 30 * 60)
    scaled_at = next(s.at for s in scenario.steps if s.kind == "scale")
    report, _ = run(scenario)
    greedy, _ = run(scenario, policy="greedy")

    frontend = pods_of(report, "web/frontend-")
    assert len(frontend) == 200
    assert all(p["createdAt"] == scaled_at for p in frontend)
    waits = [p["scheduledAt"] - p["createdAt"] for p in frontend if p["scheduledAt"] is not None]
    assert len(waits) == 200
    assert max(waits) <= BATCH_MAX + scenario.node_startup
    for claim in report["nodeClaims"]:
        assert claim["launchedAt"] <= scaled_at + BATCH_MAX
        assert claim["initializedAt"] <= claim["launchedAt"] + scenario.node_startup
    assert report["summary"]["podsScheduled"] == greedy["summary"]["podsScheduled"] == 200
    assert report["cost"]["total"] <= greedy["cost"]["total"]
    assert_one_instance_per_claim_and_no_orphan(report)


def test_a_kai_gang_of_8_gpu_pods_gets_all_8_placed() -> None:
    report, _ = run(bundled("kai-gang-8-gpus"))
    gang = [p for p in report["pods"] if p["podGroup"] == "research/pg-llm-train"]
    assert len(gang) == 8
    assert {p["scheduledAt"] for p in gang} == {gang[0]["scheduledAt"]}
    assert gang[0]["scheduledAt"] is not None
    claims = report["nodeClaims"]
    assert {c["nodePool"] for c in claims} == {"gpu"}
    assert len({c["zone"] for c in claims}) == 1  # a gang comes from one zone
    assert all(p["completedAt"] == p["scheduledAt"] + 30 * 60 for p in gang)


def test_a_kai_gang_of_8_gpu_pods_that_cannot_fit_gets_none() -> None:
    scenario = bundled_variant("kai-gang-8-gpus", ('nvidia.com/gpu: "16"', 'nvidia.com/gpu: "4"'))
    report, _ = run(shortened(scenario, 10 * 60))
    gang = [p for p in report["pods"] if p["podGroup"] == "research/pg-llm-train"]
    assert len(gang) == 8
    assert all(p["scheduledAt"] is None for p in gang)
    assert report["nodeClaims"] == []  # not half a gang: no capacity at all
    assert report["ec2Instances"] == []


def test_an_over_quota_kai_pod_group_gets_no_capacity() -> None:
    report, _ = run(bundled("kai-over-quota"))
    serving = pods_of(report, "team-b/")
    assert len(serving) == 2
    assert all(p["scheduledAt"] is None for p in serving)
    nominated = {e["object"] for e in events(report, "Nominated")}
    assert nominated == {"Pod/team-a/notebook"}  # capacity is bought for team-a only
    (notebook,) = pods_of(report, "team-a/")
    assert notebook["scheduledAt"] is not None
    assert notebook["node"] in {c["node"] for c in report["nodeClaims"]}


def test_a_spot_outage_falls_back_to_on_demand() -> None:
    scenario = bundled("spot-outage")
    outage = next(s for s in scenario.steps if s.kind == "capacityOutage")
    report, _ = run(shortened(scenario, 40 * 60))
    end = outage.at + outage.action.duration  # type: ignore[union-attr]
    launched = [c for c in report["nodeClaims"] if c["launchedAt"] is not None]
    during = [c for c in launched if outage.at <= c["launchedAt"] < end]
    after = [c for c in launched if c["launchedAt"] >= end]
    assert during
    assert {c["capacityType"] for c in during} == {"on-demand"}
    assert after
    assert {c["capacityType"] for c in after} == {"spot"}
    assert report["summary"]["launchFailures"] >= 1
    assert report["summary"]["podsScheduled"] == report["summary"]["podsTotal"]
    waits = [p["scheduledAt"] - p["createdAt"] for p in report["pods"]]
    assert max(waits) <= BATCH_MAX + scenario.node_startup  # the fallback costs no extra round
    assert_one_instance_per_claim_and_no_orphan(report)


def test_a_controller_restart_in_the_middle_of_launches_leaves_no_duplicate_and_no_orphan() -> None:
    report, simulation = run(bundled("controller-restart"))
    assert simulation.world.restarts == 2
    in_flight = [c for c in report["nodeClaims"] if c["launchedAt"] < 80 < c["initializedAt"]]
    assert in_flight  # the first restart came after launch, before registration
    assert report["summary"]["podsScheduled"] == report["summary"]["podsTotal"] == 70
    assert_one_instance_per_claim_and_no_orphan(report)


def test_a_crash_between_create_fleet_and_the_status_write_launches_nothing_twice() -> None:
    launches: list[str] = []

    def crash_on_second_launch(launch: Launch) -> None:
        launches.append(launch.instance_id)
        if len(launches) == 2:
            message = f"crashed after launching {launch.instance_id}"
            raise ControllerCrash(message)

    scenario = shortened(bundled("controller-restart"), 4 * 60)
    report, simulation = run(
        type(scenario)(  # the scenario without its restart steps: the crash is the restart
            name=scenario.name,
            region=scenario.region,
            cluster_name=scenario.cluster_name,
            duration=scenario.duration,
            catalog=scenario.catalog,
            node_startup=scenario.node_startup,
            steps=tuple(s for s in scenario.steps if s.kind != "restartController"),
        ),
        on_launch=crash_on_second_launch,
    )
    assert simulation.world.restarts == 1
    (crash,) = events(report, "ControllerRestarted")
    assert "crashed after launching" in crash["message"]
    assert report["summary"]["podsScheduled"] == report["summary"]["podsTotal"] == 30
    assert_one_instance_per_claim_and_no_orphan(report)
    assert len(report["ec2Instances"]) == len(set(launches))


def test_a_malformed_nodepool_gets_a_condition_and_an_event_while_others_keep_working() -> None:
    report, simulation = run(bundled("malformed-nodepool"))
    broken = simulation.world.kube.get(NODE_POOLS, "broken")
    conditions = {c["type"]: c for c in broken["status"]["conditions"]}
    assert conditions["ValidationSucceeded"]["status"] == "False"
    assert "spec.weight" in conditions["ValidationSucceeded"]["message"]
    assert conditions["Ready"]["status"] == "False"
    (event,) = [
        e for e in report["events"] if e["object"] == "NodePool/broken" and e["type"] == "Warning"
    ]
    assert "spec.template.spec.requirements[0].values" in event["message"]
    web = pods_of(report, "default/web-")
    assert len(web) == 30
    assert all(p["scheduledAt"] is not None for p in web)
    assert {c["nodePool"] for c in report["nodeClaims"]} == {"general"}
    batch = pods_of(report, "default/report-")
    assert len(batch) == 2
    assert all(p["scheduledAt"] is None for p in batch)


@pytest.mark.parametrize("policy", ["jointer", "greedy"])
def test_the_same_seed_gives_the_same_report(policy: str) -> None:
    scenario = shortened(bundled("spot-outage"), 10 * 60)
    first, _ = run(scenario, policy=policy, seed=5)
    second, _ = run(scenario, policy=policy, seed=5)
    assert first == second


def test_a_spot_interruption_is_handled_before_ec2_reclaims_the_instance() -> None:
    scenario = shortened(bundled("spot-outage"), 60 * 60)
    scenario = dataclasses.replace(
        scenario,
        steps=tuple(s for s in scenario.steps if s.kind != "capacityOutage"),
    )
    registries: list[CollectorRegistry] = []

    def recording(ports: Ports) -> ControllerSet:
        registries.append(ports.registry)
        return manager_factory(ports)

    report, _ = run(scenario, factory=recording)
    (warning,) = events(report, "SpotInterruptionWarning")
    instance_id = warning["message"].split()[1]
    (instance,) = [i for i in report["ec2Instances"] if i["id"] == instance_id]
    (claim,) = [c for c in report["nodeClaims"] if c["name"] == instance["nodeClaim"]]
    assert claim["deletionReason"] == "SpotInterrupted"
    assert warning["at"] < claim["deletedAt"] < warning["at"] + 120
    assert instance["terminatedAt"] < warning["at"] + 120  # drained and gone before EC2 took it
    replacements = [c for c in report["nodeClaims"] if c["launchedAt"] == warning["at"]]
    assert replacements  # the replacement was launched at once
    seen = ((e["object"], e["type"], e["reason"], e["message"]) for e in report["events"])
    found = interruption_events(
        seen, claim=claim["name"], node=claim["node"], replacement=replacements[0]["name"]
    )
    assert found == INTERRUPTION_EVENTS  # as `jointer run` emits them (tests/kube)
    (registry,) = registries  # no restart: one controller set counted everything
    assert (
        registry.get_sample_value(
            "karpenter_interruption_received_messages_total", {"message_type": SPOT}
        )
        == 1
    )
    assert registry.get_sample_value("karpenter_interruption_deleted_messages_total") == 1
    disrupted = {
        "reason": SPOT,
        "nodepool": claim["nodePool"],
        "capacity_type": "spot",
        "consolidation_policy": "",
        "termination_mode": "forceful",
    }
    assert registry.get_sample_value("karpenter_nodeclaims_disrupted_total", disrupted) == 1
    evicted = [e for e in report["evictions"] if e["node"] == claim["node"]]
    assert evicted  # drained by the controllers (Karpenter's "Evicted pod: <reason>" wording)
    assert all(warning["at"] <= e["at"] < warning["at"] + 120 for e in evicted)
    assert report["summary"]["disruptions"]["SpotInterrupted"] == 1
    assert report["summary"]["podsScheduled"] == report["summary"]["podsTotal"]
    assert_one_instance_per_claim_and_no_orphan(report)


RAISE_QUOTA = """
  - at: 10m
    apply: |
      apiVersion: scheduling.run.ai/v2
      kind: Queue
      metadata:
        name: team-b
      spec:
        resources:
          gpu: {quota: 4, limit: -1, overQuotaWeight: 1}
"""


def test_a_kai_queue_quota_raised_later_gets_its_pods_capacity_within_one_batch_window() -> None:
    """No pod changes when the quota grows: the Queue's change alone opens the batch."""
    text = (SCENARIOS / "kai-over-quota.yaml").read_text() + RAISE_QUOTA
    scenario = parse_scenario(yaml.safe_load(text), source="raise-quota", base=SCENARIOS)
    raised = 600.0
    report, _ = run(shortened(scenario, 20 * 60))
    serving = pods_of(report, "team-b/")
    assert len(serving) == 2
    nominated = [e for e in events(report, "Nominated") if e["object"].startswith("Pod/team-b/")]
    assert nominated
    assert all(raised <= e["at"] <= raised + BATCH_MAX for e in nominated), nominated
    assert all(p["scheduledAt"] is not None for p in serving)
    assert all(p["scheduledAt"] <= raised + BATCH_MAX + scenario.node_startup for p in serving)


def test_spread_pods_fall_through_a_weighted_pool_whose_limit_cannot_keep_the_spread() -> None:
    """Bug: once `reserved-od` had room for one node only, the zonally spread pods of a later
    batch were planned nowhere, batch after batch, instead of in the lighter `general` pool."""
    report, _ = run(shortened(bundled("weighted-pools"), 12 * 60))
    assert report["summary"]["podsScheduled"] == report["summary"]["podsTotal"]


def test_llmaz_pods_take_their_first_flavor_and_fall_back_only_during_its_outage() -> None:
    """Issue 19: t4g (g5g) first; a g5g spot outage puts new pods on t4 (g4dn) in the retry
    after the failed launch; after the outage new pods are on g5g again."""
    scenario = bundled("llmaz-flavors")
    outage = next(s for s in scenario.steps if s.kind == "capacityOutage")
    end = outage.at + outage.action.duration  # type: ignore[union-attr]
    report, _ = run(scenario)
    node_type = {c["node"]: c["instanceType"] for c in report["nodeClaims"] if c["node"]}
    pods = pods_of(report, "serving/llama-3-8b-")
    assert len(pods) == 6
    assert all(p["scheduledAt"] is not None for p in pods)
    family = {p["name"]: node_type[p["node"]].split(".")[0] for p in pods}
    before = [p["name"] for p in pods if p["createdAt"] < outage.at]
    during = [p["name"] for p in pods if outage.at <= p["createdAt"] < end]
    after = [p["name"] for p in pods if p["createdAt"] >= end]
    assert len(before) == len(during) == len(after) == 2
    assert {family[p] for p in before} == {"g5g"}
    assert {family[p] for p in during} == {"g4dn"}
    assert {family[p] for p in after} == {"g5g"}
    assert report["summary"]["launchFailures"] >= 1  # g5g was tried, then t4 in the retry
    waits = [p["scheduledAt"] - p["createdAt"] for p in pods]
    assert max(waits) <= BATCH_MAX + scenario.node_startup  # the fallback costs no extra round
    launched = [c for c in report["nodeClaims"] if c["launchedAt"] is not None]
    assert {c["capacityType"] for c in launched} == {"spot"}
    assert_one_instance_per_claim_and_no_orphan(report)


# -- ProvisioningRequest (issue 19 item 2) -----------------------------------------------------

PROVREQ = "ProvisioningRequest/research/"


@pytest.fixture(scope="module")
def provreq_report(test_catalog: Any) -> dict[str, Any]:
    """The kueue-provisioning-request scenario, run once for its three phases."""
    del test_catalog
    report, _ = run(bundled("kueue-provisioning-request"))
    return report


def _request_events(report: dict[str, Any], name: str) -> list[tuple[float, str]]:
    return [(e["at"], e["reason"]) for e in report["events"] if e["object"] == PROVREQ + name]


def _claims_between(report: dict[str, Any], start: float, end: float) -> list[dict[str, Any]]:
    return [c for c in report["nodeClaims"] if c["launchedAt"] and start <= c["launchedAt"] < end]


def test_a_kueue_request_for_8_gpu_pods_is_provisioned_with_8_ready_nodes_and_consumed(
    provreq_report: dict[str, Any],
) -> None:
    report = provreq_report
    reasons = _request_events(report, "train-a-prov-1")
    assert [r for _, r in reasons] == ["Accepted", "CapacityIsProvisioned"]
    provisioned_at = reasons[1][0]
    claims = _claims_between(report, 0, provisioned_at)
    assert len(claims) == 8
    assert all(
        c["initializedAt"] is not None and c["initializedAt"] <= provisioned_at for c in claims
    )
    assert len({c["zone"] for c in claims}) == 1  # one gang, one zone
    workers = pods_of(report, "research/train-a-")
    assert len(workers) == 8
    # the consumers bind to the booked nodes at once: no extra launch
    assert all(p["scheduledAt"] == p["createdAt"] for p in workers)
    assert {p["node"] for p in workers} == {c["node"] for c in claims}
    assert len(_claims_between(report, provisioned_at, 19 * 60)) == 0


def test_a_request_during_an_outage_of_its_only_type_fails_with_nothing_left_running(
    provreq_report: dict[str, Any],
) -> None:
    report = provreq_report
    reasons = _request_events(report, "train-b-prov-1")
    assert [r for _, r in reasons] == ["Accepted", "Expired"]
    accepted, failed = (at for at, _ in reasons)
    assert failed == accepted + 300  # ValidUntilSeconds
    assert report["summary"]["launchFailures"] > 0  # it kept trying, all or nothing
    attempts = [
        c
        for c in report["nodeClaims"]
        if c["launchedAt"] is None and accepted <= (c["deletedAt"] or -1) <= failed + 60
    ]
    assert len(attempts) % 8 == 0  # whole gangs of 8 NodeClaims, each rolled back
    assert attempts
    assert _claims_between(report, accepted, failed + 60) == []  # none of them ever ran
    launched = [i for i in report["ec2Instances"] if accepted <= i["launchedAt"] <= failed + 60]
    assert launched == []
    running = [
        i
        for i in report["ec2Instances"]
        if i["launchedAt"] < failed and (i["terminatedAt"] or 1e9) > failed
    ]
    assert running == []  # zero instances running when it failed
    assert_one_instance_per_claim_and_no_orphan(report)


def test_an_unconsumed_request_gets_booking_expired_and_its_nodes_go(
    provreq_report: dict[str, Any],
) -> None:
    report = provreq_report
    reasons = _request_events(report, "train-c-prov-1")
    assert [r for _, r in reasons] == [
        "Accepted",
        "CapacityIsProvisioned",
        "CapacityReservationTimeExpired",
    ]
    provisioned, expired = reasons[1][0], reasons[2][0]
    assert expired == provisioned + 600
    claims = _claims_between(report, 32 * 60, provisioned)
    assert len(claims) == 8
    # booked: not consolidated while the booking holds, consolidated after it
    assert all(c["deletedAt"] is not None and c["deletedAt"] > expired for c in claims)
    assert {c["deletionReason"] for c in claims} == {"Empty"}


def test_an_orphan_instance_is_garbage_collected_once_past_its_minimum_age() -> None:
    # an instance of this cluster whose NodeClaim is gone (a launch whose claim was deleted
    # before its status was written): Karpenter's garbage collection terminates it once it is
    # 30 s old, on one of its 2-minute passes. Its age is its LaunchTime against the
    # controllers' clock, so the simulated EC2 must stamp launches in virtual time.
    orphan: list[str] = []
    at = 300.0

    def launch_orphan(simulation: Simulation) -> None:
        cluster = simulation.scenario.cluster_name
        tags = {
            TAG_EKS_CLUSTER_NAME: cluster,
            cluster_tag(cluster): "owned",
            TAG_NODEPOOL: "general",
            TAG_NODECLASS: "default",
            TAG_NODECLAIM: "general-gone1",
        }
        launched = fleet(simulation.world.account, "on-demand", "m5.large", tags=tags)
        orphan.extend(launched["Instances"][0]["InstanceIds"])

    def on_start(simulation: Simulation) -> None:
        simulation.world.timeline.schedule(at, lambda: launch_orphan(simulation))

    _, simulation = run(shortened(bundled("deployment-0-to-200"), at + 600), on_start=on_start)

    (instance,) = orphan
    launch = simulation.world.account.launches[instance]
    assert launch.at == at
    assert launch.terminated_at is not None
    assert at + 30 <= launch.terminated_at <= at + 30 + 120 + 1
