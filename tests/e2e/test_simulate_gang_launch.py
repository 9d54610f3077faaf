"""Issue 18 item 4 in `jointer simulate`: a KAI gang whose third NodeClaim hits insufficient
capacity leaves no launched sibling behind and is re-planned whole (production controllers, the
AWS provider on moto, virtual time).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from provisioner.simulation.cloud import Launch, Outage
from provisioner.simulation.report import orphan_instances
from provisioner.simulation.runner import RunOptions, Simulation
from provisioner.simulation.wiring import manager_factory
from tests.e2e.conftest import _CATALOG, bundled_variant, events

pytestmark = pytest.mark.usefixtures("test_catalog")

GANG = "research/pg-llm-train"
ONE_GPU_NODES = (
    "values: [g5, g6, g6e]}",
    (
        "values: [g5, g6, g6e]}\n            - {key: karpenter.k8s.aws/instance-gpu-count, "
        'operator: In, values: ["1"]}'
    ),
)
"""The KAI gang of 8 one-GPU pods on one-GPU nodes: 8 NodeClaims."""


def test_a_kai_gang_whose_third_launch_hits_ice_leaves_no_sibling_and_is_replanned_whole() -> None:
    scenario = bundled_variant("kai-gang-8-gpus", ONE_GPU_NODES)
    scenario = dataclasses.replace(scenario, catalog=_CATALOG["path"])
    launches: list[Launch] = []
    holder: dict[str, Simulation] = {}

    def outage_after_second_launch(launch: Launch) -> None:
        launches.append(launch)
        if len(launches) == 2:  # the third CreateFleet of the gang finds no capacity in the zone
            world = holder["simulation"].world
            world.account.outages.append(
                Outage(start=launch.at, end=launch.at + 3600, zones=frozenset({launch.zone}))
            )

    simulation = Simulation(
        scenario,
        factory=manager_factory,
        options=RunOptions(solver_deterministic_time=0.5, on_launch=outage_after_second_launch),
    )
    holder["simulation"] = simulation
    report = simulation.run()

    failed_zone = launches[0].zone
    first_unit = [launch.instance_id for launch in launches[:2]]
    instances = {i["id"]: i for i in report["ec2Instances"]}
    # the two siblings launched before the ICE were terminated: no partial gang left running
    assert all(instances[i]["terminatedAt"] is not None for i in first_unit)
    assert all(instances[i]["terminatedAt"] <= launches[1].at + 120 for i in first_unit), (
        "siblings terminated promptly"
    )
    assert events(report, "InsufficientCapacityError")
    # re-planned whole in another zone: 8 pods scheduled together on 8 new nodes
    gang = [p for p in report["pods"] if p["podGroup"] == GANG]
    assert len(gang) == 8
    assert all(p["scheduledAt"] is not None for p in gang)
    assert len({p["scheduledAt"] for p in gang}) == 1
    live = [c for c in report["nodeClaims"] if c["initializedAt"] is not None]
    assert len(live) == 8
    assert {c["zone"] for c in live} != {failed_zone}
    assert len({c["zone"] for c in live}) == 1
    per_claim = Counter(i["nodeClaim"] for i in report["ec2Instances"])
    assert all(count == 1 for count in per_claim.values()), per_claim
    assert orphan_instances(report) == []
