"""Security groups selected by an EC2NodeClass.

Each ``securityGroupSelectorTerms`` entry is one ``DescribeSecurityGroups`` call (``group-id``,
``group-name`` or tag filters); results are merged by id (Karpenter's
``pkg/providers/securitygroup``).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Final

from cloudprovider.aws.cache import TtlCache
from cloudprovider.aws.nodeclass import SecurityGroupSelectorTerm
from cloudprovider.aws.retry import Caller
from cloudprovider.aws.sdk import Ec2Api
from cloudprovider.aws.selector import Filter, tag_filters

__all__ = ["SECURITY_GROUPS_TTL", "SecurityGroup", "SecurityGroupProvider"]

# Karpenter requeues security-group resolution every 5 minutes; groups change rarely.
SECURITY_GROUPS_TTL: Final = timedelta(minutes=5)


@dataclass(frozen=True, slots=True, kw_only=True)
class SecurityGroup:
    """A resolved security group."""

    id: str
    name: str = ""


def _term_filters(term: SecurityGroupSelectorTerm) -> list[Filter]:
    filters = tag_filters(term.tags)
    if term.id is not None:
        filters.append({"Name": "group-id", "Values": [term.id]})
    if term.name is not None:
        filters.append({"Name": "group-name", "Values": [term.name]})
    return filters


@dataclass(slots=True, kw_only=True)
class SecurityGroupProvider:
    """Resolves security group selector terms, cached per term set."""

    ec2: Ec2Api
    caller: Caller
    cache: TtlCache[str, tuple[SecurityGroup, ...]] = field(
        default_factory=lambda: TtlCache(ttl=SECURITY_GROUPS_TTL)
    )
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def resolve(self, terms: Sequence[SecurityGroupSelectorTerm]) -> tuple[SecurityGroup, ...]:
        """Every security group matching any term, sorted by id."""
        raw_terms = json.dumps([t.model_dump(mode="json") for t in terms], sort_keys=True)
        key = hashlib.sha256(raw_terms.encode()).hexdigest()
        with self._lock:
            cached = self.cache.get(key)
        if cached is not None:
            return cached
        found: dict[str, SecurityGroup] = {}
        for term in terms:
            response = self.caller.call(
                "describing security groups",
                self.ec2.describe_security_groups,
                Filters=_term_filters(term),
            )
            for raw in response.get("SecurityGroups", []):
                group = SecurityGroup(id=raw.get("GroupId", ""), name=raw.get("GroupName", ""))
                found[group.id] = group
        result = tuple(sorted(found.values(), key=lambda g: g.id))
        with self._lock:
            self.cache.set(key, result)
        return result

    def flush(self) -> None:
        """Forget cached resolutions."""
        with self._lock:
            self.cache.flush()
