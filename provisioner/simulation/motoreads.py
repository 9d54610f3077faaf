"""EC2 Describe answers kept while the simulated account's EC2 state is unchanged.

Garbage collection lists the account's instances every two minutes, drift checks describe
each instance, and the EC2NodeClass status resolves subnets, security groups and images every
minute; moto builds and serializes each answer afresh, which made it the largest single cost
of a long simulation. An EC2 ``Describe*`` answer depends only on the request and on moto's
EC2 state, and that state changes only through EC2 calls that are not ``Describe*`` (or what
the account itself does to moto's backend, which calls :meth:`ReadCache.forget`). So
:class:`ReadCache` keeps each successful ``Describe*`` answer until the next such change and
answers a repeated request with it.

moto gives every answer a request id drawn from its seeded random source; a kept answer draws
one too, the same way, so the seeded source (and with it every later id) advances exactly as
if moto had answered, and a run's trajectory does not depend on the cache.

botocore then parses each answer's XML, which costs more than moto's kept answer saves for the
largest reads (garbage collection's list of every instance). So the cache also keeps the
parsed answers of :data:`PARSED_ACTIONS` under the same rule, and the account answers a
repeated one before botocore sends it (a ``before-call`` answer), as a fresh copy with a drawn
request id.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Final

__all__ = ["OK", "PARSED_ACTIONS", "READS_LIMIT", "ReadCache", "ReadMismatchError"]

READS_LIMIT: Final = 512
"""Answers kept before the cache starts again (drift checks describe one instance each)."""

PARSED_ACTIONS: Final = frozenset(
    {"DescribeInstances", "DescribeImages", "DescribeSubnets", "DescribeSecurityGroups"}
)
"""The reads whose parsed answers are kept too (those the account answers no other way)."""

_READ_PREFIX: Final = "Describe"
_REQUEST_ID: Final = re.compile(r"(?<=<RequestId>).*(?=<\/RequestId>)")
OK: Final = 200
"""The HTTP status of an answer that is kept."""

Answer = tuple[int, dict[str, Any], Any]
"""moto's answer to a request: status, headers, body."""


class ReadMismatchError(AssertionError):
    """A kept answer differed from moto's own (raised only when checking)."""


def ec2_action(request: Any) -> str | None:
    """The action of an EC2 query-protocol request, else None."""
    host = request.url.split("/", 3)[2] if "://" in request.url else ""
    if not host.startswith("ec2."):
        return None
    body = request.body
    if isinstance(body, bytes | bytearray):
        body = body.decode("utf-8", "replace")
    if not isinstance(body, str) or not body.startswith("Action="):
        return None
    return body[len("Action=") :].split("&", 1)[0]


class ReadCache:
    """moto's answers to EC2 ``Describe*`` requests, kept until EC2 state changes.

    Args:
        answer: moto's dispatcher (``BotocoreStubber.process_request``).
        check: also ask moto on every hit; when its answer (or the random draws it makes)
            differs from the kept one, note it in ``mismatches`` and raise
            :class:`ReadMismatchError` (tests).
    """

    def __init__(self, answer: Callable[[Any], Answer | None], *, check: bool = False) -> None:
        self._answer = answer
        self._check = check
        self._kept: dict[tuple[str, Any], Answer] = {}
        self._parsed: dict[Hashable, dict[str, Any]] = {}
        self.hits = 0
        self.parsed_hits = 0
        self.misses = 0
        self.mismatches: list[str] = []

    def forget(self) -> None:
        """Drop every kept answer (the account's EC2 state changed)."""
        self._kept.clear()
        self._parsed.clear()

    def parsed(self, key: Hashable) -> dict[str, Any] | None:
        """A copy of the kept parsed answer to the request ``key``, with a drawn request id.

        None when none is kept, and always when checking (every answer is then moto's and
        botocore's, compared in :meth:`keep_parsed`).
        """
        kept = self._parsed.get(key)
        if kept is None or self._check:
            return None
        from moto.utilities.aws_headers import gen_amzn_requestid_long  # noqa: PLC0415

        self.parsed_hits += 1
        answer: dict[str, Any] = _copied(kept)
        metadata = answer.setdefault("ResponseMetadata", {})
        headers = metadata.setdefault("HTTPHeaders", {})
        metadata["RequestId"] = gen_amzn_requestid_long(headers)
        return answer

    def keep_parsed(self, key: Hashable, answer: Mapping[str, Any]) -> None:
        """Keep botocore's parsed ``answer`` to the request ``key`` until EC2 changes."""
        kept = self._parsed.get(key) if self._check else None
        if kept is not None and _without_ids(kept) != _without_ids(answer):
            self.mismatches.append(f"kept parsed answer to {key!r} differs from botocore's")
            raise ReadMismatchError(self.mismatches[-1])
        if len(self._parsed) >= READS_LIMIT:
            self._parsed.clear()
        self._parsed[key] = _copied(answer)

    def __call__(self, request: Any) -> Answer | None:
        """The answer to ``request``: a kept one when it repeats an EC2 read."""
        action = ec2_action(request)
        if action is None:
            return self._answer(request)
        if not action.startswith(_READ_PREFIX):
            self.forget()
            return self._answer(request)
        body = request.body
        key = (request.url, bytes(body) if isinstance(body, bytearray) else body)
        kept = self._kept.get(key)
        if kept is None:
            self.misses += 1
            answer = self._answer(request)
            if answer is not None and answer[0] == OK:
                if len(self._kept) >= READS_LIMIT:
                    self._kept.clear()
                self._kept[key] = (answer[0], dict(answer[1]), answer[2])
            return answer
        self.hits += 1
        if self._check:
            return self._checked(request, kept)
        return _replayed(kept)

    def _checked(self, request: Any, kept: Answer) -> Answer:
        from moto.moto_api._internal import mock_random  # noqa: PLC0415 - moto is heavy

        before = mock_random.getstate()
        fresh = self._answer(request)
        after = mock_random.getstate()
        mock_random.setstate(before)
        replayed = _replayed(kept)
        problem = ""
        if fresh is None or (fresh[0], fresh[2]) != (replayed[0], replayed[2]):
            problem = "differs from moto's"
        elif mock_random.getstate() != after:
            problem = "drew differently"
        elif fresh[1].get("x-amzn-requestid") != replayed[1].get("x-amzn-requestid"):
            problem = "has another request id"
        if problem:
            self.mismatches.append(f"kept answer to {request.body!r} {problem}")
            raise ReadMismatchError(self.mismatches[-1])
        return replayed


def _replayed(kept: Answer) -> Answer:
    """``kept`` with a new request id, drawn as moto draws it for every answer."""
    from moto.utilities.aws_headers import gen_amzn_requestid_long  # noqa: PLC0415

    status, headers, body = kept
    headers = dict(headers)
    request_id = gen_amzn_requestid_long(headers)
    if isinstance(body, str) and "<RequestId>" in body:
        body = _REQUEST_ID.sub(request_id, body)
    return status, headers, body


def _copied(value: Any) -> Any:
    """A copy of a parsed answer's dictionaries and lists (the leaves are immutable)."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value


def _without_ids(answer: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k != "ResponseMetadata"}
