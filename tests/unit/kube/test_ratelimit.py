"""KUBE_CLIENT_QPS/BURST: a token bucket on a fake clock, no sleeping."""

from provisioner.kube.ratelimit import TokenBucket


class _Time:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_burst_then_qps():
    t = _Time()
    bucket = TokenBucket(10, 3, monotonic=t.monotonic, sleep=t.sleep)
    for _ in range(3):
        assert bucket.acquire() == 0
    assert bucket.acquire() == 0.1
    assert round(t.now, 6) == 0.1
    t.now += 1.0  # refills to the burst, never beyond
    for _ in range(3):
        assert bucket.acquire() == 0
    assert bucket.acquire() > 0


def test_zero_qps_is_unlimited():
    t = _Time()
    bucket = TokenBucket(0, 1, monotonic=t.monotonic, sleep=t.sleep)
    assert all(bucket.acquire() == 0 for _ in range(100))
    assert t.slept == []
