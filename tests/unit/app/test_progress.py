"""Progress bars: `plan` by stage on large inputs, only on a terminal and without --quiet."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from provisioner.app.cli import main
from provisioner.app.progress import PlanProgress, SimulationProgress, wanted
from provisioner.simulation.runner import Progress

NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
"""
POD = """\
---
apiVersion: v1
kind: Pod
metadata: {{name: web-{i}, namespace: default}}
spec:
  containers: [{{name: c, image: web, resources: {{requests: {{cpu: 250m, memory: 256Mi}}}}}}]
"""


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def manifests(tmp_path: Path, pods: int) -> str:
    path = tmp_path / f"pods-{pods}.yaml"
    path.write_text(NODEPOOL + "".join(POD.format(i=i) for i in range(pods)))
    return str(path)


def test_a_bar_only_on_a_terminal_and_never_when_quiet() -> None:
    assert wanted(Terminal(), quiet=False)
    assert not wanted(Terminal(), quiet=True)
    assert not wanted(io.StringIO(), quiet=False)


def test_the_plan_bar_waits_for_a_large_input_and_walks_the_stages() -> None:
    small, large = Terminal(), Terminal()
    for stream, pods in ((small, 10), (large, 500)):
        bar = PlanProgress(stream, threshold=200)
        for stage in PlanProgress.STAGES:
            bar(stage, pods)
        bar.finish()
    assert small.getvalue() == ""
    text = large.getvalue()
    assert "plan 500 pods" in text
    for stage in PlanProgress.STAGES:
        assert stage in text


def test_the_simulation_bar_shows_clock_pending_nodes_and_cost() -> None:
    stream = Terminal()
    bar = SimulationProgress(stream, label="demo / greedy", duration=7200)
    bar(Progress(at=3725, pending_pods=12, nodes={"on-demand": 1, "spot": 3}, cost=1234.5))
    bar.finish()
    text = stream.getvalue()
    assert "demo / greedy" in text
    assert "1h02m05s" in text
    assert "pending 12  nodes on-demand 1 spot 3  $1,234.50" in text


@pytest.mark.parametrize(
    "case",
    [(Terminal, False, True), (Terminal, True, False), (io.StringIO, False, False)],
    ids=["terminal", "quiet", "not-a-terminal"],
)
def test_jointer_plan_draws_its_bar_on_a_terminal_for_a_large_input(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: tuple[type[io.StringIO], bool, bool],
) -> None:
    stream, quiet, drawn = case
    err = stream()
    monkeypatch.setattr(sys, "stderr", err)
    arguments = ["plan", "-f", manifests(tmp_path, 200), "--policy", "greedy", "-o", "json"]
    assert main(arguments + (["--quiet"] if quiet else [])) == 0
    assert ("plan 200 pods" in err.getvalue()) is drawn
    assert json.loads(capsys.readouterr().out)["apiVersion"]  # stdout stays one JSON document


def test_jointer_plan_draws_no_bar_for_a_small_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    assert main(["plan", "-f", manifests(tmp_path, 3), "--policy", "greedy", "-o", "json"]) == 0
    assert "plan 3 pods" not in err.getvalue()
    capsys.readouterr()
