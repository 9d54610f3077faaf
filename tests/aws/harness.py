"""The moto harness of the AWS provider tests: server, seeded account, fault injection.

One ThreadedMotoServer on 127.0.0.1 per session; each test resets it (``POST /moto-api/reset``),
then seeds a VPC with three tagged subnets (us-east-1a/b/c), a tagged security group, a node role
and the EKS AMI parameters (in moto's SSM backend, testing-tools §2). Instance types come from
the shipped catalog, filtered to a handful of types, built once per session. Faults are botocore
event hooks on the test's clients (testing-tools §3): ICE on chosen offerings and throttling
bursts. Retries never sleep.
"""

from __future__ import annotations

import copy
import logging
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError
from moto.server import ThreadedMotoServer
from moto.ssm.models import Parameter, ssm_backends

from cloudprovider.aws.catalog import Catalog, builtin_catalog
from cloudprovider.aws.cloudprovider import AwsCloudProvider, build_aws_cloud_provider
from cloudprovider.aws.launchtemplate import ClusterInfo
from cloudprovider.aws.nodeclass import EC2NodeClass, parse_nodeclass
from cloudprovider.aws.retry import Caller, RetryPolicy, no_sleep
from cloudprovider.protocol import LaunchRequest, NodeClassRef
from provisioner.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE
from provisioner.scheduling.requirements import Requirements

REGION = "us-east-1"
_boto3_client: Any = boto3.client  # the stubs overload on literal service names
ACCOUNT = "123456789012"
CLUSTER = "test-cluster"
K8S = "1.32"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
DISCOVERY = {"karpenter.sh/discovery": CLUSTER}
ROLE = "KarpenterNodeRole-test-cluster"
# moto's built-in images standing in for the EKS-optimised ones
AMI_X86 = "ami-1e749f67"
AMI_ARM = "ami-0ec9fb22458dddf3d"
AMI_NVIDIA = "ami-35e92e4c"
AMI_NEURON = "ami-03cf127a"
TEST_TYPES = (
    "c5.large",
    "c5.xlarge",
    "m5.large",
    "m5.xlarge",
    "r5.large",
    "t3.medium",
    "m6g.large",
    "g5.xlarge",
)
CLUSTER_INFO = ClusterInfo(
    name=CLUSTER,
    endpoint="https://test-cluster.gr7.us-east-1.eks.amazonaws.com",
    ca_bundle="Y2EtYnVuZGxl",
    service_cidr="172.20.0.0/16",
    cluster_dns="172.20.0.10",
)


def eks_parameters() -> dict[str, str]:
    """The SSM parameters `al2023`, `al2` and `bottlerocket` aliases read, for K8S."""
    base = f"/aws/service/eks/optimized-ami/{K8S}"
    al2023 = f"{base}/amazon-linux-2023"
    rocket = f"/aws/service/bottlerocket/aws-k8s-{K8S}"
    pinned = f"amazon-eks-node-al2023-x86_64-standard-{K8S}-v20240807"
    return {
        f"{al2023}/x86_64/standard/recommended/image_id": AMI_X86,
        f"{al2023}/x86_64/nvidia/recommended/image_id": AMI_NVIDIA,
        f"{al2023}/x86_64/neuron/recommended/image_id": AMI_NEURON,
        f"{al2023}/arm64/standard/recommended/image_id": AMI_ARM,
        f"{al2023}/x86_64/standard/{pinned}/image_id": AMI_NEURON,
        f"{base}/amazon-linux-2/recommended/image_id": AMI_X86,
        f"{base}/amazon-linux-2-arm64/recommended/image_id": AMI_ARM,
        f"{base}/amazon-linux-2-gpu/recommended/image_id": AMI_NVIDIA,
        f"{rocket}/x86_64/latest/image_id": AMI_X86,
        f"{rocket}/arm64/latest/image_id": AMI_ARM,
        f"{rocket}-nvidia/x86_64/latest/image_id": AMI_NVIDIA,
    }


def seed_ssm(parameters: dict[str, str]) -> None:
    backend = ssm_backends[ACCOUNT][REGION]
    for name, value in parameters.items():
        backend._parameters[name].append(
            Parameter(  # type: ignore[abstract]
                account_id=ACCOUNT,
                name=name,
                value=value,
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=datetime.now(UTC),
                version=1,
                data_type="aws:ec2:image",
            )
        )


class FakeTimer:
    """Monotonic seconds that move only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class StaticInstanceTypes:
    """An InstanceTypeSource over a fixed catalog."""

    catalog_value: Catalog

    def catalog(self, nodeclass: EC2NodeClass | None = None) -> Catalog:
        return self.catalog_value


@dataclass
class NodeClasses:
    """A NodeClassGetter over a dictionary."""

    items: dict[str, EC2NodeClass] = field(default_factory=dict)

    def get_nodeclass(self, name: str) -> EC2NodeClass | None:
        return self.items.get(name)

    def add(self, nodeclass: EC2NodeClass) -> EC2NodeClass:
        self.items[nodeclass.name] = nodeclass
        return nodeclass


def nodeclass_body(name: str = "default", **spec: Any) -> dict[str, Any]:
    """A valid EC2NodeClass as the API serves it (discovery by the test cluster's tag)."""
    body: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "role": ROLE,
        "subnetSelectorTerms": [{"tags": DISCOVERY}],
        "securityGroupSelectorTerms": [{"tags": DISCOVERY}],
    }
    body.update(spec)
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name, "uid": f"uid-{name}", "generation": 1},
        "spec": body,
    }


def make_nodeclass(name: str = "default", **spec: Any) -> EC2NodeClass:
    return parse_nodeclass(nodeclass_body(name, **spec))


def make_request(
    name: str = "default-abcde",
    *,
    instance_types: tuple[str, ...] = (),
    capacity_types: tuple[str, ...] = ("spot", "on-demand"),
    nodeclass: str = "default",
    nodepool: str = "default",
    requests: dict[str, int] | None = None,
) -> LaunchRequest:
    terms: list[dict[str, object]] = [
        {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": list(capacity_types)}
    ]
    if instance_types:
        terms.append({"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": list(instance_types)})
    return LaunchRequest(
        name=name,
        uid=f"uid-{name}",
        nodepool=nodepool,
        node_class=NodeClassRef(name=nodeclass),
        requirements=Requirements.from_terms(terms),
        requests=requests or {},
        labels={"team": "a"},
    )


class Faults:
    """Fault injection through botocore event hooks on the EC2 client."""

    def __init__(self, ec2: Any) -> None:
        self.ec2 = ec2
        self.ice: set[tuple[str, str, str]] = set()  # (capacity type, type, zone); "*" = any
        self.fleet_calls: list[dict[str, Any]] = []
        self.throttle_left: dict[str, int] = {}
        self.throttled: dict[str, int] = {}
        events = ec2.meta.events
        events.register("provide-client-params.ec2.CreateFleet", self._remove_ice)
        events.register("before-call.ec2.CreateFleet", self._short_circuit)
        events.register("after-call.ec2.CreateFleet", self._add_errors)
        events.register("before-call.ec2.*", self._throttle)

    def ice_on(self, capacity_type: str, instance_type: str = "*", zone: str = "*") -> None:
        self.ice.add((capacity_type, instance_type, zone))

    def throttle(self, operation: str, times: int) -> None:
        self.throttle_left[operation] = times

    def _is_ice(self, capacity_type: str, instance_type: str, zone: str) -> bool:
        return any(
            c == capacity_type and t in ("*", instance_type) and z in ("*", zone)
            for c, t, z in self.ice
        )

    def _remove_ice(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        self.fleet_calls.append(copy.deepcopy(params))
        capacity_type = params["TargetCapacitySpecification"]["DefaultTargetCapacityType"]
        removed = []
        for config in params["LaunchTemplateConfigs"]:
            kept = []
            for override in config.get("Overrides", []):
                if self._is_ice(
                    capacity_type, override["InstanceType"], override["AvailabilityZone"]
                ):
                    removed.append((config["LaunchTemplateSpecification"], override))
                else:
                    kept.append(override)
            config["Overrides"] = kept
        params["LaunchTemplateConfigs"] = [
            c for c in params["LaunchTemplateConfigs"] if c["Overrides"]
        ]
        context["jointer_ice"] = {"removed": removed, "capacity_type": capacity_type}
        if not params["LaunchTemplateConfigs"]:
            context["jointer_ice"]["empty"] = True
            # keep the request valid; before-call answers without calling moto
            params["LaunchTemplateConfigs"] = [
                {"LaunchTemplateSpecification": removed[0][0]} if removed else {}
            ]

    def _short_circuit(self, context: dict[str, Any], **_: Any) -> Any:
        if context.get("jointer_ice", {}).get("empty"):
            http = AWSResponse(None, 200, {}, None)  # type: ignore[arg-type]
            return http, {"FleetId": "fleet-ice", "Instances": [], "Errors": []}
        return None

    def _add_errors(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        state = context.get("jointer_ice")
        if not state:
            return
        errors = parsed.setdefault("Errors", [])
        for spec, override in state["removed"]:
            errors.append(
                {
                    "LaunchTemplateAndOverrides": {
                        "LaunchTemplateSpecification": spec,
                        "Overrides": override,
                    },
                    "Lifecycle": state["capacity_type"],
                    "ErrorCode": "InsufficientInstanceCapacity",
                    "ErrorMessage": "There is no capacity available that matches your request.",
                }
            )

    def _throttle(self, model: Any, **_: Any) -> None:
        name = model.name
        left = self.throttle_left.get(name, 0)
        if left > 0:
            self.throttle_left[name] = left - 1
            self.throttled[name] = self.throttled.get(name, 0) + 1
            raise ClientError(
                {"Error": {"Code": "RequestLimitExceeded", "Message": "Request limit exceeded."}},
                name,
            )


@dataclass
class AwsEnv:
    endpoint: str
    ec2: Any
    ssm: Any
    iam: Any
    sqs: Any
    events: Any
    vpc_id: str
    subnets: dict[str, str]
    security_group: str
    timer: FakeTimer
    caller: Caller
    nodeclasses: NodeClasses
    catalog: Catalog
    faults: Faults
    provider: AwsCloudProvider

    def client(self, service: str, **config: Any) -> Any:
        return _boto3_client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            config=Config(retries={"total_max_attempts": 1}, **config),
        )

    def build_provider(self, **overrides: Any) -> AwsCloudProvider:
        params: dict[str, Any] = {
            "ec2": self.ec2,
            "ssm": self.ssm,
            "iam": self.iam,
            "cluster": CLUSTER_INFO,
            "region": REGION,
            "kubernetes_version": K8S,
            "nodeclasses": self.nodeclasses,
            "instance_types": StaticInstanceTypes(self.catalog),
            "caller": self.caller,
            "timer": self.timer,
        }
        params.update(overrides)
        return build_aws_cloud_provider(**params)

    def instances(self, **filters: list[str]) -> list[dict[str, Any]]:
        flt = [{"Name": k.replace("_", "-"), "Values": v} for k, v in filters.items()]
        reservations = self.ec2.describe_instances(Filters=flt)["Reservations"]
        return [i for r in reservations for i in r["Instances"]]


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="session")
def test_catalog() -> Catalog:
    full = builtin_catalog(REGION)
    return Catalog(REGION, tuple(t for t in full.instance_types if t.name in TEST_TYPES))


def _reset(endpoint: str) -> None:
    request = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")  # noqa: S310
    with urllib.request.urlopen(request) as response:  # noqa: S310
        response.read()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, moto_endpoint: str, test_catalog: Catalog) -> AwsEnv:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    _reset(moto_endpoint)
    seed_ssm(eks_parameters())

    def client(service: str) -> Any:
        return _boto3_client(
            service,
            endpoint_url=moto_endpoint,
            region_name=REGION,
            config=Config(retries={"total_max_attempts": 1}),
        )

    ec2 = client("ec2")
    vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = {}
    for index, zone in enumerate(ZONES):
        subnet = ec2.create_subnet(
            VpcId=vpc_id,
            CidrBlock=f"10.0.{index}.0/24",
            AvailabilityZone=zone,
            TagSpecifications=[
                {
                    "ResourceType": "subnet",
                    "Tags": [{"Key": k, "Value": v} for k, v in DISCOVERY.items()],
                }
            ],
        )["Subnet"]
        subnets[zone] = subnet["SubnetId"]
    group = ec2.create_security_group(
        GroupName="nodes",
        Description="nodes",
        VpcId=vpc_id,
        TagSpecifications=[
            {
                "ResourceType": "security-group",
                "Tags": [{"Key": k, "Value": v} for k, v in DISCOVERY.items()],
            }
        ],
    )["GroupId"]
    iam = client("iam")
    iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument="{}")
    timer = FakeTimer()
    caller = Caller(policy=RetryPolicy(max_attempts=4), sleep=no_sleep)
    nodeclasses = NodeClasses()
    nodeclasses.add(make_nodeclass())
    faults = Faults(ec2)
    env = AwsEnv(
        endpoint=moto_endpoint,
        ec2=ec2,
        ssm=client("ssm"),
        iam=iam,
        sqs=client("sqs"),
        events=client("events"),
        vpc_id=vpc_id,
        subnets=subnets,
        security_group=group,
        timer=timer,
        caller=caller,
        nodeclasses=nodeclasses,
        catalog=test_catalog,
        faults=faults,
        provider=None,  # type: ignore[arg-type]
    )
    env.provider = env.build_provider()
    return env


def golden_compare(request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    from pathlib import Path  # noqa: PLC0415

    root = Path(__file__).resolve().parents[1] / "golden" / "aws"
    update = bool(request.config.getoption("--update-golden", default=False))

    def check(name: str, actual: str) -> None:
        path = root / name
        if update or not path.exists():
            if not update:
                pytest.fail(f"golden file {path} missing; run pytest with --update-golden")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(actual)
            return
        assert actual == path.read_text(), f"{name} differs from its golden file"

    return check
