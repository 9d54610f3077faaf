"""The one wrapper every AWS call goes through: classify errors, retry what is retryable.

:class:`Caller` runs an SDK call, turns botocore errors into classified
:class:`~cloudprovider.aws.errors.AwsError` subclasses (raised ``from`` the botocore error) and
retries throttling and transient failures with jittered exponential backoff, bounded both in
attempts and in total time. The sleep is injected (a no-op in tests).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, TypeVar

import tenacity
from botocore.exceptions import BotoCoreError, ClientError

from cloudprovider.aws.errors import ThrottledError, TransientError, to_aws_error

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_DELAY_SECONDS",
    "Caller",
    "RetryPolicy",
    "no_sleep",
]

T = TypeVar("T")

# AWS's SDK guidance for throttling: a handful of attempts with capped exponential backoff;
# a reconciler that gives up is retried by its work queue anyway.
DEFAULT_MAX_ATTEMPTS: Final = 5
# A launch must not block a worker for long; the work queue is the outer retry loop.
DEFAULT_MAX_DELAY_SECONDS: Final = 20.0
DEFAULT_BACKOFF_MULTIPLIER: Final = 0.2
DEFAULT_BACKOFF_MAX_SECONDS: Final = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Bounds of the retry loop.

    Attributes:
        max_attempts: attempts in all (first call included).
        max_delay: seconds after which no new attempt starts.
        multiplier: first backoff in seconds (doubled each attempt, plus jitter).
        max_backoff: cap of one backoff, in seconds.
    """

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    max_delay: float = DEFAULT_MAX_DELAY_SECONDS
    multiplier: float = DEFAULT_BACKOFF_MULTIPLIER
    max_backoff: float = DEFAULT_BACKOFF_MAX_SECONDS


@dataclass(slots=True, kw_only=True)
class Caller:
    """Runs SDK calls with classification and bounded retries.

    Attributes:
        policy: retry bounds.
        sleep: how to wait between attempts (``time.sleep``; a no-op in tests).
        attempts: how many attempts were made in all (for tests and metrics).
        retries: how many of them were retries.
    """

    policy: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], None] = time.sleep
    attempts: int = 0
    retries: int = 0

    def call(self, action: str, function: Callable[..., T], /, **kwargs: object) -> T:
        """Call ``function(**kwargs)``; ``action`` names it in errors ("describing subnets").

        Raises:
            AwsError: the classified failure of the last attempt.
        """

        def attempt() -> T:
            self.attempts += 1
            try:
                return function(**kwargs)
            except (ClientError, BotoCoreError) as error:
                raise to_aws_error(action, error) from error

        def count_retry(_state: tenacity.RetryCallState) -> None:
            self.retries += 1

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type((ThrottledError, TransientError)),
            wait=tenacity.wait_exponential_jitter(
                multiplier=self.policy.multiplier, max=self.policy.max_backoff
            ),
            stop=tenacity.stop_after_attempt(self.policy.max_attempts)
            | tenacity.stop_after_delay(self.policy.max_delay),
            sleep=self.sleep,
            before_sleep=count_retry,
            reraise=True,
        )
        result: T = retrying(attempt)
        return result


def no_sleep(_seconds: float) -> None:
    """A sleep that does not (for tests)."""
