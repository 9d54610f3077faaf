"""Fixtures for the IAM tests: acceptance parameters and golden-file comparison.

Golden files live in tests/golden/iam/. Regenerate them with
`pytest tests/unit/iam --update-golden` (the option is registered in tests/conftest.py),
then review the diff.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from iam import IamParameters

GOLDEN_DIR = Path(__file__).resolve().parents[2] / "golden" / "iam"


@pytest.fixture
def demo() -> IamParameters:
    """The acceptance parameters (demo, 111122223333, us-east-1)."""
    return IamParameters.create(cluster_name="demo", account_id="111122223333", region="us-east-1")


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    """Compare text with a golden file, or rewrite the file under --update-golden."""
    update = bool(request.config.getoption("--update-golden", default=False))

    def check(name: str, text: str) -> None:
        path = GOLDEN_DIR / name
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        if not path.exists():
            pytest.fail(f"golden file {path} missing; run pytest tests/unit/iam --update-golden")
        assert text == path.read_text(encoding="utf-8"), (
            f"output differs from {path}; if intended, run pytest tests/unit/iam --update-golden"
        )

    return check
