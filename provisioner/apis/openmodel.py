"""llmaz's OpenModel (``llmaz.io/v1alpha1``, cluster-scoped): the inference flavors of a model.

Only ``spec.inferenceConfig.flavors`` is read (``shared/batch-apis/llmaz``): each flavor has a
``name``, accelerator ``limits`` and a ``nodeSelector``; list order is preference order (at most
8). Pods of the model carry ``llmaz.io/model-name``; ``llmaz.io/inference-service-flavors``
(comma-separated names) selects and orders a subset.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import AfterValidator, Field

from provisioner.apis.base import LenientModel
from provisioner.apis.core import ObjectMeta
from provisioner.apis.nodeclaim import ResourceList

__all__ = [
    "MAX_FLAVORS",
    "OPENMODEL_API_GROUP",
    "OPENMODEL_KIND",
    "Flavor",
    "InferenceConfig",
    "OpenModel",
    "OpenModelSpec",
]

OPENMODEL_API_GROUP: Final = "llmaz.io"
OPENMODEL_KIND: Final = "OpenModel"
MAX_FLAVORS: Final = 8


class Flavor(LenientModel):
    """One accelerator flavor: where the model's pods may run and what each replica needs.

    Attributes:
        name: the flavor name pods select it by.
        limits: accelerators per replica (``nvidia.com/gpu: 1``); set as the first
            container's requests and limits.
        node_selector: the nodes of this flavor (empty: every node).
        params: other parameters (``INSTANCE-TYPE``, ``TP``...); not read.
    """

    name: str
    limits: ResourceList = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    params: dict[str, str] = Field(default_factory=dict)


def _check_flavors(flavors: tuple[Flavor, ...]) -> tuple[Flavor, ...]:
    if len(flavors) > MAX_FLAVORS:
        message = f"must have at most {MAX_FLAVORS} items"
        raise ValueError(message)
    names = [f.name for f in flavors]
    duplicate = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if duplicate is not None:
        message = f"duplicate flavor name {duplicate!r}"
        raise ValueError(message)
    return flavors


class InferenceConfig(LenientModel):
    """``spec.inferenceConfig``: the flavors, in preference order."""

    flavors: Annotated[tuple[Flavor, ...], AfterValidator(_check_flavors)] = ()


class OpenModelSpec(LenientModel):
    """The part of an OpenModel's spec Jointer reads."""

    inference_config: InferenceConfig | None = None


class OpenModel(LenientModel):
    """An llmaz OpenModel (``llmaz.io/v1alpha1``)."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: OpenModelSpec = Field(default_factory=OpenModelSpec)

    @property
    def flavors(self) -> tuple[Flavor, ...]:
        """The flavors in preference order (none when the model has no inference config)."""
        config = self.spec.inference_config
        return config.flavors if config is not None else ()
