"""The chaos soak: ``python scripts/soak.py [--seed N] [--hours H] [--pods P] [--out FILE]``.

Runs :func:`provisioner.simulation.chaos.run_soak` (24 virtual hours, ~2,000 pods by default),
writes the result to ``docs/reliability.md`` (or ``--out``; ``--out -`` prints it) and exits 1
when an invariant was violated. ``make soak`` runs it with the defaults.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
from pathlib import Path

from provisioner.simulation.chaos import render_reliability, run_soak

ROOT = Path(__file__).resolve().parents[1]


def machine() -> str:
    """A one-line description of the machine the soak ran on."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{platform.machine()}, {cpus} CPU(s), Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> int:
    """Run the soak; 0 when every invariant held, 1 otherwise."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--out", default=str(ROOT / "docs" / "reliability.md"))
    args = parser.parse_args(argv)
    if args.hours <= 0 or args.pods <= 0:
        parser.error("--hours and --pods must be positive")
    started = time.perf_counter()
    result = run_soak(args.seed, args.hours, pods=args.pods)
    result.wall_seconds = time.perf_counter() - started
    text = render_reliability(
        result,
        machine=machine(),
        date=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    for violation in result.violations:
        print(f"VIOLATION {violation.invariant} {violation.subject}: {violation.detail}")
    print(
        f"soak seed {args.seed}, {args.hours:g} h: {'PASS' if result.passed else 'FAIL'} "
        f"in {result.wall_seconds:.0f} s wall; faults {result.faults}"
    )
    return 0 if result.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
