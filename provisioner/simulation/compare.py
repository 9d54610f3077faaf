"""Two runs of one scenario side by side: `jointer simulate --compare` and `jointer report`.

:func:`comparison` is the ``SimulationComparison`` document ``--compare --report`` writes (both
reports, unchanged, under ``runs``); :func:`metrics` the figures compared; :func:`side_by_side`
the table printed. :func:`read_runs` checks a report file and names the file and field of the
first thing wrong with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from provisioner.simulation.report import API_VERSION, KIND

__all__ = [
    "COMPARISON_KIND",
    "Metric",
    "ReportError",
    "comparison",
    "labels",
    "metrics",
    "read_runs",
    "side_by_side",
]

COMPARISON_KIND: Final = "SimulationComparison"


class ReportError(ValueError):
    """A report file that cannot be read; the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class Metric:
    """One compared figure: its label, unit format and value in a report (None: not measured)."""

    label: str
    value: Callable[[Mapping[str, Any]], float | None]
    fmt: str


def _peak_nodes(report: Mapping[str, Any]) -> float:
    columns = report["timeSeries"]["nodes"].values()
    return float(max((sum(v) for v in zip(*columns, strict=True)), default=0))


METRICS: Final[tuple[Metric, ...]] = (
    Metric("cost ($)", lambda r: r["cost"]["total"], "{:.2f}"),
    Metric("cost per hour ($/h)", lambda r: r["cost"]["perHourAverage"], "{:.2f}"),
    Metric(
        "$ per requested vCPU-hour",
        lambda r: r["summary"]["spendingEfficiency"]["perRequestedVCPUHour"],
        "{:.4f}",
    ),
    Metric(
        "$ per requested GiB-hour",
        lambda r: r["summary"]["spendingEfficiency"]["perRequestedGiBHour"],
        "{:.4f}",
    ),
    Metric("nodes launched", lambda r: r["summary"]["nodeClaimsLaunched"], "{:.0f}"),
    Metric("nodes at peak", _peak_nodes, "{:.0f}"),
    Metric(
        "time to bind p50 (s)", lambda r: r["summary"]["timeToScheduleSeconds"]["p50"], "{:.1f}"
    ),
    Metric(
        "time to bind p95 (s)", lambda r: r["summary"]["timeToScheduleSeconds"]["p95"], "{:.1f}"
    ),
    Metric("pods scheduled", lambda r: r["summary"]["podsScheduled"], "{:.0f}"),
    Metric("disruptions", lambda r: sum(r["summary"]["disruptions"].values()), "{:.0f}"),
    Metric("evictions", lambda r: len(r["evictions"]), "{:.0f}"),
    Metric("protected-pod evictions", lambda r: r["summary"]["protectedPodEvictions"], "{:.0f}"),
    Metric("partial gangs", lambda r: len(r["summary"]["partialGangs"]), "{:.0f}"),
)
"""The figures compared, in the order printed."""


def metrics(report: Mapping[str, Any]) -> dict[str, float | None]:
    """Every compared figure of one report, by label."""
    values: dict[str, float | None] = {}
    for metric in METRICS:
        value = metric.value(report)
        values[metric.label] = None if value is None else float(value)
    return values


def comparison(base: Mapping[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """The ``SimulationComparison`` document: both reports and the differences (other - base)."""
    ours, theirs = metrics(base), metrics(other)
    return {
        "apiVersion": API_VERSION,
        "kind": COMPARISON_KIND,
        "scenario": base["scenario"],
        "policies": [base["policy"], other["policy"]],
        "differences": {
            label: None
            if ours[label] is None or theirs[label] is None
            else round(theirs[label] - ours[label], 6)  # type: ignore[operator]
            for label in ours
        },
        "runs": [dict(base), dict(other)],
    }


def _cell(fmt: str, value: float | None) -> str:
    return "-" if value is None else fmt.format(value)


def _difference(metric: Metric, base: float | None, other: float | None) -> str:
    if base is None or other is None:
        return "-"
    delta = other - base
    text = ("+" if delta > 0 else "") + metric.fmt.format(delta)
    if base:
        text += f" ({delta / abs(base):+.0%})"
    return text


def side_by_side(base: Mapping[str, Any], other: Mapping[str, Any]) -> str:
    """The two summaries as columns, with the difference (second minus first)."""
    ours, theirs = metrics(base), metrics(other)
    first, second = str(base["policy"]), str(other["policy"])
    if first == second:
        first, second = f"{first} (seed {base['seed']})", f"{second} (seed {other['seed']})"
    header = f"{'':<28}{first:>16}{second:>16}  {'difference':<20}"
    lines = [
        (
            f"scenario {base['scenario']}  virtual time "
            f"{float(base['durationSeconds']) / 3600:g}h  {first} vs {second}"
        ),
        "",
        header.rstrip(),
    ]
    for metric in METRICS:
        a, b = ours[metric.label], theirs[metric.label]
        lines.append(
            (
                f"{metric.label:<28}{_cell(metric.fmt, a):>16}{_cell(metric.fmt, b):>16}  "
                f"{_difference(metric, a, b)}"
            ).rstrip()
        )
    return "\n".join(lines)


# -- reading report files --------------------------------------------------------------------

_NUMBER = (int, float)
_REQUIRED: Final[tuple[tuple[str, type | tuple[type, ...]], ...]] = (
    ("scenario", str),
    ("policy", str),
    ("seed", int),
    ("durationSeconds", _NUMBER),
    ("cost", dict),
    ("cost.total", _NUMBER),
    ("cost.perHourAverage", _NUMBER),
    ("pods", list),
    ("nodeClaims", list),
    ("ec2Instances", list),
    ("evictions", list),
    ("events", list),
    ("summary", dict),
    ("summary.podsScheduled", int),
    ("summary.timeToScheduleSeconds", dict),
    ("summary.nodeClaimsLaunched", int),
    ("summary.disruptions", dict),
    ("summary.spendingEfficiency", dict),
    ("summary.protectedPodEvictions", int),
    ("summary.partialGangs", list),
    ("gangs", list),
    ("timeSeries", dict),
    ("timeSeries.at", list),
    ("timeSeries.pendingPods", list),
    ("timeSeries.boundPods", list),
    ("timeSeries.nodes", dict),
    ("timeSeries.costPerHour", list),
    ("timeSeries.cost", list),
    ("timeSeries.requestedVCPU", list),
    ("timeSeries.requestedMemoryGiB", list),
)
_NULLABLE: Final = (
    (("summary", "timeToScheduleSeconds"), ("p50", "p95")),
    (("summary", "spendingEfficiency"), ("perRequestedVCPUHour", "perRequestedGiBHour")),
)
"""Numbers a report may leave null (nothing bound, nothing requested), but must name."""
_ROWS: Final[Mapping[str, tuple[str, ...]]] = {
    "ec2Instances": ("instanceType", "capacityType", "launchedAt"),
    "evictions": ("at", "reason"),
    "gangs": ("name", "members", "timeToStartSeconds"),
    "pods": ("name", "createdAt"),
}
_TYPE_NAMES: Final[Mapping[type, str]] = {
    str: "a string",
    int: "an integer",
    dict: "an object",
    list: "a list",
}


def _expected(kind: type | tuple[type, ...]) -> str:
    return "a number" if isinstance(kind, tuple) else _TYPE_NAMES[kind]


def _check_report(report: Any, path: str | Path, at: str = "") -> Mapping[str, Any]:
    """``report`` if it has every field the comparison and the charts read.

    ``at`` is where the report sits in its file (``runs[0].``), prefixed to field names.
    """
    where = f"{path}: {at}"
    if not isinstance(report, dict):
        raise ReportError(f"{path}: {at.rstrip('.') or '(top level)'}: must be a JSON object")
    if report.get("apiVersion") != API_VERSION:
        raise ReportError(f"{where}apiVersion: must be {API_VERSION}")
    if report.get("kind") != KIND:
        raise ReportError(f"{where}kind: must be {KIND} or {COMPARISON_KIND}")
    _check_fields(report, where)
    for parent, keys in _NULLABLE:
        for key in keys:
            value = report[parent[0]][parent[1]]
            if key not in value:
                raise ReportError(f"{where}{'.'.join(parent)}.{key}: missing")
            if value[key] is not None and (
                isinstance(value[key], bool) or not isinstance(value[key], _NUMBER)
            ):
                raise ReportError(f"{where}{'.'.join(parent)}.{key}: must be a number or null")
    _check_series(report["timeSeries"], where)
    _check_rows(report, where)
    return report


def _check_fields(report: Mapping[str, Any], where: str) -> None:
    for field, kind in _REQUIRED:
        value: Any = report
        for part in field.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            hint = " (re-run jointer simulate to add it)" if field.startswith("timeSeries") else ""
            raise ReportError(f"{where}{field}: missing{hint}")
        if isinstance(value, bool) or not isinstance(value, kind):
            raise ReportError(f"{where}{field}: must be {_expected(kind)}")


def _check_series(series: Mapping[str, Any], where: str) -> None:
    length = len(series["at"])
    columns = {name: series[name] for name in _SERIES_COLUMNS}
    columns.update({f"nodes.{key}": values for key, values in series["nodes"].items()})
    for name, values in columns.items():
        if not isinstance(values, list) or len(values) != length:
            raise ReportError(f"{where}timeSeries.{name}: must be a list as long as timeSeries.at")


def _check_rows(report: Mapping[str, Any], where: str) -> None:
    for rows, fields in _ROWS.items():
        for index, row in enumerate(report[rows]):
            for field in fields:
                if not isinstance(row, dict) or field not in row:
                    raise ReportError(f"{where}{rows}[{index}].{field}: missing")


_SERIES_COLUMNS: Final = (
    "pendingPods",
    "boundPods",
    "costPerHour",
    "cost",
    "requestedVCPU",
    "requestedMemoryGiB",
)


def read_runs(path: str | Path) -> list[Mapping[str, Any]]:
    """The reports in a ``SimulationReport`` or ``SimulationComparison`` file.

    Raises:
        ReportError: unreadable file, not JSON, or a missing or mistyped field (named).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ReportError(f"{path}: cannot read: {error.strerror or error}") from error
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ReportError(
            f"{path}: not JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from error
    if isinstance(document, dict) and document.get("kind") == COMPARISON_KIND:
        runs = document.get("runs")
        if not isinstance(runs, list) or not runs:
            raise ReportError(f"{path}: runs: must be a non-empty list of SimulationReports")
        return [_check_report(run, path, f"runs[{i}].") for i, run in enumerate(runs)]
    return [_check_report(document, path)]


def labels(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """A distinct name for each run: its policy, with the seed or a number when they clash."""
    names = [str(r["policy"]) for r in runs]
    if len(set(names)) == len(names):
        return names
    named = [f"{r['policy']} (seed {r['seed']})" for r in runs]
    if len(set(named)) == len(named):
        return named
    return [f"{name} #{i + 1}" for i, name in enumerate(names)]
