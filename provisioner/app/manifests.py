"""Reading Kubernetes manifests from files, directories and standard input.

`jointer plan -f PATH` accepts YAML or JSON files (multi-document YAML and ``kind: List``
allowed), directories (every ``*.yaml``, ``*.yml`` and ``*.json`` inside, sorted by name) and
``-`` for standard input. Every error names the file and the document index.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO

import yaml

__all__ = ["Document", "ManifestError", "load_documents"]

MANIFEST_SUFFIXES: Final = (".yaml", ".yml", ".json")
STDIN: Final = "-"


class ManifestError(ValueError):
    """A manifest that cannot be read; the message names the file and document."""


@dataclass(frozen=True, slots=True)
class Document:
    """One Kubernetes object read from a manifest."""

    source: str
    index: int
    body: Mapping[str, Any]

    @property
    def kind(self) -> str:
        """The object's ``kind`` ("" when absent)."""
        kind = self.body.get("kind", "")
        return kind if isinstance(kind, str) else ""

    @property
    def api_version(self) -> str:
        """The object's ``apiVersion`` ("" when absent)."""
        version = self.body.get("apiVersion", "")
        return version if isinstance(version, str) else ""

    @property
    def where(self) -> str:
        """``file (document N)`` for messages."""
        return f"{self.source} (document {self.index})"


def load_documents(paths: Iterable[str], *, stdin: TextIO | None = None) -> list[Document]:
    """Read every object from ``paths`` in order.

    Raises:
        ManifestError: for a missing path, unparseable YAML/JSON or a document that is not an
            object with a ``kind``.
    """
    documents: list[Document] = []
    for path in paths:
        for source, text in _read_sources(path, stdin):
            documents.extend(_parse(source, text))
    return documents


def _read_sources(path: str, stdin: TextIO | None) -> Iterator[tuple[str, str]]:
    if path == STDIN:
        yield "<stdin>", (stdin or sys.stdin).read()
        return
    target = Path(path)
    if target.is_dir():
        files = sorted(p for p in target.iterdir() if p.suffix in MANIFEST_SUFFIXES and p.is_file())
        for file in files:
            yield str(file), _read_text(file)
        return
    if not target.exists():
        raise ManifestError(f"{path}: no such file or directory")
    yield str(target), _read_text(target)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read: {exc}") from exc


def _parse(source: str, text: str) -> Iterator[Document]:
    if source.endswith(".json"):
        try:
            raw_docs: list[object] = [json.loads(text)]
        except json.JSONDecodeError as exc:
            raise ManifestError(f"{source}: invalid JSON: {exc}") from exc
    else:
        try:
            raw_docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError as exc:
            raise ManifestError(f"{source}: invalid YAML: {_yaml_problem(exc)}") from exc
    index = 0
    for raw in raw_docs:
        if raw is None:  # an empty document between `---` separators
            continue
        for body in _expand_lists(source, index, raw):
            yield Document(source, index, body)
        index += 1


def _expand_lists(source: str, index: int, raw: object) -> Iterator[Mapping[str, Any]]:
    where = f"{source} (document {index})"
    if not isinstance(raw, Mapping):
        raise ManifestError(f"{where}: expected an object, got {type(raw).__name__}")
    kind = raw.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ManifestError(f"{where}: kind: required value")
    if kind == "List" or (kind.endswith("List") and isinstance(raw.get("items"), list)):
        items = raw.get("items")
        if not isinstance(items, list):
            raise ManifestError(f"{where}: items: must be a list")
        for position, item in enumerate(items):
            if not isinstance(item, Mapping) or not isinstance(item.get("kind"), str):
                raise ManifestError(f"{where}: items[{position}]: expected an object with a kind")
            yield item
        return
    yield raw


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return str(problem)
