"""Local search on plans (``solver.improve``): bins emptied into others stay valid and cheap."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from solver.greedy import cost_aware_ffd, karpenter_ffd
from solver.improve import _covers, _Domain, _Rules, improve
from solver.problem import (
    GPU_MILLI,
    Affinity,
    AntiAffinity,
    CoLocation,
    NewBin,
    Placement,
    PodClass,
    PoolLimit,
    Problem,
    Solution,
    SpreadConstraint,
    Status,
    TopologyConstraint,
    TopologyKey,
)
from solver.validate import cost, violations
from tests.unit.solver.builders import bt, pc
from tests.unit.solver.strategies import problems, problems_with_one_bin_groups


def _plan(
    problem: Problem, bins: list[tuple[str, dict[str, int]]], **devices: tuple[int, ...]
) -> Solution:
    new = tuple(
        NewBin(t, Placement(counts, {k: devices[k] for k in counts if k in devices}))
        for t, counts in bins
    )
    plan = Solution(new, (), (), 0, 0, Status.FEASIBLE)
    plan = Solution(new, (), (), cost(problem, plan), 0, Status.FEASIBLE)
    assert violations(problem, plan) == []
    return plan


def _singletons(problem: Problem, plan: Solution) -> Solution:
    """Return ``plan`` with every bin split into one bin per pod (co-located bins kept)."""
    hosted = {
        k
        for t in problem.topology
        if isinstance(t, CoLocation) and t.key is TopologyKey.HOSTNAME
        for k in t.carriers
    } | {c.key for c in problem.classes if any(g == "co" for g in c.topology)}
    out: list[NewBin] = []
    for b in plan.new_bins:
        if hosted & set(b.placement.counts) or b.placement.gpu_devices:
            out.append(b)
            continue
        for k, n in b.placement.counts.items():
            out.extend(NewBin(b.bin_type, Placement({k: 1})) for _ in range(n))
    split = Solution(tuple(out), plan.existing, plan.unplaced, 0, 0, plan.status)
    return Solution(tuple(out), plan.existing, plan.unplaced, cost(problem, split), 0, plan.status)


def _same_pods(a: Solution, b: Solution) -> None:
    assert a.new_counts() == b.new_counts()
    assert a.existing == b.existing
    assert a.unplaced == b.unplaced


@settings(max_examples=150, deadline=None)
@given(problems(), st.booleans(), st.booleans())
def test_emptied_plans_stay_valid_never_cost_more_and_keep_their_pods(
    problem: Problem, shed_first: bool, rebalance: bool
) -> None:
    for plan in (karpenter_ffd(problem), cost_aware_ffd(problem)):
        for start in (plan, _singletons(problem, plan)):
            if start is not plan:
                assume(violations(problem, start) == [])
            out = improve(problem, start, shed_first=shed_first, rebalance=rebalance)
            assert violations(problem, out) == []
            assert out.cost_micros == cost(problem, out) <= start.cost_micros
            assert len(out.new_bins) <= len(start.new_bins)
            _same_pods(out, start)


def _reference_takers(domain: _Domain, c: PodClass, i: int) -> list[int]:
    """Bins (but ``i``) with room in every column for one pod of ``c``, by the whole row."""
    fits = (domain.free >= domain._need(c)).all(axis=1) & domain.alive & domain._allowed(c)
    fits[i] = False
    return [int(j) for j in np.flatnonzero(fits)]


@settings(max_examples=100, deadline=None)
@given(problems(), st.data())
def test_takers_are_the_bins_with_room_in_every_column(
    problem: Problem, data: st.DataObject
) -> None:
    rules = _Rules(problem)
    bins = [rules.load(nb) for nb in cost_aware_ffd(problem).new_bins]
    assume(len(bins) >= 2)
    names = sorted({r for c in problem.classes for r, v in c.demand.items() if v > 0})
    domain = _Domain(rules, bins, names)
    # a bin over its room in a resource or a hostname cap (no valid plan has one, but the
    # rows must still hold); target columns only grow with pods, so they never go below 0
    j = data.draw(st.integers(0, len(bins) - 1))
    column = data.draw(st.integers(0, len(names) + len(domain.capped) - 1))
    if column < len(names):
        domain.bins[j].used[names[column]] += 10**9
    else:
        domain.bins[j].group[domain.capped[column - len(names)]] += 10**6
    domain.refresh(j)
    for c in problem.classes:
        for i in range(len(bins)):
            assert domain.takers(c, i) == _reference_takers(domain, c, i)


@settings(max_examples=100, deadline=None)
@given(problems(), st.data())
def test_the_kept_spare_room_is_every_bins_afresh(problem: Problem, data: st.DataObject) -> None:
    rules = _Rules(problem)
    bins = [rules.load(nb) for nb in cost_aware_ffd(problem).new_bins]
    assume(len(bins) >= 2)
    names = sorted({r for c in problem.classes for r, v in c.demand.items() if v > 0})
    domain = _Domain(rules, bins, names, list(problem.bin_types), growing=True)
    growth = domain.growth
    assert growth is not None
    k = len(names)
    for _ in range(data.draw(st.integers(1, 6))):
        # a class's spare room is asked for (and kept), then some bins change
        c = data.draw(st.sampled_from(problem.classes))
        demand = np.array([c.demand.get(r, 0) for r in names], dtype=np.int64)
        fresh = ((domain.free[:, :k] - demand) / np.maximum(growth.own, 1)).min(axis=1)
        assert growth._spare(demand, domain.free[:, :k]).tolist() == fresh.tolist()
        for j in data.draw(st.lists(st.integers(0, len(bins) - 1), max_size=3)):
            name = data.draw(st.sampled_from(names)) if names else None
            if name is not None:
                domain.bins[j].used[name] += data.draw(st.integers(-500, 500))
            domain.refresh(j)


def test_a_bin_short_of_room_where_a_pod_asks_nothing_still_takes_no_pod() -> None:
    # class "a" asks no memory; bin 1 is over its memory: it takes no pod, whatever it asks
    p = Problem((bt("m", 4000, 8192, 400),), (pc("a", 2, 1000, 0, ["m"]),))
    rules = _Rules(p)
    bins = [rules.load(nb) for nb in _plan(p, [("m", {"a": 1}), ("m", {"a": 1})]).new_bins]
    domain = _Domain(rules, bins, ["cpu", "memory", "pods"])
    assert domain.takers(rules.classes["a"], 0) == [1]
    bins[1].used["memory"] = 9000
    domain.refresh(1)
    assert domain.takers(rules.classes["a"], 0) == []


def test_a_half_empty_bin_is_emptied_into_the_room_of_another() -> None:
    p = Problem((bt("m", 4000, 8192, 400),), (pc("a", 3, 1000, 1024, ["m"]),))
    start = _plan(p, [("m", {"a": 2}), ("m", {"a": 1})])
    out = improve(p, start)
    assert [dict(b.placement.counts) for b in out.new_bins] == [{"a": 3}]
    assert out.cost_micros == 400


def test_a_bin_without_room_elsewhere_stays_and_the_plan_is_returned_as_is() -> None:
    p = Problem((bt("m", 4000, 8192, 400),), (pc("a", 3, 1500, 1024, ["m"]),))
    start = _plan(p, [("m", {"a": 2}), ("m", {"a": 1})])
    # 2 x 1500 leave 1000 millicores: the third pod cannot join, and no bin empties
    assert improve(p, start) is start


def test_pods_under_zonal_rules_never_move_across_zones_or_pools() -> None:
    p = Problem(
        (bt("a1", 4000, 8192, 400, zone="a"), bt("b1", 4000, 8192, 400, zone="b")),
        (pc("x", 2, 1000, 1024, ["a1", "b1"], topology=frozenset({"zs"})),),
        topology=(SpreadConstraint("zs", TopologyKey.ZONE, 1, zones=("a", "b")),),
    )
    start = _plan(p, [("a1", {"x": 1}), ("b1", {"x": 1})])
    assert improve(p, start) is start


def test_hostname_anti_affinity_and_caps_keep_pods_apart() -> None:
    p = Problem(
        (bt("m", 8000, 16384, 400),),
        (
            pc("x", 2, 500, 512, ["m"], topology=frozenset({"ha"})),
            pc("y", 3, 500, 512, ["m"], topology=frozenset({"hs"})),
        ),
        topology=(
            AntiAffinity("ha", TopologyKey.HOSTNAME),
            SpreadConstraint("hs", TopologyKey.HOSTNAME, 2),
        ),
    )
    start = _plan(p, [("m", {"x": 1, "y": 2}), ("m", {"x": 1}), ("m", {"y": 1})])
    out = improve(p, start)
    assert violations(p, out) == []
    # the lone "y" joins the second bin; the two "x" never share one
    assert sorted(sorted(b.placement.counts.items()) for b in out.new_bins) == [
        [("x", 1), ("y", 1)],
        [("x", 1), ("y", 2)],
    ]


def test_carriers_only_move_to_bins_holding_a_target() -> None:
    p = Problem(
        (bt("m", 8000, 16384, 400),),
        (
            pc("target", 1, 3000, 512, ["m"], topology=frozenset({"co"})),
            pc("carrier", 1, 500, 512, ["m"]),
            pc("other", 2, 3000, 512, ["m"]),
        ),
        topology=(CoLocation("co", TopologyKey.HOSTNAME, frozenset({"carrier"})),),
    )
    start = _plan(p, [("m", {"other": 2}), ("m", {"target": 1, "carrier": 1})])
    assert improve(p, start) is start  # "other" has room for the carrier, but no target
    wide = Problem(
        (bt("m", 16000, 16384, 800), *p.bin_types[1:]),
        tuple(
            pc(c.key, c.count, c.demand["cpu"], 512, ["m"], topology=c.topology) for c in p.classes
        ),
        topology=p.topology,
    )
    start = _plan(wide, [("m", {"other": 2}), ("m", {"target": 1, "carrier": 1})])
    out = improve(wide, start)
    assert [sorted(b.placement.counts) for b in out.new_bins] == [["carrier", "other", "target"]]


def test_fractions_move_device_by_device() -> None:
    gpu1 = bt("g", 8000, 16384, 1000, gpus=1)
    small = Problem((gpu1,), (pc("f", 2, 500, 512, ["g"], gpu_fraction_milli=400),))
    start = _plan(small, [("g", {"f": 1}), ("g", {"f": 1})], f=(1,))
    out = improve(small, start)
    assert [b.placement.gpu_devices for b in out.new_bins] == [{"f": (2,)}]
    big = Problem((gpu1,), (pc("f", 2, 500, 512, ["g"], gpu_fraction_milli=600),))
    start = _plan(big, [("g", {"f": 1}), ("g", {"f": 1})], f=(1,))
    assert improve(big, start) is start  # two 600-milli pods need two devices


def test_a_passed_deadline_changes_nothing() -> None:
    p = Problem((bt("m", 4000, 8192, 400),), (pc("a", 3, 1000, 1024, ["m"]),))
    start = _plan(p, [("m", {"a": 2}), ("m", {"a": 1})])
    assert improve(p, start, deadline=time.monotonic() - 1) is start


def _gpu_problem(**eight: object) -> Problem:
    one = bt("g1", 4000, 16384, 120, gpus=1)
    big = bt("g8", 36000, 131072, 800, gpus=8, **eight)  # type: ignore[arg-type]
    return Problem(
        (one, big),
        (
            pc("w", 7, 3000, 15000, ["g1", "g8"], gpu=1),
            pc("s", 1, 1000, 2048, ["g1", "g8"], gpu=1),
        ),
    )


def test_seven_one_gpu_bins_and_a_small_one_become_one_eight_gpu_bin() -> None:
    p = _gpu_problem()
    start = _plan(p, [("g1", {"w": 1})] * 7 + [("g1", {"s": 1})])
    out = improve(p, start)
    assert violations(p, out) == []
    assert [(b.bin_type, dict(b.placement.counts)) for b in out.new_bins] == [
        ("g8", {"w": 7, "s": 1})
    ]
    assert out.cost_micros == 800 < start.cost_micros == 960


def test_consolidation_respects_max_count_and_pool_limits() -> None:
    start_bins = [("g1", {"w": 1})] * 7 + [("g1", {"s": 1})]
    none_left = _gpu_problem(max_count=0)
    assert improve(none_left, _plan(none_left, start_bins)).cost_micros == 960
    base = _gpu_problem()
    limited = Problem(base.bin_types, base.classes, limits=(PoolLimit("default", {"cpu": 32000}),))
    start = _plan(limited, start_bins)
    out = improve(limited, start)
    assert violations(limited, out) == []
    assert out is start  # the eight-GPU node counts 36 cpus against a limit of 32


def _growth_problem(
    m_max_count: int | None = None, y_types: tuple[str, ...] = ("s", "m")
) -> Problem:
    # "x" pods keep apart (hostname anti-affinity), so no two of their bins consolidate
    return Problem(
        (bt("s", 2000, 8192, 200), bt("m", 3000, 8192, 290, max_count=m_max_count)),
        (
            pc("x", 2, 1500, 1024, ["s", "m"], topology=frozenset({"ha"})),
            pc("y", 2, 900, 1024, list(y_types)),
        ),
        topology=(AntiAffinity("ha", TopologyKey.HOSTNAME),),
    )


_GROWTH_START = [("s", {"x": 1}), ("s", {"x": 1}), ("s", {"y": 2})]


def test_a_bin_empties_into_others_moved_to_larger_offerings() -> None:
    p = _growth_problem()
    start = _plan(p, _GROWTH_START)
    out = improve(p, start)
    assert violations(p, out) == []
    # each "y" joins an "x" on a bin moved from s to m: 2 x 290 < 3 x 200
    assert sorted((b.bin_type, sorted(b.placement.counts.items())) for b in out.new_bins) == [
        ("m", [("x", 1), ("y", 1)]),
        ("m", [("x", 1), ("y", 1)]),
    ]
    assert out.cost_micros == 580 < start.cost_micros == 600


def test_growing_needs_a_saving_allowed_offerings_and_max_count() -> None:
    dear = Problem(
        (bt("s", 2000, 8192, 200), bt("m", 3000, 8192, 300)),
        _growth_problem().classes,
        topology=_growth_problem().topology,
    )
    for p in (dear, _growth_problem(m_max_count=1), _growth_problem(y_types=("s",))):
        start = _plan(p, _GROWTH_START)
        assert improve(p, start) is start


def _two_zones(zonal: frozenset[str] = frozenset()) -> Problem:
    types = (
        bt("s-a", 2000, 8192, 200, zone="a"),
        bt("m-a", 3000, 8192, 290, zone="a"),
        bt("s-b", 2000, 8192, 200, zone="b"),
        bt("m-b", 3000, 8192, 290, zone="b"),
    )
    ids = [t.id for t in types]
    return Problem(
        types,
        (
            pc("x", 1, 1500, 1024, ids, topology=frozenset({"ha"}) | zonal),
            pc("y", 1, 900, 1024, ids, topology=zonal),
        ),
        topology=(
            AntiAffinity("ha", TopologyKey.HOSTNAME),
            SpreadConstraint("zs", TopologyKey.ZONE, 1, zones=("a", "b")),
        ),
    )


def test_pods_free_of_zonal_rules_join_a_grown_bin_in_another_zone() -> None:
    p = _two_zones()
    start = _plan(p, [("s-a", {"x": 1}), ("s-b", {"y": 1})])
    out = improve(p, start)
    assert violations(p, out) == []
    assert [(b.bin_type, dict(b.placement.counts)) for b in out.new_bins] == [
        ("m-a", {"x": 1, "y": 1})
    ]
    # under a zone spread, both keep their zones
    spread = _two_zones(frozenset({"zs"}))
    start = _plan(spread, [("s-a", {"x": 1}), ("s-b", {"y": 1})])
    assert improve(spread, start) is start


def _swap_problem(apart: bool = False, t1_max: int | None = None) -> Problem:
    group = frozenset({"ha"}) if apart else frozenset()
    ids = ["t1", "t2", "t3"]
    return Problem(
        (
            bt("t1", 1000, 8192, 100, max_count=t1_max),
            bt("t2", 2000, 8192, 250),
            bt("t3", 3000, 8192, 250),
        ),
        (
            pc("a", 1, 1500, 1024, ids, topology=group),
            pc("b", 1, 500, 1024, ids),
            pc("c", 1, 1500, 1024, ids, topology=group),
        ),
        topology=(AntiAffinity("ha", TopologyKey.HOSTNAME),),
    )


def test_a_pod_swapped_for_a_smaller_one_moves_its_bin_to_a_cheaper_offering() -> None:
    p = _swap_problem()
    start = _plan(p, [("t2", {"a": 1}), ("t3", {"b": 1, "c": 1})])
    out = improve(p, start)
    assert violations(p, out) == []
    # nothing empties or merges (3500 millicores), but "a" and "b" trade places
    assert sorted((b.bin_type, sorted(b.placement.counts)) for b in out.new_bins) == [
        ("t1", ["b"]),
        ("t3", ["a", "c"]),
    ]
    assert out.cost_micros == 350 < start.cost_micros == 500


def test_swaps_keep_hostname_caps() -> None:
    # "a" and "c" keep apart: the one saving swap would put them together
    p = _swap_problem(apart=True)
    start = _plan(p, [("t2", {"a": 1}), ("t3", {"b": 1, "c": 1})])
    assert improve(p, start) is start


def test_swaps_keep_max_count() -> None:
    p = _swap_problem(t1_max=0)
    start = _plan(p, [("t2", {"a": 1}), ("t3", {"b": 1, "c": 1})])
    assert improve(p, start) is start


def _shed_case(
    bins: list[tuple[str, dict[str, int]]],
    *,
    carrier: bool = True,
    pair: int = 1500,
    m_max: int | None = None,
) -> tuple[Problem, Solution]:
    """Bins kept apart by anti-affinity ("x"), as ``bins`` place them; "c" needs "t" on its
    bin when a carrier; "t" and "c" ask ``pair`` millicores each."""
    ids = ["m", "l"]
    counts: Counter[str] = Counter()
    for _, placed in bins:
        counts.update(placed)
    sizes = {"x": 1000, "a": 1000, "t": pair, "c": pair}
    groups = {"x": ("ha",), "t": ("co",)}
    classes = tuple(
        pc(
            k,
            counts[k],
            sizes[k],
            1024,
            ids,
            topology=frozenset(groups.get(k, ())),
        )
        for k in sorted(counts)
    )
    topology: list[TopologyConstraint] = [AntiAffinity("ha", TopologyKey.HOSTNAME)]
    if carrier:
        topology.append(CoLocation("co", TopologyKey.HOSTNAME, frozenset({"c"})))
    p = Problem(
        (bt("m", 4000, 16384, 400, max_count=m_max), bt("l", 8000, 16384, 800)),
        classes,
        topology=tuple(topology),
    )
    return p, _plan(p, bins)


def test_a_bin_sheds_pods_into_the_room_of_others_and_moves_to_a_cheaper_offering() -> None:
    # nothing empties or merges ("x" keeps every bin apart); the first holds 6000 millicores
    # on "l", the second has room for 2000
    bins = [("l", {"x": 1, "a": 5}), ("m", {"x": 1, "a": 1}), ("m", {"x": 1, "t": 1, "c": 1})]
    p, start = _shed_case(bins)
    out = improve(p, start)
    assert violations(p, out) == []
    assert sorted((b.bin_type, sorted(b.placement.counts.items())) for b in out.new_bins) == [
        ("m", [("a", 3), ("x", 1)]),
        ("m", [("a", 3), ("x", 1)]),
        ("m", [("c", 1), ("t", 1), ("x", 1)]),
    ]
    assert out.cost_micros == 1200 < start.cost_micros == 1600
    # with two "m" at most, the first bin keeps its offering
    p, start = _shed_case(bins, m_max=2)
    assert improve(p, start) is start


def test_a_bin_larger_than_its_pods_need_moves_to_an_offering_that_holds_them() -> None:
    # "x" keeps the bins apart; the first holds 3000 millicores on "l" and fits "m" as it is
    p, start = _shed_case([("l", {"x": 1, "a": 2}), ("m", {"x": 1, "a": 3})])
    out = improve(p, start)
    assert sorted(b.bin_type for b in out.new_bins) == ["m", "m"]
    assert out.cost_micros == 800


def test_shedding_keeps_every_carrier_with_a_target() -> None:
    bins = [("l", {"x": 1, "t": 1, "c": 1}), ("m", {"x": 1}), ("m", {"x": 1, "a": 3})]
    # "t" leaving would shrink the first bin to "m", but "c" there needs it, and "c" finds
    # no target on the bin with room
    p, start = _shed_case(bins, pair=2000)
    assert improve(p, start) is start
    # without the affinity, one of them moves and the bin shrinks
    p, start = _shed_case(bins, pair=2000, carrier=False)
    out = improve(p, start)
    assert violations(p, out) == []
    assert out.cost_micros == 1200 < start.cost_micros


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 4),
    st.integers(1, 5),
    st.integers(1, 7),
    st.integers(0, 2**32 - 1),
)
def test_covers_is_the_reduction_over_resources(r: int, n: int, m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    have = rng.integers(0, 5, (1, m, r))
    want = rng.integers(0, 5, (n, 1, r))
    expected = (have >= want).all(axis=2)
    assert expected.shape == (n, m)
    assert np.array_equal(_covers(have, want), expected)


def test_a_one_bin_group_never_splits_across_bins() -> None:
    # a hostname affinity to its own pods (kube-scheduler's first-pod rule): all on one bin
    p = Problem(
        (bt("m", 4000, 8192, 400),),
        (
            pc("g", 2, 1500, 1024, ["m"], topology=frozenset({"one"})),
            pc("o", 2, 2500, 1024, ["m"]),
        ),
        topology=(Affinity("one", key=TopologyKey.HOSTNAME),),
    )
    start = _plan(p, [("m", {"g": 2}), ("m", {"o": 1}), ("m", {"o": 1})])
    out = improve(p, start)
    assert violations(p, out) == []
    assert [b.placement.counts.get("g", 0) for b in out.new_bins if "g" in b.placement.counts] == [
        2
    ]


@settings(max_examples=60, deadline=None)
@given(problems())
def test_domain_rows_and_needs_match_their_definitions(problem: Problem) -> None:
    from solver.improve import _Domain, _Rules  # noqa: PLC0415 - the internals under test

    plan = cost_aware_ffd(problem)
    rules = _Rules(problem)
    bins = [rules.load(nb) for nb in plan.new_bins]
    names = sorted({r for c in problem.classes for r, v in c.demand.items() if v > 0})
    domain = _Domain(rules, bins, names)
    targets = domain.targets
    for b in domain.bins:
        fresh = len(b.load) < b.t.gpus and b.used[rules.gpu] < b.t.capacity.get(rules.gpu, 0)
        want = [
            *(b.t.capacity.get(r, 0) - b.used[r] for r in names),
            *(rules.caps[g] - b.group[g] for g in domain.capped),
            *(b.group[g] for g in targets),
            GPU_MILLI if fresh else GPU_MILLI - min(b.load, default=GPU_MILLI),
        ]
        assert domain._row(b).tolist() == want
    for c in problem.classes:
        needs = rules.needs.get(c.key, ())
        want = [
            *(c.demand.get(r, 0) for r in names),
            *(int(g in c.topology) for g in domain.capped),
            *(int(g in needs) for g in targets),
            c.gpu_fraction_milli,
        ]
        assert domain._need(c).tolist() == want


@settings(max_examples=60, deadline=None)
@given(problems())
def test_consolidation_without_unused_columns_merges_the_same_bins(problem: Problem) -> None:
    from unittest.mock import patch  # noqa: PLC0415

    from solver.improve import _Consolidation  # noqa: PLC0415 - the internals under test

    init = _Consolidation.__init__

    def every_column(self: _Consolidation, *args: object) -> None:
        init(self, *args)  # type: ignore[arg-type]
        self.negative = np.ones_like(self.negative)  # every column kept, as before

    plan = karpenter_ffd(problem)
    with patch.object(_Consolidation, "__init__", every_column):
        plain = improve(problem, plan)
    assert improve(problem, plan) == plain


def test_shed_first_shrinks_bins_before_emptying_them(monkeypatch: pytest.MonkeyPatch) -> None:
    from solver import improve as module  # noqa: PLC0415

    p = Problem((bt("m", 4000, 8192, 400),), (pc("a", 3, 1000, 1024, ["m"]),))
    start = _plan(p, [("m", {"a": 2}), ("m", {"a": 1})])
    for shed_first, first in ((False, "empty"), (True, "shed")):
        calls: list[str] = []
        for name in ("empty", "shed", "swap"):
            method = getattr(module._Search, name)

            def traced(
                self: Any, *args: Any, _m: Any = method, _n: str = name, _c: list[str] = calls
            ) -> bool:
                _c.append(_n)
                return bool(_m(self, *args))

            monkeypatch.setattr(module._Search, name, traced)
        out = improve(p, start, shed_first=shed_first)
        monkeypatch.undo()
        assert calls[0] == first
        assert out.cost_micros == 400  # either way the half-empty bin goes


def test_the_spare_room_is_kept_for_the_last_demands_asked_only() -> None:
    from unittest.mock import patch  # noqa: PLC0415

    from solver import improve as module  # noqa: PLC0415

    p = Problem(
        (bt("m", 4000, 8192, 400),),
        tuple(pc(f"a{i}", 2, 500 + 100 * i, 1024, ["m"]) for i in range(4)),
    )
    rules = _Rules(p)
    bins = [rules.load(nb) for nb in _plan(p, [("m", {f"a{i}": 2}) for i in range(4)]).new_bins]
    names = ["cpu", "memory", "pods"]
    domain = _Domain(rules, bins, names, list(p.bin_types), growing=True)
    growth = domain.growth
    assert growth is not None
    free = domain.free[:, : len(names)]
    with patch.object(module, "_SPARE_DEMANDS", 2):
        for c in [*p.classes, *reversed(p.classes)]:
            demand = np.array([c.demand.get(r, 0) for r in names], dtype=np.int64)
            fresh = ((free - demand) / np.maximum(growth.own, 1)).min(axis=1)
            assert growth._spare(demand, free).tolist() == fresh.tolist()
            assert len(growth.spares) <= 2
            assert next(reversed(growth.spares)) == demand.tobytes()  # the latest is kept


def _sizes_problem(*, cpu_b_apart_from_mem: bool = False) -> Problem:
    """Offerings of one shape in eight sizes (1-8 CPUs, 2 GiB a CPU, 100 a CPU)."""
    types = tuple(bt(f"s{k}", 1000 * k, 2048 * k, 100 * k) for k in range(1, 9))
    ids = [t.id for t in types]
    two = frozenset({"two"}) if cpu_b_apart_from_mem else frozenset()
    return Problem(
        types,
        (
            pc("cpu-a", 1, 1500, 256, ids, topology=frozenset({"one"})),
            pc("mem", 1, 250, 4096, ids, topology=frozenset({"one"}) | two),
            pc("small", 1, 100, 2048, ids),
            pc("cpu-b", 1, 1500, 256, ids, topology=two),
        ),
        topology=(
            AntiAffinity("one", TopologyKey.HOSTNAME),
            AntiAffinity("two", TopologyKey.HOSTNAME),
        ),
    )


def test_a_cpu_bound_and_a_memory_bound_bin_trade_pods_until_one_steps_down() -> None:
    p = _sizes_problem()
    # four CPUs holding 3.1 CPUs and 2.5 GiB beside two holding a 4 GiB pod: no pod moves,
    # swaps or sheds so that a bin gets cheaper, so the plain polish keeps the plan
    start = _plan(p, [("s4", {"cpu-a": 1, "small": 1, "cpu-b": 1}), ("s2", {"mem": 1})])
    assert improve(p, start) is start
    out = improve(p, start, rebalance=True)
    assert violations(p, out) == []
    _same_pods(out, start)
    # dealt so that each bin fills its CPU and memory together: three CPUs and two
    assert sorted((b.bin_type, sorted(b.placement.counts)) for b in out.new_bins) == [
        ("s2", ["cpu-a", "small"]),
        ("s3", ["cpu-b", "mem"]),
    ]
    assert out.cost_micros == 500 < start.cost_micros == 600


def test_rebalancing_keeps_hostname_caps() -> None:
    # the memory pod is kept apart from both CPU pods: no deal of the pods saves
    p = _sizes_problem(cpu_b_apart_from_mem=True)
    start = _plan(p, [("s4", {"cpu-a": 1, "small": 1, "cpu-b": 1}), ("s2", {"mem": 1})])
    assert improve(p, start, rebalance=True) is start


def test_rebalancing_that_saves_nothing_leaves_the_plan_as_it_was() -> None:
    p = _sizes_problem()
    # already as cheap as the pods allow: the rebalanced deal would cost the same
    start = _plan(p, [("s2", {"cpu-a": 1, "small": 1}), ("s3", {"cpu-b": 1, "mem": 1})])
    assert improve(p, start, rebalance=True) is start


@settings(max_examples=100, deadline=None)
@given(problems_with_one_bin_groups())
def test_rebalanced_plans_keep_one_bin_groups_whole_and_every_rule(problem: Problem) -> None:
    for start in (karpenter_ffd(problem), cost_aware_ffd(problem)):
        out = improve(problem, start, rebalance=True)
        assert violations(problem, out) == []
        assert out.cost_micros == cost(problem, out) <= start.cost_micros
        _same_pods(out, start)
