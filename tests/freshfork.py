"""Run a program in a fresh interpreter (no other threads) that counts its forks."""

import subprocess
import sys
from pathlib import Path

_COUNTING = """
import os
forks = []
_fork = os.fork
def _counted():
    forks.append(1)
    return _fork()
os.fork = _counted
"""


def run_counting_forks(program: str) -> list[str]:
    """Run ``program`` from the project root with ``forks`` counting ``os.fork`` calls.

    Returns its standard output's words; fails the test when it exits with an error.
    """
    result = subprocess.run(
        [sys.executable, "-c", _COUNTING + program],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[1],
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()
