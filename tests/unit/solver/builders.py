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


def two_families() -> list[BinType]:
    """A CPU-rich family (2 GiB a CPU) and a memory-rich one (8 GiB a CPU, dearer a CPU)."""
    gib = 1024
    return [
        bt("c4", 4000, 8 * gib, 400),
        bt("c8", 8000, 16 * gib, 800),
        bt("r4", 4000, 32 * gib, 600),
        bt("r8", 8000, 64 * gib, 1200),
    ]


def interleaved(types: list[BinType], shrink: int = 1, count: int = 4) -> tuple[PodClass, ...]:
    """Lean (1 GiB a CPU) and fat (6 GiB a CPU) pods whose sizes interleave, on ``types``.

    Classes ``k0``, ``k2``, ``k4`` are lean, ``k1``, ``k3``, ``k5`` fat; ``shrink`` divides
    their CPU (and memory with it).
    """
    ids = [t.id for t in types]
    sizes = [(3000, 1), (2500, 6), (2000, 1), (1500, 6), (1000, 1), (500, 6)]
    return tuple(
        pc(f"k{i}", count, cpu // shrink, cpu // shrink * ratio * 1024 // 1000, ids)
        for i, (cpu, ratio) in enumerate(sizes)
    )
