"""The ``capacitybuffer.status`` reconciler: what each CapacityBuffer gets, in its status.

Per buffer, every 30 s (as Karpenter re-evaluates buffers) and on its changes: the buffer is
resolved as the provisioner plans it (:mod:`~provisioner.controllers.provisioning.buffers`),
its virtual pods are put into the room the cluster has
(:func:`~provisioner.controllers.provisioning.controller.bind_buffer_pods`), and the status says
``replicas`` (chunks), ``podTemplateRef`` (for a PodTemplate buffer), ``podTemplateGeneration``,
``provisioningStrategy`` and the conditions ``ReadyForProvisioning``, ``LimitedByQuotas`` and
``Provisioning`` (``True``, ``FitsExistingCapacity``, when all of its room exists). The
provisioner buys missing room itself; this reconciler only reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from provisioner.apis import conditions as cond
from provisioner.apis.base import to_wire
from provisioner.apis.conditions import parse_conditions
from provisioner.apis.errors import ApiValidationError
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.controllers.provisioning.buffers import (
    BUFFER_KIND,
    CONDITION_PROVISIONING,
    Resolution,
    resolve_all,
)
from provisioner.controllers.provisioning.controller import BUFFER_REQUEUE, bind_buffer_pods
from provisioner.controllers.provisioning.planner import PlannerConfig
from provisioner.kube.errors import KubeApiError, NotFoundError
from provisioner.kube.protocol import JsonObject
from provisioner.kube.resource import CAPACITY_BUFFERS
from provisioner.runtime.reconciler import Request, Result

__all__ = ["NAME", "CapacityBufferController", "buffer_status"]

NAME: Final = "capacitybuffer.status"
REASON_FITS: Final = "FitsExistingCapacity"
REASON_WAITING: Final = "WaitingForCapacity"


def buffer_status(
    buffer: Mapping[str, Any], resolution: Resolution, unbound: int, now: datetime
) -> JsonObject:
    """The ``status`` of ``buffer`` for ``resolution`` with ``unbound`` chunks without room."""
    status = buffer.get("status")
    old: Mapping[str, Any] = status if isinstance(status, Mapping) else {}
    try:
        conditions = parse_conditions(old.get("conditions") or [])
    except ApiValidationError:
        conditions = ()
    generation = resolution.generation
    for c in resolution.conditions:
        conditions = cond.set_condition(
            conditions,
            c.type,
            "True" if c.status == "True" else "False",
            now=now,
            reason=c.reason,
            message=c.message,
            observed_generation=generation,
        )
    if resolution.template is not None:
        fits = unbound == 0
        conditions = cond.set_condition(
            conditions,
            CONDITION_PROVISIONING,
            "True" if fits else "False",
            now=now,
            reason=REASON_FITS if fits else REASON_WAITING,
            message=(
                f"{resolution.chunks} chunk(s) fit existing capacity"
                if fits
                else f"{unbound} of {resolution.chunks} chunk(s) wait for capacity"
            ),
            observed_generation=generation,
        )
    else:
        conditions = cond.clear_condition(conditions, CONDITION_PROVISIONING)
    spec = buffer.get("spec") or {}
    result: dict[str, Any] = {
        "replicas": resolution.chunks,
        "provisioningStrategy": resolution.strategy,
        "conditions": [to_wire(c) for c in conditions],
    }
    by_template = isinstance(spec, Mapping) and spec.get("podTemplateRef") is not None
    if resolution.template is not None:
        result["podTemplateGeneration"] = resolution.template_generation
        if by_template:
            result["podTemplateRef"] = {"name": resolution.template_name}
    for stale in ("podTemplateGeneration", "podTemplateRef"):
        if stale not in result and stale in old:
            result[stale] = None  # merge-patch: removed
    return result


class CapacityBufferController(ControllerBase):
    """Writes each CapacityBuffer's status; requeued every 30 s.

    Args:
        ports: what the controller acts through.
        planner: the planner settings (the room is found as the provisioner finds it).
    """

    name: Final = NAME

    def __init__(self, *, ports: Ports, planner: PlannerConfig) -> None:
        super().__init__(ports, NAME)
        self._planner = planner

    def reconcile(self, request: Request) -> Result:
        """Resolve the buffer ``request`` names and patch its status when it changed."""
        now = self._clock.now()
        objects, _ = self._state.group_objects()
        buffer = next(
            (
                o
                for o in objects
                if o.get("kind") == BUFFER_KIND
                and (o.get("metadata") or {}).get("name") == request.name
                and ((o.get("metadata") or {}).get("namespace") or "default")
                == (request.namespace or "default")
            ),
            None,
        )
        if buffer is None:
            return Result.done()
        key = f"{request.namespace or 'default'}/{request.name}"
        resolution = next(r for r in resolve_all(objects) if r.key == key)
        _, unbound = bind_buffer_pods(self._state.snapshot(now), self._planner)
        prefix = f"{resolution.namespace}/capacitybuffer-{resolution.name}-"
        missing = sum(1 for k in unbound if k.startswith(prefix))
        status = buffer_status(buffer, resolution, missing, now)
        if {k: v for k, v in status.items() if v is not None} != _comparable(buffer.get("status")):
            try:
                self._kube.patch_status(
                    CAPACITY_BUFFERS,
                    resolution.name,
                    {"status": status},
                    namespace=resolution.namespace,
                )
            except NotFoundError:
                return Result.done()
            except KubeApiError as error:
                self._log.error(
                    "patching capacitybuffer status",
                    CapacityBuffer={"name": resolution.name, "namespace": resolution.namespace},
                    error=str(error),
                )
        return Result.after(BUFFER_REQUEUE)


def _comparable(status: object) -> object:
    return dict(status) if isinstance(status, Mapping) else None
