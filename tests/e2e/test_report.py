"""`jointer report`: the HTML page of simulation runs, its errors, and a real browser drawing it."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from provisioner.app.cli import main
from provisioner.app.report_html import CHARTS
from tests.e2e.conftest import SCENARIOS
from tests.e2e.test_simulate_cli import SCENARIO

REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory, test_catalog: Path) -> Path:
    """``simulate --compare greedy --report`` of a five-minute scenario."""
    directory = tmp_path_factory.mktemp("compare")
    scenario = directory / "tiny.yaml"
    scenario.write_text(
        SCENARIO.format(catalog=test_catalog, nodeclass=SCENARIOS / "nodeclass.yaml")
    )
    path = directory / "both.json"
    assert (
        main(["simulate", str(scenario), "--compare", "greedy", "--quiet", "--report", str(path)])
        == 0
    )
    return path


@pytest.fixture(scope="module")
def page(compared: Path) -> Path:
    out = compared.with_name("report.html")
    assert main(["report", str(compared), "-o", str(out)]) == 0
    return out


def test_the_page_is_self_contained_with_every_chart_and_the_tables(page: Path) -> None:
    text = page.read_text()
    assert "<script src" not in text.replace(" ", "")  # plotly.js is embedded, no CDN
    assert not re.search(r"""<(script|link|img)[^>]*(src|href)=["']?https?:""", text)
    assert "Plotly.newPlot" in text
    for element, heading in CHARTS:
        assert f'id="{element}"' in text, element
        assert f"<h2>{heading}</h2>".replace("'", "&#x27;") in text, heading
    assert 'id="table-summary"' in text
    summary = text[text.index('id="table-summary"') :]
    assert "<th>jointer</th><th>greedy</th><th>difference</th>" in summary
    assert "$ per requested vCPU-hour" in summary


def test_the_page_path_is_printed(
    compared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(compared), "-o", str(out)]) == 0
    assert capsys.readouterr().out == f"{out}\n"


def test_a_single_report_and_a_comparison_draw_three_runs(compared: Path, tmp_path: Path) -> None:
    single = tmp_path / "jointer.json"
    single.write_text(json.dumps(json.loads(compared.read_text())["runs"][0]))
    out = tmp_path / "three.html"
    assert main(["report", str(single), str(compared), "-o", str(out)]) == 0
    text = out.read_text()
    assert "jointer #1" in text
    assert "jointer #2" in text
    assert "greedy #3" in text


def _broken(compared: Path, change: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(compared.read_text())
    change(document)
    return document


def _drop_series(d: dict[str, Any]) -> None:
    del d["runs"][1]["timeSeries"]


def _bad_cost(d: dict[str, Any]) -> None:
    d["runs"][0]["cost"]["total"] = "cheap"


def _short_column(d: dict[str, Any]) -> None:
    d["runs"][0]["timeSeries"]["pendingPods"].pop()


def _no_reason(d: dict[str, Any]) -> None:
    d["runs"][0]["evictions"] = [{"at": 1.0}]


def _no_p50(d: dict[str, Any]) -> None:
    del d["runs"][0]["summary"]["timeToScheduleSeconds"]["p50"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_drop_series, "runs[1].timeSeries: missing (re-run jointer simulate to add it)"),
        (_bad_cost, "runs[0].cost.total: must be a number"),
        (_short_column, "runs[0].timeSeries.pendingPods: must be a list as long as timeSeries.at"),
        (_no_reason, "runs[0].evictions[0].reason: missing"),
        (_no_p50, "runs[0].summary.timeToScheduleSeconds.p50: missing"),
    ],
)
def test_a_malformed_report_is_one_line_naming_the_file_and_field(
    compared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_broken(compared, change)))
    assert main(["report", str(path), "-o", str(tmp_path / "r.html")]) == 2
    assert capsys.readouterr().err == f"jointer report: error: {path}: {message}\n"
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read: No such file or directory"),
        (
            "{not json",
            "not JSON: Expecting property name enclosed in double quotes at line 1 column 2",
        ),
        ("[]", "(top level): must be a JSON object"),
        (
            '{"apiVersion": "jointer.dev/v1alpha1", "kind": "Scenario"}',
            "kind: must be SimulationReport or SimulationComparison",
        ),
        ('{"apiVersion": "jointer.dev/v1alpha1", "kind": "SimulationReport"}', "scenario: missing"),
        (
            '{"kind": "SimulationComparison", "runs": []}',
            "runs: must be a non-empty list of SimulationReports",
        ),
    ],
)
def test_an_unreadable_report_is_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    path = tmp_path / "report.json"
    if content is not None:
        path.write_text(content)
    assert main(["report", str(path)]) == 2
    assert capsys.readouterr().err == f"jointer report: error: {path}: {message}\n"


def test_an_unwritable_page_is_one_line(
    compared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "missing" / "r.html"
    assert main(["report", str(compared), "-o", str(out)]) == 2
    assert (
        capsys.readouterr().err
        == f"jointer report: error: cannot write {out}: No such file or directory\n"
    )


def _screenshots() -> ModuleType:
    """``scripts/report_screenshots.py``, loaded from its file (``scripts`` is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "report_screenshots", REPO_ROOT / "scripts" / "report_screenshots.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("report_screenshots", module)
    spec.loader.exec_module(module)
    return module


def test_headless_chromium_draws_every_chart_without_errors(page: Path, tmp_path: Path) -> None:
    assert CHROMIUM.exists(), (
        "no /usr/bin/chromium: run scripts/install_chromium.sh (make test does)"
    )
    screenshots = _screenshots()
    assert list(screenshots.CHART_IDS) == [element for element, _ in CHARTS]
    shot = tmp_path / "report.png"
    with screenshots.browser() as context:
        check = screenshots.open_report(context, page, shot)
    assert check.errors == []
    assert check.requests == []  # works offline: nothing fetched
    assert all(count >= 1 for count in check.svgs.values()), check.svgs
    assert shot.stat().st_size > 10_000
    assert re.match(rb"\x89PNG", shot.read_bytes()[:4])
    assert (tmp_path / "report-chart-cost.png").exists()


def test_the_browser_check_sees_a_broken_page(tmp_path: Path) -> None:
    """The browser check can fail: a script error and a chart that never drew are caught."""
    broken = tmp_path / "broken.html"
    broken.write_text(
        "<!DOCTYPE html><html><body><div id='chart-cost'></div>"
        "<script>Plotly.newPlot('chart-cost', []);</script></body></html>"
    )
    screenshots = _screenshots()
    with screenshots.browser() as context:
        check = screenshots.open_report(context, broken, None)
    assert any("Plotly is not defined" in error for error in check.errors)
    assert check.svgs["chart-cost"] == 0
