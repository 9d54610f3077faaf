"""The scheduling simulation behind disruption decisions."""

from __future__ import annotations

import dataclasses
from typing import Any

from provisioner.controllers.disruption import rescheduling
from provisioner.controllers.disruption.facts import ClusterFacts
from provisioner.controllers.disruption.rescheduling import Simulation, simulate
from provisioner.controllers.provisioning.controller import build_view
from provisioner.controllers.provisioning.plan import NodeClaimPlan, Plan
from provisioner.controllers.provisioning.planner import (
    NewCapacityLimit,
    PlannerConfig,
    plan,
    plan_moves,
)
from solver import cpsat
from solver.config import SolverConfig
from tests.unit.controllers.disruption.objects import (
    GREEDY,
    catalog_of,
    claim,
    facts_of,
    node,
    pod,
    running,
)
from tests.unit.controllers.disruption.world import nodepool


def two_nodes(
    *, b_initialized: bool = True, extra: list[dict[str, Any]] | None = None
) -> ClusterFacts:
    objects = [
        claim("a"),
        node("a"),
        claim("b", initialized=b_initialized),
        node("b", labels={} if b_initialized else {"karpenter.sh/initialized": "false"}),
        running(pod("web-1"), "node-a"),
        running(pod("web-2"), "node-a"),
        *(extra or []),
    ]
    return facts_of(objects)


def test_pods_that_fit_on_the_other_node_need_no_replacement():
    facts = two_nodes()
    result = simulate(facts, catalog_of(facts), [facts.nodes["a"]], planner=GREEDY)
    assert result.ok
    assert set(result.displaced) == {"default/web-1", "default/web-2"}
    assert result.new_claims == ()


def test_uninitialized_capacity_is_not_used():
    facts = two_nodes(b_initialized=False)
    result = simulate(facts, catalog_of(facts), [facts.nodes["a"]], planner=GREEDY)
    assert result.ok
    assert len(result.new_claims) == 1  # node-b is fenced off


def test_a_pod_that_cannot_move_fails_the_simulation():
    pinned = pod("pinned", nodeSelector={"kubernetes.io/hostname": "node-a"})
    facts = two_nodes(extra=[running(pinned, "node-a")])
    result = simulate(facts, catalog_of(facts), [facts.nodes["a"]], planner=GREEDY)
    assert not result.ok
    assert result.failure is not None
    assert "default/pinned" in result.failure


def test_daemonset_pods_do_not_move():
    ds = pod("agent")
    ds["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "x"}
    ]
    facts = two_nodes(extra=[running(ds, "node-a")])
    result = simulate(facts, catalog_of(facts), [facts.nodes["a"]], planner=GREEDY)
    assert "default/agent" not in result.displaced


def test_leaving_nodes_are_not_a_destination():
    facts = two_nodes()
    result = simulate(facts, catalog_of(facts), [facts.nodes["a"]], planner=GREEDY, leaving={"b"})
    assert result.ok
    assert len(result.new_claims) == 1


def _prefers_zone_b() -> ClusterFacts:
    # zone-b costs 1 % more: only the pod's preference sends its replacement there
    preferring = pod("picky", cpu="3")
    preferring["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {
                        "matchExpressions": [
                            {
                                "key": "topology.kubernetes.io/zone",
                                "operator": "In",
                                "values": ["zone-b"],
                            }
                        ]
                    },
                }
            ]
        }
    }
    return facts_of([claim("a"), node("a"), running(preferring, "node-a")])


def test_a_simulation_honours_preferences_unless_the_preference_policy_ignores_them():
    facts = _prefers_zone_b()
    for ignore, zone in ((False, "zone-b"), (True, "zone-a")):
        planner = dataclasses.replace(GREEDY, ignore_preferences=ignore)
        result = simulate(facts, catalog_of(facts), [facts.nodes["a"]], planner=planner)
        assert result.ok
        assert [c.zone for c in result.new_claims] == [zone], ignore


def _flavored_pod() -> dict[str, Any]:
    return running(pod("llama-0", labels={"llmaz.io/model-name": "llama"}), "node-a")


def _flavor_facts(*, downgrade: bool, on: str = "c.xlarge") -> ClusterFacts:
    """A model pod on an ``on`` node; flavor "big" (c.xlarge) comes before the cheaper "small"
    (c.large)."""
    pool = nodepool()
    if downgrade:
        pool["metadata"]["annotations"] = {"jointer.dev/flavor-downgrade": "allowed"}
    model = {
        "apiVersion": "llmaz.io/v1alpha1",
        "kind": "OpenModel",
        "metadata": {"name": "llama"},
        "spec": {
            "inferenceConfig": {
                "flavors": [
                    {"name": name, "nodeSelector": {"node.kubernetes.io/instance-type": it}}
                    for name, it in (("big", "c.xlarge"), ("small", "c.large"))
                ]
            }
        },
    }
    labels = {"node.kubernetes.io/instance-type": on}
    return facts_of(
        [pool, model, claim("a", instance_type=on), node("a", labels=labels), _flavored_pod()]
    )


def test_a_model_pod_is_not_moved_to_a_later_flavor_unless_its_nodepool_allows_it():
    facts = _flavor_facts(downgrade=False)
    result = simulate(facts, catalog_of(facts), [facts.nodes["a"]], planner=GREEDY)
    assert result.ok
    [replacement] = result.new_claims
    assert replacement.instance_types == ("c.xlarge",)  # its flavor; never the cheaper "small"

    facts = _flavor_facts(downgrade=True)
    result = simulate(facts, catalog_of(facts), [facts.nodes["a"]], planner=GREEDY)
    [replacement] = result.new_claims
    assert replacement.instance_type == "c.large"


def test_a_drift_replacement_gives_a_model_pod_its_first_usable_flavor():
    facts = _flavor_facts(downgrade=False, on="c.large")  # placed on "small" during an outage
    catalog = catalog_of(facts)
    consolidating = simulate(facts, catalog, [facts.nodes["a"]], planner=GREEDY)
    [replacement] = consolidating.new_claims
    assert replacement.instance_type == "c.large"  # its flavor or a better one: the cheapest
    drifting = simulate(facts, catalog, [facts.nodes["a"]], planner=GREEDY, keep_flavor=False)
    [replacement] = drifting.new_claims
    assert replacement.instance_types == ("c.xlarge",)  # "big" first, as for a new pod


# --- what the optimiser's simulations keep (``plan_moves``) ---------------------------------

JOINTER = PlannerConfig(num_workers=1, deterministic_time=0.5, time_limit_seconds=5.0)


def _full_b() -> list[dict[str, Any]]:
    """Node b holds 3.5 of its 3.9 CPUs: node a's pods must go to new capacity."""
    return [running(pod(f"busy-{i}", cpu="875m"), "node-b") for i in range(4)]


def test_pods_that_fit_on_existing_nodes_end_the_search_at_the_greedy_plan(monkeypatch):
    def no_search(*args: object, **kwargs: object) -> object:
        raise AssertionError("the optimiser ran past the greedy plans")

    monkeypatch.setattr(cpsat, "_solve_tier", no_search)
    facts = two_nodes()
    result = simulate(
        facts, catalog_of(facts), [facts.nodes["a"]], planner=JOINTER, one_replacement=True
    )
    assert result.ok
    assert result.new_claims == ()


def test_plan_moves_returns_the_optimisers_plan_then_the_greedy_ones():
    facts = two_nodes(extra=_full_b())
    view = build_view(facts.snapshot, catalog_of(facts).templates(), region="")
    moving = {"default/busy-0"}
    plans = plan_moves(view, JOINTER, moving)
    assert len(plans) == 1  # nothing pending, nothing moves: the empty plan ends it
    assert plans[0].node_claims == ()


def test_simulations_keep_no_minimum_search_and_a_dry_run_keeps_the_solvers(monkeypatch):
    # a disruption pass runs many simulations, each on its own budget; the minimum search is
    # for a dry run whose problem took its budget to build
    configs: list[SolverConfig] = []
    real = cpsat.solve_with_greedy

    def kept(problem: Any, config: SolverConfig, **kwargs: Any) -> cpsat.Solved:
        configs.append(config)
        return real(problem, config, **kwargs)

    monkeypatch.setattr(cpsat, "solve_with_greedy", kept)
    facts = two_nodes(extra=[*_full_b(), pod("waiting", cpu="3")])
    view = build_view(facts.snapshot, catalog_of(facts).templates(), region="")
    plan_moves(view, JOINTER, {"default/busy-0"})
    plan(view, JOINTER)
    assert [c.min_search_seconds for c in configs] == [0.0, SolverConfig().min_search_seconds]
    assert SolverConfig().min_search_seconds > 0


def _claim_plan(name: str, pods: tuple[str, ...], price: float) -> NodeClaimPlan:
    return NodeClaimPlan(
        name=name,
        node_pool="default",
        instance_types=("c.large",),
        instance_type="c.large",
        capacity_type="on-demand",
        zone="zone-a",
        price_per_hour=price,
        requests={},
        pods=pods,
    )


def test_a_consolidation_keeps_the_single_node_plan_over_a_cheaper_split(monkeypatch):
    split = Plan(
        node_claims=(
            _claim_plan("x", ("default/web-1",), 0.03),
            _claim_plan("y", ("default/web-2",), 0.03),
        )
    )
    single = Plan(node_claims=(_claim_plan("z", ("default/web-1", "default/web-2"), 0.085),))
    monkeypatch.setattr(rescheduling, "plan_moves", lambda *a, **k: (split, single))
    facts = two_nodes(extra=_full_b())
    nodes = [facts.nodes["a"]]
    judged = simulate(facts, catalog_of(facts), nodes, planner=JOINTER, one_replacement=True)
    assert [c.name for c in judged.new_claims] == ["z"]
    plain = simulate(facts, catalog_of(facts), nodes, planner=JOINTER)
    assert [c.name for c in plain.new_claims] == ["x", "y"]  # drift: the optimiser's plan


def test_the_consolidation_order_prefers_moving_every_pod_then_fewer_nodes_then_price():
    ok0 = Simulation(displaced={})
    ok1 = Simulation(displaced={}, new_claims=(_claim_plan("a", (), 0.5),))
    cheap1 = Simulation(displaced={}, new_claims=(_claim_plan("b", (), 0.1),))
    two = Simulation(
        displaced={}, new_claims=(_claim_plan("c", (), 0.01), _claim_plan("d", (), 0.01))
    )
    failed = Simulation(displaced={}, failure="no")
    ranked = sorted([failed, two, ok1, cheap1, ok0], key=rescheduling._for_consolidation)
    assert ranked == [ok0, cheap1, ok1, two, failed]


def test_a_limit_keeps_moving_pods_off_capacity_no_replacement_could_use():
    facts = two_nodes(extra=_full_b())
    catalog = catalog_of(facts)
    nodes = [facts.nodes["a"]]
    # the pool plans spot (c.large: 0.0283/h in zone-a): admitted below 0.03, not below 0.028
    cheaper = NewCapacityLimit(below_per_hour=0.03, reason="no cheaper node")
    result = simulate(facts, catalog, nodes, planner=JOINTER, one_replacement=True, limit=cheaper)
    assert result.ok
    (new,) = result.new_claims
    assert new.price_per_hour < 0.03
    for limit in (
        NewCapacityLimit(below_per_hour=0.028, reason="no cheaper node"),
        NewCapacityLimit(below_per_hour=1.0, spot=False, reason="no cheaper node"),
    ):
        result = simulate(facts, catalog, nodes, planner=JOINTER, one_replacement=True, limit=limit)
        assert result.failure == "no cheaper node"
    unlimited = simulate(facts, catalog, nodes, planner=JOINTER, one_replacement=True)
    assert unlimited.ok
    assert unlimited.new_claims


def test_a_limit_leaves_pending_pods_of_the_same_shape_their_offerings():
    none = NewCapacityLimit(below_per_hour=0.0, reason="no cheaper node")
    facts = two_nodes(extra=_full_b())
    nodes = [facts.nodes["a"]]
    alone = simulate(facts, catalog_of(facts), nodes, planner=JOINTER, limit=none)
    assert alone.failure == "no cheaper node"
    waiting = pod("web-3")  # pending, in the moving web pods' class: the class keeps its offerings
    facts = two_nodes(extra=[*_full_b(), waiting])
    shared = simulate(facts, catalog_of(facts), [facts.nodes["a"]], planner=JOINTER, limit=none)
    assert shared.ok
    assert shared.new_claims


def _counting_search(monkeypatch: Any) -> list[int]:
    runs: list[int] = []
    search = cpsat._solve_tier

    def counted(*args: Any, **kwargs: Any) -> Any:
        runs.append(1)
        return search(*args, **kwargs)

    monkeypatch.setattr(cpsat, "_solve_tier", counted)
    return runs


def test_moving_pods_asking_for_more_than_the_other_nodes_have_left_end_at_the_greedy_plan(
    monkeypatch,
):
    runs = _counting_search(monkeypatch)
    none = NewCapacityLimit(below_per_hour=0.0, reason="no cheaper node")
    facts = two_nodes(extra=_full_b())  # 1 CPU moves, node b has 0.4 left
    nodes = [facts.nodes["a"]]
    result = simulate(facts, catalog_of(facts), nodes, planner=JOINTER, limit=none)
    assert result.failure == "no cheaper node"
    assert runs == []


def test_moving_pods_that_fit_the_other_nodes_room_in_total_are_still_searched(monkeypatch):
    runs = _counting_search(monkeypatch)
    none = NewCapacityLimit(below_per_hour=0.0, reason="no cheaper node")
    # three 0.5-CPU pods move; nodes b and c have 0.75 CPU left each: 1.5 in total, yet
    # each holds one of them
    busy = [
        running(pod(f"busy-{name}-{i}", cpu="1050m"), f"node-{name}")
        for name in ("b", "c")
        for i in range(3)
    ]
    moving = [running(pod(f"m-{i}"), "node-a") for i in range(3)]
    objects = [claim("a"), node("a"), claim("b"), node("b"), claim("c"), node("c")]
    facts = facts_of([*objects, *moving, *busy])
    result = simulate(facts, catalog_of(facts), [facts.nodes["a"]], planner=JOINTER, limit=none)
    assert result.failure == "no cheaper node"
    assert runs
