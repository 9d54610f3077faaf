from __future__ import annotations

import contextlib
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given

from provisioner.apis.base import parse_object, to_wire
from provisioner.apis.errors import ApiValidationError
from provisioner.apis.nodeoverlay import NodeOverlay
from tests.unit.apis.conftest import base, example_documents, set_path
from tests.unit.apis.test_nodepool import json_junk

NODEOVERLAYS_CRD = "karpenter.sh_nodeoverlays.yaml"
REQ = "spec.requirements"


def parse(data: Any) -> NodeOverlay:
    return parse_object(NodeOverlay, data, kind="NodeOverlay")


def test_example_nodeoverlays_parse(shared):
    for _, _, doc in example_documents(shared):
        if doc.get("kind") == "NodeOverlay":
            parse(doc)


def test_overlay_round_trips_and_validates_against_the_crd(crd_validator):
    overlay = parse(base("NodeOverlay"))
    assert overlay.weight == 10
    assert overlay.spec.capacity == {"nvidia.com/gpu": 4}
    wire = to_wire(overlay)
    crd_validator(NODEOVERLAYS_CRD).validate(wire)
    assert parse(wire) == overlay


@pytest.mark.parametrize(
    ("price", "adjustment", "expected"),
    [
        (None, "-10%", "0.90"),
        (None, "+10%", "1.10"),
        (None, "+0.25", "1.25"),
        (None, "-5", "0"),
        (None, "-100%", "0"),
        ("0.42", None, "0.42"),
        (None, None, "1.00"),
    ],
)
def test_adjusted_price(price, adjustment, expected):
    data = base("NodeOverlay")
    data["spec"].pop("priceAdjustment")
    if price is not None:
        data["spec"]["price"] = price
    if adjustment is not None:
        data["spec"]["priceAdjustment"] = adjustment
    assert parse(data).adjusted_price(Decimal("1.00")) == Decimal(expected)


MALFORMED: list[tuple[str, Any, str, str]] = [
    ("spec.price", "0.5", "spec.priceAdjustment", "cannot set both 'price' and 'priceAdjustment'"),
    ("spec.priceAdjustment", "10%", "spec.priceAdjustment", "must be a signed amount"),
    ("spec.priceAdjustment", "-101%", "spec.priceAdjustment", "must be a signed amount"),
    ("spec.priceAdjustment", "+1.5x", "spec.priceAdjustment", "must be a signed amount"),
    ("spec.price", "-1", "spec.price", "must be a non-negative decimal price"),
    ("spec.capacity", {"cpu": "4"}, "spec.capacity", "invalid resource restricted: cpu"),
    (
        "spec.capacity",
        {"example.com/fpga": "x"},
        "spec.capacity.example.com/fpga",
        "not a quantity",
    ),
    ("spec.weight", 0, "spec.weight", "must be between 1 and 10000"),
    ("spec.weight", 10001, "spec.weight", "must be between 1 and 10000"),
    (f"{REQ}[0].operator", "NotIn", f"{REQ}[0].operator", ""),
    (
        f"{REQ}[0]",
        {"key": "example.com/a", "operator": "NotIn"},
        f"{REQ}[0].values",
        "operator NotIn requires at least one value",
    ),
    (f"{REQ}[0].minValues", 1, f"{REQ}[0].minValues", "unknown field"),
    (
        f"{REQ}[0].key",
        "karpenter.k8s.aws/instance-tenancy",
        f"{REQ}[0].key",
        'label domain "karpenter.k8s.aws" is restricted',
    ),
    (REQ, ..., REQ, "required value"),
    ("apiVersion", "karpenter.sh/v1", "apiVersion", "must be karpenter.sh/v1alpha1"),
]


@pytest.mark.parametrize(
    ("field", "value", "path", "message"),
    MALFORMED,
    ids=[f"{c[0]}={c[1]!r:.30}" for c in MALFORMED],
)
def test_malformed_nodeoverlay_names_the_field(field, value, path, message):
    data = set_path(base("NodeOverlay"), field, value)
    if field == f"{REQ}[0].operator":  # NotIn with values is fine
        parse(data)
        return
    with pytest.raises(ApiValidationError) as err:
        parse(data)
    assert [p.path for p in err.value.problems] == [path], str(err.value)
    assert message in err.value.problems[0].message
    assert str(err.value).startswith(f"NodeOverlay gpu-slices: {path}: ")


def test_overlay_may_require_nodepool_key():
    data = base("NodeOverlay")
    data["spec"]["requirements"].append(
        {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["gpu"]}
    )
    parse(data)


@given(junk=json_junk)
def test_random_junk_raises_only_api_validation_errors(junk):
    with contextlib.suppress(ApiValidationError):
        parse(junk)
    with contextlib.suppress(ApiValidationError):
        parse({**base("NodeOverlay"), "spec": junk})
