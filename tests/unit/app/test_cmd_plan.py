"""`jointer plan` keeps each parsed catalog for the process, keyed by what it depends on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import workloads
from cloudprovider.aws import catalog as aws_catalog
from cloudprovider.aws.nodeclass import parse_nodeclass
from provisioner.app import cmd_plan

NODECLASS = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "small-pods"},
    "spec": {
        "role": "r",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"k": "v"}}],
        "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
        "kubelet": {"maxPods": 20},
    },
}


@pytest.fixture(autouse=True)
def _fresh_cache() -> Any:
    cmd_plan._CATALOGS.clear()
    yield
    cmd_plan._CATALOGS.clear()


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    calls: list[int] = []
    original = getattr(aws_catalog, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(aws_catalog, name, counted)
    return calls


def test_a_catalog_file_is_read_once_until_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = _counting(monkeypatch, "read_catalog")
    path = tmp_path / "catalog.json"
    data = workloads.karpenter_generic(1).catalog
    path.write_text(json.dumps(data))
    first = cmd_plan._catalog(str(path), "us-east-1", None)
    assert cmd_plan._catalog(str(path), "us-east-1", None) is first
    assert len(reads) == 1
    nodeclass = parse_nodeclass(NODECLASS)
    other = cmd_plan._catalog(str(path), "us-east-1", nodeclass)
    assert other is not first
    assert len(reads) == 2
    assert isinstance(data, dict)
    data["instanceTypes"] = data["instanceTypes"][:3]
    path.write_text(json.dumps(data, indent=1))
    changed = cmd_plan._catalog(str(path), "us-east-1", None)
    assert len(reads) == 3
    assert len(changed.instance_types) == 3
    text = path.read_text()
    cheaper = text.replace('"fake-it-0"', '"fake-it-X"', 1)
    assert len(cheaper) == len(text)
    path.write_text(cheaper)  # the same size, at once: told apart by content
    renamed = cmd_plan._catalog(str(path), "us-east-1", None)
    assert len(reads) == 4
    assert renamed.instance_types[-1].name == "fake-it-X"


def test_the_builtin_catalog_is_resolved_once_per_region_and_nodeclass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resolved = _counting(monkeypatch, "builtin_catalog")
    first = cmd_plan._catalog(None, "us-east-1", None)
    assert cmd_plan._catalog(None, "us-east-1", None) is first
    assert len(resolved) == 1
    small = cmd_plan._catalog(None, "us-east-1", parse_nodeclass(NODECLASS))
    assert len(resolved) == 2
    assert {t.capacity["pods"] for t in small.instance_types} == {20_000}
    assert cmd_plan._catalog(None, "us-east-1", None) is first


def test_a_missing_catalog_is_still_bad_input(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.json")
    with pytest.raises(cmd_plan.InputError, match=r"nope\.json: \[Errno 2\]"):
        cmd_plan._catalog(missing, "us-east-1", None)
    with pytest.raises(cmd_plan.InputError, match="--region mars-1"):
        cmd_plan._catalog(None, "mars-1", None)
