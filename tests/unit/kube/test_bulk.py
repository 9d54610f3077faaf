"""Bulk helpers: JSON copies like deepcopy's, the collector paused for a relist only."""

from __future__ import annotations

import copy
import gc
from datetime import UTC, datetime
from typing import Any

from provisioner.kube.bulk import collector_paused, copy_json
from provisioner.kube.informer import Informer
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.resource import NODES


def test_copy_json_is_a_deep_copy() -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    original: dict[str, Any] = {
        "metadata": {"name": "n", "labels": {"a": "b"}},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "n": 1, "f": 0.5},
        "extra": ({"t": [1]}, when, None, True),
    }
    copied = copy_json(original)
    assert copied == original == copy.deepcopy(original)
    copied["metadata"]["labels"]["a"] = "changed"
    copied["spec"]["taints"][0]["key"] = "changed"
    copied["extra"][0]["t"].append(2)
    assert original["metadata"]["labels"] == {"a": "b"}
    assert original["spec"]["taints"][0]["key"] == "k"
    assert original["extra"][0]["t"] == [1]


def test_the_collector_is_paused_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner step leaves it to the outer one
    assert gc.isenabled()


def test_a_relist_runs_with_the_collector_paused(kube: InMemoryKube) -> None:
    kube.create(NODES, {"metadata": {"name": "n1"}})
    seen: list[bool] = []
    informer = Informer(
        kube, NODES, on_add=lambda _obj: seen.append(gc.isenabled()), watch_timeout=None
    )
    informer.sync_once()
    assert seen == [False]
    assert gc.isenabled()
