"""Shared fixtures: the path to `shared/` (Karpenter CRDs, examples) and hypothesis profiles."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=50)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

REPO_ROOT = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    """Return the `shared/` directory that sits beside the checkout (or $JOINTER_SHARED)."""
    override = os.environ.get("JOINTER_SHARED")
    if override:
        return Path(override)
    return REPO_ROOT.parent / "shared"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite golden files (tests/golden/**) from the current output instead of comparing",
    )


@pytest.fixture(scope="session")
def shared() -> Path:
    path = shared_dir()
    if not (path / "karpenter" / "crds").is_dir():
        pytest.fail(f"shared/ with Karpenter's CRDs not found at {path}; set JOINTER_SHARED")
    return path
