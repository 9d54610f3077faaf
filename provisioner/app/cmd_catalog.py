"""``jointer catalog export [--region R] [-f NODECLASS.yaml]``: print the built-in catalog.

The catalog (``spec/catalog.md``) is the shipped EC2 data and price table for the region, with
allocatable computed for the given EC2NodeClass (or the AL2023 defaults). Bad input (unknown
region, unreadable or invalid nodeclass) is a one-line message on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Final

__all__ = ["add_arguments", "run"]

DEFAULT_REGION: Final = "us-east-1"
EXIT_USAGE: Final = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``export`` and its options."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    export = actions.add_parser("export", help="print the built-in catalog of a region as JSON")
    export.add_argument("--region", default=DEFAULT_REGION, help="AWS region (default us-east-1)")
    export.add_argument(
        "-f",
        "--nodeclass",
        dest="nodeclass",
        type=Path,
        help="EC2NodeClass manifest whose kubelet and volume settings shape allocatable",
    )


def _load_nodeclass(path: Path) -> object:
    import yaml  # noqa: PLC0415 -- keep `jointer --help` light

    from cloudprovider.aws.nodeclass import KIND, parse_nodeclass  # noqa: PLC0415

    try:
        documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from exc
    nodeclasses = [d for d in documents if isinstance(d, dict) and d.get("kind") == KIND]
    if len(nodeclasses) != 1:
        raise ValueError(f"{path}: expected exactly one {KIND}, found {len(nodeclasses)}")
    try:
        return parse_nodeclass(nodeclasses[0])
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc


def run(args: argparse.Namespace) -> int:
    """Print the catalog JSON; 2 on bad input."""
    from cloudprovider.aws.catalog import builtin_catalog, catalog_to_wire  # noqa: PLC0415
    from cloudprovider.aws.nodeclass import EC2NodeClass  # noqa: PLC0415
    from cloudprovider.aws.pricing import UnsupportedRegionError  # noqa: PLC0415

    nodeclass: EC2NodeClass | None = None
    if args.nodeclass is not None:
        try:
            loaded = _load_nodeclass(args.nodeclass)
        except ValueError as exc:
            sys.stderr.write(f"jointer catalog export: {exc}\n")
            return EXIT_USAGE
        assert isinstance(loaded, EC2NodeClass)  # noqa: S101 -- narrowing for mypy
        nodeclass = loaded
    try:
        catalog = builtin_catalog(args.region, nodeclass=nodeclass)
    except UnsupportedRegionError as exc:
        sys.stderr.write(f"jointer catalog export: {exc}\n")
        return EXIT_USAGE
    json.dump(catalog_to_wire(catalog), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0
