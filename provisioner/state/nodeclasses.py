"""Node classes read from the cluster state's cache, as Karpenter reads them from its informer.

The AWS provider reads a NodeClaim's EC2NodeClass on every launch, liveness check, drift
check and garbage-collection list. Asking the API server each time costs one GET per node
every few minutes (5,000 nodes: about 17 a second for drift alone), out of the client's
request budget. The cluster state already receives every EC2NodeClass event (the NodeClass
controller watches them) and keeps each one whole (``ClusterState.node_class``); this reader
answers from there and asks the API only for a class the cache has not seen (not delivered
yet, or deleted), so a class created a moment ago is still found.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from provisioner.state.cluster import ClusterState

__all__ = ["NodeClassReads"]

LiveRead = Callable[[str], Mapping[str, Any] | None]


class NodeClassReads:
    """Reads node classes of one kind by name: the cache first, then the API.

    Args:
        state: the controllers' cluster state.
        kind: the node class kind (``EC2NodeClass``).
        live: reads one from the API (None when it does not exist).
    """

    def __init__(self, state: ClusterState, kind: str, live: LiveRead) -> None:
        self._state = state
        self._kind = kind
        self._live = live
        self.live_reads = 0
        """How many reads went to the API."""

    def __call__(self, name: str) -> Mapping[str, Any] | None:
        """The node class called ``name`` as the API last sent it (read only), or None."""
        cached = self._state.node_class(self._kind, name)
        if cached is not None:
            return cached
        self.live_reads += 1
        return self._live(name)
