"""EC2 instance-type entries from the shipped data, by name."""

from __future__ import annotations

from typing import Any

import pytest

from cloudprovider.aws.catalog import load_builtin_ec2_data


@pytest.fixture(scope="session")
def ec2_types() -> dict[str, dict[str, Any]]:
    return {info["InstanceType"]: info for info in load_builtin_ec2_data()["instanceTypes"]}
