"""`jointer simulate`: replay a scenario against an embedded cluster (`spec/simulate.md`).

Exit status 0 when the scenario ran to its end (whatever the outcome), 2 for an invalid
scenario (the message names the step and the field), 1 for an internal failure.

The controllers' own logs are silent unless ``LOG_LEVEL`` is set in the environment; they then
go to standard error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Final, TextIO

EXIT_OK: Final = 0
EXIT_INTERNAL: Final = 1
EXIT_INPUT: Final = 2
_PROGRESS_EVERY: Final = 60.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `jointer simulate`."""
    parser.add_argument("scenario", metavar="SCENARIO.yaml", help="the scenario to replay")
    parser.add_argument("--report", metavar="REPORT.json", help="write the JSON report here")
    parser.add_argument(
        "--policy",
        choices=("jointer", "greedy"),
        default="jointer",
        help="optimiser, or Karpenter-style first-fit-decreasing",
    )
    parser.add_argument("--seed", type=int, default=1, metavar="N", help="random seed (default 1)")
    parser.add_argument("--quiet", action="store_true", help="no progress and no summary table")


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600:d}h{whole % 3600 // 60:02d}m{whole % 60:02d}s"


def progress_line(snapshot: Any) -> str:
    """One progress line: virtual clock, pending pods, nodes by capacity type, cost so far."""
    nodes = " ".join(f"{kind} {count}" for kind, count in snapshot.nodes.items()) or "none"
    return (
        f"[{_clock(snapshot.at)}] pending pods {snapshot.pending_pods:>4}  "
        f"nodes {nodes}  cost ${snapshot.cost:,.2f}"
    )


class _Progress:
    """Rewrites one line on a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.used = False

    def __call__(self, snapshot: Any) -> None:
        self._stream.write("\r\x1b[K" + progress_line(snapshot))
        self._stream.flush()
        self.used = True

    def finish(self) -> None:
        if self.used:
            self._stream.write("\n")
            self._stream.flush()


def _logger() -> Any:
    level = os.environ.get("LOG_LEVEL")
    if not level:
        return None
    from provisioner.app.logging_setup import build_logger  # noqa: PLC0415

    return build_logger(level=level, log_format="json", stream=sys.stderr, name="simulate")


def run(args: argparse.Namespace) -> int:
    """Run `jointer simulate` and return its exit status."""
    from provisioner.simulation.report import summary_table  # noqa: PLC0415
    from provisioner.simulation.runner import RunOptions, Simulation  # noqa: PLC0415
    from provisioner.simulation.scenario import ScenarioError, load_scenario  # noqa: PLC0415
    from provisioner.simulation.wiring import manager_factory  # noqa: PLC0415

    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as error:
        sys.stderr.write(f"jointer simulate: error: {error}\n")
        return EXIT_INPUT
    progress = _Progress(sys.stdout) if sys.stdout.isatty() and not args.quiet else None
    try:
        logger = _logger()
        options = RunOptions(
            policy="greedy" if args.policy == "greedy" else "jointer",
            seed=args.seed,
            progress=progress,
            progress_every=_PROGRESS_EVERY,
            logger=logger,
        )
        report = Simulation(scenario, factory=manager_factory, options=options).run()
    except ScenarioError as error:
        if progress is not None:
            progress.finish()
        sys.stderr.write(f"jointer simulate: error: {args.scenario}: {error}\n")
        return EXIT_INPUT
    except Exception as error:  # noqa: BLE001 - exit status 1 is the contract for internal failures
        if progress is not None:
            progress.finish()
        traceback.print_exc(file=sys.stderr)
        sys.stderr.write(f"jointer simulate: internal error: {type(error).__name__}: {error}\n")
        return EXIT_INTERNAL
    if progress is not None:
        progress.finish()
    if args.report:
        path = Path(args.report)
        try:
            path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        except OSError as error:
            sys.stderr.write(f"jointer simulate: error: cannot write {path}: {error}\n")
            return EXIT_INTERNAL
    if not args.quiet:
        sys.stdout.write(summary_table(report) + "\n")
    return EXIT_OK
