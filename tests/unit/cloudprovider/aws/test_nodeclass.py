"""EC2NodeClass: Karpenter's examples parse, CEL rules reject bad input naming the field, and
what Jointer serialises validates against the CRD schema."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from cloudprovider.aws.nodeclass import AMIFamily, EC2NodeClass, parse_nodeclass
from provisioner.apis.base import to_wire
from provisioner.apis.errors import ApiValidationError


def example_nodeclasses(shared: Path) -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    for path in sorted((shared / "karpenter" / "examples").glob("*.yaml")):
        text = path.read_text().replace("${CLUSTER_NAME}", "demo-cluster")
        docs = yaml.safe_load_all(text)
        found.extend((path.name, d) for d in docs if d and d.get("kind") == "EC2NodeClass")
    return found


@pytest.fixture(scope="module")
def crd_schema(shared: Path) -> dict[str, Any]:
    crd = yaml.safe_load(
        (shared / "karpenter/crds/karpenter.k8s.aws_ec2nodeclasses.yaml").read_text()
    )
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def test_every_example_nodeclass_parses_and_validates_against_the_crd(shared, crd_schema):
    examples = example_nodeclasses(shared)
    assert len(examples) >= 20
    for name, doc in examples:
        nodeclass = parse_nodeclass(doc)
        assert nodeclass.name, name
        jsonschema.validate(to_wire(nodeclass), crd_schema)
        assert parse_nodeclass(to_wire(nodeclass)) == nodeclass


BASE: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default"},
    "spec": {
        "role": "KarpenterNodeRole-demo",
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
    },
}


def with_spec(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    for key, value in changes.items():
        if value is None:
            doc["spec"].pop(key, None)
        else:
            doc["spec"][key] = value
    return doc


def test_defaults_are_karpenters():
    nodeclass = parse_nodeclass(BASE)
    options = nodeclass.spec.metadata_options
    assert (options.http_endpoint, options.http_protocol_ipv6) == ("enabled", "disabled")
    assert (options.http_put_response_hop_limit, options.http_tokens) == (1, "required")
    assert nodeclass.ami_family() is AMIFamily.AL2023
    assert to_wire(nodeclass)["spec"]["metadataOptions"]["httpProtocolIPv6"] == "disabled"


def test_full_spec_and_status_round_trip_and_validate(crd_schema):
    doc = with_spec(
        kubelet={
            "maxPods": 20,
            "podsPerCore": 2,
            "clusterDNS": ["10.0.0.10"],
            "systemReserved": {"cpu": "100m", "memory": "100Mi"},
            "kubeReserved": {"cpu": "200m"},
            "evictionHard": {"memory.available": "5%"},
            "evictionSoft": {"memory.available": "10%"},
            "evictionSoftGracePeriod": {"memory.available": "1m"},
            "imageGCHighThresholdPercent": 85,
            "imageGCLowThresholdPercent": 80,
            "cpuCFSQuota": True,
            "containerLogMaxSize": "10Mi",
        },
        blockDeviceMappings=[
            {
                "deviceName": "/dev/xvda",
                "rootVolume": True,
                "ebs": {
                    "volumeSize": "100Gi",
                    "volumeType": "gp3",
                    "kmsKeyID": "k",
                    "encrypted": True,
                },
            },
            {
                "deviceName": "/dev/xvdb",
                "ebs": {"snapshotID": "snap-1", "volumeInitializationRate": 200},
            },
        ],
        instanceStorePolicy="RAID0",
        networkInterfaces=[
            {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
            {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"},
        ],
        capacityReservationSelectorTerms=[{"ownerID": "123456789012", "tags": {"a": "b"}}],
        placementGroupSelector={"name": "pg"},
        connectionTracking={"udpTimeout": 30},
        cpuOptions={"nestedVirtualization": "enabled"},
        associatePublicIPAddress=False,
        detailedMonitoring=True,
        ipPrefixCount=1,
        tags={"team": "ml"},
    )
    doc["status"] = {
        "subnets": [{"id": "subnet-1", "zone": "us-east-1a", "zoneID": "use1-az1"}],
        "securityGroups": [{"id": "sg-1"}],
        "amis": [
            {
                "id": "ami-1",
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
                ],
            }
        ],
        "capacityReservations": [
            {
                "availabilityZone": "us-east-1a",
                "id": "cr-1",
                "instanceMatchCriteria": "open",
                "instanceType": "p5.48xlarge",
                "ownerID": "123456789012",
            }
        ],
        "instanceProfile": "profile",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Ready",
                "message": "",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
            }
        ],
    }
    nodeclass = parse_nodeclass(doc)
    assert nodeclass.spec.kubelet is not None
    assert nodeclass.spec.kubelet.max_pods == 20
    wire = to_wire(nodeclass)
    assert wire["spec"]["kubelet"]["containerLogMaxSize"] == "10Mi"
    assert wire["spec"]["kubelet"]["clusterDNS"] == ["10.0.0.10"]
    jsonschema.validate(wire, crd_schema)
    assert parse_nodeclass(wire) == nodeclass


MALFORMED = [
    pytest.param(
        with_spec(instanceProfile="p"),
        "spec: must specify exactly one of ['role', 'instanceProfile']",
        id="role-and-profile",
    ),
    pytest.param(
        with_spec(role=None),
        "spec: must specify exactly one of ['role', 'instanceProfile']",
        id="neither",
    ),
    pytest.param(with_spec(role=""), "spec.role: role cannot be empty", id="empty-role"),
    pytest.param(
        with_spec(amiSelectorTerms=[{"alias": "al2023@latest", "tags": {"a": "b"}}]),
        "spec.amiSelectorTerms: 'alias' is mutually exclusive",
        id="alias-with-tags",
    ),
    pytest.param(
        with_spec(amiSelectorTerms=[{"alias": "al2023@latest"}, {"id": "ami-1"}]),
        "combination of other amiSelectorTerms",
        id="alias-not-alone",
    ),
    pytest.param(
        with_spec(amiSelectorTerms=[{"alias": "ubuntu@latest"}]),
        "spec.amiSelectorTerms[0].alias: family is not supported",
        id="alias-family",
    ),
    pytest.param(
        with_spec(amiSelectorTerms=[{"alias": "windows2022@v1"}]),
        "windows families may only specify version 'latest'",
        id="windows-pin",
    ),
    pytest.param(
        with_spec(amiSelectorTerms=[{"alias": "al2023"}]), "improperly formatted", id="alias-format"
    ),
    pytest.param(with_spec(amiSelectorTerms=[]), "spec.amiSelectorTerms:", id="no-ami-terms"),
    pytest.param(
        with_spec(amiSelectorTerms=[{"owner": "self"}]),
        "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
        id="owner-only",
    ),
    pytest.param(
        with_spec(amiSelectorTerms=[{"tags": {"a": "b"}}]),
        "spec: must specify amiFamily",
        id="no-family",
    ),
    pytest.param(
        with_spec(amiFamily="Bottlerocket"),
        "spec: if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias",
        id="family-mismatch",
    ),
    pytest.param(with_spec(amiFamily="Ubuntu"), "spec.amiFamily:", id="family-enum"),
    pytest.param(
        with_spec(tags={"kubernetes.io/cluster/demo": "owned"}),
        "spec.tags: tag contains a restricted tag matching kubernetes.io/cluster/",
        id="restricted-tag",
    ),
    pytest.param(
        with_spec(tags={"karpenter.sh/nodepool": "x"}),
        "restricted tag matching karpenter.sh/nodepool",
        id="restricted-nodepool",
    ),
    pytest.param(
        with_spec(subnetSelectorTerms=[]),
        "spec.subnetSelectorTerms: subnetSelectorTerms cannot be empty",
        id="no-subnets",
    ),
    pytest.param(
        with_spec(subnetSelectorTerms=[{"id": "subnet-1", "tags": {"a": "b"}}]),
        "spec.subnetSelectorTerms: 'id' is mutually exclusive",
        id="subnet-id-tags",
    ),
    pytest.param(
        with_spec(subnetSelectorTerms=[{"id": "vpc-1"}]),
        "spec.subnetSelectorTerms[0].id:",
        id="subnet-id-pattern",
    ),
    pytest.param(
        with_spec(subnetSelectorTerms=[{"tags": {"a": ""}}]),
        "spec.subnetSelectorTerms[0].tags: empty tag keys or values",
        id="empty-tag",
    ),
    pytest.param(
        with_spec(securityGroupSelectorTerms=[{"name": "n", "id": "sg-1"}]),
        "spec.securityGroupSelectorTerms: 'id' is mutually exclusive",
        id="sg-name-id",
    ),
    pytest.param(
        with_spec(securityGroupSelectorTerms=[{}]),
        "expected at least one, got none, ['tags', 'id', 'name']",
        id="sg-empty-term",
    ),
    pytest.param(
        with_spec(
            blockDeviceMappings=[
                {"rootVolume": True, "ebs": {"volumeSize": "1Gi"}},
                {"rootVolume": True, "ebs": {"volumeSize": "1Gi"}},
            ]
        ),
        "spec.blockDeviceMappings: must have only one blockDeviceMappings with rootVolume",
        id="two-roots",
    ),
    pytest.param(
        with_spec(blockDeviceMappings=[{"ebs": {"volumeType": "gp3"}}]),
        "spec.blockDeviceMappings[0].ebs: snapshotID or volumeSize must be defined",
        id="no-size",
    ),
    pytest.param(
        with_spec(blockDeviceMappings=[{"ebs": {"volumeSize": "20GB"}}]),
        "spec.blockDeviceMappings[0].ebs.volumeSize:",
        id="bad-size",
    ),
    pytest.param(
        with_spec(
            blockDeviceMappings=[{"ebs": {"volumeSize": "20Gi", "volumeInitializationRate": 200}}]
        ),
        "snapshotID must be set when volumeInitializationRate is set",
        id="init-rate",
    ),
    pytest.param(
        with_spec(metadataOptions={"httpPutResponseHopLimit": 65}),
        "spec.metadataOptions.httpPutResponseHopLimit:",
        id="hop-limit",
    ),
    pytest.param(
        with_spec(metadataOptions={"httpTokens": "maybe"}),
        "spec.metadataOptions.httpTokens:",
        id="http-tokens",
    ),
    pytest.param(with_spec(instanceStorePolicy="RAID1"), "spec.instanceStorePolicy:", id="raid1"),
    pytest.param(with_spec(kubelet={"maxPods": -1}), "spec.kubelet.maxPods:", id="max-pods"),
    pytest.param(
        with_spec(kubelet={"maxPods": "many"}), "spec.kubelet.maxPods:", id="max-pods-type"
    ),
    pytest.param(
        with_spec(kubelet={"systemReserved": {"gpu": "1"}}),
        "spec.kubelet.systemReserved: gpu: valid keys are",
        id="system-reserved-key",
    ),
    pytest.param(
        with_spec(kubelet={"kubeReserved": {"memory": "lots"}}),
        "spec.kubelet.kubeReserved: memory:",
        id="kube-reserved-value",
    ),
    pytest.param(
        with_spec(kubelet={"evictionHard": {"memory.free": "1Gi"}}),
        "spec.kubelet.evictionHard: memory.free: valid keys are",
        id="eviction-key",
    ),
    pytest.param(
        with_spec(kubelet={"evictionHard": {"memory.available": "150%"}}),
        "spec.kubelet.evictionHard: memory.available: percentage",
        id="eviction-pct",
    ),
    pytest.param(
        with_spec(kubelet={"evictionSoft": {"memory.available": "1Gi"}}),
        "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",
        id="soft-grace",
    ),
    pytest.param(
        with_spec(kubelet={"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60}),
        "imageGCHighThresholdPercent must be greater",
        id="image-gc",
    ),
    pytest.param(
        with_spec(
            networkInterfaces=[
                {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"}
            ]
        ),
        "must include a primary interface",
        id="nic-primary",
    ),
    pytest.param(
        with_spec(connectionTracking={}), "spec.connectionTracking: at least one of", id="conntrack"
    ),
    pytest.param(
        with_spec(placementGroupSelector={"name": "a", "id": "pg-1"}),
        "'name' and 'id' are mutually exclusive",
        id="pg",
    ),
    pytest.param(
        with_spec(capacityReservationSelectorTerms=[{"ownerID": "12"}]),
        "spec.capacityReservationSelectorTerms[0].ownerID:",
        id="owner-id",
    ),
    pytest.param(
        with_spec(subnetSelector={"a": "b"}),
        "spec.subnetSelector: unknown field",
        id="unknown-field",
    ),
]


@pytest.mark.parametrize(("doc", "message"), MALFORMED)
def test_malformed_nodeclass_names_kind_object_and_field(doc, message):
    with pytest.raises(ApiValidationError) as caught:
        parse_nodeclass(doc)
    assert str(caught.value).startswith("EC2NodeClass default: ")
    assert message in str(caught.value)


def test_subnet_id_exclusivity_follows_the_crd_rule_exactly():
    # The CRD's rule is `!self.all(...)`: one clean term makes the list acceptable.
    terms = [{"id": "subnet-1", "tags": {"a": "b"}}, {"tags": {"a": "b"}}]
    assert parse_nodeclass(with_spec(subnetSelectorTerms=terms)).name == "default"


def test_custom_family_with_alias_is_custom():
    nodeclass = parse_nodeclass(with_spec(amiFamily="Custom"))
    assert nodeclass.ami_family() is AMIFamily.CUSTOM
    assert nodeclass.alias() == "al2023@latest"


def test_model_is_frozen():
    nodeclass = parse_nodeclass(BASE)
    with pytest.raises(Exception):  # noqa: B017
        nodeclass.spec = nodeclass.spec  # type: ignore[misc]
    assert isinstance(nodeclass, EC2NodeClass)
