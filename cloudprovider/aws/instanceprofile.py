"""The instance profile nodes of an EC2NodeClass launch with.

``spec.instanceProfile`` is used as is. For ``spec.role`` Jointer manages a profile as Karpenter
does (``karpenter-aws.md`` §8): name ``<cluster>_<hash(region, nodeclass name, uid)>``, path
``/karpenter/<region>/<cluster>/<nodeclass-uid>/``, tagged with the cluster's scoped tags; the
role is (re)attached when it changed; the profile is deleted with its EC2NodeClass and garbage
collected by path prefix.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Final

from cloudprovider.aws.cache import TtlCache
from cloudprovider.aws.errors import NotFoundError
from cloudprovider.aws.nodeclass import EC2NodeClass
from cloudprovider.aws.retry import Caller
from cloudprovider.aws.sdk import IamApi
from cloudprovider.aws.tags import (
    TAG_EKS_CLUSTER_NAME,
    TAG_NODECLASS,
    TAG_OWNED,
    TAG_REGION,
    cluster_tag,
    to_tag_list,
)

__all__ = [
    "INSTANCE_PROFILE_TTL",
    "InstanceProfileProvider",
    "profile_name",
    "profile_name_of",
    "profile_path",
]

# Karpenter caches a resolved profile 15 minutes: IAM is eventually consistent and rate limited.
INSTANCE_PROFILE_TTL: Final = timedelta(minutes=15)


def profile_name(cluster: str, region: str, nodeclass: EC2NodeClass) -> str:
    """``<cluster>_<hash>`` for a role-based nodeclass (stable for its name and uid)."""
    return profile_name_of(cluster, region, nodeclass.name, str(nodeclass.metadata.get("uid", "")))


def profile_name_of(cluster: str, region: str, name: str, uid: str) -> str:
    """``<cluster>_<hash>`` for the nodeclass ``name`` with ``uid``."""
    digest = hashlib.sha256(f"{region}/{name}/{uid}".encode()).hexdigest()
    return f"{cluster}_{int(digest[:16], 16)}"


def profile_path(cluster: str, region: str, nodeclass_uid: str = "") -> str:
    """``/karpenter/<region>/<cluster>/[<uid>/]``: the managed profiles' path."""
    base = f"/karpenter/{region}/{cluster}/"
    return f"{base}{nodeclass_uid}/" if nodeclass_uid else base


@dataclass(slots=True, kw_only=True)
class InstanceProfileProvider:
    """Creates, reuses and deletes role-based instance profiles."""

    iam: IamApi
    caller: Caller
    cluster: str
    region: str
    cache: TtlCache[str, str] = field(default_factory=lambda: TtlCache(ttl=INSTANCE_PROFILE_TTL))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def resolve(self, nodeclass: EC2NodeClass) -> str:
        """The profile name the nodeclass launches with, creating it for ``spec.role``.

        Raises:
            AwsError: IAM refused (classified; ``NotFoundError`` when the role does not exist).
        """
        if nodeclass.spec.instance_profile is not None:
            return nodeclass.spec.instance_profile
        role = str(nodeclass.spec.role)
        name = profile_name(self.cluster, self.region, nodeclass)
        with self._lock:
            if self.cache.get(name) == role:
                return name
        self._ensure(name, role, nodeclass)
        with self._lock:
            self.cache.set(name, role)
        return name

    def _ensure(self, name: str, role: str, nodeclass: EC2NodeClass) -> None:
        try:
            profile = self.caller.call(
                "getting instance profile", self.iam.get_instance_profile, InstanceProfileName=name
            )["InstanceProfile"]
        except NotFoundError:
            tags = {
                cluster_tag(self.cluster): TAG_OWNED,
                TAG_EKS_CLUSTER_NAME: self.cluster,
                TAG_NODECLASS: nodeclass.name,
                TAG_REGION: self.region,
            }
            uid = str(nodeclass.metadata.get("uid", ""))
            profile = self.caller.call(
                "creating instance profile",
                self.iam.create_instance_profile,
                InstanceProfileName=name,
                Path=profile_path(self.cluster, self.region, uid),
                Tags=to_tag_list(tags),
            )["InstanceProfile"]
        attached = [r.get("RoleName", "") for r in profile.get("Roles", [])]
        if attached == [role]:
            return
        for old in attached:
            self.caller.call(
                "removing role from instance profile",
                self.iam.remove_role_from_instance_profile,
                InstanceProfileName=name,
                RoleName=old,
            )
        self.caller.call(
            "adding role to instance profile",
            self.iam.add_role_to_instance_profile,
            InstanceProfileName=name,
            RoleName=role,
        )

    def delete(self, name: str) -> None:
        """Detach roles from and delete a managed profile; a missing profile is fine."""
        try:
            profile = self.caller.call(
                "getting instance profile", self.iam.get_instance_profile, InstanceProfileName=name
            )["InstanceProfile"]
            for role in profile.get("Roles", []):
                self.caller.call(
                    "removing role from instance profile",
                    self.iam.remove_role_from_instance_profile,
                    InstanceProfileName=name,
                    RoleName=role.get("RoleName", ""),
                )
            self.caller.call(
                "deleting instance profile",
                self.iam.delete_instance_profile,
                InstanceProfileName=name,
            )
        except NotFoundError:
            pass
        with self._lock:
            self.cache.flush()

    def garbage_collect(self, live_nodeclass_uids: Collection[str]) -> list[str]:
        """Delete managed profiles whose EC2NodeClass no longer exists; return their names."""
        response = self.caller.call(
            "listing instance profiles",
            self.iam.list_instance_profiles,
            PathPrefix=profile_path(self.cluster, self.region),
        )
        deleted = []
        for profile in response.get("InstanceProfiles", []):
            uid = profile.get("Path", "").rstrip("/").rpartition("/")[2]
            if uid and uid not in live_nodeclass_uids:
                self.delete(profile["InstanceProfileName"])
                deleted.append(profile["InstanceProfileName"])
        return deleted
