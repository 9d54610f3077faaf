"""AWS error classification: codes -> kinds, CreateError reasons, botocore -> AwsError."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from cloudprovider.aws.errors import (
    CapacityError,
    ErrorKind,
    NotFoundError,
    ThrottledError,
    TransientError,
    classify,
    classify_code,
    create_error_reason,
    is_capacity_code,
    to_aws_error,
)


def _client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "m"}}, "CreateFleet")


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("InsufficientInstanceCapacity", ErrorKind.CAPACITY),
        ("MaxSpotInstanceCountExceeded", ErrorKind.CAPACITY),
        ("ReservationCapacityExceeded", ErrorKind.CAPACITY),
        ("RequestLimitExceeded", ErrorKind.THROTTLING),
        ("ThrottlingException", ErrorKind.THROTTLING),
        ("InternalError", ErrorKind.TRANSIENT),
        ("UnauthorizedOperation", ErrorKind.UNAUTHORIZED),
        ("AuthFailure.ServiceLinkedRoleCreationNotPermitted", ErrorKind.UNAUTHORIZED),
        ("InvalidInstanceID.NotFound", ErrorKind.NOT_FOUND),
        ("InvalidLaunchTemplateName.NotFoundException", ErrorKind.NOT_FOUND),
        ("ParameterNotFound", ErrorKind.NOT_FOUND),
        ("NoSuchEntity", ErrorKind.NOT_FOUND),
        ("InvalidParameterValue", ErrorKind.INVALID_PARAMETER),
        ("EntityAlreadyExists", ErrorKind.ALREADY_EXISTS),
        ("DryRunOperation", ErrorKind.DRY_RUN),
        ("SomethingElse", ErrorKind.OTHER),
    ],
)
def test_codes_are_classified(code: str, kind: ErrorKind):
    assert classify_code(code) is kind
    assert classify(_client_error(code)) is kind


def test_connection_errors_are_transient():
    assert classify(EndpointConnectionError(endpoint_url="http://x")) is ErrorKind.TRANSIENT


def test_to_aws_error_builds_the_typed_error_naming_the_action():
    error = to_aws_error("launching nodeclaim a", _client_error("RequestLimitExceeded"))

    assert isinstance(error, ThrottledError)
    assert error.code == "RequestLimitExceeded"
    assert str(error).startswith("launching nodeclaim a, RequestLimitExceeded")
    assert isinstance(to_aws_error("x", _client_error("InvalidInstanceID.NotFound")), NotFoundError)
    assert isinstance(to_aws_error("x", _client_error("InternalError")), TransientError)
    assert isinstance(to_aws_error("x", _client_error("VcpuLimitExceeded")), CapacityError)


@pytest.mark.parametrize(
    ("codes", "reason"),
    [
        (["InsufficientInstanceCapacity", "UnauthorizedOperation"], "Unauthorized"),
        (["InvalidLaunchTemplateName.NotFoundException"], "LaunchTemplateNotFound"),
        (["MaxSpotInstanceCountExceeded"], "SpotQuotaExceeded"),
        (["AuthFailure.ServiceLinkedRoleCreationNotPermitted"], "SpotSLRCreationFailed"),
        (["Weird"], "LaunchFailed"),
    ],
)
def test_create_error_reasons_follow_karpenters_precedence(codes: list[str], reason: str):
    assert create_error_reason(codes) == reason


def test_capacity_codes_are_karpenters_list():
    assert is_capacity_code("InsufficientFreeAddressesInSubnet")
    assert not is_capacity_code("RequestLimitExceeded")
