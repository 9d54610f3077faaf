"""The classified-error caller: retries throttling and transient errors, bounded; never sleeps."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from cloudprovider.aws.errors import NotFoundError, ThrottledError
from cloudprovider.aws.retry import Caller, RetryPolicy


def _failing(codes: list[str], result: str = "ok"):
    calls: list[dict[str, object]] = []

    def call(**kwargs: object) -> str:
        calls.append(kwargs)
        if codes:
            raise ClientError({"Error": {"Code": codes.pop(0), "Message": "m"}}, "Op")
        return result

    return call, calls


def test_throttling_is_retried_until_success():
    slept: list[float] = []
    caller = Caller(policy=RetryPolicy(max_attempts=5), sleep=slept.append)
    function, calls = _failing(["RequestLimitExceeded", "InternalError"])

    assert caller.call("doing", function, A=1) == "ok"

    assert calls == [{"A": 1}] * 3
    assert caller.retries == 2
    assert len(slept) == 2
    assert all(0 < s <= RetryPolicy().max_backoff for s in slept)


def test_attempts_are_bounded_and_the_last_error_is_raised_from_its_cause():
    caller = Caller(policy=RetryPolicy(max_attempts=3), sleep=lambda _s: None)
    function, calls = _failing(["RequestLimitExceeded"] * 10)

    with pytest.raises(ThrottledError) as error:
        caller.call("doing", function)

    assert len(calls) == 3
    assert isinstance(error.value.__cause__, ClientError)


def test_total_time_is_bounded():
    caller = Caller(
        policy=RetryPolicy(max_attempts=100, max_delay=0.0, multiplier=1.0), sleep=lambda _s: None
    )
    function, calls = _failing(["RequestLimitExceeded"] * 10)

    with pytest.raises(ThrottledError):
        caller.call("doing", function)

    assert len(calls) == 1


def test_other_errors_are_not_retried():
    caller = Caller(sleep=lambda _s: None)
    function, calls = _failing(["InvalidInstanceID.NotFound"])

    with pytest.raises(NotFoundError):
        caller.call("doing", function)

    assert len(calls) == 1
