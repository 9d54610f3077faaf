"""The kmock API server (with Jointer's shim) on 127.0.0.1 and a `RealKube` connected to it.

The server enforces the chart's RBAC on requests with the controller's token (the kubeconfig
`jointer run` is given) and records them for the least-privilege proof, through the session's
`tests.kubecalls.KubeRbacHook`; `kube`, the test's own client, sends no token and is not checked.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s_client

from provisioner.kube.real import RealKube
from tests.kube.kmock_shim import EmulatorThread
from tests.kubecalls import KUBE_RBAC_KEY


@pytest.fixture
def api(request: pytest.FixtureRequest) -> Iterator[EmulatorThread]:
    thread = EmulatorThread(authorize=request.config.stash[KUBE_RBAC_KEY].check)
    try:
        yield thread
    finally:
        thread.close()


@pytest.fixture
def kube(api: EmulatorThread) -> Iterator[RealKube]:
    configuration = k8s_client.Configuration()
    configuration.host = api.url
    configuration.retries = 0
    real = RealKube(k8s_client.ApiClient(configuration), request_timeout=5)
    try:
        yield real
    finally:
        real.close()
