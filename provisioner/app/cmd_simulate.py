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
from typing import Any, Final

EXIT_OK: Final = 0
EXIT_INTERNAL: Final = 1
EXIT_INPUT: Final = 2
_PROGRESS_EVERY: Final = 60.0
_PROGRESS_UPDATES: Final = 500
"""At most this many progress updates per run (each one lists the pods and nodes)."""


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
    parser.add_argument(
        "--compare",
        choices=("jointer", "greedy"),
        metavar="POLICY",
        help="also run POLICY (jointer or greedy) and print both summaries side by side",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress and no summary table")


def _logger() -> Any:
    level = os.environ.get("LOG_LEVEL")
    if not level:
        return None
    from provisioner.app.logging_setup import build_logger  # noqa: PLC0415

    return build_logger(level=level, log_format="json", stream=sys.stderr, name="simulate")


def run(args: argparse.Namespace) -> int:
    """Run `jointer simulate` and return its exit status."""
    from provisioner.simulation.compare import comparison, side_by_side  # noqa: PLC0415
    from provisioner.simulation.report import summary_table  # noqa: PLC0415
    from provisioner.simulation.scenario import ScenarioError, load_scenario  # noqa: PLC0415

    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as error:
        sys.stderr.write(f"jointer simulate: error: {error}\n")
        return EXIT_INPUT
    if args.report and not Path(args.report).parent.is_dir():
        sys.stderr.write(
            f"jointer simulate: error: --report {args.report}: "
            f"directory {Path(args.report).parent} does not exist\n"
        )
        return EXIT_INPUT
    policies = [args.policy] + ([args.compare] if args.compare else [])
    reports: list[dict[str, Any]] = []
    for policy in policies:
        outcome = _simulate(scenario, args, policy)
        if isinstance(outcome, int):
            return outcome
        reports.append(outcome)
    if len(reports) == 1:
        document, text = reports[0], summary_table(reports[0])
    else:
        document = comparison(reports[0], reports[1])
        text = side_by_side(reports[0], reports[1])
    if args.report:
        path = Path(args.report)
        try:
            path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        except OSError as error:
            sys.stderr.write(f"jointer simulate: error: cannot write {path}: {error.strerror}\n")
            return EXIT_INTERNAL
    if not args.quiet:
        sys.stdout.write(text + "\n")
    return EXIT_OK


def _simulate(scenario: Any, args: argparse.Namespace, policy: str) -> dict[str, Any] | int:
    """One run of ``scenario`` under ``policy``: its report, or the exit status of a failure."""
    from provisioner.app.progress import SimulationProgress, wanted  # noqa: PLC0415
    from provisioner.simulation.runner import RunOptions, Simulation  # noqa: PLC0415
    from provisioner.simulation.scenario import ScenarioError  # noqa: PLC0415
    from provisioner.simulation.wiring import manager_factory  # noqa: PLC0415

    progress = (
        SimulationProgress(
            sys.stderr, label=f"{scenario.name} / {policy}", duration=scenario.duration
        )
        if wanted(sys.stderr, quiet=args.quiet)
        else None
    )
    try:
        options = RunOptions(
            policy="greedy" if policy == "greedy" else "jointer",
            seed=args.seed,
            progress=progress,
            progress_every=max(_PROGRESS_EVERY, scenario.duration / _PROGRESS_UPDATES),
            logger=_logger(),
        )
        return Simulation(scenario, factory=manager_factory, options=options).run()
    except ScenarioError as error:
        sys.stderr.write(f"jointer simulate: error: {args.scenario}: {error}\n")
        return EXIT_INPUT
    except Exception as error:  # noqa: BLE001 - exit status 1 is the contract for internal failures
        traceback.print_exc(file=sys.stderr)
        sys.stderr.write(f"jointer simulate: internal error: {type(error).__name__}: {error}\n")
        return EXIT_INTERNAL
    finally:
        if progress is not None:
            progress.finish()
