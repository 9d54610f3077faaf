"""SSM parameter lookups (EKS-optimised AMI aliases, ``ssmParameter`` AMI terms), cached.

Karpenter caches alias parameters for 24 hours (rechecking ``latest``/``recommended`` entries
every 30 minutes) and custom parameters for 5 minutes. A parameter that does not exist resolves
to None (and that answer is cached for the short TTL, so a missing variant is not asked for on
every launch).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Final

from cloudprovider.aws.cache import Timer, TtlCache
from cloudprovider.aws.errors import NotFoundError
from cloudprovider.aws.retry import Caller
from cloudprovider.aws.sdk import SsmApi

__all__ = [
    "SSM_ALIAS_TTL",
    "SSM_CUSTOM_TTL",
    "SSM_MISSING_TTL",
    "SSM_RECOMMENDED_TTL",
    "SsmProvider",
]

# Pinned alias versions never change: keep them a day (Karpenter's 24 h).
SSM_ALIAS_TTL: Final = timedelta(hours=24)
# `latest`/`recommended` parameters move when AWS publishes an AMI: recheck every 30 minutes.
SSM_RECOMMENDED_TTL: Final = timedelta(minutes=30)
# User-owned parameters (`ssmParameter` terms) may be rewritten at any time.
SSM_CUSTOM_TTL: Final = timedelta(minutes=5)
# A parameter that does not exist (a variant AWS does not publish) is asked for again soon.
SSM_MISSING_TTL: Final = timedelta(minutes=5)


@dataclass(slots=True, kw_only=True)
class SsmProvider:
    """Reads SSM parameters through the classified-error caller, with per-kind TTLs."""

    ssm: SsmApi
    caller: Caller
    timer: Timer = time.monotonic
    _pinned: TtlCache[str, str] = field(init=False)
    _moving: TtlCache[str, str] = field(init=False)
    _custom: TtlCache[str, str] = field(init=False)
    _missing: TtlCache[str, str] = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._pinned = TtlCache(ttl=SSM_ALIAS_TTL, timer=self.timer)
        self._moving = TtlCache(ttl=SSM_RECOMMENDED_TTL, timer=self.timer)
        self._custom = TtlCache(ttl=SSM_CUSTOM_TTL, timer=self.timer)
        self._missing = TtlCache(ttl=SSM_MISSING_TTL, timer=self.timer)

    def _cache_for(self, name: str, *, custom: bool) -> TtlCache[str, str]:
        if custom:
            return self._custom
        if "/latest/" in name or "/recommended/" in name or "-latest" in name:
            return self._moving
        return self._pinned

    def get(self, name: str, *, custom: bool = False) -> str | None:
        """The parameter's value, or None when it does not exist."""
        cache = self._cache_for(name, custom=custom)
        with self._lock:
            if self._missing.get(name):
                return None
            cached = cache.get(name)
        if cached is not None:
            return cached
        try:
            response = self.caller.call("getting ssm parameter", self.ssm.get_parameter, Name=name)
        except NotFoundError:
            with self._lock:
                self._missing.set(name, name)
            return None
        value = response.get("Parameter", {}).get("Value")
        if value is None:
            return None
        with self._lock:
            cache.set(name, value)
        return value

    def flush(self) -> None:
        """Forget every cached parameter."""
        with self._lock:
            for cache in (self._pinned, self._moving, self._custom):
                cache.flush()
            self._missing.flush()
