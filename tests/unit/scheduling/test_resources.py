"""Resource lists: parsing, formatting, arithmetic and the effective pod request."""

import pytest

from provisioner.apis.core import Pod
from provisioner.scheduling.quantity import QuantityError
from provisioner.scheduling.resources import (
    ResourceListError,
    add,
    exceeded,
    fits,
    format_resource_list,
    is_binary_resource,
    is_equal,
    is_zero,
    max_of,
    parse_resource_list,
    pod_requests,
    requests_of,
    subtract,
    with_pod_slot,
)

GI = 2**30 * 1000


def test_parse_resource_list_reads_quantities_and_numbers():
    assert parse_resource_list({"cpu": "500m", "memory": "1Gi", "pods": 110}) == {
        "cpu": 500,
        "memory": GI,
        "pods": 110_000,
    }


def test_parse_resource_list_names_the_resource_and_field():
    with pytest.raises(ResourceListError, match=r"'memory' at spec.requests.memory") as caught:
        parse_resource_list({"cpu": "1", "memory": "1 GB"}, field="spec.requests")
    assert isinstance(caught.value, QuantityError)
    assert isinstance(caught.value, ValueError)


def test_format_resource_list_uses_binary_suffixes_for_bytes_and_sorts_keys():
    formatted = format_resource_list(
        {
            "memory": GI,
            "cpu": 1500,
            "hugepages-2Mi": 4 * 2**20 * 1000,
            "ephemeral-storage": 20 * GI,
            "nvidia.com/gpu": 2000,
            "pods": 110_000,
        }
    )
    assert formatted == {
        "cpu": "1500m",
        "ephemeral-storage": "20Gi",
        "hugepages-2Mi": "4Mi",
        "memory": "1Gi",
        "nvidia.com/gpu": "2",
        "pods": "110",
    }
    assert list(formatted) == sorted(formatted)


@pytest.mark.parametrize(
    ("name", "binary"),
    [("memory", True), ("storage", True), ("hugepages-1Gi", True), ("cpu", False), ("pods", False)],
)
def test_is_binary_resource(name, binary):
    assert is_binary_resource(name) is binary


def test_arithmetic_treats_missing_keys_as_zero():
    a = {"cpu": 1000, "memory": 5}
    b = {"cpu": 500, "pods": 1000}
    assert add(a, b, b) == {"cpu": 2000, "memory": 5, "pods": 2000}
    assert add() == {}
    assert subtract(a, b) == {"cpu": 500, "memory": 5, "pods": -1000}
    assert max_of(a, b) == {"cpu": 1000, "memory": 5, "pods": 1000}
    assert a == {"cpu": 1000, "memory": 5}  # inputs untouched


def test_is_zero_and_is_equal():
    assert is_zero({})
    assert is_zero({"cpu": 0})
    assert not is_zero({"cpu": 1})
    assert is_equal({"cpu": 1, "gpu": 0}, {"cpu": 1})
    assert not is_equal({"cpu": 1}, {"cpu": 2})


@pytest.mark.parametrize(
    ("requests", "available", "missing"),
    [
        ({"cpu": 1000}, {"cpu": 1000}, []),
        ({"cpu": 1001}, {"cpu": 1000}, ["cpu"]),
        ({"nvidia.com/gpu": 1000}, {"cpu": 4000}, ["nvidia.com/gpu"]),
        ({"nvidia.com/gpu": 0}, {}, []),
        ({"cpu": -5}, {}, []),
        ({"memory": 2, "cpu": 2}, {"memory": 1, "cpu": 1}, ["cpu", "memory"]),
    ],
)
def test_fits_and_exceeded(requests, available, missing):
    assert exceeded(requests, available) == missing
    assert fits(requests, available) is (not missing)


def test_with_pod_slot_adds_one_pod():
    assert with_pod_slot({"cpu": 100}) == {"cpu": 100, "pods": 1000}
    assert with_pod_slot({"pods": 1000}) == {"pods": 2000}


def container(
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    restart_policy: str | None = None,
) -> dict[str, object]:
    resources: dict[str, object] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    spec: dict[str, object] = {"name": "c", "resources": resources}
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def test_pod_requests_sums_app_containers():
    pods = pod_requests([container({"cpu": "1"}), container({"cpu": "500m", "memory": "1Gi"})])
    assert pods == {"cpu": 1500, "memory": GI}


def test_pod_requests_default_requests_to_limits():
    pods = pod_requests([container(requests={"cpu": "100m"}, limits={"cpu": "2", "memory": "1Gi"})])
    assert pods == {"cpu": 100, "memory": GI}


def test_pod_requests_take_the_largest_init_container():
    pods = pod_requests(
        [container({"cpu": "1", "memory": "1Gi"})],
        [container({"cpu": "3"}), container({"memory": "2Gi"})],
    )
    assert pods == {"cpu": 3000, "memory": 2 * GI}


def test_pod_requests_with_sidecars_follow_kep_753():
    pods = pod_requests(
        [container({"cpu": "1"})],
        [
            container({"cpu": "500m"}, restart_policy="Always"),
            container({"cpu": "2"}),
            container({"cpu": "300m"}, restart_policy="Always"),
        ],
    )
    # running: app 1 + sidecars 0.5 + 0.3; init peak: 2 + the 0.5 sidecar started before it.
    assert pods == {"cpu": 2500}


def test_pod_requests_sidecars_alone_add_to_the_app_containers():
    pods = pod_requests(
        [container({"cpu": "1"})],
        [container({"cpu": "1"}, restart_policy="Always"), container({"cpu": "1500m"})],
    )
    assert pods == {"cpu": 2500}


def test_pod_requests_add_overhead():
    pods = pod_requests([container({"cpu": "1"})], overhead={"cpu": "250m", "memory": "120Mi"})
    assert pods == {"cpu": 1250, "memory": 120 * 2**20 * 1000}


def test_pod_requests_of_containers_without_resources_are_empty():
    assert pod_requests([{"name": "a"}, {"name": "b", "resources": None}]) == {}


@pytest.mark.parametrize(
    ("containers", "init", "message"),
    [
        ([container({"cpu": "lots"})], [], r"containers\[0\].resources.requests.cpu"),
        ([], [container(limits={"memory": "x"})], r"initContainers\[0\].resources.limits"),
        ([{"resources": []}], [], r"containers\[0\].resources must be an object"),
        ([{"resources": {"requests": ["cpu"]}}], [], "requests must be an object"),
        ([{"resources": {"requests": {"cpu": None}}}], [], "not a quantity"),
    ],
)
def test_pod_requests_name_the_bad_field(containers, init, message):
    with pytest.raises(ResourceListError, match=message):
        pod_requests(containers, init)


def _pod(
    containers: list[dict[str, object]],
    init: list[dict[str, object]] | tuple[()] = (),
    overhead: dict[str, str] | None = None,
) -> Pod:
    spec: dict[str, object] = {"containers": list(containers), "initContainers": list(init)}
    if overhead:
        spec["overhead"] = overhead
    return Pod.model_validate({"spec": spec})


@pytest.mark.parametrize(
    ("containers", "init", "overhead"),
    [
        ([container(limits={"nvidia.com/gpu": "1"})], [], None),
        ([container(requests={"cpu": "100m"}, limits={"cpu": "2", "memory": "1Gi"})], [], None),
        ([container({"cpu": "1", "memory": "1Gi"})], [container({"cpu": "3"})], None),
        (
            [container({"cpu": "1"})],
            [
                container(limits={"cpu": "500m"}, restart_policy="Always"),
                container({"cpu": "2"}),
                container({"cpu": "300m"}, restart_policy="Always"),
            ],
            {"cpu": "250m"},
        ),
    ],
)
def test_requests_of_a_pod_model_follow_the_same_rule(containers, init, overhead):
    assert requests_of(_pod(containers, init, overhead)) == pod_requests(containers, init, overhead)


def test_requests_of_a_gpu_limit_without_request_is_one_gpu():
    assert requests_of(_pod([container(limits={"nvidia.com/gpu": "1"})])) == {
        "nvidia.com/gpu": 1000
    }


def test_requests_of_name_the_bad_field():
    with pytest.raises(ResourceListError, match=r"initContainers\[0\].resources.limits.memory"):
        requests_of(_pod([], [container(limits={"memory": "x"})]))
