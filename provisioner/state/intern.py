"""Sharing identical parts of cached models, so 50,000 replicas cost little more than one.

Replicas of one template differ in name, uid and node; their containers, requests,
tolerations, affinity, owner references, labels and conditions are equal. :class:`Interner`
replaces each such part of a freshly validated model by one canonical instance per distinct
value, and shares the per-instance bookkeeping pydantic keeps (``__pydantic_fields_set__``).

Sharing never changes what a model reads: a part is replaced only by an equal one (same types,
same values). It cannot leak a change from one object to another either: models are frozen, and
a shared dict is a :class:`FrozenDict`, which refuses mutation (copies of it are plain dicts).

Parts that carry a timestamp (a condition's ``lastTransitionTime``, a taint's ``timeAdded``) are
per-object in a real cluster, so they are not tabled (their own parts still are). The table is
bounded: when it is full it starts afresh, which only loses sharing for what comes next.
"""

from __future__ import annotations

import functools
import sys
import typing
from datetime import datetime
from typing import Any, Final, NoReturn, Self, TypeVar

import pydantic
from pydantic_core import SchemaSerializer

__all__ = ["DEFAULT_TABLE_LIMIT", "FrozenDict", "Interner"]

DEFAULT_TABLE_LIMIT: Final = 1 << 17
"""Distinct shared parts kept before the table starts afresh (~131k; ~20 MB at most)."""

_IDENTITY_STRINGS: Final = frozenset({"name", "uid", "resource_version", "generate_name"})
"""Fields of an object's own top-level parts whose strings are unique to it (not interned)."""

_ATOMS: Final = frozenset({int, float, bool, type(None)})

M = TypeVar("M", bound=pydantic.BaseModel)

_object_setattr = object.__setattr__
_intern = sys.intern


def _has_datetime(annotation: Any, seen: set[type]) -> bool:
    """Whether values of ``annotation`` may hold a timestamp (then they are per-object)."""
    if annotation is datetime:
        return True
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        if annotation in seen:
            return False
        seen.add(annotation)
        return any(_has_datetime(f.annotation, seen) for f in annotation.model_fields.values())
    return any(_has_datetime(arg, seen) for arg in typing.get_args(annotation))


@functools.cache
def _is_model(cls: type) -> bool:
    # pydantic's metaclass makes isinstance() slow; a class is asked once
    return issubclass(cls, pydantic.BaseModel)


class FrozenDict(dict[Any, Any]):
    """A dict that refuses mutation: a map shared by several cached models.

    It is a ``dict`` for every reader (``isinstance``, ``json``, ``orjson``, pydantic);
    ``copy.copy``, ``copy.deepcopy`` and ``dict(...)`` of it give an ordinary mutable dict.
    """

    __slots__ = ()

    def _refuse(self, *_: object, **__: object) -> NoReturn:
        raise TypeError("a cached object's map is shared and read-only; copy it with dict()")

    __setitem__ = _refuse
    __delitem__ = _refuse
    __ior__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse

    def __copy__(self) -> dict[Any, Any]:
        """A plain, mutable copy."""
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        """A plain, mutable copy (keys and values are strings and numbers)."""
        return dict(self)

    def __reduce__(self) -> tuple[type[Self], tuple[dict[Any, Any]]]:
        """Pickled as its items (unpickles as a FrozenDict)."""
        return (type(self), (dict(self),))


_EMPTY: Final = FrozenDict()
_UNSET: Final = object()
"""The key of a field left to its default (the default is the class's, so equal)."""


class Interner:
    """Canonical instances of the shareable parts of cached models (one per cache).

    Args:
        limit: distinct parts tabled before the table starts afresh.
    """

    __slots__ = ("_fields_sets", "_limit", "_plans", "_serializers", "_stamp_fields", "_table")

    def __init__(self, *, limit: int = DEFAULT_TABLE_LIMIT) -> None:
        self._limit = limit
        self._table: dict[Any, Any] = {}
        self._fields_sets: dict[frozenset[str], set[str]] = {}
        self._plans: dict[type[pydantic.BaseModel], tuple[tuple[str, bool], ...]] = {}
        self._stamp_fields: dict[type[pydantic.BaseModel], tuple[str, ...]] = {}
        self._serializers: dict[tuple[type[pydantic.BaseModel], str], SchemaSerializer | None] = {}

    def __len__(self) -> int:
        """How many distinct parts are tabled."""
        return len(self._table)

    def share(self, model: M) -> M:
        """``model`` (freshly validated, not yet published) with its parts made canonical.

        The model and its direct sub-models (``metadata``, ``spec``, ``status``) are the
        object's own and are kept; everything below them is replaced by canonical instances.
        Returns ``model`` itself.
        """
        self._own(model, top=True)
        return model

    # -- internals ---------------------------------------------------------------------------

    def _plan(self, cls: type[pydantic.BaseModel]) -> tuple[tuple[str, bool], ...]:
        """``cls``'s fields, each with whether its default comes from a factory."""
        plan = self._plans.get(cls)
        if plan is None:
            plan = tuple(
                (name, info.default_factory is not None) for name, info in cls.model_fields.items()
            )
            self._plans[cls] = plan
        return plan

    def _serializer(self, cls: type[pydantic.BaseModel], name: str) -> SchemaSerializer | None:
        """How to write field ``name`` of ``cls`` as JSON (None: it holds a timestamp)."""
        key = (cls, name)
        if key not in self._serializers:
            annotation = cls.model_fields[name].annotation
            self._serializers[key] = (
                None
                if annotation is None or _has_datetime(annotation, set())
                else pydantic.TypeAdapter(annotation).serializer
            )
        return self._serializers[key]

    def _own(self, model: pydantic.BaseModel, *, top: bool) -> None:
        values = model.__dict__
        fields_set = model.__pydantic_fields_set__
        model_cls = model.__class__
        for name, factory in self._plan(model_cls):
            if not factory and name not in fields_set:
                continue  # the class's own immutable default
            value = values[name]
            cls = value.__class__
            if cls is str:
                if name not in _IDENTITY_STRINGS:
                    values[name] = _intern(value)
            elif cls in _ATOMS:
                pass
            elif not value:
                if cls is dict:
                    values[name] = _EMPTY
            elif top and _is_model(cls):
                self._own(value, top=False)
            else:
                values[name] = self._part(model_cls, name, value)
        self._share_fields_set(model)

    def _part(self, cls: type[pydantic.BaseModel], name: str, value: Any) -> Any:
        """The canonical instance of field ``name``'s value, found by its JSON (set fields only).

        Equal JSON of the set fields means equal values of equal types with the same fields
        set; writing it is cheap next to walking it, so a repeated part costs one write.
        """
        serializer = self._serializer(cls, name)
        if serializer is None:
            return self._canon(value)[0]
        key = (cls, name, serializer.to_json(value, exclude_unset=True))
        known = self._table.get(key)
        if known is None:
            known = self._canon(value)[0]  # new: its own parts may be known
            self._store(key, known)
        return known

    def _share_fields_set(self, model: pydantic.BaseModel) -> None:
        # pydantic only mutates this set on attribute assignment (refused: models are frozen)
        # and copies it in model_copy, so equal sets can be one set.
        fields_set = model.__pydantic_fields_set__
        frozen = frozenset(fields_set)
        shared = self._fields_sets.get(frozen)
        if shared is None:
            self._fields_sets[frozen] = fields_set
        elif shared is not fields_set:
            _object_setattr(model, "__pydantic_fields_set__", shared)

    def _canon(self, value: Any) -> tuple[Any, Any]:
        """The canonical instance of ``value`` and its key (None: not shareable).

        Keys: a string is its own key, another atom ``(type, value)``, an empty map or
        sequence ``(type,)``, and a tabled part the ``id`` of its canonical instance (which
        the table keeps alive as long as a key naming it is there).
        """
        cls = value.__class__
        if cls is str:
            return value, value
        if cls in _ATOMS:
            return value, (cls, value)
        if cls is tuple:
            return self._canon_tuple(value) if value else (value, (tuple,))
        if cls is dict or cls is FrozenDict:
            return self._canon_dict(value)
        if _is_model(cls):
            return self._canon_model(value)
        return value, None  # timestamps and anything else: this object's own

    def _canon_tuple(self, value: tuple[Any, ...]) -> tuple[Any, Any]:
        items: list[Any] = []
        keys: list[Any] = [tuple]
        shareable = True
        for item in value:
            cls = item.__class__
            if cls is str:
                keys.append(item)
            elif cls in _ATOMS:
                keys.append((cls, item))
            else:
                item, key = self._canon(item)  # noqa: PLW2901 - its canonical instance
                if key is None:
                    shareable = False
                keys.append(key)
            items.append(item)
        if not shareable:
            return tuple(items), None
        full = tuple(keys)
        known = self._table.get(full)
        if known is None:
            known = tuple(_intern(i) if i.__class__ is str else i for i in items)
            self._store(full, known)
        return known, id(known)

    def _canon_dict(self, value: dict[Any, Any]) -> tuple[Any, Any]:
        if not value:
            return _EMPTY, (dict,)
        keys: list[Any] = [dict]
        for k, v in value.items():
            cls = v.__class__
            if k.__class__ is not str or not (cls is str or cls in _ATOMS):
                return value, None  # nested maps are not shared
            keys += (k, v if cls is str else (cls, v))
        full = tuple(keys)
        known = self._table.get(full)
        if known is None:
            known = FrozenDict(
                {_intern(k): _intern(v) if v.__class__ is str else v for k, v in value.items()}
            )
            self._store(full, known)
        return known, id(known)

    def _stamps(self, cls: type[pydantic.BaseModel]) -> tuple[str, ...]:
        """``cls``'s own timestamp fields."""
        stamps = self._stamp_fields.get(cls)
        if stamps is None:
            stamps = tuple(
                name
                for name, info in cls.model_fields.items()
                if datetime in (info.annotation, *typing.get_args(info.annotation))
            )
            self._stamp_fields[cls] = stamps
        return stamps

    def _stamped(self, model: pydantic.BaseModel) -> tuple[Any, Any]:
        """A part with a timestamp set: its own, with its strings and parts shared."""
        values = model.__dict__
        for name, value in values.items():
            cls = value.__class__
            if cls is str:
                values[name] = _intern(value)
            elif cls not in _ATOMS and value:
                canonical = self._canon(value)[0]
                if canonical is not value:
                    values[name] = canonical
        self._share_fields_set(model)
        return model, None

    def _canon_model(self, model: pydantic.BaseModel) -> tuple[Any, Any]:
        values = model.__dict__
        cls = model.__class__
        for stamp in self._stamps(cls):
            if values[stamp] is not None:
                return self._stamped(model)
        fields_set = model.__pydantic_fields_set__
        keys: list[Any] = [cls]
        replaced: list[tuple[str, Any]] = []
        shareable = True
        for name, factory in self._plan(cls):
            unset = name not in fields_set
            if unset and not factory:
                keys.append(_UNSET)  # the class's own immutable default
                continue
            value = values[name]
            vcls = value.__class__
            if vcls is str:
                replaced.append((name, value))
                key: Any = value
            elif vcls in _ATOMS:
                key = (vcls, value)
            else:
                canonical, key = self._canon(value)
                if key is None:
                    shareable = False
                if canonical is not value:
                    replaced.append((name, canonical))
            keys.append(_UNSET if unset else key)
        full = tuple(keys) if shareable else None
        known = self._table.get(full) if full is not None else None
        if known is None:
            for name, canonical in replaced:
                values[name] = _intern(canonical) if canonical.__class__ is str else canonical
            self._share_fields_set(model)
            if full is None:
                return model, None
            self._store(full, model)
            known = model
        return known, id(known)

    def _store(self, key: tuple[Any, ...], value: Any) -> None:
        table = self._table
        if len(table) >= self._limit:
            table.clear()
        table[key] = value
