"""Reading Kubernetes manifests from files, directories and standard input.

`jointer plan -f PATH` accepts YAML or JSON files (multi-document YAML and ``kind: List``
allowed), directories (every ``*.yaml``, ``*.yml`` and ``*.json`` inside, sorted by name) and
``-`` for standard input. Every error names the file and the document index.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NamedTuple, TextIO

import yaml

from solver.forked import Forked, fork_allowed

__all__ = ["Document", "ManifestError", "load_documents"]

_BASE_LOADER: Final[type[Any]] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's C loader when PyYAML was built with it (ten times faster), else the pure one."""


class _Loader(_BASE_LOADER):  # type: ignore[misc]
    """The safe loader, resolving each distinct plain scalar's type once per stream."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._plain: dict[str, str] = {}

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: tuple[bool, bool]) -> str:
        """The tag of an untagged node (PyYAML's rules; cached for plain scalars)."""
        if kind is yaml.ScalarNode and implicit[0]:
            tag = self._plain.get(value)
            if tag is None:
                tag = self._plain[value] = super().resolve(kind, value, implicit)
            return tag
        return str(super().resolve(kind, value, implicit))


_STR: Final = "tag:yaml.org,2002:str"
_MAP: Final = "tag:yaml.org,2002:map"
_SEQ: Final = "tag:yaml.org,2002:seq"
_MERGE: Final = "tag:yaml.org,2002:merge"
_VALUE: Final = "tag:yaml.org,2002:value"
_ScalarEvent: Final = yaml.ScalarEvent
_MappingStartEvent: Final = yaml.MappingStartEvent
_MappingEndEvent: Final = yaml.MappingEndEvent
_SequenceStartEvent: Final = yaml.SequenceStartEvent
_SequenceEndEvent: Final = yaml.SequenceEndEvent
_DocumentStartEvent: Final = yaml.DocumentStartEvent
_DocumentEndEvent: Final = yaml.DocumentEndEvent
_StreamEndEvent: Final = yaml.StreamEndEvent

PARALLEL_FROM: Final = 1 << 23
"""Characters from which `jointer plan` reads a YAML file in two processes (~16,000 pods).

Below it the line reader (:func:`_from_lines`) reads the whole file in this process in no
more CPU than this process spends on its half with a child alive (fork, the child's pickled
half, copy-on-write faults while it runs): measured at 1k-10k diverse pods."""

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


def load_documents(
    paths: Iterable[str], *, stdin: TextIO | None = None, workers: int = 1
) -> list[Document]:
    """Read every object from ``paths`` in order.

    With ``workers`` 2 or more, a large YAML file is read in two halves at once (see
    :func:`load_yaml_documents`).

    Raises:
        ManifestError: for a missing path, unparseable YAML/JSON or a document that is not an
            object with a ``kind``.
    """
    documents: list[Document] = []
    for path in paths:
        for source, text in _read_sources(path, stdin):
            documents.extend(_parse(source, text, workers))
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


def _parse(source: str, text: str, workers: int) -> Iterator[Document]:
    if source.endswith(".json"):
        try:
            raw_docs: list[object] = [json.loads(text)]
        except json.JSONDecodeError as exc:
            raise ManifestError(f"{source}: invalid JSON: {exc}") from exc
    else:
        try:
            raw_docs = load_yaml_documents(text, workers=workers)
        except yaml.YAMLError as exc:
            raise ManifestError(f"{source}: invalid YAML: {_yaml_problem(exc)}") from exc
        except ValueError as exc:  # a scalar PyYAML cannot build (a timestamp's month 13)
            raise ManifestError(f"{source}: invalid YAML: {exc}") from exc
    index = 0
    for raw in raw_docs:
        if raw is None:  # an empty document between `---` separators
            continue
        for body in _expand_lists(source, index, raw):
            yield Document(source, index, body)
        index += 1


def load_yaml_documents(
    text: str, *, workers: int = 1, parallel_from: int = PARALLEL_FROM
) -> list[object]:
    """Every document of ``text``, exactly as ``yaml.safe_load_all`` reads them.

    Plain manifests (no anchors, aliases or explicit tags) are built straight from the
    parser's events (:func:`_from_events`); any other text, or text the parser rejects, goes
    through the composer (:func:`_from_nodes`), which also raises PyYAML's errors.

    With ``workers`` 2 or more and at least ``parallel_from`` characters, the text is cut in
    two at a document start near its middle and a forked child reads the second half while
    this process reads the first (:func:`_in_two`); anything unusual reads it whole.

    Raises:
        yaml.YAMLError: invalid YAML.
    """
    if workers >= 2 and len(text) >= parallel_from:  # noqa: PLR2004 - two halves
        cut = _document_start_near_middle(text)
        if cut is not None:
            halves = _in_two(text, cut)
            if halves is not None:
                return halves
    return _load_whole(text)


_DOCUMENT_START: Final = re.compile(r"^---(?=[ \t\r\n]|\Z)", re.MULTILINE)


def _document_start_near_middle(text: str) -> int | None:
    """Where a ``---`` line at column 0 at or after the middle of ``text`` starts, if any.

    libyaml reads such a line as a document start wherever it is (a plain or block scalar
    ends before column 0, a quoted scalar or flow collection reaching it is an error), so the
    documents before it and from it are those of the whole text. Directives (``%TAG``)
    belong to the document after them: text with any is not cut.
    """
    if text.startswith("%") or "\n%" in text:
        return None
    found = _DOCUMENT_START.search(text, len(text) // 2)
    return found.start() if found is not None and found.start() > 0 else None


def _in_two(text: str, cut: int) -> list[object] | None:
    """The documents of ``text[:cut]`` read here and of ``text[cut:]`` by a forked child.

    The child sends its documents back pickled (``solver.forked``). None when either half
    fails: the whole text is then read again in this process, which raises its errors with
    the whole text's line numbers.
    """
    if not fork_allowed():
        return None  # no fork here, or another thread may hold a lock the child would need
    child = Forked.start(lambda: (_load_whole(text[cut:]),))
    if child is None:
        return None
    first: list[object] | None = None
    try:
        first = _load_whole(text[:cut])
    except yaml.YAMLError:
        first = None
    finally:
        try:
            _, second = child.result(None)
        except Exception:  # noqa: BLE001 - the whole text is read again, raising it there
            second = None
    if first is None or second is None:
        return None
    return first + second


def _load_whole(text: str) -> list[object]:
    """The documents of ``text`` read in this process (see :func:`load_yaml_documents`)."""
    try:
        return _from_lines(text)
    except _NotPlainError:
        pass
    try:
        return _from_events(text)
    except (_NotPlainError, yaml.YAMLError):
        return _from_nodes(text)


class _NotPlainError(Exception):
    """The text needs the composer (an anchor, alias, explicit tag, merge or odd key)."""


_SCALAR_KEYS: Final = frozenset({str, int, float, bool})
"""Key types built directly (others, e.g. ``null`` or timestamps, go the composer's way)."""


def _from_events(text: str) -> list[object]:  # noqa: C901, PLR0912, PLR0915 - one hot loop
    """The documents of ``text`` built from the (C) parser's events, or :class:`_NotPlainError`.

    No node trees: each scalar, map and list is built as its event arrives. A distinct plain
    scalar is resolved (and, when not a string, constructed by PyYAML's safe constructor)
    once per stream; the values it can give (numbers, booleans, None, timestamps) are
    immutable, so sharing them is safe. Twice as fast as :func:`_from_nodes`.

    Anchors and aliases are read as PyYAML reads them: an alias is the anchored object
    itself, and anchors hold within their document. What PyYAML would refuse or build in
    its own way (an undefined or repeated anchor, an alias to a container still open, a
    merge key) goes to the composer.
    """
    loader = _Loader(text)
    get = loader.get_event
    plain: dict[str, object] = {}
    documents: list[object] = []
    anchors: dict[str, object] = {}
    outer: list[tuple[Any, object]] = []  # the enclosing containers with their pending keys
    missing: Any = outer  # no pending key (a sentinel no scalar equals)
    top: Any = None  # the container being filled (None at a document's root)
    key: object = missing
    root: object = None
    try:
        get()  # StreamStartEvent
        while True:
            event = get()
            cls = event.__class__
            value: Any
            if cls is _ScalarEvent:
                if event.tag is not None:
                    raise _NotPlainError
                value = event.value
                if event.implicit[0]:
                    value = plain.get(value, missing)
                    if value is missing:
                        value = plain[event.value] = _plain_scalar(loader, event.value)
                if event.anchor is not None:
                    _anchor(anchors, event.anchor, value)
            elif cls is _MappingStartEvent or cls is _SequenceStartEvent:
                if event.tag is not None:
                    raise _NotPlainError
                value = {} if cls is _MappingStartEvent else []
                if event.anchor is not None:
                    _anchor(anchors, event.anchor, value)
            elif cls is _MappingEndEvent or cls is _SequenceEndEvent:
                top, key = outer.pop()
                continue
            elif cls is _DocumentEndEvent:
                documents.append(root)
                continue
            elif cls is _DocumentStartEvent:
                anchors = {}
                continue
            elif cls is _StreamEndEvent:
                return documents
            else:  # an alias: the anchored object, unless it is a container still open
                value = anchors.get(event.anchor, missing)
                if value is missing or value is top or any(value is o for o, _ in outer):
                    raise _NotPlainError
                cls = _ScalarEvent  # nothing to open
            if top is None:
                root = value
            elif top.__class__ is list:
                top.append(value)
            elif key is missing:
                if value.__class__ not in _SCALAR_KEYS:
                    raise _NotPlainError
                key = value
                continue
            else:
                top[key] = value
                key = missing
            if cls is not _ScalarEvent:
                outer.append((top, key))
                top, key = value, missing
    finally:
        loader.dispose()


def _anchor(anchors: dict[str, object], name: str, value: object) -> None:
    """Note ``value`` under anchor ``name`` (a repeated anchor goes to the composer)."""
    if name in anchors:
        raise _NotPlainError
    anchors[name] = value


def _unusual(text: str) -> bool:
    """Whether ``text`` has what :func:`_from_lines` leaves to libyaml.

    That is non-ASCII or control characters (tabs, CR), double quotes or comments.
    """
    return (
        not text.isascii() or '"' in text or "#" in text or not text.replace("\n", "").isprintable()
    )


_KEY_LINE: Final = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_./-]*):(?: (.*))?\Z")
_PLAIN: Final = re.compile(r"(?:[A-Za-z0-9_./+~^$(<=;]|-(?=[^ ]))(?:(?!: )[^#])*(?<![: ])\Z")
_QUOTED: Final = re.compile(r"'(?:[^']|'')*'\Z")
_INDENT: Final = re.compile(r" *")


_BLOCK: Final = object()
"""A line's value that is the block below it (``key:``)."""
_ANCHOR_NAME: Final = re.compile(r"[A-Za-z0-9_-]+\Z")


class _Anchored(NamedTuple):
    """A line's value that is the block below it, anchored (``key: &name``)."""

    name: str


class _Alias(NamedTuple):
    """A line's value that is an anchored block above it (``key: *name``)."""

    name: str


_NEW_LIST: Final = object()
_NEW_MAP: Final = object()
_SEPARATOR: Final = (-1, False, None, None)


def _from_lines(text: str) -> list[object]:  # noqa: C901, PLR0912, PLR0915 - one hot loop
    """The documents of block-style ``text`` read line by line, or :class:`_NotPlainError`.

    Only the plainest block YAML (what PyYAML's and kubectl's dumpers write for manifests)
    is read here: printable ASCII; one ``key: value``, ``key:``, ``- key: value`` or
    ``- value`` per line; values plain (resolved as :func:`_plain_scalar` resolves them),
    single-quoted on one line, ``[]`` or ``{}``, an anchored block (``key: &name``) or an
    alias (``key: *name``, the anchored object itself, as PyYAML builds it, anchors holding
    within their document); ``---`` between documents. Anything else (comments, flow
    collections, double quotes, block or multi-line scalars, other anchors, tags, empty
    values or documents, odd indentation, non-string keys) raises
    :class:`_NotPlainError` and is read by libyaml instead, so what this returns is always
    what ``yaml.safe_load_all`` returns. Each distinct line is looked at once.
    """
    if not text or _unusual(text):
        raise _NotPlainError
    loader = _Loader("")
    shapes: dict[str, tuple[int, bool, str | None, object]] = {"---": _SEPARATOR}
    scalars: dict[str, object] = {}
    new_list, new_map, block = _NEW_LIST, _NEW_MAP, _BLOCK
    documents: list[object] = []
    stack: list[tuple[int, Any]] = []  # open containers, innermost last, with their column
    root: object = None
    pending: Any = None  # the mapping whose last key (``key:``) awaits a block value
    pending_key: str | None = None
    pending_at = 0
    pending_anchor: str | None = None
    anchors: dict[str, object] = {}
    started = False  # a `---` opened a document
    try:
        for line in text.split("\n"):
            if not line:
                continue
            shape = shapes.get(line)
            if shape is None:
                shape = shapes[line] = _line_shape(line, loader, scalars)
            column, item, key, value = shape
            if column < 0:  # ---
                if (root is None and started) or pending is not None:
                    raise _NotPlainError  # an empty document or value
                if root is not None:
                    documents.append(root)
                root, stack, started, anchors = None, [], True, {}
                continue
            if pending is not None:
                if column > pending_at or (column == pending_at and item):
                    child: Any = [] if item else {}
                    pending[pending_key] = child
                    stack.append((column, child))
                    pending = None
                    if pending_anchor is not None:
                        if pending_anchor in anchors:
                            raise _NotPlainError  # a repeated anchor
                        anchors[pending_anchor] = child
                        pending_anchor = None
                else:
                    raise _NotPlainError  # an empty value (null)
            elif root is None:
                if column:
                    raise _NotPlainError
                root = [] if item else {}
                stack.append((0, root))
            at, top = stack[-1]
            while at > column or (at == column and not item and top.__class__ is list):
                stack.pop()
                if not stack:
                    raise _NotPlainError
                at, top = stack[-1]
            if at != column:
                raise _NotPlainError
            if item:
                if top.__class__ is not list:
                    raise _NotPlainError
                if key is not None:
                    mapping: dict[str, object] = {}
                    top.append(mapping)
                    column += 2
                    stack.append((column, mapping))
                    top = mapping
            elif top.__class__ is not dict:
                raise _NotPlainError
            if value is new_list:
                value = []
            elif value is new_map:
                value = {}
            elif value is block:
                pending, pending_key, pending_at = top, key, column
                continue
            elif value.__class__ is _Anchored:
                pending, pending_key, pending_at = top, key, column
                pending_anchor = value.name
                continue
            elif value.__class__ is _Alias:
                value = anchors.get(value.name, anchors)
                if value is anchors or any(value is open_ for _, open_ in stack):
                    raise _NotPlainError  # undefined, or a container still open
            if key is None:
                top.append(value)
            else:
                top[key] = value
        if pending is not None or root is None:
            raise _NotPlainError
        documents.append(root)
        return documents
    finally:
        loader.dispose()


def _line_shape(
    line: str, loader: Any, scalars: dict[str, object]
) -> tuple[int, bool, str | None, object]:
    """``(column, item, key, value)`` of one line of :func:`_from_lines`."""
    if line[-1] == " ":
        raise _NotPlainError
    column = _INDENT.match(line).end()  # type: ignore[union-attr]
    content = line[column:]
    item = content[:2] == "- "
    if item:
        content = content[2:]
    found = _KEY_LINE.match(content)
    if found is None:
        if not item or not content or content[0] in "- ":
            raise _NotPlainError
        return column, True, None, _scalar(content, loader, scalars)
    key = _scalar(found.group(1), loader, scalars)
    if key.__class__ is not str:
        raise _NotPlainError
    raw = found.group(2)
    if raw is None:
        return column, item, key, _BLOCK
    if not raw or raw[0] == " ":
        raise _NotPlainError
    if raw[0] in "&*":
        if _ANCHOR_NAME.match(raw, 1) is None:
            raise _NotPlainError  # an anchored scalar or an odd name
        return column, item, key, (_Anchored if raw[0] == "&" else _Alias)(raw[1:])
    return column, item, key, _scalar(raw, loader, scalars)


def _scalar(raw: str, loader: Any, scalars: dict[str, object]) -> object:
    """A one-line value of :func:`_from_lines` (``[]``, ``{}``: :data:`_NEW_LIST`, ...)."""
    value = scalars.get(raw, scalars)
    if value is not scalars:
        return value
    if raw == "[]":
        value = _NEW_LIST
    elif raw == "{}":
        value = _NEW_MAP
    elif raw[0] == "'":
        if _QUOTED.match(raw) is None:
            raise _NotPlainError
        value = raw[1:-1].replace("''", "'")
    elif _PLAIN.match(raw) is None:
        raise _NotPlainError
    else:
        value = _plain_scalar(loader, raw)
    scalars[raw] = value
    return value


def _resolved_first_characters() -> frozenset[str] | None:
    """The first characters PyYAML's implicit resolvers look at, None if they see any."""
    resolvers = _Loader.yaml_implicit_resolvers
    if None in resolvers or _Loader.yaml_path_resolvers:
        return None
    return frozenset(key for key in resolvers if key)


_RESOLVED_FIRST: Final = _resolved_first_characters()


def _plain_scalar(loader: Any, text: str) -> object:
    """A plain scalar's value: a string unless PyYAML's implicit resolvers say otherwise."""
    if _RESOLVED_FIRST is not None and text and text[0] not in _RESOLVED_FIRST:
        return text  # no resolver for its first character: PyYAML's resolve gives str
    tag = loader.resolve(yaml.ScalarNode, text, (True, False))
    if tag == _STR:
        return text
    if tag in (_MERGE, _VALUE):
        raise _NotPlainError
    return loader.construct_object(yaml.ScalarNode(tag, text), deep=True)


def _from_nodes(text: str) -> list[object]:
    """The documents of ``text`` from the (C) composer's node trees.

    Plain maps, lists and strings are built directly, and everything else (numbers,
    booleans, timestamps, merge keys, unhashable keys) goes through PyYAML's safe
    constructor. A third of the time of ``safe_load_all``.
    """
    loader = _Loader(text)
    try:
        documents: list[object] = []
        while loader.check_node():
            node = loader.get_node()
            documents.append(None if node is None else _Constructor(loader).build(node))
            # what PyYAML's construct_document resets after each document
            loader.constructed_objects = {}
            loader.recursive_objects = {}
        return documents
    finally:
        loader.dispose()


class _Constructor:
    """Builds Python objects from composed YAML nodes (see :func:`load_yaml_documents`)."""

    def __init__(self, loader: Any) -> None:
        self._safe = loader
        self._built: dict[int, object] = {}
        """Containers by node id within one document: aliases share one object, as in PyYAML."""

    def build(self, node: yaml.Node) -> object:
        """The Python value of ``node``."""
        if isinstance(node, yaml.ScalarNode):
            return node.value if node.tag == _STR else self._safe.construct_object(node, deep=True)
        built = self._built.get(id(node))
        if built is not None:
            return built
        if isinstance(node, yaml.MappingNode) and node.tag == _MAP:
            mapping: dict[Any, object] = {}
            self._built[id(node)] = mapping
            for key_node, value_node in node.value:
                key = None if key_node.tag == _MERGE else self.build(key_node)
                if not isinstance(key, str | int | float | bool):
                    del self._built[id(node)]
                    return self._safe.construct_object(node, deep=True)
                mapping[key] = self.build(value_node)
            return mapping
        if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:
            sequence: list[object] = []
            self._built[id(node)] = sequence
            sequence.extend(self.build(item) for item in node.value)
            return sequence
        return self._safe.construct_object(node, deep=True)


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
