"""Synthetic solver problems resembling Karpenter's diverse benchmark (no tests here).

Run ``python -m tests.unit.solver.synthetic [pods ...]`` for ad-hoc timings of the greedy
planners and ``solve`` (uses wall-clock limits; never from a test).
"""

from __future__ import annotations

import random
import sys
import time

from solver.problem import (
    AntiAffinity,
    BinType,
    CoLocation,
    PodClass,
    Problem,
    SpreadConstraint,
    TopologyConstraint,
    TopologyKey,
)

ZONES = ("z1", "z2", "z3")
CPU = (100, 250, 500, 1000, 1500)
MEM = (100, 256, 512, 1024, 2048, 4096)


def fake_types(count: int = 400) -> tuple[BinType, ...]:
    """Karpenter's fake catalog: type i has i vCPU, 2i GiB, 10i pods; one offering per zone."""
    out: list[BinType] = []
    for i in range(1, count + 1):
        cap = {"cpu": i * 1000 - 100, "memory": 2 * i * 1024 - 10, "pods": 10 * i}
        price = round((0.1 * i + 0.1 * 2 * i * 2**30 / 1e9) * 1e6)
        out.extend(
            BinType(f"it{i}/{z}", f"it{i}", z, "on-demand", "default", cap, price) for z in ZONES
        )
    return tuple(out)


def diverse(pods: int, *, labels: int = 7, shapes: int = 6, seed: int = 1) -> Problem:
    """Pods split in sixths like the benchmark; ``shapes`` (cpu, memory) shapes per group."""
    rng = random.Random(seed)  # noqa: S311 - synthetic data
    types = fake_types()
    ids = frozenset(t.id for t in types)
    shape_pool = [(c, m) for c in CPU for m in MEM]
    rng.shuffle(shape_pool)
    shape_list = shape_pool[:shapes]
    topo: list[TopologyConstraint] = [AntiAffinity("anti", TopologyKey.HOSTNAME)]
    vals = [chr(ord("a") + i) for i in range(labels)]
    for v in vals:
        topo.append(SpreadConstraint(f"zs-{v}", TopologyKey.ZONE, 1, zones=ZONES))
        topo.append(SpreadConstraint(f"hs-{v}", TopologyKey.HOSTNAME, 1))
    per = max(pods // 6, 1)
    kinds = ["generic", "zs", "hs", "ha", "za", "anti"]
    carriers: dict[str, set[str]] = {f"{k}-{v}": set() for k in ("ha", "za") for v in vals}
    found: dict[str, tuple[int, dict[str, int], set[str]]] = {}
    for i in range(pods):
        kind = kinds[min(i // per, 5)]
        (cpu, mem), own, sel = rng.choice(shape_list), rng.choice(vals), rng.choice(vals)
        key = f"{kind}/{cpu}/{mem}/{own}" + (f"/{sel}" if kind in ("ha", "za") else "")
        top: set[str] = set()
        if kind == "zs":
            top = {f"zs-{own}"}
        elif kind == "hs":
            top = {f"hs-{own}"}
        elif kind == "anti":
            top = {"anti"}
        elif kind in ("ha", "za"):
            top = {f"ha-{own}", f"za-{own}"}
            carriers[f"{kind}-{sel}"].add(key)
        n = found[key][0] if key in found else 0
        found[key] = (n + 1, {"cpu": cpu, "memory": mem, "pods": 1}, top)
    classes = [
        PodClass(k, n, d, ids, topology=frozenset(top)) for k, (n, d, top) in sorted(found.items())
    ]
    for name, cs in sorted(carriers.items()):
        key = TopologyKey.HOSTNAME if name.startswith("ha") else TopologyKey.ZONE
        topo.append(CoLocation(name, key, frozenset(cs)))
    return Problem(types, tuple(classes), topology=tuple(topo))


def main(sizes: list[int]) -> None:
    from solver.config import SolverConfig  # noqa: PLC0415
    from solver.cpsat import solve  # noqa: PLC0415
    from solver.greedy import cost_aware_ffd, karpenter_ffd  # noqa: PLC0415
    from solver.validate import violations  # noqa: PLC0415

    for n in sizes:
        p = diverse(n)
        t0 = time.monotonic()
        k = karpenter_ffd(p)
        t1 = time.monotonic()
        g = cost_aware_ffd(p)
        t2 = time.monotonic()
        s = solve(p, SolverConfig(time_limit_seconds=max(1.0, n / 2000)))
        t3 = time.monotonic()
        bad = violations(p, s)
        print(  # noqa: T201 - ad-hoc script
            f"pods {n} classes {len(p.classes)} types {len(p.bin_types)}: "
            f"karpenter {k.cost_micros} ({len(k.new_bins)} bins, {t1 - t0:.2f}s) "
            f"cost-aware {g.cost_micros} ({t2 - t1:.2f}s) solve {s.cost_micros} "
            f"lb {s.lower_bound_micros} {s.status} {t3 - t2:.2f}s "
            f"gap {(s.cost_micros - s.lower_bound_micros) / max(s.cost_micros, 1):.3%} "
            f"unplaced {sum(u.count for u in s.unplaced)} invalid {len(bad)}"
        )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1000])
