# ruff: noqa: PT018
"""Errors from Status, resource lookup and paths, selectors, merge patch, conflict retry."""

from __future__ import annotations

import pytest

from provisioner.kube import errors
from provisioner.kube.patch import apply_merge_patch
from provisioner.kube.resource import (
    ALL_RESOURCES,
    EC2_NODE_CLASSES,
    NODE_OVERLAYS,
    PODS,
    resource_for,
    resource_of,
)
from provisioner.kube.retry import conflict_retry
from provisioner.kube.selector import from_label_selector, parse_label_selector


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (400, "BadRequest", errors.BadRequestError),
        (401, "Unauthorized", errors.UnauthorizedError),
        (403, "Forbidden", errors.ForbiddenError),
        (404, "NotFound", errors.NotFoundError),
        (409, "Conflict", errors.ConflictError),
        (409, "AlreadyExists", errors.AlreadyExistsError),
        (410, "Expired", errors.GoneError),
        (418, "Teapot", errors.ClientError),
        (422, "Invalid", errors.InvalidError),
        (429, "TooManyRequests", errors.TooManyRequestsError),
        (503, "ServiceUnavailable", errors.ServerError),
    ],
)
def test_errors_from_status(code, reason, cls):
    error = errors.from_status(
        {"code": code, "reason": reason, "message": "m", "details": {"name": "x"}}
    )
    assert type(error) is cls
    assert error.code == code and error.reason == reason and error.details == {"name": "x"}
    assert errors.to_status(error)["code"] == code


def test_error_tree_shape():
    assert issubclass(errors.NotFoundError, LookupError)
    assert issubclass(errors.UnreachableError, ConnectionError)
    assert not issubclass(errors.AlreadyExistsError, errors.ConflictError)
    assert issubclass(errors.ServerError, errors.KubeApiError)


def test_from_status_uses_http_code_when_status_is_empty():
    error = errors.from_status({}, code=404)
    assert isinstance(error, errors.NotFoundError) and error.reason == "NotFound"


def test_resource_lookup_and_paths():
    assert resource_for("karpenter.k8s.aws/v1", "EC2NodeClass") is EC2_NODE_CLASSES
    assert (
        resource_of({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay"}) is NODE_OVERLAYS
    )
    with pytest.raises(LookupError):
        resource_for("v1", "Nope")
    assert PODS.path(namespace="ns", name="p", subresource="eviction") == (
        "/api/v1/namespaces/ns/pods/p/eviction"
    )
    assert PODS.path() == "/api/v1/pods"
    assert (
        EC2_NODE_CLASSES.path(name="default") == "/apis/karpenter.k8s.aws/v1/ec2nodeclasses/default"
    )
    assert len({(r.api_version, r.kind) for r in ALL_RESOURCES}) == len(ALL_RESOURCES)


def test_structured_selector():
    selector = from_label_selector(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}],
        }
    )
    assert selector.matches({"app": "web"})
    assert not selector.matches({"app": "web", "tier": "db"})
    assert not from_label_selector(None).matches({})
    assert from_label_selector({}).matches({"any": "thing"})


def test_string_selector_whitespace():
    assert parse_label_selector(" a = b , c notin ( x , y ) ").matches({"a": "b", "c": "z"})


def test_merge_patch_rfc7386():
    assert apply_merge_patch(
        {"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": None, "d": 3}, "l": [2]}
    ) == {
        "a": {"c": 2, "d": 3},
        "l": [2],
    }


def test_conflict_retry_retries_only_conflicts():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise errors.ConflictError("stale")
        return "ok"

    assert conflict_retry(flaky, attempts=3) == "ok"
    with pytest.raises(errors.ConflictError):
        conflict_retry(lambda: (_ for _ in ()).throw(errors.ConflictError("x")), attempts=2)
    with pytest.raises(errors.NotFoundError):
        conflict_retry(lambda: (_ for _ in ()).throw(errors.NotFoundError("x")))
