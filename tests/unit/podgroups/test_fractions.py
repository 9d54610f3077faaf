"""KAI GPU fractions: annotation parsing, validation errors, scaling pods."""

import pytest

from provisioner.podgroups import (
    FractionError,
    gpu_fraction_milli,
    is_scaling_pod,
    scaling_pod_original,
)
from tests.unit.podgroups import builders as b


def _fraction(
    annotations: dict[str, str], device_memory_mib: int | None = None
) -> tuple[int, int] | None:
    return gpu_fraction_milli(b.pod("f", "ml", annotations=annotations), device_memory_mib)


def test_no_annotations_is_not_fractional():
    assert _fraction({}) is None


@pytest.mark.parametrize(
    ("annotations", "memory", "expected"),
    [
        pytest.param({"gpu-fraction": "0.5"}, None, (500, 1), id="half"),
        pytest.param({"gpu-fraction": "1"}, None, (1000, 1), id="whole"),
        pytest.param({"gpu-fraction": "0.3333"}, None, (334, 1), id="rounds-up"),
        pytest.param({"gpu-fraction": "0.0001"}, None, (1, 1), id="at-least-one-milli"),
        pytest.param(
            {"gpu-fraction": "0.25", "gpu-fraction-num-devices": "4"}, None, (250, 4), id="devices"
        ),
        pytest.param({"gpu-memory": "20480"}, 81920, (250, 1), id="memory-mib"),
        pytest.param({"gpu-memory": "20Gi"}, 81920, (250, 1), id="memory-quantity"),
        pytest.param({"gpu-memory": "2000"}, None, (1000, 1), id="memory-unknown-device"),
    ],
)
def test_gpu_fraction_milli(annotations, memory, expected):
    assert _fraction(annotations, memory) == expected


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        pytest.param(
            {"gpu-fraction": "0"},
            "pod ml/f: annotation gpu-fraction='0': must be > 0 and <= 1",
            id="zero",
        ),
        pytest.param(
            {"gpu-fraction": "1.5"},
            "pod ml/f: annotation gpu-fraction='1.5': must be > 0 and <= 1",
            id="above-one",
        ),
        pytest.param(
            {"gpu-fraction": "half"},
            "pod ml/f: annotation gpu-fraction='half': not a number",
            id="not-a-number",
        ),
        pytest.param(
            {"gpu-fraction": "NaN"},
            "pod ml/f: annotation gpu-fraction='NaN': not a number",
            id="nan",
        ),
        pytest.param(
            {"gpu-memory": "lots"},
            "pod ml/f: annotation gpu-memory='lots': not a number",
            id="memory",
        ),
        pytest.param(
            {"gpu-memory": "0"},
            "pod ml/f: annotation gpu-memory='0': must be > 0 MiB",
            id="memory-zero",
        ),
        pytest.param(
            {"gpu-memory": "100000"},
            "pod ml/f: annotation gpu-memory='100000': exceeds the device memory of 81920 MiB",
            id="memory-too-big",
        ),
        pytest.param(
            {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"},
            "pod ml/f: annotation gpu-fraction-num-devices='0': must be >= 1",
            id="devices-zero",
        ),
        pytest.param(
            {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "two"},
            "pod ml/f: annotation gpu-fraction-num-devices='two': not a whole number",
            id="devices-nan",
        ),
        pytest.param(
            {"gpu-fraction": "0.5", "gpu-memory": "2000"},
            "pod ml/f: annotation gpu-memory='2000': cannot be combined with gpu-fraction",
            id="both",
        ),
    ],
)
def test_gpu_fraction_errors_name_pod_and_annotation(annotations, message):
    with pytest.raises(FractionError) as caught:
        _fraction(annotations, 81920)
    assert str(caught.value) == message
    assert caught.value.pod == "ml/f"


SCALING_LABELS = {
    "app": "scaling-pod",
    "shared-gpu-pod-name": "infer-0",
    "shared-gpu-pod-namespace": "ml",
}


def test_scaling_pod_points_at_its_original():
    p = b.pod("ml-infer-0", "kai-scale-adjust", labels=SCALING_LABELS)
    assert is_scaling_pod(p)
    assert scaling_pod_original(p) == "ml/infer-0"


@pytest.mark.parametrize(
    ("namespace", "labels"),
    [
        ("default", SCALING_LABELS),
        ("kai-scale-adjust", {"app": "other"}),
        ("kai-scale-adjust", {"app": "scaling-pod"}),
    ],
)
def test_other_pods_are_not_scaling_pods(namespace, labels):
    assert scaling_pod_original(b.pod("x", namespace, labels=labels)) is None
