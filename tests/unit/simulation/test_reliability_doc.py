"""``docs/reliability.md`` as the soak writes it: every fault with its count, every invariant
with its result, machine and date, and the wall-time target."""

from __future__ import annotations

from provisioner.simulation.chaos import FAULTS, SoakResult, render_reliability
from provisioner.simulation.invariants import INVARIANTS, Violation


def result(**changes: object) -> SoakResult:
    base = SoakResult(
        seed=4,
        hours=1.0,
        faults={kind: index + 1 for index, kind in enumerate(FAULTS)},
        planned={kind: index + 2 for index, kind in enumerate(FAULTS)},
        checks=60,
        violations=[],
        counts=dict.fromkeys(INVARIANTS, 0),
        pods=900,
        node_claims=30,
        instances=29,
        restarts=3,
        wall_seconds=30.0,
    )
    for key, value in changes.items():
        setattr(base, key, value)
    return base


def test_every_fault_and_invariant_is_listed_with_machine_and_date() -> None:
    text = render_reliability(result(), machine="x86_64, 2 CPU(s)", date="2026-11-26 07:00 UTC")
    assert "- Machine: x86_64, 2 CPU(s)" in text
    assert "- Date: 2026-11-26 07:00 UTC" in text
    assert "**PASS**" in text
    for index, kind in enumerate(FAULTS):
        assert f"| `{kind}` | {FAULTS[kind][0]} | {index + 2} | {index + 1} |" in text
    for name in INVARIANTS:
        assert f"(`{name}`) | 0 | holds |" in text
    assert "12 min extrapolated from this 1 virtual hour run (x24): does not hold" in text


def test_a_violation_fails_the_result_and_is_listed() -> None:
    violation = Violation(
        invariant="duplicateLaunches", at=120, subject="general-x", detail="2 instances"
    )
    counts = dict.fromkeys(INVARIANTS, 0) | {"duplicateLaunches": 1}
    failed = result(violations=[violation], counts=counts, hours=24.0, wall_seconds=500.0)
    assert not failed.passed
    text = render_reliability(failed, machine="m", date="d")
    assert "**FAIL**" in text
    assert "(`duplicateLaunches`) | 1 | FAILS |" in text
    assert "- 120s `duplicateLaunches` general-x: 2 instances" in text
    assert "8.3 min measured: holds" in text
