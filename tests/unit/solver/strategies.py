"""Random small solver problems for property tests."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

from solver.problem import (
    Affinity,
    AntiAffinity,
    CoLocation,
    ExistingBin,
    Gang,
    PodClass,
    PoolLimit,
    Problem,
    SpreadConstraint,
    TopologyConstraint,
    TopologyKey,
)
from tests.unit.solver.builders import GPU, bt, pc


@st.composite
def problems(draw: st.DrawFn) -> Problem:
    n_types = draw(st.integers(1, 5))
    types = []
    for i in range(n_types):
        size = draw(st.sampled_from([1, 2, 4, 8]))
        gpus = draw(st.sampled_from([0, 0, 1, 2]))
        price = size * 100 + gpus * 500 + draw(st.integers(0, 30))
        pool = draw(st.sampled_from(["p", "q"]))
        types.append(
            bt(
                f"t{i}",
                size * 1000,
                size * 2048,
                price,
                zone=draw(st.sampled_from("ab")),
                pool=pool,
                gpus=gpus,
            )
        )
    ids = [t.id for t in types]
    existing: tuple[ExistingBin, ...] = ()
    if draw(st.booleans()):
        existing = (
            ExistingBin("e0", "a", "p", {"cpu": 1500, "memory": 3000, "pods": 10, GPU: 1}, (1000,)),
        )
    topology: tuple[TopologyConstraint, ...] = (
        SpreadConstraint("zs", TopologyKey.ZONE, 1, zones=("a", "b")),
        AntiAffinity("ha", TopologyKey.HOSTNAME),
    )
    gangs = []
    classes = []
    for j in range(draw(st.integers(1, 4))):
        kind = draw(
            st.sampled_from(["plain", "plain", "frac", "gpu", "gang", "zs", "ha", "co", "cz", "tg"])
        )
        allowed = frozenset(draw(st.sets(st.sampled_from(ids), min_size=1)))
        demand = {"cpu": draw(st.sampled_from([250, 500, 1000, 1500])), "memory": 512, "pods": 1}
        kw: dict[str, Any] = {}
        if kind == "frac":
            kw["gpu_fraction_milli"] = draw(st.sampled_from([250, 500, 700]))
        if kind == "gpu":
            demand[GPU] = 1
        if kind == "gang":
            gangs.append(Gang(f"g{j}", draw(st.integers(1, 3))))
            kw["gang"] = f"g{j}"
        if kind in ("zs", "ha"):
            kw["topology"] = frozenset({kind})
        if kind == "tg":
            kw["topology"] = frozenset({"co", "cz"})
        count = draw(st.integers(3 if kind == "gang" else 1, 6))
        classes.append(
            PodClass(
                f"c{j}" + (kind if kind in ("co", "cz") else ""),
                count,
                demand,
                allowed,
                allowed_existing=frozenset({"e0"}) if existing else frozenset(),
                **kw,
            )
        )
    carriers = {k: frozenset(c.key for c in classes if c.key.endswith(k)) for k in ("co", "cz")}
    topology = (
        *topology,
        CoLocation("co", TopologyKey.HOSTNAME, carriers["co"]),
        CoLocation("cz", TopologyKey.ZONE, carriers["cz"]),
    )
    limits = (PoolLimit("q", {"cpu": draw(st.sampled_from([2000, 8000, 100000]))}),)
    weights = {"p": draw(st.sampled_from([0, 10]))}
    return Problem(tuple(types), tuple(classes), existing, tuple(gangs), topology, limits, weights)


@st.composite
def problems_with_one_bin_groups(draw: st.DrawFn) -> Problem:
    """``problems()`` plus classes held to one bin each (hostname ``Affinity``)."""
    problem = draw(problems())
    ids = [t.id for t in problem.bin_types]
    groups = [f"hf{i}" for i in range(draw(st.integers(1, 2)))]
    extra = [
        pc(
            f"g{j}",
            draw(st.integers(1, 4)),
            draw(st.sampled_from([250, 500, 1000])),
            512,
            sorted(draw(st.sets(st.sampled_from(ids), min_size=1))),
            topology=frozenset({draw(st.sampled_from(groups))}),
        )
        for j in range(draw(st.integers(1, 3)))
    ]
    topology = (*problem.topology, *(Affinity(g, None, TopologyKey.HOSTNAME) for g in groups))
    return dataclasses.replace(problem, classes=(*problem.classes, *extra), topology=topology)
