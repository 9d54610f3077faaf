"""TTL cache expiry with an injected timer."""

from __future__ import annotations

from datetime import timedelta

from cloudprovider.aws.cache import INSTANCE_TYPES_TTL, TtlCache


def test_entries_expire_after_the_ttl():
    now = [0.0]
    cache: TtlCache[str, int] = TtlCache(timedelta(seconds=10), lambda: now[0])
    cache.set("a", 1)
    now[0] = 9.9
    assert cache.get("a") == 1
    now[0] = 10.0
    assert cache.get("a") is None


def test_get_or_set_builds_once_until_flushed():
    built: list[int] = []

    def build(value: int) -> int:
        built.append(value)
        return value

    cache: TtlCache[str, int] = TtlCache(INSTANCE_TYPES_TTL, lambda: 0.0)
    assert cache.get_or_set("k", lambda: build(1)) == 1
    assert cache.get_or_set("k", lambda: build(2)) == 1
    cache.flush()
    assert cache.get_or_set("k", lambda: build(3)) == 3
    assert built == [1, 3]


def test_within_asks_for_a_younger_entry_than_the_ttl():
    now = [0.0]
    cache: TtlCache[str, int] = TtlCache(timedelta(seconds=180), lambda: now[0])
    cache.set("a", 1)
    now[0] = 59.9
    assert cache.get("a", within=timedelta(seconds=60)) == 1
    now[0] = 60.0
    assert cache.get("a", within=timedelta(seconds=60)) is None
    assert cache.get("a") == 1  # still held for a reader that accepts its age


def test_retain_only_forgets_the_other_keys():
    cache: TtlCache[str, int] = TtlCache(timedelta(seconds=10), lambda: 0.0)
    for key in "abc":
        cache.set(key, 1)
    cache.retain_only({"b", "z"})
    assert [cache.get(k) for k in "abc"] == [None, 1, None]
