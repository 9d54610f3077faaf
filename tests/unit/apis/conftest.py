"""Fixtures for the API model tests: valid base objects, CRD schema validators, examples."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

EXAMPLE_VARIABLES = {"CLUSTER_NAME": "jointer-test"}

NODEPOOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "default"},
    "spec": {
        "template": {
            "metadata": {"labels": {"team": "ml"}},
            "spec": {
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {
                        "key": "karpenter.k8s.aws/instance-category",
                        "operator": "In",
                        "values": ["c", "m", "r"],
                        "minValues": 2,
                    },
                ],
                "nodeClassRef": {
                    "group": "karpenter.k8s.aws",
                    "kind": "EC2NodeClass",
                    "name": "default",
                },
            },
        },
    },
}

NODECLAIM: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodeClaim",
    "metadata": {"name": "default-abcde", "labels": {"karpenter.sh/nodepool": "default"}},
    "spec": {
        "requirements": [
            {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]},
            {
                "key": "node.kubernetes.io/instance-type",
                "operator": "In",
                "values": ["m5.large", "m5.xlarge"],
                "minValues": 2,
            },
        ],
        "resources": {"requests": {"cpu": "1500m", "memory": "2Gi", "pods": 3}},
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
    },
}

NODEOVERLAY: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1alpha1",
    "kind": "NodeOverlay",
    "metadata": {"name": "gpu-slices"},
    "spec": {
        "requirements": [
            {"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": ["a10g"]}
        ],
        "priceAdjustment": "-10%",
        "capacity": {"nvidia.com/gpu": 4},
        "weight": 10,
    },
}


def base(kind: str) -> dict[str, Any]:
    """A deep copy of a valid object of ``kind``."""
    return copy.deepcopy(
        {"NodePool": NODEPOOL, "NodeClaim": NODECLAIM, "NodeOverlay": NODEOVERLAY}[kind]
    )


def set_path(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Set ``a.b[2].c`` in ``obj`` (a ``...`` value deletes the field); return ``obj``."""
    parts: list[str | int] = []
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        parts.append(int(index) if index else name)
    target: Any = obj
    for part in parts[:-1]:
        target = target[part]
    if value is ...:
        del target[parts[-1]]
    else:
        target[parts[-1]] = value
    return obj


def substitute(text: str) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: EXAMPLE_VARIABLES.get(m.group(1), "x"), text)


def example_documents(shared: Path) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """Every document of every example: (file name, document index, object)."""
    for path in sorted((shared / "karpenter" / "examples").glob("*.yaml")):
        for index, doc in enumerate(yaml.safe_load_all(substitute(path.read_text()))):
            if isinstance(doc, dict):
                yield path.name, index, doc


@pytest.fixture(scope="session")
def crd_validator(shared: Path) -> Callable[[str], jsonschema.protocols.Validator]:
    """Return a Draft 7 validator for the openAPIV3Schema of a CRD file (x-kubernetes-* ignored)."""
    cache: dict[str, jsonschema.protocols.Validator] = {}

    def load(name: str) -> jsonschema.protocols.Validator:
        if name not in cache:
            crd = yaml.safe_load((shared / "karpenter" / "crds" / name).read_text())
            schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            jsonschema.Draft7Validator.check_schema(schema)
            cache[name] = jsonschema.Draft7Validator(schema)
        return cache[name]

    return load
