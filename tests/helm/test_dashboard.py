"""The Grafana dashboard shipped in the chart: every query names a metric the controller exports,
and the chart renders it as an optional ConfigMap with Grafana's sidecar label."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from provisioner.controllers.disruption.metrics import DisruptionMetrics
from provisioner.controllers.metrics import Metrics
from tests.helm.conftest import CHART, CI_VALUES, Render

DASHBOARD = CHART / "dashboards" / "jointer.json"
PROMQL_WORDS = frozenset(
    {
        # aggregations, functions and keywords the dashboard may use
        *("sum", "count", "max", "min", "avg", "by", "without", "on", "ignoring"),
        *("group_left", "group_right", "rate", "increase", "irate", "histogram_quantile"),
        *("and", "or", "unless", "bool", "offset", "clamp_min", "topk"),
    }
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def exported_metrics() -> set[str]:
    """The series names the controller's registry exposes (``/metrics`` of ``jointer run``)."""
    registry = CollectorRegistry()
    Metrics(registry)
    DisruptionMetrics(registry)
    names: set[str] = set()
    for family in registry.collect():
        match family.type:
            case "counter":
                names |= {f"{family.name}_total", f"{family.name}_created"}
            case "histogram":
                names |= {f"{family.name}{s}" for s in ("_bucket", "_sum", "_count", "_created")}
            case _:
                names.add(family.name)
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (labels, functions and keywords removed)."""
    text = _STRING.sub("", expr)
    text = _MATCHERS.sub("", text)
    text = _RANGE.sub("", text)
    text = _GROUPING.sub("", text)
    return {
        word
        for word in _IDENT.findall(text)
        if word not in PROMQL_WORDS and not re.fullmatch(r"\d.*", word)
    }


def queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]


def test_the_dashboard_covers_what_issue_20_asks_for() -> None:
    titles = " ".join(title.lower() for title, _ in queries())
    for topic in ("nodes", "cost", "pending", "latency", "disruption", "interruption", "gap"):
        assert topic in titles


@pytest.mark.parametrize(("title", "expr"), queries(), ids=[t for t, _ in queries()])
def test_every_query_names_only_metrics_the_controller_exports(title: str, expr: str) -> None:
    names = metric_names(expr)
    assert names, f"{title}: no metric in {expr!r}"
    missing = names - exported_metrics()
    assert not missing, f"{title}: {sorted(missing)} are not exported by the controller"


def test_the_metric_name_reader_sees_through_promql() -> None:
    expr = (
        'sum by (nodepool) (rate(a_total{x="b_total"}[5m])) '
        "* on (zone) group_left() max by (zone) (c_gauge)"
    )
    assert metric_names(expr) == {"a_total", "c_gauge"}
    assert "karpenter_made_up_total" not in exported_metrics()


def _dashboards(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == "ConfigMap" and "jointer.json" in o.get("data", {})]


def test_the_chart_ships_no_dashboard_by_default(render: Render) -> None:
    assert _dashboards(render("--values", str(CI_VALUES))) == []


def test_the_chart_ships_the_dashboard_as_a_sidecar_configmap(render: Render) -> None:
    (config_map,) = _dashboards(
        render(
            "--values",
            str(CI_VALUES),
            "--set",
            "dashboards.enabled=true",
            "--set",
            "dashboards.namespace=monitoring",
            "--set",
            "dashboards.annotations.grafana_folder=Jointer",
        )
    )
    assert config_map["metadata"]["name"] == "jointer-dashboard"
    assert config_map["metadata"]["namespace"] == "monitoring"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "Jointer"}
    assert json.loads(config_map["data"]["jointer.json"]) == json.loads(DASHBOARD.read_text())


def test_the_dashboard_file_is_in_the_packaged_chart() -> None:
    ignored = (CHART / ".helmignore").read_text() if (CHART / ".helmignore").exists() else ""
    assert "dashboards" not in ignored
    assert Path(DASHBOARD).is_file()
