"""The pydantic base for API objects and the parse entry point that turns errors into field paths.

Models are frozen and use Kubernetes' camelCase names as aliases (``min_values`` is read from and
written to ``minValues``). ``ApiModel`` forbids unknown fields, as the API server does for fields of
a structural schema with strict field validation; ``LenientModel`` ignores them (for core/v1 objects
Jointer only reads part of).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import pydantic
from pydantic.alias_generators import to_camel

from provisioner.apis.errors import ApiValidationError, FieldProblem

__all__ = ["ApiModel", "LenientModel", "format_location", "parse_object", "to_wire"]


class ApiModel(pydantic.BaseModel):
    """Frozen, camelCase-aliased, unknown fields rejected."""

    model_config = pydantic.ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="forbid",
        validate_default=False,
    )


class LenientModel(pydantic.BaseModel):
    """Frozen, camelCase-aliased, unknown fields ignored."""

    model_config = pydantic.ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="ignore",
    )


M = TypeVar("M", bound=pydantic.BaseModel)


def format_location(loc: tuple[int | str, ...]) -> str:
    """Render a pydantic error location as a Kubernetes field path (``spec.taints[0].key``)."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif path:
            path += f".{part}"
        else:
            path = str(part)
    return path


def _message(error: Mapping[str, Any]) -> str:
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required value"
    message = str(error.get("msg", "invalid value"))
    # pydantic prefixes messages from our validators with "Value error, "
    return message.removeprefix("Value error, ")


def parse_object(model: type[M], data: object, *, kind: str) -> M:
    """Validate ``data`` (a decoded JSON/YAML object) as ``model``.

    Raises:
        ApiValidationError: naming ``kind``, the object's ``metadata.name`` and every bad field.
    """
    name = None
    if isinstance(data, Mapping):
        metadata = data.get("metadata")
        if isinstance(metadata, Mapping) and isinstance(metadata.get("name"), str):
            name = metadata["name"]
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        problems = [
            FieldProblem(format_location(tuple(err["loc"])), _message(err))
            for err in exc.errors(include_url=False)
        ]
        raise ApiValidationError(kind, name, problems) from exc


def to_wire(model: pydantic.BaseModel) -> dict[str, Any]:
    """Serialise to the Kubernetes JSON shape: camelCase, unset and None fields omitted."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
