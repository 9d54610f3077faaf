"""Algebraic laws of requirements and resource lists (property tests)."""

from hypothesis import given
from hypothesis import strategies as st

from provisioner.scheduling import resources
from provisioner.scheduling.requirements import Requirement, Requirements
from tests.strategies import (
    LABEL_VALUES,
    label_sets,
    requirement_sets,
    requirements,
    resource_lists,
)

# Values the strategies never draw, to check complements and bounds beyond the pool.
PROBES = (*LABEL_VALUES, "", "d", "0", "4", "11", "-3", "007", "+2", "1.5")


def same_states(a: Requirement, b: Requirement) -> bool:
    return a.allow_absent == b.allow_absent and all(a.has(v) == b.has(v) for v in PROBES)


@given(requirements(), requirements())
def test_intersection_is_commutative(a, b):
    assert a.intersection(b) == b.intersection(a)
    assert same_states(a.intersection(b), b.intersection(a))


@given(requirements(), requirements(), requirements())
def test_intersection_is_associative(a, b, c):
    left = a.intersection(b).intersection(c)
    right = a.intersection(b.intersection(c))
    assert same_states(left, right)
    assert left.min_values == right.min_values


@given(requirements())
def test_intersection_is_idempotent(a):
    assert a.intersection(a) == a


@given(requirements(), requirements())
def test_intersection_allows_exactly_the_states_both_allow(a, b):
    both = a.intersection(b)
    assert both.allow_absent == (a.allow_absent and b.allow_absent)
    for value in PROBES:
        assert both.has(value) == (a.has(value) and b.has(value))


@given(requirements())
def test_empty_means_nothing_is_allowed_and_any_is_allowed(a):
    chosen = a.any()
    if a.is_empty():
        assert chosen is None
        assert not any(a.has(v) for v in PROBES)
    if chosen is not None:
        assert a.has(chosen)
    else:
        assert a.is_finite()


@given(requirements())
def test_finite_values_are_exactly_the_allowed_values(a):
    values = a.values()
    if values is None:
        assert a.size() is None
    else:
        assert a.size() == len(values)
        assert all(a.has(v) for v in values)
        assert not any(a.has(v) for v in PROBES if v not in values)


@given(requirement_sets, requirement_sets)
def test_intersects_is_none_iff_the_shared_intersections_are_non_empty(a, b):
    shared = a.keys() & b.keys()
    non_empty = all(not a[key].intersection(b[key]).is_empty() for key in shared)
    assert (a.intersects(b) is None) == non_empty
    if a.is_satisfiable() and b.is_satisfiable():
        assert (a.intersects(b) is None) == a.union(b).is_satisfiable()


@given(requirement_sets, requirement_sets)
def test_intersects_is_symmetric(a, b):
    assert (a.intersects(b) is None) == (b.intersects(a) is None)


@given(requirement_sets, requirement_sets)
def test_union_is_commutative(a, b):
    assert a.union(b) == b.union(a)


@given(requirement_sets, label_sets)
def test_matches_is_the_conjunction_of_the_requirements(reqs, labels):
    expected = all(
        r.allow_absent if labels.get(key) is None else r.has(labels[key]) for key, r in reqs.items()
    )
    assert reqs.matches(labels) == expected


@given(requirement_sets, requirement_sets, label_sets)
def test_a_label_set_matching_both_matches_the_union(a, b, labels):
    assert (a.matches(labels) and b.matches(labels)) == a.union(b).matches(labels)


@given(requirement_sets)
def test_to_dicts_round_trips(reqs):
    assert Requirements.from_terms(reqs.to_dicts()) == reqs


@given(requirement_sets)
def test_pinned_labels_match(reqs):
    pinned = reqs.labels()
    for key, value in pinned.items():
        assert reqs[key].has(value)


@given(resource_lists(), resource_lists())
def test_subtract_undoes_add(a, b):
    assert resources.is_equal(resources.subtract(resources.add(a, b), b), a)


@given(resource_lists(), resource_lists())
def test_requests_fit_in_themselves_plus_anything_non_negative(a, b):
    assert resources.fits(a, resources.add(a, b))
    assert resources.exceeded(a, resources.add(a, b)) == []


@given(resource_lists(), resource_lists(), resource_lists())
def test_add_is_commutative_and_associative(a, b, c):
    assert resources.is_equal(resources.add(a, b), resources.add(b, a))
    assert resources.is_equal(
        resources.add(resources.add(a, b), c), resources.add(a, resources.add(b, c))
    )


@given(resource_lists(), resource_lists())
def test_max_of_bounds_both(a, b):
    top = resources.max_of(a, b)
    assert resources.fits(a, top)
    assert resources.fits(b, top)


@given(resource_lists(min_value=-(10**15), max_value=10**15))
def test_format_then_parse_round_trips(a):
    assert resources.parse_resource_list(resources.format_resource_list(a)) == a


@given(st.lists(resource_lists(), max_size=4))
def test_pod_requests_of_app_containers_is_their_sum(lists):
    containers = [{"resources": {"requests": resources.format_resource_list(r)}} for r in lists]
    assert resources.is_equal(resources.pod_requests(containers), resources.add(*lists))
