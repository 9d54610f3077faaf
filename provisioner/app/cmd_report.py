"""`jointer report`: one self-contained HTML page of charts over simulation reports.

Exit status 0 when the page was written, 2 for an unusable report (the message names the file
and the field) or output path.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Final

EXIT_OK: Final = 0
EXIT_INPUT: Final = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `jointer report`."""
    parser.add_argument(
        "reports",
        nargs="+",
        metavar="REPORT.json",
        help="`jointer simulate --report` files (a single run or a --compare pair)",
    )
    parser.add_argument(
        "-o", "--output", default="report.html", metavar="REPORT.html", help="the page to write"
    )


def run(args: argparse.Namespace) -> int:
    """Run `jointer report` and return its exit status."""
    from provisioner.app.report_html import render  # noqa: PLC0415
    from provisioner.simulation.compare import ReportError, read_runs  # noqa: PLC0415

    try:
        runs = [report for path in args.reports for report in read_runs(path)]
    except ReportError as error:
        sys.stderr.write(f"jointer report: error: {error}\n")
        return EXIT_INPUT
    output = Path(args.output)
    try:
        output.write_text(render(runs), encoding="utf-8")
    except OSError as error:
        sys.stderr.write(f"jointer report: error: cannot write {output}: {error.strerror}\n")
        return EXIT_INPUT
    sys.stdout.write(f"{output}\n")
    return EXIT_OK
