"""The fluid cost that guides rebalancing: its rows, its value, its bound by prices."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from solver.improve import _Offerings
from solver.problem import BinType
from solver.rebalance import FluidCost
from tests.unit.solver.builders import bt

NAMES = ["cpu", "memory", "pods"]


def _fluid(types: list[BinType], names: list[str] = NAMES) -> FluidCost:
    offerings = _Offerings(types, names)
    return FluidCost(offerings.cap, offerings.price)


def _sized(k: int) -> BinType:
    """Karpenter's fake instance type of ``k`` CPUs: 2 GiB and 10 pods a CPU, less overhead."""
    capacity = {"cpu": 1000 * k - 100, "memory": 2048 * k - 10, "pods": 10 * k}
    return BinType(f"s{k}", f"s{k}", "a", "on-demand", "default", capacity, 100 * k)


def test_offerings_of_one_shape_leave_the_largest_row_only() -> None:
    # the per-node overhead makes the largest cheapest per unit of everything
    fluid = _fluid([_sized(k) for k in range(1, 9)])
    assert fluid.weights.shape == (1, 3)
    assert np.allclose(fluid.weights[0], [800 / 7900, 800 / (2048 * 8 - 10), 800 / 80])


def test_offerings_within_a_percent_of_another_everywhere_are_left_out() -> None:
    # a type 0.5 % dearer than the one kept adds no row; one 5 % cheaper in CPU and 5 %
    # dearer in memory does
    base = bt("base", 4000, 8192, 1000)
    close = bt("close", 4000, 8192, 1005)
    cheaper_cpu = BinType(
        "cpu",
        "cpu",
        "a",
        "on-demand",
        "default",
        {**base.capacity, "cpu": 4200, "memory": 7800},
        1000,
    )
    assert _fluid([base, close]).weights.shape == (1, 3)
    assert _fluid([base, cheaper_cpu, close]).weights.shape == (2, 3)


def test_the_fluid_cost_is_the_bins_resource_that_costs_most() -> None:
    cpu_rich = bt("c", 4000, 4096, 400)
    mem_rich = bt("r", 1000, 8192, 400)
    fluid = _fluid([cpu_rich, mem_rich])
    used = np.array([[2000.0, 1024.0, 2.0], [500.0, 4096.0, 2.0], [0.0, 0.0, 0.0]])
    # CPU-heavy pods are cheapest on the CPU-rich offering: half its CPUs, half its price
    assert np.allclose(fluid.of(used), [200.0, 200.0, 0.0])


def test_a_resource_an_offering_lacks_rules_it_out() -> None:
    no_gpu = bt("n", 4000, 8192, 100)
    gpu = bt("g", 4000, 8192, 1000, gpus=1)
    fluid = _fluid([no_gpu, gpu], [*NAMES, "nvidia.com/gpu"])
    assert fluid.of(np.array([[1000.0, 0.0, 1.0, 1.0]]))[0] == 1000.0
    assert fluid.of(np.array([[1000.0, 0.0, 1.0, 0.0]]))[0] == 25.0


@st.composite
def _offerings_and_use(draw: st.DrawFn) -> tuple[list, list[float]]:  # type: ignore[type-arg]
    n = draw(st.integers(1, 12))
    types = [
        bt(
            f"t{i}",
            draw(st.integers(500, 64_000)),
            draw(st.integers(512, 256_000)),
            draw(st.integers(1, 100_000)),
        )
        for i in range(n)
    ]
    t = draw(st.sampled_from(types))
    used = [draw(st.floats(0, t.capacity[r], allow_nan=False, allow_infinity=False)) for r in NAMES]
    return types, used


@settings(max_examples=200, deadline=None)
@given(_offerings_and_use())
def test_the_fluid_cost_is_never_above_the_price_of_an_offering_that_holds_the_pods(
    case: tuple[list, list[float]],  # type: ignore[type-arg]
) -> None:
    types, used = case
    value = _fluid(types).of(np.array([used]))[0]
    holding = [
        t for t in types if all(t.capacity[r] >= u for r, u in zip(NAMES, used, strict=True))
    ]
    assert holding
    # rows within a percent of a kept one are left out, so the value may be a percent above
    assert value <= 1.01 * min(t.price_micros for t in holding) + 1e-6


def test_no_offerings_or_no_resources_cost_nothing() -> None:
    assert _fluid([]).of(np.array([[1.0, 2.0, 3.0]])).tolist() == [0.0]
    assert _fluid([bt("t", 1000, 1024, 100)], []).of(np.zeros((2, 0))).tolist() == [0.0, 0.0]
