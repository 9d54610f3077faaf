"""Turn the decoded documents of a manifest file into typed API objects.

Decoding (YAML/JSON, reading the file) is the caller's I/O; this module is pure. It dispatches each
document on ``kind`` to a model and parses it with :func:`provisioner.apis.base.parse_object`, so a
bad document is reported with its file, its index and the field::

    nodepools.yaml document 2: NodePool default: spec.weight: must be between 1 and 100

Error tree::

    ValueError
     └── ManifestError        one document of a manifest is not a valid object
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

import pydantic

from provisioner.apis.base import parse_object
from provisioner.apis.errors import ApiValidationError
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.apis.nodeoverlay import NodeOverlay
from provisioner.apis.nodepool import NodePool

__all__ = ["KARPENTER_KINDS", "Document", "ManifestError", "parse_documents"]

KARPENTER_KINDS: Final[Mapping[str, type[pydantic.BaseModel]]] = MappingProxyType(
    {"NodePool": NodePool, "NodeClaim": NodeClaim, "NodeOverlay": NodeOverlay}
)
"""The ``karpenter.sh`` kinds of this package; callers add others (``EC2NodeClass``)."""


class ManifestError(ValueError):
    """A document of a manifest that is not a valid object.

    Attributes:
        source: the file (or other origin) the documents came from.
        index: the 0-based index of the document in it.
        detail: what is wrong; for invalid objects, the :class:`ApiValidationError` text.
    """

    def __init__(self, source: str, index: int, detail: str) -> None:
        self.source = source
        self.index = index
        self.detail = detail
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"{self.source} document {self.index}: {self.detail}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Document:
    """One parsed document: where it came from, its kind and the object."""

    source: str
    index: int
    kind: str
    obj: pydantic.BaseModel


def parse_documents(
    documents: Iterable[object],
    *,
    source: str,
    kinds: Mapping[str, type[pydantic.BaseModel]] = KARPENTER_KINDS,
    skip_unknown: bool = True,
) -> list[Document]:
    """Parse decoded documents (``yaml.safe_load_all`` output, or a JSON list) by kind.

    Empty documents are skipped, and so are kinds not in ``kinds`` unless ``skip_unknown`` is false.

    Args:
        documents: the decoded documents, in file order.
        source: the file name, used in error messages.
        kinds: kind to model.
        skip_unknown: whether to ignore documents of other kinds.

    Raises:
        ManifestError: for the first document that is not an object, has no kind, has an unknown
            kind (when not skipped) or does not validate (chained from its ``ApiValidationError``).
    """
    parsed: list[Document] = []
    for index, document in enumerate(documents):
        if document is None:
            continue
        if not isinstance(document, Mapping):
            raise ManifestError(source, index, "not an object")
        kind = document.get("kind")
        if not isinstance(kind, str) or not kind:
            raise ManifestError(source, index, "kind: required value")
        model = kinds.get(kind)
        if model is None:
            if skip_unknown:
                continue
            raise ManifestError(source, index, f"kind: unsupported kind {kind}")
        try:
            obj = parse_object(model, document, kind=kind)
        except ApiValidationError as exc:
            raise ManifestError(source, index, str(exc)) from exc
        parsed.append(Document(source=source, index=index, kind=kind, obj=obj))
    return parsed
