"""What a spot interruption leaves in the event stream, alike under `jointer run` and `simulate`.

Both drivers run the one replacement-first `interruption` reconciler, so both tests compare
against :data:`INTERRUPTION_EVENTS`: the warning on the Node and the NodeClaim, and the
replacement's launch.
"""

from __future__ import annotations

from collections.abc import Iterable

SPOT = "spot_interrupted"
"""The ``reason`` label of the interruption's metrics."""

Seen = tuple[str, str, str, str]
"""(role, type, reason, message) of one event."""

INTERRUPTION_EVENTS: tuple[Seen, ...] = (
    ("node", "Warning", "SpotInterrupted", "Spot interruption warning was triggered"),
    ("nodeclaim", "Warning", "SpotInterrupted", "Spot interruption warning was triggered"),
    ("replacement", "Normal", "DisruptionLaunching", "Launching NodeClaim: SpotInterrupted"),
)
_REASONS = frozenset(reason for _, _, reason, _ in INTERRUPTION_EVENTS)


def interruption_events(
    events: Iterable[tuple[str, str, str, str]], *, claim: str, node: str, replacement: str
) -> tuple[Seen, ...]:
    """The interruption's events among ``(Kind/name, type, reason, message)``, by role."""
    roles = {f"Node/{node}": "node", f"NodeClaim/{claim}": "nodeclaim"}
    roles[f"NodeClaim/{replacement}"] = "replacement"
    return tuple(
        sorted(
            (roles[obj], kind, reason, message)
            for obj, kind, reason, message in events
            if obj in roles and reason in _REASONS
        )
    )
