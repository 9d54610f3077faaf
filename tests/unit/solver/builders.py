"""Small builders for solver tests."""

from __future__ import annotations

from typing import Any

from solver.config import SolverConfig
from solver.problem import BinType, PodClass

GPU = "nvidia.com/gpu"
TEST_CONFIG = SolverConfig(
    time_limit_seconds=60, num_workers=1, random_seed=7, deterministic_time=0.3, colgen_rounds=10
)


def bt(
    id_: str,
    cpu: int,
    mem: int,
    price: int,
    *,
    zone: str = "a",
    pool: str = "default",
    gpus: int = 0,
    max_count: int | None = None,
) -> BinType:
    cap = {"cpu": cpu, "memory": mem, "pods": 110}
    if gpus:
        cap[GPU] = gpus
    return BinType(id_, id_, zone, "on-demand", pool, cap, price, max_count=max_count, gpus=gpus)


def pc(key: str, count: int, cpu: int, mem: int, types: list[str], **kw: Any) -> PodClass:
    demand = {"cpu": cpu, "memory": mem, "pods": 1}
    if "gpu" in kw:
        demand[GPU] = kw.pop("gpu")
    return PodClass(key, count, demand, frozenset(types), **kw)
