"""The planner's indexes agree with the straightforward definitions they replace."""

from __future__ import annotations

import dataclasses
import random
from types import SimpleNamespace
from typing import Any

import pytest

from cloudprovider.instancetype import InstanceType, Offering
from provisioner.apis import labels as wk
from provisioner.controllers.provisioning.builder import (
    _by_labels,
    _first_undominated,
    _FitIndex,
    _fits_option,
    _selected,
)
from provisioner.controllers.provisioning.offerings import (
    DaemonOverhead,
    Option,
    PoolTemplate,
    enumerate_options,
)
from provisioner.controllers.provisioning.planner import MAX_INSTANCE_TYPES, _TargetIndex
from provisioner.controllers.provisioning.podfacts import SelectorKey, selector_matches
from provisioner.scheduling.requirements import Requirement, Requirements
from provisioner.scheduling.resources import fits

RESOURCES = ("cpu", "memory", "pods", "nvidia.com/gpu")


def _naive_undominated(vectors: list[tuple[int, ...]]) -> list[int]:
    """Keep each vector no kept one is at least as large as in every component."""
    kept: list[int] = []
    for i, vector in enumerate(vectors):
        if not any(all(a >= b for a, b in zip(vectors[k], vector, strict=True)) for k in kept):
            kept.append(i)
    return kept


@pytest.mark.parametrize("seed", range(40))
def test_first_undominated_matches_the_pairwise_scan(seed: int) -> None:
    rng = random.Random(seed)  # noqa: S311 - reproducible test data
    dims = rng.randint(1, 5)
    vectors = [tuple(rng.randint(0, 4) for _ in range(dims)) for _ in range(rng.randint(0, 60))]
    assert _first_undominated(vectors) == _naive_undominated(vectors)


def test_first_undominated_keeps_the_first_of_equal_vectors() -> None:
    assert _first_undominated([(2, 2), (1, 3), (2, 2), (1, 1), (3, 3)]) == [0, 1, 4]
    assert _first_undominated([]) == []


def _options(rng: random.Random, count: int) -> list[Option]:
    pool = PoolTemplate(
        name="default",
        weight=0,
        requirements=Requirements(),
        labels={},
        taints=(),
        limits=None,
        instance_types=(),
    )
    options = []
    for i in range(count):
        capacity = {name: rng.choice([0, 1000, 2000, 4000]) for name in RESOURCES[:3]}
        if rng.random() < 0.3:
            capacity["nvidia.com/gpu"] = rng.choice([1000, 2000])
        offering = Offering(zone="z1", capacity_type="spot", price=rng.choice([0.1, 0.2, 0.3]))
        instance_type = InstanceType(
            name=f"type-{i}",
            labels={},
            capacity=capacity,
            allocatable=capacity,
            offerings=(offering,),
        )
        options.append(
            Option(
                id=f"default/type-{i}/z1/spot",
                pool=pool,
                instance_type=instance_type,
                offering=offering,
                labels={},
                capacity=capacity,
                daemon_requests={},
            )
        )
    return options


@pytest.mark.parametrize("seed", range(20))
def test_target_index_lists_the_fitting_allowed_options_cheapest_first(seed: int) -> None:
    rng = random.Random(seed)  # noqa: S311 - reproducible test data
    options = _options(rng, rng.randint(1, 80))
    index = _TargetIndex(options)
    for _ in range(20):
        requests = {name: rng.choice([0, 500, 1000, 3000]) for name in rng.sample(RESOURCES, 2)}
        allowed = frozenset(o.id for o in options if rng.random() < 0.7)
        mask = index.fitting(requests) & index.allowed(allowed)
        expected = sorted(
            (o for o in options if o.id in allowed and fits(requests, o.capacity)),
            key=lambda o: (o.price, o.instance_type.name),
        )
        assert index.members(mask) == expected
        listing = index.listing(mask | index.bit(options[0]))
        assert listing is not None
        with_chosen = sorted(
            {o.id: o for o in [*expected, options[0]]}.values(),
            key=lambda o: (o.price, o.instance_type.name),
        )[:MAX_INSTANCE_TYPES]
        assert listing.options == tuple(with_chosen)
        assert listing.names == tuple(o.instance_type.name for o in with_chosen)


@pytest.mark.parametrize("seed", range(10))
def test_fit_index_lists_the_options_one_pod_fits_on_as_fits_option_does(seed: int) -> None:
    rng = random.Random(seed)  # noqa: S311 - reproducible test data
    options = _options(rng, rng.randint(1, 80))
    # a second offering of some types: options of one (pool, type) share their capacity
    options += [dataclasses.replace(o, id=o.id.replace("z1", "z2")) for o in options[::3]]
    index = _FitIndex({o.id: o for o in options})
    for _ in range(30):
        requests = {name: rng.choice([0, 500, 1000, 3000]) for name in rng.sample(RESOURCES, 2)}
        if rng.random() < 0.1:
            requests["cpu"] = 2**63  # past int64: the plain test
        fraction = rng.choice([0, 0, 500])
        expected = {o.id for o in options if _fits_option(requests, fraction, o)}
        assert index.fitting(requests, fraction) == expected
        assert index.fitting(dict(reversed(requests.items())), fraction) == expected


def _offerings_catalog(rng: random.Random) -> tuple[InstanceType, ...]:
    types = []
    for i in range(rng.randint(1, 12)):
        offers = [
            Offering(zone=zone, capacity_type=kind, price=rng.choice([0.1, 0.2]))
            for zone in ("z1", "z2", "z3")
            for kind in ("spot", "on-demand")
            if rng.random() < 0.7
        ]
        if rng.random() < 0.3:
            offers.append(
                Offering(
                    zone="z1",
                    capacity_type="reserved",
                    price=0.05,
                    reservation_id=f"cr-{i}",
                    reservation_type="default",
                )
            )
        capacity = {"cpu": 4000, "memory": 8 << 30, "pods": 110_000}
        types.append(
            InstanceType(
                name=f"type-{i}",
                labels={"family": rng.choice(["c", "m"]), wk.LABEL_ZONE: "stale"},
                capacity=capacity,
                allocatable=capacity,
                offerings=tuple(offers),
            )
        )
    return tuple(types)


def _requirement(rng: random.Random) -> Requirement:
    key, values = rng.choice(
        [
            (wk.LABEL_ZONE, ["z1", "z2", "z3"]),
            (wk.LABEL_CAPACITY_TYPE, ["spot", "on-demand", "reserved"]),
            (wk.LABEL_CAPACITY_RESERVATION_TYPE, ["default", "capacity-block"]),
            (wk.LABEL_INSTANCE_TYPE, [f"type-{i}" for i in range(12)]),
            ("family", ["c", "m"]),
        ]
    )
    operator = rng.choice(["In", "NotIn", "Exists", "DoesNotExist"])
    chosen = rng.sample(values, rng.randint(1, len(values))) if operator in {"In", "NotIn"} else []
    return Requirement.from_operator(key, operator, chosen)


@pytest.mark.parametrize("seed", range(30))
def test_options_are_the_offerings_whose_labels_meet_the_pool_requirements(seed: int) -> None:
    # requirements on offering labels are checked per offering, the others once per instance
    # type; the options are those of checking every requirement on every offering's labels
    rng = random.Random(seed)  # noqa: S311 - reproducible test data
    types = _offerings_catalog(rng)
    pools = [
        PoolTemplate(
            name=f"pool-{p}",
            weight=0,
            requirements=Requirements(_requirement(rng) for _ in range(rng.randint(0, 4))),
            labels={"team": "a"},
            taints=(),
            limits=None,
            instance_types=types,
        )
        for p in range(2)
    ]
    expected = [
        f"{pool.name}/{t.name}/{o.key}"
        for pool in pools
        for t in pool.instance_types
        for o in t.available_offerings()
        if pool.requirements.matches(
            {
                **t.labels,
                **pool.labels,
                wk.LABEL_INSTANCE_TYPE: t.name,
                wk.LABEL_REGION: "r",
                wk.LABEL_ZONE: o.zone,
                wk.LABEL_CAPACITY_TYPE: o.capacity_type,
                **(
                    {
                        wk.LABEL_CAPACITY_RESERVATION_ID: o.reservation_id,
                        wk.LABEL_CAPACITY_RESERVATION_TYPE: o.reservation_type or "default",
                    }
                    if o.reservation_id
                    else {}
                ),
            }
        )
    ]
    options = enumerate_options(pools, DaemonOverhead(()), "r")
    assert [o.id for o in options] == expected


def _stand_in(namespace: str, labels: dict[str, str]) -> Any:
    """A pending pod as the label index reads it (its facts' namespace and labels)."""
    facts = SimpleNamespace(
        namespace=namespace, labels=labels, label_key=tuple(sorted(labels.items()))
    )
    return SimpleNamespace(facts=facts)


def _naive_selected(pending: list[Any], namespaces: list[str], selector: SelectorKey) -> list[Any]:
    """Every label set of each namespace, in the order first seen, tested on its own."""
    selected: list[Any] = []
    for namespace in dict.fromkeys(namespaces):
        sets: dict[tuple[tuple[str, str], ...], list[Any]] = {}
        for item in pending:
            if item.facts.namespace == namespace:
                sets.setdefault(item.facts.label_key, []).append(item)
        for members in sets.values():
            if selector_matches(selector, members[0].facts.labels):
                selected.extend(members)
    return selected


@pytest.mark.parametrize("seed", range(30))
def test_label_index_selects_what_testing_every_label_set_selects(seed: int) -> None:
    rng = random.Random(seed)  # noqa: S311 - reproducible test data
    keys, values, spaces = ("app", "tier", "zone", "team"), ("1", "2", "3"), ("a", "b")
    pending = [
        _stand_in(
            rng.choice(spaces),
            {k: rng.choice(values) for k in keys if rng.random() < 0.6},
        )
        for _ in range(rng.randint(0, 80))
    ]
    index = _by_labels(pending)
    operators = ("In", "NotIn", "Exists", "DoesNotExist")
    for _ in range(40):
        match = tuple(
            sorted({k: rng.choice(values) for k in rng.sample(keys, rng.randint(0, 2))}.items())
        )
        # an expression's values may repeat, as an API object's may
        expressions = tuple(
            sorted(
                (k, op, tuple(sorted(rng.choices(values, k=rng.randint(1, 3)))))
                for k, op in (
                    (rng.choice(keys), rng.choice(operators)) for _ in range(rng.randint(0, 2))
                )
            )
        )
        selector: SelectorKey = (match, expressions)
        namespaces = rng.sample([*spaces, "c"], rng.randint(1, 3))
        assert _selected(index, namespaces, selector) == _naive_selected(
            pending, namespaces, selector
        )
