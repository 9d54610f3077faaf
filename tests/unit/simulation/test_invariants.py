"""The chaos soak's invariant checker on hand-made timelines: each invariant holds on a clean
timeline and is reported (once) on one that breaks it."""

from __future__ import annotations

from provisioner.simulation.invariants import (
    GANG_GRACE_SECONDS,
    INVARIANTS,
    ORPHAN_GRACE_SECONDS,
    PENDING_GRACE_SECONDS,
    Claim,
    Eviction,
    Gang,
    Instance,
    InvariantChecker,
    Observation,
    PendingPod,
    Pool,
)

CLAIM = Claim(name="general-abcde", node_pool="general", capacity={"cpu": 4000})


def run(*observations: Observation) -> InvariantChecker:
    checker = InvariantChecker()
    for observation in observations:
        checker.observe(observation)
    return checker


def broken(checker: InvariantChecker) -> dict[str, int]:
    return {name: count for name, count in checker.counts().items() if count}


def test_a_clean_timeline_breaks_nothing_and_every_invariant_is_counted() -> None:
    checker = run(
        Observation(
            at=0,
            instances=(Instance(instance_id="i-1", node_claim=CLAIM.name),),
            launches={CLAIM.name: ("i-1",)},
            claims=(CLAIM,),
            pools=(Pool(name="general", limits={"cpu": 4000}),),
            pending=(PendingPod(key="web/a", created_at=0, has_reason=False),),
            gangs=(Gang(key="research/pg", min_member=4, bound=4),),
            evictions=(Eviction(at=0, pod="web/b"),),
        ),
        Observation(at=600, pending=(PendingPod(key="web/a", created_at=0, has_reason=True),)),
    )
    assert checker.counts() == dict.fromkeys(INVARIANTS, 0)
    assert checker.observations == 2


def test_an_instance_without_its_nodeclaim_is_an_orphan_after_the_grace_only() -> None:
    orphan = Instance(instance_id="i-9", node_claim="general-gone")
    checker = InvariantChecker()
    assert checker.observe(Observation(at=100, instances=(orphan,))) == []
    assert (
        checker.observe(Observation(at=100 + ORPHAN_GRACE_SECONDS - 1, instances=(orphan,))) == []
    )
    found = checker.observe(Observation(at=100 + ORPHAN_GRACE_SECONDS, instances=(orphan,)))
    assert [v.invariant for v in found] == ["orphanInstances"]
    assert found[0].subject == "i-9"
    # Reported once, however long it stays.
    assert checker.observe(Observation(at=2000, instances=(orphan,))) == []


def test_an_orphan_terminated_in_time_is_not_reported() -> None:
    orphan = Instance(instance_id="i-9", node_claim="")
    checker = run(
        Observation(at=0, instances=(orphan,)),
        Observation(at=120),
        Observation(at=200, instances=(orphan,)),
        Observation(at=200 + ORPHAN_GRACE_SECONDS - 1, instances=(orphan,)),
    )
    assert broken(checker) == {}


def test_two_instances_for_one_nodeclaim_are_a_duplicate_launch() -> None:
    checker = run(Observation(at=5, launches={CLAIM.name: ("i-1", "i-2"), "other": ("i-3",)}))
    assert broken(checker) == {"duplicateLaunches": 1}
    assert "i-1, i-2" in checker.violations[0].detail


def test_evicting_a_do_not_disrupt_pod_or_below_a_pdb_is_reported() -> None:
    checker = run(
        Observation(
            at=10,
            evictions=(
                Eviction(at=9, pod="finance/ledger-1", protected=True),
                Eviction(at=9, pod="web/api-1", short_pdbs=("web/api",)),
            ),
        )
    )
    assert broken(checker) == {"protectedPodEvictions": 1, "pdbViolations": 1}


def test_a_gang_partly_bound_past_the_grace_is_partial_unless_disturbed() -> None:
    partial = Gang(key="research/pg", min_member=4, bound=2)
    disturbed = Gang(key="research/pg2", min_member=4, bound=1, disturbed=True)
    checker = run(
        Observation(at=0, gangs=(partial, disturbed)),
        Observation(at=GANG_GRACE_SECONDS, gangs=(partial, disturbed)),
    )
    assert broken(checker) == {"partialGangs": 1}
    assert checker.violations[0].subject == "research/pg"


def test_a_gang_that_fills_up_within_the_grace_is_fine() -> None:
    checker = run(
        Observation(at=0, gangs=(Gang(key="g", min_member=4, bound=2),)),
        Observation(at=60, gangs=(Gang(key="g", min_member=4, bound=4),)),
        Observation(at=60 + GANG_GRACE_SECONDS, gangs=(Gang(key="g", min_member=4, bound=4),)),
    )
    assert broken(checker) == {}


def test_nodeclaims_above_a_nodepool_limit_are_reported() -> None:
    claims = (CLAIM, Claim(name="general-fghij", node_pool="general", capacity={"cpu": 2000}))
    pools = (Pool(name="general", limits={"cpu": 5000}), Pool(name="gpu", limits={"cpu": 1}))
    checker = run(Observation(at=0, claims=claims, pools=pools))
    assert broken(checker) == {"nodePoolLimits": 1}
    assert checker.violations[0].subject == "general/cpu"


def test_a_pod_pending_without_a_reason_counts_from_when_capacity_returned() -> None:
    pod = PendingPod(key="web/a", created_at=0, has_reason=False)
    during_outage = Observation(at=1000, pending=(pod,), capacity_since=900)
    assert broken(run(during_outage)) == {}
    late = Observation(at=900 + PENDING_GRACE_SECONDS + 1, pending=(pod,), capacity_since=900)
    checker = run(late)
    assert broken(checker) == {"pendingPods": 1}
    assert checker.violations[0].subject == "web/a"
