"""Hypothesis strategies shared by the test suite (add new ones at the end, grouped by package)."""

from __future__ import annotations

from hypothesis import strategies as st

from provisioner.scheduling.requirements import Requirement, Requirements

# --- provisioner.scheduling -------------------------------------------------------------------

LABEL_KEYS = ("zone", "arch", "team")
# Small value pools make collisions (and so interesting intersections) likely; integer-looking
# values, including a non-canonical "05", exercise the Gt/Lt bounds.
LABEL_VALUES = ("a", "b", "c", "1", "2", "3", "05", "-1", "10")
RESOURCE_NAMES = ("cpu", "memory", "pods", "nvidia.com/gpu", "ephemeral-storage")

label_keys = st.sampled_from(LABEL_KEYS)
label_values = st.sampled_from(LABEL_VALUES)
bounds = st.integers(min_value=-2, max_value=11)
min_values = st.none() | st.integers(min_value=1, max_value=3)


@st.composite
def requirements_for(draw: st.DrawFn, key: str) -> Requirement:
    """A requirement on ``key`` built through `Requirement.from_operator`, any operator."""
    operator = draw(
        st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"])
    )
    if operator in {"In", "NotIn"}:
        low = 1 if operator == "In" else 0
        values: list[str] = draw(st.lists(label_values, min_size=low, max_size=3, unique=True))
    elif operator in {"Exists", "DoesNotExist"}:
        values = []
    else:
        values = [str(draw(bounds))]
    return Requirement.from_operator(key, operator, values, draw(min_values))


def requirements(key: str = "zone") -> st.SearchStrategy[Requirement]:
    """Requirements on one key, including intersections of up to three of them."""
    single = requirements_for(key)
    return single | st.lists(single, min_size=2, max_size=3).map(
        lambda parts: Requirements(parts)[key]
    )


requirement_sets = st.lists(label_keys.flatmap(requirements), max_size=4).map(Requirements)
label_sets = st.dictionaries(label_keys, label_values, max_size=3)


def resource_lists(
    *, min_value: int = 0, max_value: int = 10**12
) -> st.SearchStrategy[dict[str, int]]:
    """Resource lists in milli-units over a few common resource names."""
    return st.dictionaries(
        st.sampled_from(RESOURCE_NAMES),
        st.integers(min_value=min_value, max_value=max_value),
        max_size=len(RESOURCE_NAMES),
    )
