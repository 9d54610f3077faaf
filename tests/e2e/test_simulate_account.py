"""The simulated AWS account (moto in process) and the simulated kubelet reading it."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from cloudprovider.aws.catalog import builtin_catalog
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.resource import NODES, PODS
from provisioner.simulation.cloud import Launch, MotoCloud, Outage
from provisioner.simulation.kubelet import Kubelet
from provisioner.simulation.objects import condition_true
from provisioner.simulation.timeline import Timeline
from tests.e2e.fleets import fleet

REGION = "us-east-1"
ZONES = ("us-east-1a", "us-east-1b")


@pytest.fixture
def account() -> Iterator[MotoCloud]:
    cloud = MotoCloud(timeline=Timeline(), region=REGION, cluster="demo", zones=ZONES, seed=7)
    cloud.start()
    try:
        yield cloud
    finally:
        cloud.stop()


def test_the_account_is_seeded_like_an_eks_cluster(account: MotoCloud) -> None:
    ec2 = account.client("ec2")
    subnets = ec2.describe_subnets(
        Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": ["demo"]}]
    )["Subnets"]
    assert sorted(s["AvailabilityZone"] for s in subnets) == list(ZONES)
    groups = ec2.describe_security_groups(
        Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": ["demo"]}]
    )
    assert len(groups["SecurityGroups"]) == 1
    ssm = account.client("ssm")
    arm = ssm.get_parameter(
        Name="/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/standard/recommended/image_id"
    )["Parameter"]["Value"]
    (image,) = ec2.describe_images(ImageIds=[arm])["Images"]
    assert image["Architecture"] == "arm64"
    assert account.queue_url.endswith("/demo")


def test_an_outage_fails_covered_offerings_with_insufficient_capacity(account: MotoCloud) -> None:
    account.outages.append(
        Outage(start=0, end=600, capacity_type="spot", instance_types=frozenset({"m5.large"}))
    )
    result = fleet(account, "spot", "m5.large")
    assert result["Instances"] == []
    assert {e["ErrorCode"] for e in result["Errors"]} == {"InsufficientInstanceCapacity"}
    assert len(result["Errors"]) == len(ZONES)
    partial = fleet(account, "spot", "m5.large", "c5.large")
    assert partial["Instances"][0]["InstanceType"] == "c5.large"
    assert len(partial["Errors"]) == len(ZONES)
    on_demand = fleet(account, "on-demand", "m5.large")
    assert on_demand["Instances"][0]["InstanceType"] == "m5.large"
    assert account.counters.failed_fleets == 1
    assert len(account.describe()) == 2  # nothing leaked from the failed pools


def test_an_outage_ends_in_virtual_time(account: MotoCloud) -> None:
    account.outages.append(Outage(start=0, end=600, zones=frozenset({"us-east-1a", "us-east-1b"})))
    assert fleet(account, "on-demand", "m5.large")["Instances"] == []
    account.timeline.run_until(600)
    assert fleet(account, "on-demand", "m5.large")["Instances"]


def test_launches_and_terminations_are_recorded_in_virtual_time(account: MotoCloud) -> None:
    account.timeline.run_until(30)
    instance_id = fleet(account, "spot", "m5.large")["Instances"][0]["InstanceIds"][0]
    launch = account.launches[instance_id]
    assert (launch.at, launch.instance_type, launch.capacity_type) == (30, "m5.large", "spot")
    account.timeline.run_until(90)
    account.client("ec2").terminate_instances(InstanceIds=[instance_id])
    assert account.launches[instance_id].terminated_at == 90
    assert account.nodeclaim_of(account.describe([instance_id])[0]) == "nc-1"


def test_instances_are_stamped_with_their_virtual_launch_time(account: MotoCloud) -> None:
    # garbage collection ages instances by LaunchTime against the controllers' clock: both must
    # be virtual time, or an orphan instance looks months old or not yet launched
    account.timeline.run_until(30)
    first = fleet(account, "spot", "m5.large")["Instances"][0]["InstanceIds"][0]
    account.timeline.run_until(3600)
    second = fleet(account, "on-demand", "m5.large", nodeclaim="nc-2")["Instances"][0][
        "InstanceIds"
    ][0]
    described = {i["InstanceId"]: i for i in account.describe([first, second])}
    assert described[first]["LaunchTime"] == account.timeline.at_seconds(30)
    assert described[second]["LaunchTime"] == account.timeline.at_seconds(3600)


def shown(account: MotoCloud) -> dict[str, str]:
    """What the controllers' DescribeInstances shows: instance id -> state."""
    reservations = account.client("ec2").describe_instances()["Reservations"]
    return {i["InstanceId"]: i["State"]["Name"] for r in reservations for i in r["Instances"]}


def test_terminated_instances_fade_from_describe_instances_after_an_hour(
    account: MotoCloud,
) -> None:
    ec2 = account.client("ec2")
    early = fleet(account, "on-demand", "m5.large")["Instances"][0]["InstanceIds"][0]
    late = fleet(account, "spot", "m5.large", nodeclaim="nc-2")["Instances"][0]["InstanceIds"][0]
    running = fleet(account, "on-demand", "c5.large", nodeclaim="nc-3")["Instances"][0][
        "InstanceIds"
    ][0]
    ec2.terminate_instances(InstanceIds=[early])
    account.timeline.run_until(1800)
    account.terminate(late)  # as EC2 reclaims a spot instance
    account.timeline.run_until(3599)
    assert shown(account) == {early: "terminated", late: "terminated", running: "running"}
    account.timeline.run_until(3600 + 1)
    assert shown(account) == {late: "terminated", running: "running"}  # early: an hour ago
    with pytest.raises(ClientError, match=r"InvalidInstanceID\.NotFound"):
        ec2.describe_instances(InstanceIds=[early])
    assert (
        ec2.describe_instances(Filters=[{"Name": "instance-id", "Values": [early]}])["Reservations"]
        == []
    )
    assert len(ec2.describe_instances(InstanceIds=[late])["Reservations"]) == 1
    account.timeline.run_until(5400 + 1)
    assert shown(account) == {running: "running"}
    account.timeline.run_until(48 * 3600)
    assert shown(account) == {running: "running"}  # a running instance never fades
    # The report still sees every instance the account ever had, as it was last shown.
    ever = {i["InstanceId"]: i for i in account.instances_ever()}
    assert sorted(ever) == sorted([early, late, running])
    assert ever[early]["State"]["Name"] == "terminated"
    assert account.nodeclaim_of(ever[late]) == "nc-2"
    assert account.launches[early].terminated_at == 0


def test_a_stopped_instance_does_not_fade(account: MotoCloud) -> None:
    instance_id = fleet(account, "on-demand", "m5.large")["Instances"][0]["InstanceIds"][0]
    account.stop_instance(instance_id)
    account.timeline.run_until(5 * 3600)
    assert shown(account) == {instance_id: "stopped"}


class Unreadable(dict[str, str]):
    """A tag table entry that fails when read (a lookup must not scan other resources)."""

    def items(self) -> Any:
        raise AssertionError("another resource's tags were scanned")


def test_one_resources_tags_are_looked_up_directly_with_moto_s_answer(
    account: MotoCloud,
) -> None:
    from moto.ec2.models import ec2_backends  # noqa: PLC0415 - the backend under test

    backend: Any = ec2_backends["123456789012"][REGION]
    result = fleet(account, "on-demand", "m5.large")
    instance_id = result["Instances"][0]["InstanceIds"][0]
    fleet_id = result["FleetId"]
    moto_scan = type(backend).describe_tags
    for resource in (instance_id, fleet_id, "i-0000000000000000f"):
        filters = {"resource-id": [resource]}
        assert backend.describe_tags(filters=filters) == moto_scan(backend, filters=filters)
    assert backend.describe_tags(filters={"resource-id": [instance_id]})
    wildcard = {"resource-id": ["i-*"], "key": ["karpenter.sh/nodeclaim"]}
    assert backend.describe_tags(filters=wildcard) == moto_scan(backend, filters=wildcard)
    tagged = account.client("ec2").describe_instances(
        Filters=[{"Name": "tag:karpenter.sh/nodeclaim", "Values": ["nc-1"]}]
    )["Reservations"]
    assert [i["InstanceId"] for r in tagged for i in r["Instances"]] == [instance_id]
    backend.tags["vol-0000000000000000f"] = Unreadable(Name="x")
    assert {t["key"] for t in backend.describe_tags(filters={"resource-id": [instance_id]})} == {
        "karpenter.sh/nodeclaim",
        "karpenter.sh/nodepool",
    }


def test_a_spot_interruption_reaches_the_queue_through_eventbridge(account: MotoCloud) -> None:
    account.send_spot_interruption("i-0123456789abcdef0")
    messages = account.client("sqs").receive_message(
        QueueUrl=account.queue_url, MaxNumberOfMessages=10
    )
    (message,) = messages["Messages"]
    body = json.loads(message["Body"])
    assert body["source"] == "aws.ec2"
    assert body["detail-type"] == "EC2 Spot Instance Interruption Warning"
    assert body["detail"]["instance-id"] == "i-0123456789abcdef0"


def kubelet_on(account: MotoCloud) -> tuple[InMemoryKube, Kubelet]:
    """An empty cluster and the simulated kubelet of ``account``'s instances (Ready at 40 s)."""
    kube = InMemoryKube(clock=account.timeline.clock.now)
    kubelet = Kubelet(
        timeline=account.timeline,
        kube=kube,
        cloud=account,
        catalog=builtin_catalog(REGION),
        node_startup=40,
        region=REGION,
    )
    return kube, kubelet


def test_the_kubelet_registers_then_readies_a_node(account: MotoCloud) -> None:
    timeline = account.timeline
    kube, kubelet = kubelet_on(account)
    launched: list[Launch] = []
    account.on_launch.append(launched.append)
    result = fleet(account, "on-demand", "g5.xlarge")
    (instance_id,) = result["Instances"][0]["InstanceIds"]
    assert [launch.instance_id for launch in launched] == [instance_id]
    timeline.run_until(30)
    (node,) = kube.list(NODES).items
    labels = node["metadata"]["labels"]
    assert (
        node["spec"]["providerID"]
        == f"aws:///{labels['topology.kubernetes.io/zone']}/{instance_id}"
    )
    assert labels["node.kubernetes.io/instance-type"] == "g5.xlarge"
    assert labels["karpenter.sh/capacity-type"] == "on-demand"
    assert labels["karpenter.sh/nodepool"] == "default"
    assert labels["kubernetes.io/hostname"] == node["metadata"]["name"]
    assert {t["key"] for t in node["spec"]["taints"]} == {
        "karpenter.sh/unregistered",
        "node.kubernetes.io/not-ready",
    }
    assert not condition_true(node, "Ready")
    assert "nvidia.com/gpu" not in node["status"]["allocatable"]
    timeline.run_until(40)
    node = kube.get(NODES, node["metadata"]["name"])
    assert condition_true(node, "Ready")
    assert {t["key"] for t in node["spec"]["taints"]} == {"karpenter.sh/unregistered"}
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1"
    account.client("ec2").terminate_instances(InstanceIds=[instance_id])
    kubelet.instance_gone(instance_id)
    assert kube.list(NODES).items == []


def bound_pod(name: str, node: str, tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c"}], "tolerations": tolerations},
    }


def test_a_stopped_instance_leaves_its_node_unreachable_and_its_pods_are_evicted(
    account: MotoCloud,
) -> None:
    timeline = account.timeline
    kube, kubelet = kubelet_on(account)
    kube.subscribe(kubelet.observe, frozen=True)
    (instance_id,) = fleet(account, "on-demand", "m5.large")["Instances"][0]["InstanceIds"]
    timeline.run_until(40)
    (node,) = kube.list(NODES).items
    name = node["metadata"]["name"]
    unreachable = {"key": "node.kubernetes.io/unreachable", "operator": "Exists"}
    kube.create(PODS, bound_pod("plain", name, []))
    kube.create(PODS, bound_pod("forever", name, [{**unreachable, "effect": "NoExecute"}]))
    kube.create(PODS, bound_pod("brief", name, [{**unreachable, "tolerationSeconds": 60}]))
    timeline.run_until(41)
    assert {p["status"]["phase"] for p in kube.list(PODS).items} == {"Running"}
    timeline.run_until(100)
    account.stop_instance(instance_id)
    timeline.run_until(139)
    assert condition_true(kube.get(NODES, name), "Ready")  # not noticed yet
    timeline.run_until(140)
    node = kube.get(NODES, name)
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusUnknown")
    assert {
        (t["key"], t["effect"]) for t in node["spec"]["taints"] if "unreachable" in t["key"]
    } == {("node.kubernetes.io/unreachable", e) for e in ("NoSchedule", "NoExecute")}
    pods = {p["metadata"]["name"]: p for p in kube.list(PODS).items}
    assert all(not condition_true(p, "Ready") for p in pods.values())
    timeline.run_until(199)
    assert sorted(p["metadata"]["name"] for p in kube.list(PODS).items) == [
        "brief",
        "forever",
        "plain",
    ]
    timeline.run_until(200)  # the 60 s toleration ran out
    assert sorted(p["metadata"]["name"] for p in kube.list(PODS).items) == ["forever", "plain"]
    timeline.run_until(440)  # the default 300 s toleration ran out
    assert [p["metadata"]["name"] for p in kube.list(PODS).items] == ["forever"]
    timeline.run_until(3600)
    assert [p["metadata"]["name"] for p in kube.list(PODS).items] == ["forever"]
    assert kube.list(NODES).items  # the Node stays until its instance is terminated


def test_calls_are_answered_in_process_and_never_leave_it(
    account: MotoCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_network(*_: object) -> None:
        raise AssertionError("a simulated AWS call opened a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    ec2 = account.client("ec2")
    assert ec2.meta.endpoint_url == f"https://ec2.{REGION}.amazonaws.com"  # as against AWS
    assert ec2.describe_subnets()["Subnets"]  # signed and serialised, answered by moto


def test_only_one_simulation_runs_at_a_time(account: MotoCloud) -> None:
    other = MotoCloud(timeline=Timeline(), region=REGION, cluster="x", zones=ZONES, seed=1)
    with pytest.raises(RuntimeError, match="another simulation"):
        other.start()
