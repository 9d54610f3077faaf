"""``nodeclaim.podevents``: ``status.lastPodEventTime``, the clock of ``consolidateAfter``.

A pod event on a node is a pod bound to it, a pod on it becoming terminal or terminating, or a
pod on it deleted (Karpenter's ``c/nodeclaim/podevents``). :meth:`PodEventsController.observe`
maps pod watch events to the node's NodeClaim; the reconciler stamps the time, at most once per
10 s per NodeClaim (an event inside the window is stamped when the window closes).
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Final

from provisioner.apis.core import is_terminal
from provisioner.controllers.nodeclaim.status import patch_claim_status
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.kube.event import format_time
from provisioner.kube.protocol import WatchEvent, WatchEventType
from provisioner.runtime.reconciler import Request, Result

__all__ = ["DEDUPE", "PodEventsController"]

NAME: Final = "nodeclaim.podevents"
DEDUPE: Final = timedelta(seconds=10)

_PodState = tuple[str, bool, bool]  # (node, terminal, terminating)


class PodEventsController(ControllerBase):
    """Stamps ``lastPodEventTime`` on the NodeClaim of a node whose pods changed.

    Args:
        ports: the shared ports.
    """

    name: Final = NAME

    def __init__(self, *, ports: Ports) -> None:
        super().__init__(ports, NAME)
        self._seen: dict[str, _PodState] = {}
        self._due: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def observe(self, event: WatchEvent) -> list[Request]:
        """Map a pod watch event to the NodeClaim whose node it concerns (if it is an event)."""
        obj = event.object
        metadata = obj.get("metadata") or {}
        uid = str(metadata.get("uid") or metadata.get("name") or "")
        node = str((obj.get("spec") or {}).get("nodeName") or "")
        terminal = is_terminal(obj)
        current: _PodState = (node, terminal, bool(metadata.get("deletionTimestamp")))
        with self._lock:
            previous = self._seen.get(uid)
            if event.type == WatchEventType.DELETED:
                self._seen.pop(uid, None)
                changed = True
            else:
                self._seen[uid] = current
                changed = previous != current
        if not node or not changed:
            return []
        found = self._state.node(node)
        provider_id = found.spec.provider_id if found is not None else ""
        claim = self._state.node_claim_for_provider_id(provider_id) if provider_id else None
        if claim is None:
            return []
        with self._lock:
            self._due.setdefault(claim.name, self._clock.now())
        return [Request(name=claim.name)]

    def reconcile(self, request: Request) -> Result:
        """Stamp ``lastPodEventTime`` (deduplicated 10 s)."""
        claim = self._state.node_claim(request.name)
        if claim is None or claim.metadata.deletion_timestamp is not None:
            with self._lock:
                self._due.pop(request.name, None)
            return Result.done()
        now = self._clock.now()
        last = claim.status.last_pod_event_time if claim.status else None
        if last is not None and now - last < DEDUPE:
            return Result.after(last + DEDUPE - now)
        with self._lock:
            if self._due.pop(request.name, None) is None:
                return Result.done()
        patch_claim_status(
            self._kube,
            request.name,
            lambda _: {"lastPodEventTime": format_time(now)},
            now=now,
        )
        return Result.done()
