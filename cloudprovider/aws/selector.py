"""EC2 ``Filters`` from EC2NodeClass selector terms (subnets, security groups, AMIs).

A tag value of ``*`` means "the tag exists" (``tag-key`` filter); otherwise ``tag:<key>`` with
the value. Each term becomes one filter list (its fields ANDed); terms are ORed by calling once
per term and merging the results, as Karpenter does.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["Filter", "tag_filters"]

Filter = dict[str, str | list[str]]


def tag_filters(tags: Mapping[str, str] | None) -> list[Filter]:
    """EC2 filters matching every tag (``*`` = any value)."""
    filters: list[Filter] = []
    for key, value in sorted((tags or {}).items()):
        if value == "*":
            filters.append({"Name": "tag-key", "Values": [key]})
        else:
            filters.append({"Name": f"tag:{key}", "Values": [value]})
    return filters
