"""Launch templates: one per (nodeclass, AMI, launch-relevant settings), created on demand.

The template name is ``karpenter.k8s.aws/<hash>`` where the hash covers everything the template
holds (AMI, user data with its labels/taints/max pods, security groups, profile, block devices,
metadata options, monitoring, tags), so equal launches share a template and any change makes a
new one (karpenter-aws.md §6). Templates are looked up with ``DescribeLaunchTemplates`` and
created when missing; the cache remembers recent use, and :meth:`LaunchTemplateProvider.
delete_unused` deletes this cluster's templates that were not used for a TTL.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final

from cloudprovider.aws.cache import Timer
from cloudprovider.aws.errors import AlreadyExistsError, NotFoundError
from cloudprovider.aws.nodeclass import AMIFamily, BlockDeviceMapping, EC2NodeClass
from cloudprovider.aws.retry import Caller
from cloudprovider.aws.sdk import Ec2Api
from cloudprovider.aws.tags import TAG_EKS_CLUSTER_NAME, TAG_NODECLASS, to_tag_list

__all__ = [
    "LAUNCH_TEMPLATE_NAME_PREFIX",
    "LAUNCH_TEMPLATE_TTL",
    "ClusterInfo",
    "LaunchTemplateProvider",
    "LaunchTemplateSpec",
    "launch_template_data",
]

# Karpenter keeps a template in its cache for a minute after last use, then deletes it: unused
# templates (old AMIs, edited nodeclasses) do not pile up against the account's LT quota.
LAUNCH_TEMPLATE_TTL: Final = timedelta(minutes=1)
LAUNCH_TEMPLATE_NAME_PREFIX: Final = "karpenter.k8s.aws/"
_GIB: Final = 1024**3


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterInfo:
    """What nodes need to join the cluster.

    Attributes:
        name: the cluster name.
        endpoint: the API server URL.
        ca_bundle: the cluster CA, base64.
        service_cidr: the service CIDR (``serviceIpv4Cidr``), needed by AL2023.
        cluster_dns: the kube-dns service IP, if known.
    """

    name: str
    endpoint: str
    ca_bundle: str
    service_cidr: str | None = None
    cluster_dns: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchTemplateSpec:
    """Everything one launch template holds.

    Attributes:
        nodeclass: the EC2NodeClass.
        image_id: the AMI.
        user_data: plain-text user data (base64-encoded into the template).
        security_group_ids: resolved security groups.
        instance_profile: the instance profile name.
        tags: the launch tags (cluster, nodepool, nodeclass, ``spec.tags``).
        capacity_reservation_id: launch only into this reservation (``reserved`` launches).
        capacity_reservation_type: ``default`` or ``capacity-block`` (market type).
    """

    nodeclass: EC2NodeClass
    image_id: str
    user_data: str
    security_group_ids: tuple[str, ...]
    instance_profile: str
    tags: Mapping[str, str]
    capacity_reservation_id: str | None = None
    capacity_reservation_type: str | None = None


def _volume_size_gib(size: str | None) -> int | None:
    if size is None:
        return None
    if size.endswith("Gi"):
        return int(size[:-2])
    if size.endswith("G"):
        return max(1, int(size[:-1]) * 1000**3 // _GIB)
    if size.endswith("Ti"):
        return int(size[:-2]) * 1024
    if size.endswith("T"):
        return int(size[:-1]) * 1000**4 // _GIB
    return int(size)


def _block_device(mapping: BlockDeviceMapping) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if mapping.device_name is not None:
        result["DeviceName"] = mapping.device_name
    ebs = mapping.ebs
    if ebs is not None:
        raw: dict[str, Any] = {
            "DeleteOnTermination": ebs.delete_on_termination,
            "Encrypted": ebs.encrypted,
            "Iops": ebs.iops,
            "KmsKeyId": ebs.kms_key_id,
            "SnapshotId": ebs.snapshot_id,
            "Throughput": ebs.throughput,
            "VolumeSize": _volume_size_gib(ebs.volume_size),
            "VolumeType": ebs.volume_type,
            "VolumeInitializationRate": ebs.volume_initialization_rate,
        }
        result["Ebs"] = {k: v for k, v in raw.items() if v is not None}
    return result


def _default_block_devices(family: AMIFamily) -> list[dict[str, Any]]:
    def gp3(device: str, size: int) -> dict[str, Any]:
        return {
            "DeviceName": device,
            "Ebs": {"Encrypted": True, "VolumeSize": size, "VolumeType": "gp3"},
        }

    if family is AMIFamily.BOTTLEROCKET:
        return [gp3("/dev/xvda", 4), gp3("/dev/xvdb", 20)]
    if family.is_windows:
        return [gp3("/dev/sda1", 50)]
    if family is AMIFamily.CUSTOM:
        return []
    return [gp3("/dev/xvda", 20)]


def launch_template_data(spec: LaunchTemplateSpec) -> dict[str, Any]:
    """The ``LaunchTemplateData`` of a template (deterministic for equal specs)."""
    nodeclass = spec.nodeclass.spec
    metadata = nodeclass.metadata_options
    data: dict[str, Any] = {
        "ImageId": spec.image_id,
        "IamInstanceProfile": {"Name": spec.instance_profile},
        "UserData": base64.b64encode(spec.user_data.encode()).decode(),
        "MetadataOptions": {
            "HttpEndpoint": metadata.http_endpoint,
            "HttpProtocolIpv6": metadata.http_protocol_ipv6,
            "HttpPutResponseHopLimit": metadata.http_put_response_hop_limit,
            "HttpTokens": metadata.http_tokens,
            "InstanceMetadataTags": "disabled",
        },
        "Monitoring": {"Enabled": bool(nodeclass.detailed_monitoring)},
        "TagSpecifications": [
            {"ResourceType": "network-interface", "Tags": to_tag_list(spec.tags)},
        ],
    }
    mappings = (
        [_block_device(m) for m in nodeclass.block_device_mappings]
        if nodeclass.block_device_mappings
        else _default_block_devices(spec.nodeclass.ami_family())
    )
    if mappings:
        data["BlockDeviceMappings"] = mappings
    if nodeclass.associate_public_ip_address is not None:
        data["NetworkInterfaces"] = [
            {
                "DeviceIndex": 0,
                "AssociatePublicIpAddress": nodeclass.associate_public_ip_address,
                "Groups": list(spec.security_group_ids),
            }
        ]
    else:
        data["SecurityGroupIds"] = list(spec.security_group_ids)
    if spec.capacity_reservation_id:
        data["CapacityReservationSpecification"] = {
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationId": spec.capacity_reservation_id},
        }
        if spec.capacity_reservation_type == "capacity-block":
            data["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
    return data


def template_name(cluster: str, data: Mapping[str, Any]) -> str:
    """``karpenter.k8s.aws/<hash of cluster and data>``."""
    raw = json.dumps([cluster, data], sort_keys=True)
    return LAUNCH_TEMPLATE_NAME_PREFIX + str(int(hashlib.sha256(raw.encode()).hexdigest()[:16], 16))


@dataclass(slots=True, kw_only=True)
class LaunchTemplateProvider:
    """Creates launch templates on demand and deletes the ones no longer used."""

    ec2: Ec2Api
    caller: Caller
    cluster: str
    timer: Timer = time.monotonic
    ttl: timedelta = LAUNCH_TEMPLATE_TTL
    _last_used: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def ensure(self, spec: LaunchTemplateSpec) -> str:
        """The name of the template for ``spec``, creating it when missing."""
        data = launch_template_data(spec)
        name = template_name(self.cluster, data)
        now = self.timer()
        with self._lock:
            recent = (
                name in self._last_used and now - self._last_used[name] < self.ttl.total_seconds()
            )
            self._last_used[name] = now
        if recent:
            return name
        try:
            self.caller.call(
                "describing launch templates",
                self.ec2.describe_launch_templates,
                LaunchTemplateNames=[name],
            )
        except NotFoundError:
            # created concurrently by another worker: fine
            with contextlib.suppress(AlreadyExistsError):
                self.caller.call(
                    "creating launch template",
                    self.ec2.create_launch_template,
                    LaunchTemplateName=name,
                    LaunchTemplateData=data,
                    TagSpecifications=[
                        {"ResourceType": "launch-template", "Tags": to_tag_list(spec.tags)}
                    ],
                )
        return name

    def invalidate(self, name: str) -> None:
        """Forget that ``name`` exists (it was reported missing at launch)."""
        with self._lock:
            self._last_used.pop(name, None)

    def delete_unused(self) -> list[str]:
        """Delete this cluster's templates not used within the TTL; return their names."""
        response = self.caller.call(
            "describing launch templates",
            self.ec2.describe_launch_templates,
            Filters=[{"Name": f"tag:{TAG_EKS_CLUSTER_NAME}", "Values": [self.cluster]}],
        )
        now = self.timer()
        deleted: list[str] = []
        for template in response.get("LaunchTemplates", []):
            name = template.get("LaunchTemplateName", "")
            if not name.startswith(LAUNCH_TEMPLATE_NAME_PREFIX):
                continue
            with self._lock:
                last = self._last_used.setdefault(name, now)
                expired = now - last >= self.ttl.total_seconds()
                if expired:
                    del self._last_used[name]
            if expired:
                with contextlib.suppress(NotFoundError):
                    self.caller.call(
                        "deleting launch template",
                        self.ec2.delete_launch_template,
                        LaunchTemplateName=name,
                    )
                deleted.append(name)
        return deleted

    def delete_for_nodeclass(self, nodeclass: str) -> list[str]:
        """Delete this cluster's templates made for the EC2NodeClass ``nodeclass``; their names.

        Karpenter's EC2NodeClass termination: templates tagged with the cluster and the class.
        """
        response = self.caller.call(
            "describing launch templates",
            self.ec2.describe_launch_templates,
            Filters=[
                {"Name": f"tag:{TAG_EKS_CLUSTER_NAME}", "Values": [self.cluster]},
                {"Name": f"tag:{TAG_NODECLASS}", "Values": [nodeclass]},
            ],
        )
        names = sorted(
            str(t.get("LaunchTemplateName", ""))
            for t in response.get("LaunchTemplates", [])
            if str(t.get("LaunchTemplateName", "")).startswith(LAUNCH_TEMPLATE_NAME_PREFIX)
        )
        self.delete_all(names)
        return names

    def delete_all(self, names: Sequence[str]) -> None:
        """Delete the named templates (missing ones are fine)."""
        for name in names:
            with contextlib.suppress(NotFoundError):
                self.caller.call(
                    "deleting launch template",
                    self.ec2.delete_launch_template,
                    LaunchTemplateName=name,
                )
            self.invalidate(name)
