"""The scheduling simulation behind disruption decisions."""

from __future__ import annotations

from typing import Any

from provisioner.controllers.disruption.facts import ClusterFacts
from provisioner.controllers.disruption.rescheduling import simulate
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
