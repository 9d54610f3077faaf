"""The polish's first pass runs to its own deadline; the passes after it stop at the budget."""

import time
from collections import Counter

import pytest

from solver import improve as polish
from solver.greedy import cost_aware_ffd, karpenter_ffd
from solver.improve import improve
from solver.validate import violations
from tests.unit.solver.synthetic import diverse


def _counting(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    calls: Counter[str] = Counter()
    for cls, name in ((polish._Shed, "shed"), (polish._Swaps, "swap"), (polish._Domain, "empty")):
        method = "run" if name != "empty" else "empty"
        real = getattr(cls, method)

        def counted(self: object, i: int, _real=real, _name=name) -> bool:
            calls[_name] += 1
            return bool(_real(self, i))

        monkeypatch.setattr(cls, method, counted)
    return calls


def test_past_the_deadline_only_the_first_pass_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    p = diverse(200)
    karpenter = karpenter_ffd(p)
    calls = _counting(monkeypatch)
    gone, later = time.monotonic() - 1, time.monotonic() + 60
    # no first pass of its own: nothing runs past the deadline
    assert improve(p, karpenter, deadline=gone, shed_first=True) is karpenter
    assert sum(calls.values()) == 0
    first = improve(p, karpenter, deadline=gone, shed_first=True, first_pass_until=later)
    assert calls["shed"] > 0
    assert calls["swap"] == calls["empty"] == 0
    assert violations(p, first) == []
    assert first.cost_micros < karpenter.cost_micros
    # the whole polish goes on from where the first pass stopped
    assert improve(p, karpenter, shed_first=True).cost_micros <= first.cost_micros


def test_the_first_pass_of_a_plan_not_of_full_bins_empties_bins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    p = diverse(200)
    plan = cost_aware_ffd(p)
    calls = _counting(monkeypatch)
    gone, later = time.monotonic() - 1, time.monotonic() + 60
    improve(p, plan, deadline=gone, first_pass_until=later)
    assert calls["empty"] > 0
    assert calls["shed"] == calls["swap"] == 0
