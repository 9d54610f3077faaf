"""moto's response serializer with each attribute's candidate names worked out once.

To serialize a response, moto's ``AttributePicker`` finds every member of every structure on
the Python object by trying candidate names (an explicit alias, the shape's name, the key, the
key without its parent's or class's prefix, the model's name, each also in snake case). It
instantiates six alias providers and tests each one for every member of every object, so a
DescribeInstances answer spent most of its time there. The candidates depend only on the
picker's providers, the object's class, the member's key, its shape and the shape's parent
structure; :func:`memoized` keeps them per such combination while a simulated account runs,
and picks values exactly as moto does, so every response serializes to the same result.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

__all__ = ["MEMO_LIMIT", "memoized"]

MEMO_LIMIT: Final = 50_000
"""Entries kept before the memo starts again (botocore caches its shapes, so a run's members
number in the thousands; the limit only guards against shapes built afresh per request)."""

_METHOD_NAMES: Final = "method_names_from_class"

_Key = tuple[type, tuple[type, ...], type, str, int, int]
_Entry = tuple[object, object, tuple[str, ...]]


def _picker(memo: dict[_Key, _Entry]) -> Callable[[Any, Any], Any]:
    from moto.core.constants import MISSING  # noqa: PLC0415 - moto is heavy
    from moto.core.utils import get_value  # noqa: PLC0415

    def pick(picker: Any, context: Any) -> Any:
        """``AttributePicker.__call__`` with the candidate names memoized."""
        obj, shape = context.obj, context.shape
        parent = getattr(shape, "parent", None)
        key = (
            type(picker),
            tuple(picker.alias_providers),
            type(obj),
            context.key,
            id(shape),
            id(parent),
        )
        entry = memo.get(key)
        # the entry holds the shape and parent, so their ids are not reused while it lives
        if entry is None or entry[0] is not shape or entry[1] is not parent:
            if len(memo) >= MEMO_LIMIT:
                memo.clear()
            entry = (shape, parent, tuple(picker.get_possible_keys(context)))
            memo[key] = entry
        value = None
        for possible_key in entry[2]:
            found = get_value(obj, possible_key, MISSING)
            if found is not MISSING:
                value = found
                break
        if picker.response_transformers:
            key_path = f"{context.key_path}.{context.key}"
            for transform_path, transform in picker.response_transformers.items():
                if key_path.endswith(transform_path):
                    return transform(value)
        return value

    return pick


@contextmanager
def memoized() -> Iterator[None]:
    """Serialize moto responses with memoized candidate names while the block runs.

    Also lists each response class's method names once: moto lists them (``inspect.getmembers``
    over the class) on every request to find the action's handler.
    """
    from moto.core import responses  # noqa: PLC0415 - moto is heavy
    from moto.core.serialize import AttributePicker  # noqa: PLC0415

    original = AttributePicker.__call__
    names = getattr(responses, _METHOD_NAMES)
    setattr(AttributePicker, "__call__", _picker({}))  # noqa: B010 - a method replaced for a while
    setattr(responses, _METHOD_NAMES, functools.cache(names))
    try:
        yield
    finally:
        setattr(AttributePicker, "__call__", original)  # noqa: B010
        setattr(responses, _METHOD_NAMES, names)
