from __future__ import annotations

from datetime import UTC, datetime, timedelta

from provisioner.apis.conditions import (
    CONDITION_READY,
    NODECLAIM_CONDITION_INITIALIZED,
    NODECLAIM_CONDITION_LAUNCHED,
    NODECLAIM_CONDITION_REGISTERED,
    NODECLAIM_READY_DEPENDENTS,
    NODEPOOL_READY_DEPENDENTS,
    REASON_AWAITING_RECONCILIATION,
    REASON_NODE_NOT_FOUND,
    clear_condition,
    get_condition,
    is_false,
    is_true,
    is_unknown,
    root_status,
    set_condition,
    set_false,
    set_root_condition,
    set_true,
    set_unknown,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(minutes=1)
T2 = T0 + timedelta(minutes=2)


def test_set_new_condition_stamps_now_and_default_reason():
    conditions = set_true((), NODECLAIM_CONDITION_LAUNCHED, now=T0, observed_generation=1)
    launched = get_condition(conditions, NODECLAIM_CONDITION_LAUNCHED)
    assert launched is not None
    assert launched.status == "True"
    assert launched.reason == "Launched"
    assert launched.last_transition_time == T0
    assert launched.observed_generation == 1
    assert is_true(conditions, "Launched")
    assert not is_false(conditions, "Launched")
    assert not is_unknown(conditions, "Launched")
    assert is_unknown(conditions, "Registered")
    assert get_condition(conditions, "Registered") is None


def test_transition_time_changes_only_when_status_changes():
    conditions = set_unknown((), "Registered", now=T0)
    assert get_condition(conditions, "Registered").reason == REASON_AWAITING_RECONCILIATION  # type: ignore[union-attr]
    same_status = set_unknown(
        conditions, "Registered", now=T1, reason=REASON_NODE_NOT_FOUND, message="node not found"
    )
    registered = get_condition(same_status, "Registered")
    assert registered is not None
    assert registered.reason == REASON_NODE_NOT_FOUND
    assert registered.message == "node not found"
    assert registered.last_transition_time == T0

    flipped = set_true(same_status, "Registered", now=T2, observed_generation=2)
    registered = get_condition(flipped, "Registered")
    assert registered is not None
    assert registered.last_transition_time == T2
    assert registered.observed_generation == 2
    assert registered.message == ""


def test_setting_an_identical_condition_returns_the_same_tuple():
    conditions = set_false((), "Drifted", now=T0, reason="NodePoolDrifted")
    assert set_false(conditions, "Drifted", now=T1, reason="NodePoolDrifted") is conditions
    assert clear_condition(conditions, "Other") is conditions


def test_set_preserves_order_and_clear_removes():
    conditions = set_true((), "A", now=T0)
    conditions = set_true(conditions, "B", now=T0)
    conditions = set_false(conditions, "A", now=T1, reason="Broken")
    assert [c.type for c in conditions] == ["A", "B"]
    assert [c.type for c in clear_condition(conditions, "A")] == ["B"]
    assert set_condition(conditions, "C", "Unknown", now=T0)[-1].type == "C"


def test_root_condition_follows_dependents():
    conditions = set_true((), NODECLAIM_CONDITION_LAUNCHED, now=T0)
    assert root_status(conditions, NODECLAIM_READY_DEPENDENTS) == "Unknown"
    conditions = set_root_condition(conditions, NODECLAIM_READY_DEPENDENTS, now=T0)
    ready = get_condition(conditions, CONDITION_READY)
    assert ready is not None
    assert ready.status == "Unknown"
    assert ready.message == "Registered=Unknown"

    conditions = set_false(
        conditions,
        NODECLAIM_CONDITION_INITIALIZED,
        now=T1,
        reason="NodeNotReady",
        message="node not ready",
    )
    conditions = set_root_condition(conditions, NODECLAIM_READY_DEPENDENTS, now=T1)
    ready = get_condition(conditions, CONDITION_READY)
    assert ready is not None
    assert (ready.status, ready.reason, ready.message) == (
        "False",
        "NodeNotReady",
        "Initialized=False, node not ready",
    )
    assert ready.last_transition_time == T1

    for dependent in (NODECLAIM_CONDITION_REGISTERED, NODECLAIM_CONDITION_INITIALIZED):
        conditions = set_true(conditions, dependent, now=T2)
    conditions = set_root_condition(conditions, NODECLAIM_READY_DEPENDENTS, now=T2)
    assert is_true(conditions, CONDITION_READY)
    assert root_status(conditions, NODECLAIM_READY_DEPENDENTS) == "True"


def test_nodepool_ready_dependents():
    assert NODEPOOL_READY_DEPENDENTS == ("ValidationSucceeded", "NodeClassReady")
