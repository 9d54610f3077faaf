"""Fixtures of the AWS provider tests (moto over HTTP): see tests/aws/harness.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.aws.harness import (
    aws,
    golden_compare,
    moto_endpoint,
    test_catalog,
)

__all__ = ["aws", "moto_endpoint", "test_catalog"]


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    return golden_compare(request)
