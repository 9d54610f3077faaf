"""The `jointer` command line.

Each subcommand lives in its own module and is imported only when it runs, so `jointer plan`
does not pay for boto3 or the Kubernetes client at start-up.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Final, Protocol


class _Command(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


# subcommand -> (module implementing add_arguments/run, one-line help)
COMMANDS: Final[dict[str, tuple[str, str]]] = {
    "catalog": ("provisioner.app.cmd_catalog", "export the instance catalog of a region"),
    "plan": ("provisioner.app.cmd_plan", "dry-run the provisioner over manifests"),
    "iam-policy": ("provisioner.app.cmd_iam", "print the IAM policies Jointer needs"),
    "simulate": ("provisioner.app.cmd_simulate", "replay a scenario against an embedded cluster"),
    "report": ("provisioner.app.cmd_report", "draw simulation reports as one HTML page"),
    "run": ("provisioner.app.cmd_run", "run the controller in a cluster"),
}


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """Build the top-level parser with one sub-parser per command.

    Only the module of the command named in ``argv`` is imported (to add its options), so one
    command's dependencies never slow down or break another.
    """
    parser = argparse.ArgumentParser(
        prog="jointer",
        description="Jointer: a Karpenter-compatible, gang-aware node provisioner.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    for name, (module_name, help_text) in COMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(_module=module_name)
        if name == chosen:
            _load(module_name).add_arguments(sub)
    return parser


def _load(module_name: str) -> _Command:
    module: _Command = importlib.import_module(module_name)
    return module


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `jointer` command line and return its exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(arguments)
    args = parser.parse_args(arguments)
    try:
        return _load(args._module).run(args)  # noqa: SLF001
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `jointer catalog export | head` closes stdout early; that is not an error.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
