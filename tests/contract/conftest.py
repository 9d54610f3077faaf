"""The contract suite runs on moto too: reuse the AWS harness fixtures."""

from __future__ import annotations

from tests.aws.harness import aws, moto_endpoint, test_catalog

__all__ = ["aws", "moto_endpoint", "test_catalog"]
