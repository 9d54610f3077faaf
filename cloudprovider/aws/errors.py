"""AWS error classification, done once: every other module asks these predicates.

Every AWS call goes through :func:`cloudprovider.aws.retry.call`, which turns botocore errors
into :class:`AwsError` subclasses by :func:`classify`. Nothing else in the project compares AWS
error-code strings.

The tree::

    AwsError                     (.code, .action; raised from the botocore error)
    ├── ThrottledError           RequestLimitExceeded, Throttling, ...   retried
    ├── TransientError           InternalError, ServiceUnavailable, connection errors   retried
    ├── UnauthorizedError        UnauthorizedOperation, AccessDenied, ...
    ├── NotFoundError            InvalidInstanceID.NotFound, ParameterNotFound, ...
    ├── InvalidParameterError    InvalidParameterValue, ...
    └── CapacityError            Karpenter's unfulfillable-capacity codes
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from botocore.exceptions import (
    ConnectionError as BotoConnectionError,
)

__all__ = [
    "CAPACITY_ERROR_CODES",
    "LAUNCH_TEMPLATE_NOT_FOUND_CODES",
    "NOT_FOUND_ERROR_CODES",
    "SERVICE_LINKED_ROLE_CODE",
    "THROTTLING_ERROR_CODES",
    "TRANSIENT_ERROR_CODES",
    "UNAUTHORIZED_ERROR_CODES",
    "AwsError",
    "CapacityError",
    "ErrorKind",
    "InvalidParameterError",
    "NotFoundError",
    "ThrottledError",
    "TransientError",
    "UnauthorizedError",
    "classify",
    "classify_code",
    "create_error_reason",
    "error_code",
    "is_capacity_code",
    "is_launch_template_not_found",
    "to_aws_error",
]

# Karpenter's unfulfillable-capacity codes (pkg/errors/errors.go): mark the offering unavailable.
CAPACITY_ERROR_CODES: Final = frozenset(
    {
        "InsufficientInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "Unsupported",
        "InsufficientFreeAddressesInSubnet",
        "MaxFleetCountExceeded",
        "ReservationCapacityExceeded",
    }
)
SERVICE_LINKED_ROLE_CODE: Final = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
THROTTLING_ERROR_CODES: Final = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestThrottled",
        "RequestThrottledException",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
        "ProvisionedThroughputExceededException",
    }
)
TRANSIENT_ERROR_CODES: Final = frozenset(
    {
        "InternalError",
        "InternalFailure",
        "InternalServerError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "Unavailable",
        "RequestTimeout",
        "RequestTimeoutException",
        "IdempotentParameterMismatch",
    }
)
UNAUTHORIZED_ERROR_CODES: Final = frozenset(
    {
        "UnauthorizedOperation",
        "AccessDenied",
        "AccessDeniedException",
        "AuthFailure",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "ExpiredToken",
        "ExpiredTokenException",
        SERVICE_LINKED_ROLE_CODE,
    }
)
LAUNCH_TEMPLATE_NOT_FOUND_CODES: Final = frozenset(
    {
        "InvalidLaunchTemplateName.NotFoundException",
        "InvalidLaunchTemplateId.NotFound",
        "InvalidLaunchTemplateId.VersionNotFound",
    }
)
NOT_FOUND_ERROR_CODES: Final = (
    frozenset(
        {
            "InvalidInstanceID.NotFound",
            "InvalidInstanceID.Malformed",
            "InvalidSubnetID.NotFound",
            "InvalidGroup.NotFound",
            "InvalidAMIID.NotFound",
            "InvalidAMIID.Unavailable",
            "ParameterNotFound",
            "NoSuchEntity",
            "AWS.SimpleQueueService.NonExistentQueue",
            "QueueDoesNotExist",
            "ResourceNotFoundException",
            "NotFoundException",
        }
    )
    | LAUNCH_TEMPLATE_NOT_FOUND_CODES
)
INVALID_PARAMETER_ERROR_CODES: Final = frozenset(
    {
        "InvalidParameterValue",
        "InvalidParameter",
        "InvalidParameterCombination",
        "InvalidRequest",
        "ValidationError",
        "ValidationException",
        "MissingParameter",
        "InvalidAMIID.Malformed",
        "InvalidUserData.Malformed",
        "InvalidParameterException",
        "EntityAlreadyExists",
        "InvalidLaunchTemplateName.AlreadyExistsException",
        "LimitExceeded",
    }
)
_ALREADY_EXISTS_CODES: Final = frozenset(
    {"EntityAlreadyExists", "InvalidLaunchTemplateName.AlreadyExistsException"}
)
_DRY_RUN_OK: Final = "DryRunOperation"

# Karpenter's CreateError reasons for fleet errors, in its order of precedence (ICE last).
_CREATE_REASONS: Final[tuple[tuple[frozenset[str], str], ...]] = (
    (frozenset({SERVICE_LINKED_ROLE_CODE}), "SpotSLRCreationFailed"),
    (frozenset({"UnauthorizedOperation", "AccessDenied", "AuthFailure"}), "Unauthorized"),
    (frozenset({"AuthFailure.AMIAuthorization"}), "AMIAuthorizationFailure"),
    (
        frozenset({"InvalidGroup.NotFound", "SecurityGroupsPerInstanceLimitExceeded"}),
        "SecurityGroupSubnetVPCMismatch",
    ),
    (
        frozenset({"InvalidParameterValue.InstanceProfile", "InvalidIamInstanceProfile"}),
        "InstanceProfileNameInvalid",
    ),
    (LAUNCH_TEMPLATE_NOT_FOUND_CODES, "LaunchTemplateNotFound"),
    (frozenset({"InvalidUserData.Malformed"}), "UserDataSizeLimitExceeded"),
    (frozenset({"InvalidAMIID.Malformed"}), "InvalidAMIID"),
    (frozenset({"InvalidAMIID.NotFound", "InvalidAMIID.Unavailable"}), "AMINotFound"),
    (frozenset({"RequestLimitExceeded"}), "RequestLimitExceeded"),
    (frozenset({"InternalError"}), "InternalError"),
    (frozenset({"FreeTierIneligible"}), "FreeTierIneligible"),
    (frozenset({"MaxFleetCountExceeded"}), "FleetQuotaExceeded"),
    (frozenset({"PendingVerification"}), "AccountPendingVerification"),
    (frozenset({"MaxSpotInstanceCountExceeded"}), "SpotQuotaExceeded"),
    (frozenset({"VcpuLimitExceeded"}), "VCPULimitExceeded"),
    (frozenset({"InsufficientFreeAddressesInSubnet"}), "InsufficientFreeAddressesInSubnet"),
)


class ErrorKind(StrEnum):
    """What an AWS error means for the caller."""

    CAPACITY = "capacity"
    THROTTLING = "throttling"
    TRANSIENT = "transient"
    UNAUTHORIZED = "unauthorized"
    NOT_FOUND = "not_found"
    INVALID_PARAMETER = "invalid_parameter"
    ALREADY_EXISTS = "already_exists"
    DRY_RUN = "dry_run"
    OTHER = "other"


class AwsError(Exception):
    """A classified AWS API failure.

    Attributes:
        kind: the classification.
        code: the AWS error code ("" for transport errors).
        action: what Jointer was doing ("describing subnets").
    """

    kind: ErrorKind = ErrorKind.OTHER

    def __init__(self, action: str, code: str, message: str) -> None:
        super().__init__(f"{action}, {code}: {message}" if code else f"{action}, {message}")
        self.action = action
        self.code = code


class ThrottledError(AwsError):
    """AWS throttled the request; retried with backoff."""

    kind = ErrorKind.THROTTLING


class TransientError(AwsError):
    """A server-side or transport failure worth retrying."""

    kind = ErrorKind.TRANSIENT


class UnauthorizedError(AwsError):
    """The controller's IAM role may not do this."""

    kind = ErrorKind.UNAUTHORIZED


class NotFoundError(AwsError, LookupError):
    """The resource does not exist."""

    kind = ErrorKind.NOT_FOUND


class InvalidParameterError(AwsError, ValueError):
    """AWS rejected the request's parameters (or the resource already exists)."""

    kind = ErrorKind.INVALID_PARAMETER


class AlreadyExistsError(InvalidParameterError):
    """The resource to create already exists."""

    kind = ErrorKind.ALREADY_EXISTS


class DryRunAllowedError(AwsError):
    """``DryRunOperation``: the dry run says the real call would be allowed."""

    kind = ErrorKind.DRY_RUN


class CapacityError(AwsError):
    """An unfulfillable-capacity error."""

    kind = ErrorKind.CAPACITY


_ERROR_TYPES: Final[dict[ErrorKind, type[AwsError]]] = {
    ErrorKind.CAPACITY: CapacityError,
    ErrorKind.THROTTLING: ThrottledError,
    ErrorKind.TRANSIENT: TransientError,
    ErrorKind.UNAUTHORIZED: UnauthorizedError,
    ErrorKind.NOT_FOUND: NotFoundError,
    ErrorKind.INVALID_PARAMETER: InvalidParameterError,
    ErrorKind.ALREADY_EXISTS: AlreadyExistsError,
    ErrorKind.DRY_RUN: DryRunAllowedError,
    ErrorKind.OTHER: AwsError,
}


def classify_code(code: str) -> ErrorKind:
    """The kind of an AWS error code."""
    kind = ErrorKind.OTHER
    if code in CAPACITY_ERROR_CODES:
        kind = ErrorKind.CAPACITY
    elif code in THROTTLING_ERROR_CODES:
        kind = ErrorKind.THROTTLING
    elif code in TRANSIENT_ERROR_CODES:
        kind = ErrorKind.TRANSIENT
    elif code in UNAUTHORIZED_ERROR_CODES or code.startswith("AuthFailure"):
        kind = ErrorKind.UNAUTHORIZED
    elif code in NOT_FOUND_ERROR_CODES or code.endswith((".NotFound", "NotFoundException")):
        kind = ErrorKind.NOT_FOUND
    elif code in _ALREADY_EXISTS_CODES or code.endswith(".Duplicate"):
        kind = ErrorKind.ALREADY_EXISTS
    elif code in INVALID_PARAMETER_ERROR_CODES or code.startswith("Invalid"):
        kind = ErrorKind.INVALID_PARAMETER
    elif code == _DRY_RUN_OK:
        kind = ErrorKind.DRY_RUN
    return kind


def error_code(error: BaseException) -> str:
    """The AWS error code of a botocore ``ClientError`` (or an AwsError), "" otherwise."""
    if isinstance(error, AwsError):
        return error.code
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code", ""))
    return ""


def classify(error: BaseException) -> ErrorKind:
    """The kind of a botocore error (client errors by code; connection errors transient)."""
    if isinstance(error, AwsError):
        return error.kind
    if isinstance(error, ClientError):
        return classify_code(error_code(error))
    if isinstance(
        error,
        EndpointConnectionError | ConnectTimeoutError | ReadTimeoutError | BotoConnectionError,
    ):
        return ErrorKind.TRANSIENT
    return ErrorKind.OTHER


def to_aws_error(action: str, error: ClientError | BotoCoreError) -> AwsError:
    """The classified AwsError for a botocore error (the caller raises it ``from`` error)."""
    code = error_code(error)
    if isinstance(error, ClientError):
        message = str(error.response.get("Error", {}).get("Message", ""))
    else:
        message = str(error)
    return _ERROR_TYPES[classify(error)](action, code, message)


def is_capacity_code(code: str) -> bool:
    """Whether a fleet error code means "no capacity for this offering"."""
    return code in CAPACITY_ERROR_CODES


def is_service_linked_role_code(code: str) -> bool:
    """Whether a fleet error says the spot service-linked role could not be created."""
    return code == SERVICE_LINKED_ROLE_CODE


def is_launch_template_not_found(error: BaseException) -> bool:
    """Whether the launch template of a request does not exist (any more)."""
    return error_code(error) in LAUNCH_TEMPLATE_NOT_FOUND_CODES


def create_error_reason(codes: list[str]) -> str:
    """Karpenter's CreateError reason for the fleet error codes of a failed launch."""
    present = set(codes)
    for known, reason in _CREATE_REASONS:
        if present & known:
            return reason
    return "LaunchFailed"
