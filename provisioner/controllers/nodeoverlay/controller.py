"""``nodeoverlay.validation``: each NodeOverlay's ``ValidationSucceeded`` and ``Ready`` conditions.

The provisioner applies every valid NodeOverlay to the instance types of each batch (prices and
extended capacity; :mod:`provisioner.controllers.provisioning.overlays`), the same in
`jointer run`, `jointer simulate` and `jointer plan`. This controller tells the user whether an
overlay is in force: a valid one gets ``ValidationSucceeded=True`` and ``Ready=True``; one
Jointer cannot read gets ``ValidationSucceeded=False`` with the message naming the field (and
is left out of planning), ``Ready=False``, and a ``Warning`` event. Status is written with a
merge patch, only when it changed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from provisioner.apis import conditions as cond
from provisioner.apis.base import to_wire
from provisioner.apis.conditions import parse_conditions
from provisioner.apis.nodeoverlay import NODEOVERLAY_API_VERSION, NODEOVERLAY_KIND
from provisioner.controllers.events import Event, object_ref
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.kube.errors import KubeApiError, NotFoundError
from provisioner.kube.resource import NODE_OVERLAYS
from provisioner.runtime.reconciler import Request, Result

__all__ = ["NodeOverlayController"]

NAME: Final = "nodeoverlay.validation"
CONDITION_VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"
REASON_VALIDATION_FAILED: Final = "NodeOverlayValidationFailed"
RETRY: Final = timedelta(seconds=10)


class NodeOverlayController(ControllerBase):
    """Keeps each NodeOverlay's conditions current.

    Args:
        ports: what the controller acts through.
    """

    name: Final = NAME

    def __init__(self, *, ports: Ports) -> None:
        super().__init__(ports, NAME)

    def reconcile(self, request: Request) -> Result:
        """Validate the NodeOverlay ``request.name`` and write its conditions."""
        entry = self._state.overlay(request.name)
        if entry is None:
            return Result.done()
        now = self._clock.now()
        current = parse_conditions(entry.conditions)
        generation = entry.generation or None
        if entry.overlay is None:
            message = entry.error or "invalid"
            conditions = cond.set_false(
                current,
                CONDITION_VALIDATION_SUCCEEDED,
                now=now,
                reason=REASON_VALIDATION_FAILED,
                message=message[:1000],
                observed_generation=generation,
            )
            if conditions != current:
                self._events.publish(
                    Event(
                        object_ref(
                            NODEOVERLAY_KIND, entry.name, api_version=NODEOVERLAY_API_VERSION
                        ),
                        "Warning",
                        "FailedValidation",
                        message[:1000],
                    )
                )
                self._log.error(
                    "nodeoverlay validation failed", NodeOverlay={"name": entry.name}, error=message
                )
        else:
            conditions = cond.set_true(
                current, CONDITION_VALIDATION_SUCCEEDED, now=now, observed_generation=generation
            )
        conditions = cond.set_root_condition(
            conditions, (CONDITION_VALIDATION_SUCCEEDED,), now=now, observed_generation=generation
        )
        if conditions == current:
            return Result.done()
        body = {"status": {"conditions": [to_wire(c) for c in conditions]}}
        try:
            self._kube.patch_status(NODE_OVERLAYS, entry.name, body)
        except NotFoundError:
            return Result.done()
        except KubeApiError as error:
            self._log.error(
                "patching nodeoverlay status", NodeOverlay={"name": entry.name}, error=str(error)
            )
            return Result.after(RETRY)
        return Result.done()
