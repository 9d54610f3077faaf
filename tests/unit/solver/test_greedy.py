from hypothesis import given, settings

from solver.greedy import cost_aware_ffd, karpenter_ffd
from solver.problem import ExistingBin, Gang, Problem, UnplacedReason
from solver.validate import violations
from tests.unit.solver.builders import bt, pc
from tests.unit.solver.strategies import problems


@settings(max_examples=60)
@given(problems())
def test_greedy_outputs_are_valid(problem):
    for plan in (karpenter_ffd, cost_aware_ffd):
        s = plan(problem)
        assert violations(problem, s) == []


def test_existing_bins_used_first():
    e = ExistingBin("n1", "a", "default", {"cpu": 2000, "memory": 4096, "pods": 10})
    p = Problem(
        (bt("s", 2000, 4096, 100),),
        (pc("c", 3, 1000, 1024, ["s"], allowed_existing=frozenset({"n1"})),),
        existing=(e,),
    )
    for plan in (karpenter_ffd, cost_aware_ffd):
        s = plan(p)
        assert s.existing[0].placement.counts == {"c": 2}
        assert len(s.new_bins) == 1
        assert violations(p, s) == []


def test_gang_that_cannot_fit_whole_gets_nothing():
    p = Problem(
        (bt("s", 2000, 4096, 100, max_count=2),),
        (pc("g", 5, 1000, 1024, ["s"], gang="G"), pc("c", 1, 1000, 1024, ["s"])),
        gangs=(Gang("G", 5),),
    )
    for plan in (karpenter_ffd, cost_aware_ffd):
        s = plan(p)
        assert violations(p, s) == []
        assert [(u.class_key, u.count, u.reason) for u in s.unplaced] == [
            ("g", 5, UnplacedReason.GANG)
        ]
        assert s.placed_counts() == {"c": 1}


def test_cost_aware_downsizes():
    p = Problem(
        (bt("s", 2000, 4096, 100), bt("b", 8000, 16384, 380)), (pc("c", 1, 1000, 1024, ["s", "b"]),)
    )
    assert cost_aware_ffd(p).new_bins[0].bin_type == "s"


def test_no_capacity_reason():
    p = Problem((bt("s", 2000, 4096, 100),), (pc("c", 1, 4000, 1024, ["s"]),))
    assert karpenter_ffd(p).unplaced[0].reason is UnplacedReason.NO_CAPACITY
