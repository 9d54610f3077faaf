"""Render `jointer report` pages to PNG screenshots with headless Chromium (for docs/).

    python scripts/report_screenshots.py report.html [more.html ...] [--out docs/images]

Each page is opened in Debian's Chromium (``/usr/bin/chromium``, installed by
``scripts/install_chromium.sh``) through Playwright; the whole page goes to
``OUT/<name>.png`` and each chart to ``OUT/<name>-<chart>.png``. Exits 1 (naming the page)
when a page logs a console error or a chart did not draw its SVG.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
CHART_IDS = (
    "chart-cost",
    "chart-nodes",
    "chart-pending",
    "chart-bind",
    "chart-efficiency",
    "chart-disruptions",
    "chart-gangs",
)
"""The charts of a report page (`provisioner.app.report_html.CHARTS`)."""


@dataclass
class PageCheck:
    """What a page did in the browser: console errors, failed requests, SVGs per chart."""

    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    svgs: dict[str, int] = field(default_factory=dict)


@contextmanager
def browser() -> Iterator[Any]:
    """Headless Chromium with a fresh profile directory, closed on exit."""
    from playwright.sync_api import sync_playwright  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="jointer-chromium-") as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=list(CHROMIUM_ARGS),  # the profile directory is --user-data-dir
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


def open_report(context: Any, page_path: Path, screenshot: Path | None) -> PageCheck:
    """Open ``page_path``, wait for the charts, screenshot it; return what the page did."""
    check = PageCheck()
    page = context.new_page()
    page.on("console", lambda m: check.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: check.errors.append(str(e)))
    page.on(
        "request",
        lambda r: (
            None if r.url.startswith(("file:", "data:", "blob:")) else check.requests.append(r.url)
        ),
    )
    page.goto(page_path.resolve().as_uri(), wait_until="load")
    for chart in CHART_IDS:
        check.svgs[chart] = page.locator(f"#{chart} svg.main-svg").count()
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot), full_page=True)
        for chart in CHART_IDS:
            element = page.locator(f"#{chart}")
            if element.count():
                element.screenshot(path=str(screenshot.with_name(f"{screenshot.stem}-{chart}.png")))
    page.close()
    return check


def main(argv: Sequence[str] | None = None) -> int:
    """Screenshot every page given; 1 when one of them did not render cleanly."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="+", type=Path, metavar="REPORT.html")
    parser.add_argument("--out", type=Path, default=Path("docs/images"), help="PNG directory")
    args = parser.parse_args(argv)
    failed = 0
    with browser() as context:
        for page_path in args.pages:
            if not page_path.is_file():
                print(f"report_screenshots: error: {page_path}: no such file", file=sys.stderr)
                failed = 1
                continue
            target = args.out / f"{page_path.stem}.png"
            check = open_report(context, page_path, target)
            missing = [chart for chart, count in check.svgs.items() if not count]
            if check.errors or missing or check.requests:
                print(
                    f"report_screenshots: error: {page_path}: console errors {check.errors}, "
                    f"charts without SVG {missing}, network requests {check.requests}",
                    file=sys.stderr,
                )
                failed = 1
                continue
            print(target)
    return failed


if __name__ == "__main__":
    sys.exit(main())
