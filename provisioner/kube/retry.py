"""Retrying read-modify-patch loops on optimistic-concurrency conflicts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

from provisioner.kube.errors import ConflictError

T = TypeVar("T")

DEFAULT_CONFLICT_ATTEMPTS: Final = 5
"""client-go's `retry.DefaultRetry` makes 5 attempts."""


def conflict_retry(fn: Callable[[], T], attempts: int = DEFAULT_CONFLICT_ATTEMPTS) -> T:
    """Call `fn` (which reads, modifies and patches with a resourceVersion) until it succeeds.

    Only `ConflictError` is retried, immediately (the next read sees the newer object); any
    other error propagates at once.

    Args:
        fn: one whole read-modify-write attempt.
        attempts: the maximum number of calls (>= 1).

    Returns:
        What `fn` returned.

    Raises:
        ConflictError: every attempt conflicted (the last conflict).
        ValueError: `attempts` < 1.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except ConflictError:
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")  # pragma: no cover
