"""Cost-aware greedy: a group held to one node (hostname ``Affinity``) gets a node it fits."""

from solver.cpsat import solve
from solver.greedy import cost_aware_ffd
from solver.problem import Affinity, Problem, TopologyKey
from solver.validate import violations
from tests.unit.solver.builders import TEST_CONFIG, bt, pc

TYPES = (bt("small", 3000, 8192, 100), bt("big", 6000, 16384, 210))
IDS = [t.id for t in TYPES]
AFF = (Affinity("aff", None, TopologyKey.HOSTNAME),)


def test_a_group_is_placed_before_other_classes_fill_its_node() -> None:
    # by CPU the filler comes between the group's classes; placed in that order it would take
    # the room the group's node was opened with, and the group's last pods would find none
    p = Problem(
        TYPES,
        (
            pc("g1", 2, 1500, 512, IDS, topology=frozenset({"aff"})),
            pc("filler", 2, 1000, 512, IDS),
            pc("g2", 4, 500, 512, IDS, topology=frozenset({"aff"})),
        ),
        topology=AFF,
    )
    for s in (cost_aware_ffd(p), solve(p, TEST_CONFIG)):
        assert violations(p, s) == []
        assert s.unplaced == ()


def test_a_group_does_not_start_on_a_node_without_room_for_it() -> None:
    # the filler's node has room for one pod of the group only
    p = Problem(
        TYPES,
        (
            pc("filler", 1, 2500, 512, IDS),
            pc("g", 6, 500, 512, IDS, topology=frozenset({"aff"})),
        ),
        topology=AFF,
    )
    s = cost_aware_ffd(p)
    assert violations(p, s) == []
    assert s.unplaced == ()
    assert sorted(b.placement.counts.get("g", 0) for b in s.new_bins) == [0, 6]
