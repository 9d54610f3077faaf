"""The per-run indexes of the greedy planners agree with the plain definitions."""

from typing import Any
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from solver.greedy import (
    _INF,
    _Bin,
    _Cap,
    _Catalog,
    _copies,
    _Lazy,
    _maxcap,
    _Packer,
    _room_ok,
    cost_aware_ffd,
    karpenter_ffd,
)
from solver.problem import (
    BinType,
    CoLocation,
    Gang,
    PodClass,
    Problem,
    Solution,
    TopologyKey,
)
from solver.validate import violations
from solver.weights import fit_key, fits_one
from tests.unit.solver.builders import bt, pc
from tests.unit.solver.strategies import problems, problems_with_one_bin_groups


@settings(max_examples=60)
@given(problems())
def test_catalog_agrees_with_fits_one(problem: Problem) -> None:
    cat = _Catalog(problem)
    for c in problem.classes:
        fits = cat.fits(c)
        copies = cat.copies(c)
        for t, g in zip(problem.bin_types, cat.gids, strict=True):
            assert fit_key(t) == fit_key(cat.reps[g])
            assert bool(fits[g]) == fits_one(problem, c, t)
            assert copies[g] == _copies(t, c, _INF)
        want = [
            t for t in problem.bin_types if t.id in c.allowed_bin_types and fits_one(problem, c, t)
        ]
        assert cat.eligible(c) == want


@settings(max_examples=60)
@given(problems())
def test_packer_eligible_and_gate_agree_with_definitions(problem: Problem) -> None:
    packer = _Packer(problem, karpenter=False)
    for c in problem.classes:
        for domain in [(None, None), ("p", None), (None, "a"), ("q", "b")]:
            want = [
                t
                for t in problem.bin_types
                if t.id in c.allowed_bin_types
                and fits_one(problem, c, t)
                and domain[0] in (None, t.pool)
                and domain[1] in (None, t.zone)
            ]
            assert packer.eligible(c, domain) == want
        present, below = packer._gate(c)
        assert (not present and all(limit > 0 for _, limit in below)) == (packer.empty_room(c) > 0)


@st.composite
def _types(draw: st.DrawFn) -> list[BinType]:
    n = draw(st.integers(1, 12))
    return [
        bt(
            f"t{i}",
            draw(st.sampled_from([1000, 2000, 4000])),
            draw(st.sampled_from([2048, 4096])),
            draw(st.integers(1, 50)),
            gpus=draw(st.sampled_from([0, 1, 2])),
        )
        for i in range(n)
    ]


@settings(max_examples=200)
@given(st.data())
def test_cap_without_matches_a_fresh_bound(data: st.DataObject) -> None:
    types = data.draw(_types())
    drop = data.draw(st.sets(st.integers(0, len(types) - 1)))
    kept = [t for i, t in enumerate(types) if i not in drop]
    dropped = [t for i, t in enumerate(types) if i in drop]
    got = _Cap.of(types).without(dropped, kept)
    assert got == _Cap.of(kept)
    assert got.top == _maxcap(kept)


@settings(max_examples=100)
@given(st.data())
def test_ranked_iterates_in_sorted_order(data: st.DataObject) -> None:
    types = data.draw(_types())
    keyed = [(t.price_micros / data.draw(st.integers(1, 4)), t.id, t) for t in types]
    want = [t for _, _, t in sorted(keyed, key=lambda x: (x[0], x[1]))]
    ranked = _Lazy(iter(want))
    first = next(iter(ranked), None)
    assert first is (want[0] if want else None)
    assert list(ranked) == want
    assert list(ranked) == want


@settings(max_examples=60)
@given(problems(), st.integers(1, 300))
def test_offerings_rank_by_price_per_copy_up_to_the_cap_then_id(problem: Problem, cap: int) -> None:
    packer = _Packer(problem, karpenter=False)
    for c in problem.classes:
        eligible = packer.eligible(c, (None, None))
        per = {t.id: t.price_micros / max(min(cap, _copies(t, c, _INF)), 1) for t in eligible}
        want = sorted(eligible, key=lambda t: (per[t.id], t.id))
        assert list(packer._by_price_per_copy(c, cap)) == want
        # a cap above every offering's copies ranks the same as the largest copies
        assert list(packer._by_price_per_copy(c, cap + 10**6)) == list(
            packer._by_price_per_copy(c, 10**9)
        )


def _plain_open_order(packer: _Packer, zone: str | None) -> list[_Bin]:
    """Return the open bins a fill in ``zone`` tries, by the definition (a full sort)."""
    by_zone = packer.s.by_zone
    if zone is None:
        opened = packer.s.bins[packer.n_existing :]
    else:
        opened = by_zone[zone] + by_zone[None]
        if by_zone[None] and not packer.karpenter:
            opened.sort(key=lambda b: b.seq)
    if packer.karpenter:
        opened = sorted(opened, key=lambda b: b.npods)
    return opened


@settings(max_examples=80)
@given(problems())
def test_open_order_matches_a_full_sort(problem: Problem) -> None:
    fast = _Packer._open_order

    def checked(packer: _Packer, zone: str | None) -> list[_Bin]:
        got = fast(packer, zone)
        assert got == _plain_open_order(packer, zone)
        return got

    with patch.object(_Packer, "_open_order", checked):
        karpenter_ffd(problem)
        cost_aware_ffd(problem)


@settings(max_examples=80)
@given(problems())
def test_skipping_bins_of_disallowed_offerings_keeps_the_plans(problem: Problem) -> None:
    with patch("solver.greedy._none_allowed", return_value=False):
        plain = (karpenter_ffd(problem), cost_aware_ffd(problem))
    assert (karpenter_ffd(problem), cost_aware_ffd(problem)) == plain


def test_bins_of_offerings_a_class_may_not_use_are_not_fitted() -> None:
    # pool "pb"'s large pods leave room on 20 bins that pool "pa"'s small pods must pass by
    types = (bt("a", 4000, 16384, 3000, pool="pa"), bt("b", 1000, 4096, 1000, pool="pb"))
    large = [pc(f"b{i}", 2, 600 + i, 256, ["b"]) for i in range(10)]
    small = [pc(f"a{i}", 1, 100 + i, 256, ["a"]) for i in range(20)]
    problem = Problem(types, (*large, *small))
    plan, calls = _fit_calls(cost_aware_ffd, problem)
    assert not plan.unplaced
    assert sorted(b.bin_type for b in plan.new_bins) == ["a"] + ["b"] * 20
    # the small pods are only fitted against the bins of their own pool
    assert not [call for call in calls if call.startswith("a") and call.endswith("@pb")]


def _fit_calls(planner: Any, problem: Problem) -> tuple[Solution, list[str]]:
    """Return ``planner``'s plan and its ``fit`` calls as "class@pool of the bin"."""
    fit = _Packer.fit
    calls: list[str] = []

    def counted(packer: _Packer, b: _Bin, c: PodClass, *args: Any) -> Any:
        calls.append(f"{c.key}@{b.by_cpu[0].pool}")
        return fit(packer, b, c, *args)

    with patch.object(_Packer, "fit", counted):
        return planner(problem), calls


@settings(max_examples=80)
@given(problems())
def test_skipping_bins_of_other_pools_keeps_the_plans(problem: Problem) -> None:
    every = frozenset(t.pool for t in problem.bin_types)
    with patch.object(_Packer, "_pools_of", return_value=every):
        plain = (karpenter_ffd(problem), cost_aware_ffd(problem))
    assert (karpenter_ffd(problem), cost_aware_ffd(problem)) == plain


def test_bins_of_another_pool_are_not_fitted_whatever_their_offerings() -> None:
    # Karpenter-style bins of pool "pb" keep all ten of its offerings as candidates, more
    # than ``_none_allowed`` looks at: pool "pa"'s small pods still pass them by
    types = (
        bt("a", 4000, 16384, 3000, pool="pa"),
        *(bt(f"b{i}", 1000 + 100 * i, 4096, 1000 + i, pool="pb") for i in range(10)),
    )
    b_ids = [t.id for t in types[1:]]
    large = [pc(f"b{i}", 1, 900, 256, b_ids) for i in range(10)]
    small = [pc(f"a{i}", 1, 100 + i, 256, ["a"]) for i in range(5)]
    problem = Problem(types, (*large, *small))
    plan, calls = _fit_calls(karpenter_ffd, problem)
    assert not plan.unplaced
    assert violations(problem, plan) == []
    assert not [call for call in calls if call.startswith("a") and call.endswith("@pb")]


@settings(max_examples=80)
@given(problems())
def test_usable_open_bins_keep_the_cost_aware_plans(problem: Problem) -> None:
    # every open bin, as before the per-offerings lists: the same plans
    def every_bin(packer: _Packer, _c: PodClass, zone: str | None) -> list[_Bin]:
        return packer._open_order(zone)

    with patch.object(_Packer, "_usable_open", every_bin):
        plain = cost_aware_ffd(problem)
    assert cost_aware_ffd(problem) == plain


def test_usable_open_bins_forget_the_bins_an_undone_gang_opened() -> None:
    # q1 opens the one bin of "a"; the gang's classes (same offerings) open both bins of "b"
    # (g2 sees g1's), cannot be placed whole and are undone: q2 must then open "b" again,
    # not go to a dropped bin
    types = (bt("a", 4000, 16384, 100, max_count=1), bt("b", 4000, 16384, 120, max_count=2))
    both = ["a", "b"]
    problem = Problem(
        types,
        (
            pc("q1", 1, 3000, 1024, both),
            pc("g1", 2, 1800, 1024, both, gang="G"),
            pc("g2", 3, 1700, 1024, both, gang="G"),
            pc("q2", 1, 1500, 1024, both),
            pc("q3", 1, 900, 1024, both),
        ),
        gangs=(Gang("G", 5, same_pool=False, same_zone=False),),
    )
    plan = cost_aware_ffd(problem)
    assert violations(problem, plan) == []
    assert sorted((b.bin_type, sorted(b.placement.counts)) for b in plan.new_bins) == [
        ("a", ["q1", "q3"]),
        ("b", ["q2"]),
    ]
    assert sorted((u.class_key, u.count) for u in plan.unplaced) == [("g1", 2), ("g2", 3)]


@settings(max_examples=100)
@given(problems_with_one_bin_groups())
def test_gated_open_bins_keep_the_plans(problem: Problem) -> None:
    # every open bin, as before the bins lacking a required group were dropped: same plans
    gated = _Packer._gated

    def checked(packer: _Packer, c: PodClass, zone: str | None, opened: list[_Bin]) -> Any:
        got = gated(packer, c, zone, opened)
        for tid, held in packer.s.holders.items():
            assert held == {id(b): b for b in packer.s.bins if not b.existing and b.group[tid]}
        assert got == [b for b in opened if b in got]  # a subsequence, in order
        assert all(packer.host_room(b, c) == 0 for b in opened if b not in got)
        return got

    def every_bin(_packer: _Packer, _c: PodClass, _zone: str | None, opened: list[_Bin]) -> Any:
        return opened

    with patch.object(_Packer, "_gated", every_bin):
        plain = (karpenter_ffd(problem), cost_aware_ffd(problem))
    with patch.object(_Packer, "_gated", checked):
        assert (karpenter_ffd(problem), cost_aware_ffd(problem)) == plain


def test_a_carrier_tries_its_targets_bins_in_karpenter_order() -> None:
    # three bins hold targets; "fill" leaves 20 / 60 / 200 millicores on them, three pods
    # each: Karpenter's order (pods, then opening) takes the second bin, the first that fits
    problem = Problem(
        (bt("t", 2000, 8192, 100),),
        (
            pc("a", 1, 1900, 512, ["t"], topology=frozenset({"co"})),
            pc("b", 2, 950, 512, ["t"], topology=frozenset({"co"})),
            pc("c", 3, 600, 512, ["t"], topology=frozenset({"co"})),
            pc("fill", 3, 40, 64, ["t"]),
            pc("x1co", 1, 30, 64, ["t"]),
        ),
        topology=(CoLocation("co", TopologyKey.HOSTNAME, frozenset({"x1co"})),),
    )
    plan = karpenter_ffd(problem)
    assert violations(problem, plan) == []
    [with_carrier] = [b for b in plan.new_bins if "x1co" in b.placement.counts]
    assert sorted(with_carrier.placement.counts) == ["b", "fill", "x1co"]


@settings(max_examples=100)
@given(problems())
def test_blocks_without_room_keep_the_plans(problem: Problem) -> None:
    # blocks of two bins, so that small problems have blocks to leave out; every block
    # visited, as before: the same plans, and every skip count only passes spent bins
    fill = _Packer.fill

    def checked(packer: _Packer, c: PodClass, domain: Any, n: int, journal: Any) -> int:
        placed = fill(packer, c, domain, n, journal)
        key = packer._skip_key(c, domain[1]) if not packer.needy(c) else None
        if key is not None and key in packer._skip:
            dem = [(r, v) for r, v in c.demand.items() if v > 0]
            need = packer.need_mask(c)
            usable = packer._usable_open(c, domain[1])
            for b in usable[: packer._skip[key]]:
                assert b.dead or b.exh & need or not _room_ok(b.maxcap, b.used, dem)
        return placed

    with patch("solver.greedy._BLOCK", 2), patch.object(_Packer, "_room_in", return_value=True):
        plain = cost_aware_ffd(problem)
    with patch("solver.greedy._BLOCK", 2), patch.object(_Packer, "fill", checked):
        assert cost_aware_ffd(problem) == plain


def test_a_fill_passes_over_full_blocks() -> None:
    # 40 bins, one big pod each; only the 36th (the last of the ninth block of 4) has memory
    # left for the small pods: they visit that block only, and land there
    types = (bt("t", 4000, 16384, 100),)
    big = [pc(f"b{i:02}", 1, 3800 - i, 256 if i == 35 else 16000, ["t"]) for i in range(40)]
    problem = Problem(types, (*big, pc("small", 2, 100, 1000, ["t"])))
    visit = _Packer._visit
    seen: list[int] = []

    def counted(packer: _Packer, c: PodClass, domain: Any, n: int, *args: Any) -> Any:
        opened = list(args[1])
        if c.key == "small":
            seen.append(len(opened))
        return visit(packer, c, domain, n, args[0], opened, *args[2:])

    with patch("solver.greedy._BLOCK", 4), patch.object(_Packer, "_visit", counted):
        plan = cost_aware_ffd(problem)
    assert violations(problem, plan) == []
    assert not plan.unplaced
    assert seen == [4]
    assert len(plan.new_bins) == 40
    with patch.object(_Packer, "_room_in", return_value=True):
        assert cost_aware_ffd(problem) == plan
