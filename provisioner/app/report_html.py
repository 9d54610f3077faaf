"""The HTML report of one or more simulation runs (`jointer report`): Plotly charts and tables.

One self-contained file: plotly.js is embedded in the page (no CDN, works offline) and every
chart is a Plotly figure drawn from the runs' ``timeSeries``, ``evictions``, ``gangs`` and
``summary`` (`provisioner.simulation.series`).
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from provisioner.simulation.compare import METRICS, labels, metrics

__all__ = ["CHARTS", "render"]

CHARTS: Final = (
    ("chart-cost", "Hourly cost"),
    ("chart-nodes", "Nodes by instance type and capacity type"),
    ("chart-pending", "Pending pods"),
    ("chart-bind", "Time to bind"),
    ("chart-efficiency", "Spending efficiency"),
    ("chart-disruptions", "Disruptions and evictions by reason"),
    ("chart-gangs", "Gangs' time to start"),
)
"""Every chart's element id and title, in page order."""
_COLOURS: Final = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
_CONFIG: Final = {"displaylogo": False, "responsive": True}
_LAYOUT: Final = {
    "template": "plotly_white",
    "height": 380,
    "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
    "legend": {"orientation": "h", "y": -0.2},
}


def _hours(run: Mapping[str, Any]) -> list[float]:
    return [t / 3600 for t in run["timeSeries"]["at"]]


def _figure(title: str, x_title: str, y_title: str) -> go.Figure:
    figure = go.Figure()
    figure.update_layout(title=title, xaxis_title=x_title, yaxis_title=y_title, **_LAYOUT)
    return figure


def _cost(runs: Sequence[Mapping[str, Any]], names: Sequence[str]) -> go.Figure:
    figure = _figure("Hourly cost (price of the running instances)", "virtual hours", "$ / hour")
    for i, (run, name) in enumerate(zip(runs, names, strict=True)):
        figure.add_trace(
            go.Scatter(
                x=_hours(run),
                y=run["timeSeries"]["costPerHour"],
                name=name,
                mode="lines",
                line={"shape": "hv", "color": _COLOURS[i % len(_COLOURS)]},
            )
        )
    return figure


def _nodes(runs: Sequence[Mapping[str, Any]], names: Sequence[str]) -> go.Figure:
    figure = make_subplots(
        rows=len(runs), cols=1, shared_xaxes=True, subplot_titles=list(names), vertical_spacing=0.12
    )
    keys = sorted({key for run in runs for key in run["timeSeries"]["nodes"]})
    colour = {key: _COLOURS[i % len(_COLOURS)] for i, key in enumerate(keys)}
    for row, run in enumerate(runs, start=1):
        for key, values in sorted(run["timeSeries"]["nodes"].items()):
            figure.add_trace(
                go.Scatter(
                    x=_hours(run),
                    y=values,
                    name=key,
                    legendgroup=key,
                    showlegend=row == 1 or key not in runs[0]["timeSeries"]["nodes"],
                    stackgroup=f"run{row}",
                    line={"shape": "hv", "color": colour[key]},
                ),
                row=row,
                col=1,
            )
        figure.update_yaxes(title_text="nodes", row=row, col=1)
    figure.update_xaxes(title_text="virtual hours", row=len(runs), col=1)
    figure.update_layout(
        title="Nodes by instance type / capacity type", **{**_LAYOUT, "height": 300 * len(runs)}
    )
    return figure


def _pending(runs: Sequence[Mapping[str, Any]], names: Sequence[str]) -> go.Figure:
    figure = _figure("Pending pods", "virtual hours", "pods")
    for i, (run, name) in enumerate(zip(runs, names, strict=True)):
        figure.add_trace(
            go.Scatter(
                x=_hours(run),
                y=run["timeSeries"]["pendingPods"],
                name=name,
                mode="lines",
                line={"shape": "hv", "color": _COLOURS[i % len(_COLOURS)]},
            )
        )
    return figure


def _bind(runs: Sequence[Mapping[str, Any]], names: Sequence[str]) -> go.Figure:
    figure = _figure("Time to bind (pod created to bound)", "", "seconds")
    for i, (run, name) in enumerate(zip(runs, names, strict=True)):
        waits = [
            float(p["scheduledAt"]) - float(p["createdAt"])
            for p in run["pods"]
            if p.get("scheduledAt") is not None
        ]
        figure.add_trace(
            go.Box(y=waits, name=name, boxpoints="outliers", marker_color=_COLOURS[i % 6])
        )
    return figure


def _efficiency(runs: Sequence[Mapping[str, Any]], names: Sequence[str]) -> go.Figure:
    figure = make_subplots(
        rows=1, cols=2, subplot_titles=["$ per requested vCPU-hour", "$ per requested GiB-hour"]
    )
    for i, (run, name) in enumerate(zip(runs, names, strict=True)):
        series = run["timeSeries"]
        for col, column in ((1, "requestedVCPU"), (2, "requestedMemoryGiB")):
            values = [
                round(rate / requested, 6) if requested else None
                for rate, requested in zip(series["costPerHour"], series[column], strict=True)
            ]
            figure.add_trace(
                go.Scatter(
                    x=_hours(run),
                    y=values,
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    mode="lines",
                    line={"shape": "hv", "color": _COLOURS[i % len(_COLOURS)]},
                ),
                row=1,
                col=col,
            )
        figure.update_xaxes(title_text="virtual hours")
    figure.update_layout(title="Spending efficiency (lower is better)", **_LAYOUT)
    return figure


def _disruptions(runs: Sequence[Mapping[str, Any]], names: Sequence[str]) -> go.Figure:
    figure = make_subplots(
        rows=1, cols=2, subplot_titles=["NodeClaims disrupted", "pods evicted (protected hatched)"]
    )
    for i, (run, name) in enumerate(zip(runs, names, strict=True)):
        colour = _COLOURS[i % len(_COLOURS)]
        disruptions = run["summary"]["disruptions"]
        figure.add_trace(
            go.Bar(
                x=list(disruptions) or ["none"],
                y=list(disruptions.values()) or [0],
                name=name,
                legendgroup=name,
                marker_color=colour,
            ),
            row=1,
            col=1,
        )
        evicted = Counter(str(e["reason"]) for e in run["evictions"])
        protected = Counter(str(e["reason"]) for e in run["evictions"] if e.get("protected"))
        reasons = sorted(evicted) or ["none"]
        figure.add_trace(
            go.Bar(
                x=reasons,
                y=[evicted[r] for r in reasons],
                name=name,
                legendgroup=name,
                showlegend=False,
                marker_color=colour,
                marker_pattern_shape=["/" if protected[r] else "" for r in reasons],
                customdata=[protected[r] for r in reasons],
                hovertemplate="%{x}: %{y} evicted, %{customdata} protected",
            ),
            row=1,
            col=2,
        )
    figure.update_yaxes(title_text="count")
    figure.update_layout(title="Disruptions and evictions by reason", barmode="group", **_LAYOUT)
    return figure


def _gangs(runs: Sequence[Mapping[str, Any]], names: Sequence[str]) -> go.Figure:
    figure = _figure("Gangs' time to start (first member created to last bound)", "", "seconds")
    for i, (run, name) in enumerate(zip(runs, names, strict=True)):
        rows = run["gangs"]
        figure.add_trace(
            go.Bar(
                x=[g["name"] for g in rows] or ["no pod groups"],
                y=[g["timeToStartSeconds"] for g in rows] or [0],
                name=name,
                marker_color=_COLOURS[i % len(_COLOURS)],
                text=["never started" if g["timeToStartSeconds"] is None else "" for g in rows],
            )
        )
    figure.update_layout(barmode="group")
    return figure


_BUILDERS: Final = {
    "chart-cost": _cost,
    "chart-nodes": _nodes,
    "chart-pending": _pending,
    "chart-bind": _bind,
    "chart-efficiency": _efficiency,
    "chart-disruptions": _disruptions,
    "chart-gangs": _gangs,
}


def _metrics_table(runs: Sequence[Mapping[str, Any]], names: Sequence[str]) -> str:
    values = [metrics(run) for run in runs]
    head = "".join(f"<th>{html.escape(name)}</th>" for name in names)
    if len(runs) == 2:  # noqa: PLR2004 - a pair gets its difference
        head += "<th>difference</th>"
    body = []
    for metric in METRICS:
        cells = [values[i][metric.label] for i in range(len(runs))]
        row = "".join(
            f"<td>{'-' if v is None else html.escape(metric.fmt.format(v))}</td>" for v in cells
        )
        if len(runs) == 2 and None not in cells:  # noqa: PLR2004
            delta = float(cells[1]) - float(cells[0])  # type: ignore[arg-type]
            row += f"<td>{html.escape(('+' if delta > 0 else '') + metric.fmt.format(delta))}</td>"
        elif len(runs) == 2:  # noqa: PLR2004
            row += "<td>-</td>"
        body.append(f"<tr><th>{html.escape(metric.label)}</th>{row}</tr>")
    return (
        f'<table id="table-summary"><thead><tr><th></th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _instances_table(run: Mapping[str, Any], name: str) -> str:
    end = float(run["durationSeconds"])
    groups: dict[tuple[str, str], list[float]] = {}
    for row in run["ec2Instances"]:
        stop = row.get("terminatedAt")
        hours = ((float(stop) if stop is not None else end) - float(row["launchedAt"])) / 3600
        entry = groups.setdefault((str(row["instanceType"]), str(row["capacityType"])), [0, 0, 0])
        entry[0] += 1
        entry[1] += hours
        entry[2] += hours * float(row.get("pricePerHour") or 0.0)
    rows = "".join(
        f"<tr><td>{html.escape(t)}</td><td>{html.escape(c)}</td><td>{n:.0f}</td>"
        f"<td>{h:.2f}</td><td>{cost:.2f}</td></tr>"
        for (t, c), (n, h, cost) in sorted(groups.items())
    )
    return (
        f"<h3>{html.escape(name)}: EC2 instances</h3><table class='instances'><thead><tr>"
        "<th>instance type</th><th>capacity</th><th>count</th><th>hours</th><th>cost ($)</th>"
        f"</tr></thead><tbody>{rows}</tbody></table>"
    )


_STYLE: Final = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 4px 10px; text-align: right; }
thead th { background: #f3f3f3; }
tbody th { text-align: left; font-weight: normal; }
section { margin-bottom: 2em; }
"""


def render(runs: Sequence[Mapping[str, Any]]) -> str:
    """The report page of ``runs`` (checked reports, `provisioner.simulation.compare.read_runs`)."""
    names = labels(runs)
    scenarios = sorted({str(run["scenario"]) for run in runs})
    title = f"Jointer simulation report: {', '.join(scenarios)}"
    charts = []
    for element, heading in CHARTS:
        figure = _BUILDERS[element](runs, names)
        div = pio.to_html(
            figure, full_html=False, include_plotlyjs=False, div_id=element, config=_CONFIG
        )
        charts.append(f"<section><h2>{html.escape(heading)}</h2>{div}</section>")
    described = "".join(
        f"<li>{html.escape(name)}: scenario {html.escape(str(run['scenario']))}, policy "
        f"{html.escape(str(run['policy']))}, seed {run['seed']}, "
        f"{float(run['durationSeconds']) / 3600:g} virtual hours</li>"
        for run, name in zip(runs, names, strict=True)
    )
    tables = "".join(_instances_table(run, name) for run, name in zip(runs, names, strict=True))
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head><body>'
        f"<h1>{html.escape(title)}</h1><ul>{described}</ul>"
        f"<section><h2>Summary</h2>{_metrics_table(runs, names)}</section>"
        f"{''.join(charts)}<section><h2>Instances</h2>{tables}</section>"
        "</body></html>\n"
    )
