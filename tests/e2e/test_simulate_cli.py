"""`jointer simulate` on the command line: exit status, report, summary, progress, --compare."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from provisioner.app.cli import main
from provisioner.simulation import wiring
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
    efficiency = report["summary"]["spendingEfficiency"]
    assert (
        f"  efficiency     ${efficiency['perRequestedVCPUHour']:.4f} per requested vCPU-hour, "
        f"${efficiency['perRequestedGiBHour']:.4f} per requested GiB-hour"
    ) in out
    assert efficiency["requestedVCPUHours"] == round((300 - 41) / 3600, 6)  # 1 vCPU from 41 s
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


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_a_progress_bar_on_a_terminal_over_virtual_time(
    tiny: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["simulate", str(tiny)]) == 0
    bar = terminal.getvalue()
    assert "tiny / jointer" in bar
    assert "0h05m00s" in bar  # the bar reached the end of virtual time
    assert "pending 0  nodes spot 1" in bar or "pending 0  nodes on-demand 1" in bar
    assert "━" in bar  # rich draws the bar
    assert "tiny / jointer" not in capsys.readouterr().out  # never on standard output


@pytest.mark.parametrize("quiet", [True, False])
def test_no_progress_bar_when_quiet_or_not_a_terminal(
    tiny: Path, monkeypatch: pytest.MonkeyPatch, quiet: bool
) -> None:
    stream = Terminal() if quiet else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    assert main(["simulate", str(tiny), *(["--quiet"] if quiet else [])]) == 0
    assert stream.getvalue() == ""


def test_compare_prints_both_columns_and_keeps_both_runs(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "both.json"
    assert main(["simulate", str(tiny), "--compare", "greedy", "--report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "scenario tiny  virtual time 0.0833333h  jointer vs greedy" in out
    header = next(line for line in out.splitlines() if "difference" in line)
    assert header.split() == ["jointer", "greedy", "difference"]
    for label in (
        "cost ($)",
        "$ per requested vCPU-hour",
        "$ per requested GiB-hour",
        "nodes launched",
        "time to bind p50 (s)",
        "time to bind p95 (s)",
        "disruptions",
        "protected-pod evictions",
        "partial gangs",
    ):
        assert any(line.startswith(label) for line in out.splitlines()), label
    document = json.loads(path.read_text())
    assert (document["kind"], document["policies"]) == (
        "SimulationComparison",
        ["jointer", "greedy"],
    )
    jointer, greedy = document["runs"]
    assert (jointer["policy"], greedy["policy"]) == ("jointer", "greedy")
    assert document["differences"]["cost ($)"] == pytest.approx(
        greedy["cost"]["total"] - jointer["cost"]["total"], abs=1e-6
    )
    cost_line = next(line for line in out.splitlines() if line.startswith("cost ($)"))
    assert cost_line.split()[2:4] == [
        f"{jointer['cost']['total']:.2f}",
        f"{greedy['cost']['total']:.2f}",
    ]


def test_a_report_in_a_missing_directory_is_refused_before_the_run(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "nowhere" / "r.json"
    assert main(["simulate", str(tiny), "--compare", "greedy", "--report", str(target)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"jointer simulate: error: --report {target}: directory {target.parent} does not exist\n"
    )
