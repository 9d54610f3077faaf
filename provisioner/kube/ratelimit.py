"""A client-side token bucket: ``KUBE_CLIENT_QPS`` and ``KUBE_CLIENT_BURST``, as client-go's.

Every request takes one token; the bucket holds ``burst`` tokens and refills at ``qps`` a
second. Time and waiting are injected, so the limiter is tested without sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    """Blocks :meth:`acquire` until a token is free (``qps <= 0``: never blocks).

    Args:
        qps: tokens added a second.
        burst: the bucket's size (at least one token).
        monotonic: seconds, monotonic.
        sleep: waits a number of seconds.
    """

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._monotonic = monotonic
        self._sleep = sleep
        self._tokens = float(self.burst)
        self._last = monotonic()
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Take one token, waiting for it; returns the seconds waited."""
        if self.qps <= 0:
            return 0.0
        with self._lock:
            now = self._monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait
