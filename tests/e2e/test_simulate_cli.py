"""`jointer simulate` on the command line: exit status, report file, summary, progress."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from provisioner.app import cmd_simulate
from provisioner.app.cli import main
from provisioner.simulation import wiring
from provisioner.simulation.runner import Progress
from tests.e2e.conftest import SCENARIOS

SCENARIO = """
apiVersion: jointer.dev/v1alpha1
kind: Scenario
metadata: {{name: tiny}}
spec:
  region: us-east-1
  clusterName: demo
  duration: 5m
  catalog: {catalog}
  steps:
  - at: 0s
    applyFile: {nodeclass}
  - at: 0s
    apply: |
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {{name: general}}
      spec:
        template:
          spec:
            nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
            requirements:
            - {{key: karpenter.k8s.aws/instance-family, operator: In, values: [m6a]}}
      ---
      apiVersion: v1
      kind: Pod
      metadata: {{name: one, namespace: default}}
      spec:
        containers: [{{name: c, image: app, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}]
"""


@pytest.fixture
def tiny(tmp_path: Path, test_catalog: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(SCENARIO.format(catalog=test_catalog, nodeclass=SCENARIOS / "nodeclass.yaml"))
    return path


def test_a_run_writes_the_report_and_prints_the_summary(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report_path = tmp_path / "out" / "report.json"
    report_path.parent.mkdir()
    assert main(["simulate", str(tiny), "--report", str(report_path), "--seed", "4"]) == 0
    report = json.loads(report_path.read_text())
    assert (report["kind"], report["scenario"], report["seed"], report["policy"]) == (
        "SimulationReport",
        "tiny",
        4,
        "jointer",
    )
    (pod,) = report["pods"]
    assert (pod["name"], pod["scheduledAt"]) == ("default/one", 41.0)
    (claim,) = report["nodeClaims"]
    assert claim["instanceType"].startswith("m6a.")
    out = capsys.readouterr().out
    assert "scenario tiny  policy jointer  seed 4  virtual time 0h05m00s" in out
    assert "pods           1 created, 1 scheduled" in out
    assert "\r" not in out  # no progress line when standard output is not a terminal


def test_quiet_prints_nothing_and_greedy_is_reported(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report_path = tmp_path / "r.json"
    assert (
        main(["simulate", str(tiny), "--quiet", "--policy", "greedy", "--report", str(report_path)])
        == 0
    )
    assert capsys.readouterr().out == ""
    assert json.loads(report_path.read_text())["policy"] == "greedy"


def test_an_internal_failure_exits_1(
    tiny: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(ports: Any) -> Any:
        raise RuntimeError("wiring exploded")

    monkeypatch.setattr(wiring, "manager_factory", broken)
    assert main(["simulate", str(tiny), "--quiet"]) == 1
    assert (
        "jointer simulate: internal error: RuntimeError: wiring exploded" in capsys.readouterr().err
    )


def test_an_unusable_catalog_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    catalog = tmp_path / "catalog.json"
    catalog.write_text('{"apiVersion": "jointer.dev/v1alpha1", "kind": "InstanceCatalog"}')
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(catalog=catalog, nodeclass=SCENARIOS / "nodeclass.yaml"))
    assert main(["simulate", str(path)]) == 2
    assert "spec.catalog:" in capsys.readouterr().err


def test_the_progress_line_shows_clock_pending_pods_nodes_and_cost() -> None:
    line = cmd_simulate.progress_line(
        Progress(at=3725, pending_pods=12, nodes={"on-demand": 1, "spot": 3}, cost=1234.5)
    )
    assert line == "[1h02m05s] pending pods   12  nodes on-demand 1 spot 3  cost $1,234.50"
