"""Typed cloud-provider errors: the control signals the core acts on.

The tree::

    CloudProviderError                       base of everything a provider raises on purpose
    ├── InsufficientCapacityError            nothing could be launched for capacity reasons;
    │                                        the core deletes the NodeClaim and re-plans
    ├── NodeClassNotReadyError               the NodeClass is missing, terminating or not Ready;
    │                                        the core deletes the NodeClaim
    ├── NodeClaimNotFoundError (LookupError) the instance is gone; the core finishes deletion
    └── CreateError                          a launch failed for another reason (``reason`` is a
                                             Karpenter condition reason); the core retries

Each error names the failed action in its message ("launching nodeclaim default-x2k4p, ...") and
is raised ``from`` its cause. The core never inspects messages, only types and ``reason``.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "REASON_LAUNCH_FAILED",
    "REASON_NODECLASS_READINESS_UNKNOWN",
    "CloudProviderError",
    "CreateError",
    "InsufficientCapacityError",
    "NodeClaimNotFoundError",
    "NodeClassNotReadyError",
]

REASON_LAUNCH_FAILED: Final = "LaunchFailed"
REASON_NODECLASS_READINESS_UNKNOWN: Final = "NodeClassReadinessUnknown"


class CloudProviderError(Exception):
    """Base class of every error a cloud provider raises on purpose."""


class InsufficientCapacityError(CloudProviderError):
    """No offering the NodeClaim allows could be launched (capacity, quota or none left).

    The core deletes the NodeClaim (reason ``insufficient_capacity``) and plans again; the
    provider has already marked the failed offerings unavailable.
    """


class NodeClassNotReadyError(CloudProviderError):
    """The NodeClaim's NodeClass does not exist, is terminating, or is not Ready.

    The core deletes the NodeClaim (reason ``nodeclass_not_ready``).
    """


class NodeClaimNotFoundError(CloudProviderError, LookupError):
    """The instance behind a NodeClaim does not exist (any more).

    Raised by ``get`` and by ``delete`` of an instance that is already terminated, so the core
    can remove its finalizer and finish the deletion.
    """


class CreateError(CloudProviderError):
    """A launch failed for a reason other than capacity; the core retries it.

    Attributes:
        reason: a Karpenter condition reason (``LaunchFailed``, ``Unauthorized``,
            ``NodeClassReadinessUnknown``, ``LaunchTemplateNotFound``, ...), used as the reason of
            the NodeClaim's ``Launched=Unknown`` condition.
    """

    def __init__(self, message: str, *, reason: str = REASON_LAUNCH_FAILED) -> None:
        super().__init__(message)
        self.reason = reason
