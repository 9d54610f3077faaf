"""Subnets selected by an EC2NodeClass, and the subnet a launch uses in each zone.

Karpenter's ``pkg/providers/subnet``: each ``subnetSelectorTerms`` entry is one
``DescribeSubnets`` call (``subnet-id`` or tag filters); results are merged by id. For a launch,
each zone gets the subnet with the most available IP addresses.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final

from cloudprovider.aws.cache import TtlCache
from cloudprovider.aws.nodeclass import SubnetSelectorTerm
from cloudprovider.aws.retry import Caller
from cloudprovider.aws.sdk import Ec2Api
from cloudprovider.aws.selector import Filter, tag_filters

__all__ = ["SUBNETS_TTL", "Subnet", "SubnetProvider", "zonal_subnets"]

# Karpenter re-resolves subnets every minute: new subnets and free-IP counts show up quickly.
SUBNETS_TTL: Final = timedelta(minutes=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Subnet:
    """A resolved subnet."""

    id: str
    zone: str
    zone_id: str = ""
    available_ips: int = 0
    vpc_id: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)


def _term_filters(term: SubnetSelectorTerm) -> list[Filter]:
    filters = tag_filters(term.tags)
    if term.id is not None:
        filters.append({"Name": "subnet-id", "Values": [term.id]})
    return filters


def _terms_key(terms: Sequence[Any]) -> str:
    raw = json.dumps([t.model_dump(mode="json") for t in terms], sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()


@dataclass(slots=True, kw_only=True)
class SubnetProvider:
    """Resolves subnet selector terms through DescribeSubnets, cached per term set."""

    ec2: Ec2Api
    caller: Caller
    cache: TtlCache[str, tuple[Subnet, ...]] = field(
        default_factory=lambda: TtlCache(ttl=SUBNETS_TTL)
    )
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def resolve(self, terms: Sequence[SubnetSelectorTerm]) -> tuple[Subnet, ...]:
        """Every subnet matching any term, sorted by id."""
        key = _terms_key(terms)
        with self._lock:
            cached = self.cache.get(key)
        if cached is not None:
            return cached
        found: dict[str, Subnet] = {}
        for term in terms:
            response = self.caller.call(
                "describing subnets", self.ec2.describe_subnets, Filters=_term_filters(term)
            )
            for raw in response.get("Subnets", []):
                subnet = Subnet(
                    id=raw.get("SubnetId", ""),
                    zone=raw.get("AvailabilityZone", ""),
                    zone_id=raw.get("AvailabilityZoneId", ""),
                    available_ips=raw.get("AvailableIpAddressCount", 0),
                    vpc_id=raw.get("VpcId", ""),
                    tags={t.get("Key", ""): t.get("Value", "") for t in raw.get("Tags", [])},
                )
                found[subnet.id] = subnet
        result = tuple(sorted(found.values(), key=lambda s: s.id))
        with self._lock:
            self.cache.set(key, result)
        return result

    def flush(self) -> None:
        """Forget cached resolutions."""
        with self._lock:
            self.cache.flush()


def zonal_subnets(subnets: Sequence[Subnet]) -> dict[str, Subnet]:
    """One subnet per zone: the one with the most available IPs (ties: lowest id)."""
    best: dict[str, Subnet] = {}
    for subnet in sorted(subnets, key=lambda s: (-s.available_ips, s.id)):
        best.setdefault(subnet.zone, subnet)
    return best
