"""moto's query-protocol parser without its quadratic prefix scan.

moto's ``QueryParser`` decides whether a structure member is present by scanning every
parameter of the request for the member's prefix, once per member of every structure it walks.
A CreateFleet with a few hundred launch-template overrides carries thousands of parameters,
so parsing one took most of a second and dominated long simulations. :func:`indexed` answers
the same question from the request's parameter names sorted once (the first name not below
the prefix starts with it exactly when any name does), so every request parses to the same
result.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["has_prefix", "indexed"]

_CACHE = "_jointer_sorted_parameters"
_METHOD = "_gonna_recurse"
"""The method of moto's ``QueryParser`` replaced while a simulated account runs."""


def has_prefix(names: list[str], prefix: str) -> bool:
    """Whether any of the sorted ``names`` starts with ``prefix``."""
    index = bisect_left(names, prefix)
    return index < len(names) and names[index].startswith(prefix)


def _gonna_recurse(parser: Any, query_params: Any, prefix: str) -> bool:
    """True when no parameter starts with ``prefix`` (moto's ``_gonna_recurse``, indexed)."""
    if prefix == "":
        return False
    cached: tuple[Any, list[str]] | None = parser.__dict__.get(_CACHE)
    if cached is None or cached[0] is not query_params:
        cached = (query_params, sorted(query_params))
        parser.__dict__[_CACHE] = cached
    return not has_prefix(cached[1], prefix)


@contextmanager
def indexed() -> Iterator[None]:
    """Parse query-protocol requests with the indexed prefix test while the block runs."""
    from moto.core.parse import QueryParser  # noqa: PLC0415 - moto is heavy

    original: Callable[..., bool] = getattr(QueryParser, _METHOD)
    setattr(QueryParser, _METHOD, _gonna_recurse)
    try:
        yield
    finally:
        setattr(QueryParser, _METHOD, original)
