"""RBAC over HTTP: the kmock shim authorizes the controller's requests as the API server does.

Each HTTP request is mapped to its RBAC attributes (list vs get vs watch, deletecollection,
subresources) and a request no rule allows gets the API server's 403 Status; only requests with
the controller's bearer token are checked. The `api` fixture wires the session's
`KubeRbacHook`, so `jointer run` over HTTP is decided by the chart's rules and recorded.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client

from provisioner.kube.errors import ForbiddenError
from provisioner.kube.rbac import AccessRequest, Authorizer, PolicyRule, chart_rules
from provisioner.kube.real import RealKube
from provisioner.kube.resource import NODES, PODS
from tests.kube.kmock_shim import CONTROLLER_TOKEN, EmulatorThread
from tests.kubecalls import KUBE_RBAC_KEY

USER = "system:serviceaccount:kube-system:jointer"
OTHER_TOKEN = "someone-else"  # noqa: S105 - not a secret


class Recorder:
    """An authorizer that records every request and allows only `allow`."""

    def __init__(self, allow: Callable[[AccessRequest], bool] = lambda _: True) -> None:
        self.seen: list[AccessRequest] = []
        self._allow = allow

    def __call__(self, request: AccessRequest) -> None:
        self.seen.append(request)
        if not self._allow(request):
            Authorizer([], user=USER).check(request)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder(lambda r: r.resource != "nodes")


@pytest.fixture
def server(recorder: Recorder) -> Iterator[EmulatorThread]:
    thread = EmulatorThread(authorize=recorder)
    try:
        yield thread
    finally:
        thread.close()


def send(
    server: EmulatorThread,
    method: str,
    path: str,
    body: Any = None,
    *,
    token: str | None = CONTROLLER_TOKEN,
    content_type: str = "application/json",
    read: bool = True,
) -> tuple[int, Any]:
    """The status and (with `read`) the decoded first line of the answer (a watch streams on)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    headers = {"Content-Type": content_type}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        connection.request(method, path, json.dumps(body) if body is not None else None, headers)
        response = connection.getresponse()
        if not read:
            return response.status, None
        payload = response.read().decode()
        first = payload.splitlines()[0] if payload else ""
        return response.status, json.loads(first) if first else None
    finally:
        connection.close()


POD = {"metadata": {"name": "web-0", "namespace": "default"}, "spec": {"containers": []}}
PODS_PATH = "/api/v1/namespaces/default/pods"
CLAIMS_PATH = "/apis/karpenter.sh/v1/nodeclaims"


@pytest.mark.parametrize(
    "case",
    [
        ("GET", f"{PODS_PATH}/web-0", None, ("get", "", "pods", "", "default", "web-0")),
        ("GET", PODS_PATH, None, ("list", "", "pods", "", "default", None)),
        ("GET", "/api/v1/pods", None, ("list", "", "pods", "", None, None)),
        (
            "GET",
            "/api/v1/pods?watch=true&timeoutSeconds=1",
            None,
            ("watch", "", "pods", "", None, None),
        ),
        (
            "GET",
            f"{PODS_PATH}?watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3Dweb-0",
            None,
            ("watch", "", "pods", "", "default", "web-0"),
        ),
        ("POST", PODS_PATH, POD, ("create", "", "pods", "", "default", None)),
        ("PUT", f"{PODS_PATH}/web-0", POD, ("update", "", "pods", "", "default", "web-0")),
        ("PATCH", f"{PODS_PATH}/web-0", {}, ("patch", "", "pods", "", "default", "web-0")),
        (
            "PATCH",
            f"{PODS_PATH}/web-0/status",
            {"status": {}},
            ("patch", "", "pods", "status", "default", "web-0"),
        ),
        (
            "POST",
            f"{PODS_PATH}/web-0/eviction",
            {"metadata": {"name": "web-0"}},
            ("create", "", "pods", "eviction", "default", "web-0"),
        ),
        (
            "POST",
            f"{PODS_PATH}/web-0/binding",
            {"target": {"name": "n"}},
            ("create", "", "pods", "binding", "default", "web-0"),
        ),
        ("DELETE", f"{PODS_PATH}/web-0", {}, ("delete", "", "pods", "", "default", "web-0")),
        ("DELETE", PODS_PATH, {}, ("deletecollection", "", "pods", "", "default", None)),
        (
            "PATCH",
            f"{CLAIMS_PATH}/nc-1/status",
            {"status": {}},
            ("patch", "karpenter.sh", "nodeclaims", "status", None, "nc-1"),
        ),
        ("GET", CLAIMS_PATH, None, ("list", "karpenter.sh", "nodeclaims", "", None, None)),
    ],
)
def test_requests_map_to_rbac_attributes_as_the_api_server_does(
    server: EmulatorThread, recorder: Recorder, case: tuple[str, str, Any, tuple[Any, ...]]
) -> None:
    method, path, body, expected = case
    send(server, "POST", PODS_PATH, POD, token=None)  # the test's own client: not checked
    assert recorder.seen == []
    send(server, method, path, body, read=False)
    verb, group, resource, subresource, namespace, name = expected
    assert recorder.seen == [AccessRequest(verb, group, resource, subresource, namespace, name)]


def test_only_requests_with_the_controller_token_are_checked(
    server: EmulatorThread, recorder: Recorder
) -> None:
    assert send(server, "GET", "/api/v1/nodes", token=None)[0] == 200
    assert send(server, "GET", "/api/v1/nodes", token=OTHER_TOKEN)[0] == 200
    assert send(server, "GET", "/version/")[0] == 200  # a non-resource URL
    assert recorder.seen == []


def test_a_denied_request_gets_the_api_servers_403_status(server: EmulatorThread) -> None:
    status, body = send(server, "DELETE", "/api/v1/nodes/n1", {})
    assert status == 403
    assert body == {
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure",
        "reason": "Forbidden",
        "code": 403,
        "message": f'nodes "n1" is forbidden: User "{USER}" cannot delete resource "nodes" '
        'in API group "" at the cluster scope',
        "details": {"name": "n1", "kind": "nodes"},
    }
    status, body = send(server, "GET", "/api/v1/nodes?watch=true")
    assert status == 403
    assert body["message"] == (
        f'nodes is forbidden: User "{USER}" cannot watch resource "nodes" '
        'in API group "" at the cluster scope'
    )
    assert body["details"] == {"kind": "nodes"}


def controller_client(api: EmulatorThread) -> RealKube:
    configuration = k8s_client.Configuration()
    configuration.host = api.url
    configuration.retries = 0
    configuration.api_key = {"authorization": CONTROLLER_TOKEN}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    return RealKube(k8s_client.ApiClient(configuration), request_timeout=5)


def test_the_controllers_http_calls_are_decided_by_the_chart_and_recorded(
    api: EmulatorThread,
    kube_rbac_rules: Callable[[list[PolicyRule]], None],
    request: pytest.FixtureRequest,
) -> None:
    hook = request.config.stash[KUBE_RBAC_KEY]
    with controller_client(api) as controller:
        controller.list(NODES)
        assert AccessRequest("list", "", "nodes") in hook.allowed
        # the chart without `list nodes`: the same call is the API server's 403
        listing = AccessRequest("list", "", "nodes")
        kube_rbac_rules([c for r in chart_rules() for c in r.cells() if not c.allows(listing)])
        with pytest.raises(ForbiddenError) as raised:
            controller.list(NODES)
        assert raised.value.code == 403
        assert raised.value.message == (
            f'nodes is forbidden: User "{USER}" cannot list resource "nodes" '
            'in API group "" at the cluster scope'
        )
        controller.list(PODS)  # other rules still allow
