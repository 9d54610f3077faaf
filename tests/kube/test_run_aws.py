"""`jointer run`'s AWS wiring on moto (in process, `mock_aws`): clients, cluster, interruptions.

The Kubernetes side is the in-memory API and the clock is fake; nothing is served or run in
threads. Covered: the provider is built from `eks:DescribeCluster` (endpoint, CA, service CIDR,
kube-dns address, version), botocore's own retries are off, the interruption queue is polled by
the one replacement-first `interruption` reconciler (a spot interruption found through the
cache's instance index taints the node; with nothing to replace its NodeClaim goes at once),
Karpenter's queue metrics count the message, and unusable AWS settings fail with the variable
named.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from cloudprovider.aws.cloudprovider import AwsCloudProvider
from provisioner.app.cli import build_parser
from provisioner.app.cmd_run import execute
from provisioner.app.settings import Settings, SettingsError
from provisioner.app.wiring import ControllerProcess, Seams, WiringError, build_controller
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.protocol import WatchEvent, WatchEventType, get_or_none
from provisioner.kube.resource import EC2_NODE_CLASSES, EVENTS, NODE_CLAIMS, NODES
from provisioner.runtime.clock import FakeClock
from provisioner.runtime.reconciler import Request
from tests.aws.harness import nodeclass_body

REGION = "us-east-1"
CLUSTER = "test-cluster"
QUEUE = "test-cluster"
INSTANCE = "i-0123456789abcdef0"
NODE = "ip-10-0-0-1.ec2.internal"
RECEIVED = "karpenter_interruption_received_messages_total"
QUEUED = "karpenter_interruption_message_queue_duration_seconds"
_client: Any = boto3.client  # the stubs overload on literal service names


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[None]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    for name in ("AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with mock_aws():
        yield


def eks_cluster() -> None:
    _client("eks", region_name=REGION).create_cluster(
        name=CLUSTER,
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": []},
        kubernetesNetworkConfig={"serviceIpv4Cidr": "172.20.0.0/16"},
        version="1.32",
    )


def build(**settings: str) -> tuple[ControllerProcess, InMemoryKube]:
    clock = FakeClock()
    kube = InMemoryKube(clock=clock.now)
    values = {
        "cluster_name": CLUSTER,
        "aws_region": REGION,
        "leader_elect": "false",
        "metrics_port": "0",
        "health_probe_port": "0",
        **settings,
    }
    process = build_controller(
        Settings(**values),
        seams=Seams(kube=kube, clock=clock, host="127.0.0.1", watch_timeout=None),
    )
    return process, kube


def close(process: ControllerProcess) -> None:
    process.endpoints.stop()


def test_the_aws_provider_is_built_from_the_eks_cluster(aws):
    eks_cluster()
    process, _ = build()
    try:
        cloud = process.cloud
        assert isinstance(cloud, AwsCloudProvider)
        assert cloud.region == REGION
        assert cloud.cluster.name == CLUSTER
        assert cloud.cluster.endpoint.startswith("https://")
        assert cloud.cluster.ca_bundle
        assert cloud.cluster.service_cidr == "172.20.0.0/16"
        assert cloud.cluster.cluster_dns == "172.20.0.10"
        retries = cloud.instances.ec2.meta.config.retries  # type: ignore[attr-defined]
        assert retries["total_max_attempts"] == 1
        names = [r.name for r in process.controllers.reconcilers]
        assert "providers.pricing" in names
        assert "interruption" not in names  # no INTERRUPTION_QUEUE
    finally:
        close(process)


def test_the_provider_reads_ec2nodeclasses_from_the_controllers_cache(aws):
    eks_cluster()
    process, kube = build()
    try:
        cloud = process.cloud
        assert isinstance(cloud, AwsCloudProvider)
        body = nodeclass_body("cached", role="NodeRole")
        # delivered by the informer into the manager's cache; the API itself has none
        process.controllers.manager.handle(EC2_NODE_CLASSES, WatchEvent(WatchEventType.ADDED, body))
        found = cloud.nodeclasses.get_nodeclass("cached")
        assert found is not None
        assert found.spec.role == "NodeRole"
        assert get_or_none(kube, EC2_NODE_CLASSES, "cached") is None
        # one the cache has not seen is asked of the API
        kube.create(EC2_NODE_CLASSES, nodeclass_body("fresh"))
        assert cloud.nodeclasses.get_nodeclass("fresh") is not None
    finally:
        close(process)


def test_a_cluster_endpoint_setting_wins_over_the_eks_answer(aws):
    eks_cluster()
    process, _ = build(cluster_endpoint="https://api.example.com")
    try:
        assert isinstance(process.cloud, AwsCloudProvider)
        assert process.cloud.cluster.endpoint == "https://api.example.com"
    finally:
        close(process)


def spot_interruption(instance_id: str, at: datetime) -> str:
    return json.dumps(
        {
            "version": "0",
            "id": "1e5527d7-bb36-4607-3370-4164db56a40e",
            "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2",
            "account": "123456789012",
            "time": at.isoformat(),
            "region": REGION,
            "resources": [f"arn:aws:ec2:{REGION}b:instance/{instance_id}"],
            "detail": {"instance-id": instance_id, "instance-action": "terminate"},
        }
    )


def test_a_spot_interruption_from_the_queue_taints_and_deletes_its_nodeclaim(aws):
    eks_cluster()
    sqs = _client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName=QUEUE)["QueueUrl"]
    process, kube = build(interruption_queue=QUEUE)
    try:
        created = kube.create(
            NODE_CLAIMS,
            {
                "metadata": {
                    "name": "default-abcde",
                    "labels": {
                        "karpenter.sh/nodepool": "default",
                        "karpenter.sh/capacity-type": "spot",
                        "node.kubernetes.io/instance-type": "m5.large",
                        "topology.kubernetes.io/zone": "us-east-1b",
                    },
                    "finalizers": ["karpenter.sh/termination"],
                },
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": "default",
                    },
                    "requirements": [],
                },
            },
        )
        provider_id = f"aws:///us-east-1b/{INSTANCE}"
        kube.patch_status(
            NODE_CLAIMS,
            "default-abcde",
            {"status": {"providerID": provider_id, "nodeName": NODE}},
        )
        kube.create(NODES, {"metadata": {"name": NODE}, "spec": {"providerID": provider_id}})
        process.manager.start()  # the cache, as the driver's start fills it
        clock = process.manager.clock
        sent = clock.now() - timedelta(seconds=30)
        sqs.send_message(QueueUrl=url, MessageBody=spot_interruption(INSTANCE, sent))
        interruption = next(r for r in process.controllers.reconcilers if r.name == "interruption")
        interruption.reconcile(Request())
        assert {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"} in (
            kube.get(NODES, NODE)["spec"]["taints"]
        )
        claim = kube.get(NODE_CLAIMS, "default-abcde")
        assert claim["metadata"]["deletionTimestamp"]
        assert claim["metadata"]["uid"] == created["metadata"]["uid"]
        (reason,) = [c for c in claim["status"]["conditions"] if c["type"] == "DisruptionReason"]
        assert reason["reason"] == "SpotInterrupted"
        assert (
            process.registry.get_sample_value(
                "karpenter_nodeclaims_disrupted_total",
                {
                    "reason": "spot_interrupted",
                    "nodepool": "default",
                    "capacity_type": "spot",
                    "consolidation_policy": "",
                    "termination_mode": "forceful",
                },
            )
            == 1
        )
        sample = process.registry.get_sample_value
        assert sample(RECEIVED, {"message_type": "spot_interrupted"}) == 1
        assert sample("karpenter_interruption_deleted_messages_total") == 1
        assert sample(f"{QUEUED}_count") == 1
        assert sample(f"{QUEUED}_sum") == 30
        warned = sorted((e["involvedObject"]["kind"], e["reason"]) for e in kube.list(EVENTS).items)
        assert warned == [("Node", "SpotInterrupted"), ("NodeClaim", "SpotInterrupted")]
        assert isinstance(process.cloud, AwsCloudProvider)
        assert process.cloud.unavailable.is_unavailable("spot", "m5.large", "us-east-1b")
        assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []
    finally:
        close(process)


def test_a_missing_eks_cluster_names_cluster_name(aws):
    with pytest.raises(WiringError, match="CLUSTER_NAME: cannot describe EKS cluster"):
        build()


def test_no_region_anywhere_names_aws_region(aws):
    with pytest.raises(SettingsError, match="AWS_REGION"):
        build(aws_region="")


def test_run_exits_1_with_one_line_when_the_cluster_cannot_be_described(aws, capsys):
    args = build_parser(["run"]).parse_args(["run", "--leader-elect", "false"])
    environ = {"CLUSTER_NAME": "absent", "AWS_REGION": REGION, "METRICS_PORT": "0"}
    kube = InMemoryKube(clock=FakeClock().now)
    assert execute(args, environ=environ, seams=Seams(kube=kube, host="127.0.0.1")) == 1
    err = capsys.readouterr().err
    assert err.startswith("jointer run: CLUSTER_NAME: cannot describe EKS cluster 'absent'")
    assert len(err.splitlines()) == 1
