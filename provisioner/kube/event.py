"""Building core/v1 Events and formatting API timestamps (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from provisioner.kube.protocol import EventType, JsonObject
from provisioner.kube.resource import EVENTS, Resource


def format_time(moment: datetime) -> str:
    """Format a `metav1.Time` (seconds, UTC, `Z`)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(moment: datetime) -> str:
    """Format a `metav1.MicroTime` (microseconds, UTC, `Z`)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """Parse a `metav1.Time` or `MicroTime` into an aware datetime."""
    return datetime.fromisoformat(text).astimezone(UTC)


def object_reference(obj: Mapping[str, Any]) -> JsonObject:
    """The `ObjectReference` of an object in wire shape."""
    metadata = obj.get("metadata", {})
    reference: JsonObject = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": metadata.get("name", ""),
    }
    for key in ("namespace", "uid", "resourceVersion"):
        if metadata.get(key):
            reference[key] = metadata[key]
    return reference


def build_event(
    involved: Mapping[str, Any],
    *,
    reason: str,
    message: str,
    type: EventType,  # noqa: A002 - the API's own field name
    component: str,
    now: datetime,
) -> JsonObject:
    """Build a core/v1 Event about `involved`, named by `generateName` (`<object name>.`).

    The event's namespace is the object's, or `default` for cluster-scoped objects.
    """
    reference = object_reference(involved)
    timestamp = format_time(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "generateName": f"{reference['name']}.",
            "namespace": reference.get("namespace") or "default",
        },
        "involvedObject": reference,
        "reason": reason,
        "message": message,
        "type": type,
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": timestamp,
        "lastTimestamp": timestamp,
        "count": 1,
    }


class _Creator(Protocol):
    def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> JsonObject: ...


def record_event(
    client: _Creator,
    involved: Mapping[str, Any],
    *,
    reason: str,
    message: str,
    type: EventType,  # noqa: A002 - the API's own field name
    component: str,
    now: datetime,
) -> JsonObject:
    """Create the Event ``build_event`` describes through ``client.create`` (both adapters)."""
    event = build_event(
        involved, reason=reason, message=message, type=type, component=component, now=now
    )
    return client.create(EVENTS, event, namespace=event["metadata"]["namespace"])
