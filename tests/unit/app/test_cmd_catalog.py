"""`jointer catalog export`: output and exit codes, never a traceback."""

from __future__ import annotations

import json
from typing import Any

import pytest

from provisioner.app.cli import main

NODECLASS = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: pods20
spec:
  role: KarpenterNodeRole-demo
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  amiSelectorTerms: [{alias: al2023@latest}]
  kubelet: {maxPods: 20}
"""


def export(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["catalog", "export", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def by_name(out: str) -> dict[str, Any]:
    return {t["name"]: t for t in json.loads(out)["instanceTypes"]}


def test_export_us_east_1(capsys):
    code, out, err = export(capsys, "--region", "us-east-1")
    assert code == 0, err
    types = by_name(out)
    assert types["m5.large"]["allocatable"] == {
        "cpu": "1930m",
        "memory": "6903Mi",
        "pods": "29",
        "ephemeral-storage": "17Gi",
    }
    assert types["g5.xlarge"]["labels"]["karpenter.k8s.aws/instance-gpu-name"] == "a10g"
    assert types["g5.xlarge"]["capacity"]["nvidia.com/gpu"] == "1"
    assert all(t["offerings"] for t in types.values())


def test_export_with_nodeclass_max_pods(capsys, tmp_path):
    path = tmp_path / "nc.yaml"
    path.write_text(NODECLASS)
    code, out, err = export(capsys, "-f", str(path))
    assert code == 0, err
    assert by_name(out)["m5.large"]["allocatable"]["pods"] == "20"


@pytest.mark.parametrize("region", ["eu-west-9", "us-gov-west-1"])
def test_region_without_data_exits_2(capsys, region):
    code, out, err = export(capsys, "--region", region)
    assert code == 2
    assert out == ""
    assert region in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(
            NODECLASS.replace("maxPods: 20", "maxPods: -3"), "spec.kubelet.maxPods", id="field"
        ),
        pytest.param(
            NODECLASS.replace("role: KarpenterNodeRole-demo", "instanceProfile: p\n  role: r"),
            "spec: must specify exactly one",
            id="rule",
        ),
        pytest.param("kind: [unclosed", "not valid YAML", id="yaml"),
        pytest.param("kind: NodePool\n", "expected exactly one EC2NodeClass, found 0", id="none"),
        pytest.param(b"\xff\xfe\x00", "cannot read", id="binary"),
    ],
)
def test_bad_nodeclass_file_exits_2_naming_file_and_field(capsys, tmp_path, content, expected):
    path = tmp_path / "bad.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    code, out, err = export(capsys, "-f", str(path))
    assert code == 2
    assert str(path) in err
    assert expected in err
    assert out == ""


def test_missing_nodeclass_file_exits_2(capsys, tmp_path):
    code, _, err = export(capsys, "-f", str(tmp_path / "missing.yaml"))
    assert code == 2
    assert "missing.yaml" in err
