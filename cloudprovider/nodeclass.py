"""Provider-neutral NodeClass lifecycle: what the core's NodeClass controller asks a provider.

The core controller (``nodeclass``) owns the Kubernetes side — the finalizer, writing status,
waiting while NodeClaims still use the class — and asks the provider (AWS: EC2NodeClass) to
resolve a class's status and to clean up the cloud resources made for it once it is deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol

__all__ = ["NodeClassLifecycle"]


class NodeClassLifecycle(Protocol):
    """A provider's NodeClass status and cleanup (AWS: ``AwsNodeClassLifecycle``)."""

    @property
    def finalizer(self) -> str:
        """What holds a deleted NodeClass until cleanup (``karpenter.k8s.aws/termination``)."""
        ...

    def status(self, nodeclass: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        """The ``status`` the NodeClass should have now (wire form, conditions stamped ``now``).

        A malformed NodeClass gets ``ValidationSucceeded=False`` naming the field; cloud errors
        become ``Unknown`` conditions. Never raises for either.
        """
        ...

    def cleanup(self, nodeclass: Mapping[str, Any]) -> list[str]:
        """Delete the cloud resources made for a deleted NodeClass; what was deleted.

        Raises:
            CloudProviderError: cleanup must be retried.
        """
        ...
