"""Errors of the Kubernetes port, built from the API's `Status` (the kopf shape).

Every adapter raises these, never its client library's own errors (those are chained as
`__cause__`)::

    KubeApiError                      any failed API call; carries code, reason, message
    ├── ClientError                   4xx: the request is wrong for the current state
    │   ├── BadRequestError           400 (e.g. a malformed label selector)
    │   ├── UnauthorizedError         401
    │   ├── ForbiddenError            403
    │   ├── NotFoundError             404; also a LookupError
    │   ├── ConflictError             409 Conflict: stale resourceVersion or failed precondition
    │   ├── AlreadyExistsError        409 AlreadyExists: create of an existing name
    │   ├── GoneError                 410: a watch's resourceVersion is too old; relist
    │   ├── InvalidError              422: the object fails validation
    │   └── TooManyRequestsError      429: throttled, or an eviction a PDB forbids
    ├── ServerError                   5xx
    └── UnreachableError              no HTTP answer at all (refused, reset, timed out);
                                      also a ConnectionError

`AlreadyExistsError` is deliberately not a `ConflictError`: conflict retries re-read and
re-patch, which never helps a duplicate create.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any


class KubeApiError(Exception):
    """A Kubernetes API call failed.

    Attributes:
        code: HTTP status code (0 when no HTTP answer arrived).
        reason: the `Status.reason` (`NotFound`, `Conflict`, `AlreadyExists`, ...).
        message: the human message of the `Status`.
        details: the `Status.details` mapping (name, kind, causes), possibly empty.
    """

    code: int = 0

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        reason: str = "",
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.reason = reason
        self.message = message
        self.details: Mapping[str, Any] = dict(details or {})

    def __str__(self) -> str:
        return f"({self.code} {self.reason}) {self.message}" if self.reason else self.message


class ClientError(KubeApiError):
    """A 4xx answer."""

    code = 400


class BadRequestError(ClientError):
    """400 Bad Request."""

    code = 400


class UnauthorizedError(ClientError):
    """401 Unauthorized."""

    code = 401


class ForbiddenError(ClientError):
    """403 Forbidden."""

    code = 403


class NotFoundError(ClientError, LookupError):
    """404: the object (or the resource) does not exist."""

    code = 404


class ConflictError(ClientError):
    """409 Conflict: the object changed since it was read, or a precondition failed."""

    code = 409


class AlreadyExistsError(ClientError):
    """409 AlreadyExists: an object of that name exists already."""

    code = 409


class GoneError(ClientError):
    """410 Gone: the requested resourceVersion is no longer available (watch expired)."""

    code = 410


class InvalidError(ClientError):
    """422 Unprocessable Entity: the object fails validation."""

    code = 422


class TooManyRequestsError(ClientError):
    """429: throttled, or an eviction that would violate a PodDisruptionBudget."""

    code = 429


class ServerError(KubeApiError):
    """A 5xx answer."""

    code = 500


class UnreachableError(KubeApiError, ConnectionError):
    """The API server gave no HTTP answer (connection refused or reset, timeout)."""

    code = 0


_BY_CODE: dict[int, type[KubeApiError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    422: InvalidError,
    429: TooManyRequestsError,
}


def error_class(code: int, reason: str = "") -> type[KubeApiError]:
    """Choose the error class for an HTTP status code and `Status.reason`."""
    if code == HTTPStatus.CONFLICT and reason == "AlreadyExists":
        return AlreadyExistsError
    if code in _BY_CODE:
        return _BY_CODE[code]
    if HTTPStatus.BAD_REQUEST <= code < HTTPStatus.INTERNAL_SERVER_ERROR:
        return ClientError
    if code >= HTTPStatus.INTERNAL_SERVER_ERROR:
        return ServerError
    return KubeApiError


def make_error(
    code: int,
    reason: str,
    message: str,
    details: Mapping[str, Any] | None = None,
) -> KubeApiError:
    """Build the error for a code, reason and message (as an adapter or a fake would)."""
    return error_class(code, reason)(message, code=code, reason=reason, details=details)


def _phrase(code: int) -> str:
    try:
        return HTTPStatus(code).phrase.replace(" ", "")
    except ValueError:
        return "Unknown"


def from_status(status: Mapping[str, Any], *, code: int | None = None) -> KubeApiError:
    """Build the error from an API `Status` object.

    Args:
        status: the decoded `Status` (`code`, `reason`, `message`, `details`); may be partial.
        code: the HTTP status code, used when the `Status` carries none.

    Returns:
        The most specific error of the tree.
    """
    raw_code = status.get("code")
    final_code = raw_code if isinstance(raw_code, int) and raw_code else (code or 500)
    reason = str(status.get("reason") or _phrase(final_code))
    message = str(status.get("message") or reason)
    details = status.get("details")
    return make_error(
        final_code, reason, message, details if isinstance(details, Mapping) else None
    )


def to_status(error: KubeApiError) -> dict[str, Any]:
    """Render an error as an API `Status` (what a server would send)."""
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure",
        "code": error.code,
        "reason": error.reason,
        "message": error.message,
        "details": dict(error.details),
    }
