"""The kmock API server (with Jointer's shim) on 127.0.0.1 and a `RealKube` connected to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s_client

from provisioner.kube.real import RealKube
from tests.kube.kmock_shim import EmulatorThread


@pytest.fixture
def api() -> Iterator[EmulatorThread]:
    thread = EmulatorThread()
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
