"""Domain-count arithmetic of ``topologySpreadConstraints`` as Karpenter applies it.

Karpenter (``topologygroup.go``) admits a pod into domain ``d`` when
``count[d] + self - globalMin <= maxSkew``, where ``globalMin`` is the smallest count over the
eligible domains (missing counts are zero), forced to zero when fewer than ``minDomains``
domains are eligible, and always zero for the hostname key (a new node is a new, empty domain).
Among the admissible domains the one with the fewest pods wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["global_min", "pick_domain", "skew_allows"]


def global_min(
    counts: Mapping[str, int],
    eligible_domains: Iterable[str],
    *,
    min_domains: int | None = None,
    is_hostname: bool = False,
) -> int:
    """The minimum matching-pod count over ``eligible_domains`` (Karpenter's ``domainMinCount``).

    Zero for hostname spreads, when there are no eligible domains, or when fewer than
    ``min_domains`` are eligible.
    """
    eligible = set(eligible_domains)
    if is_hostname or not eligible:
        return 0
    if min_domains is not None and len(eligible) < min_domains:
        return 0
    return min(counts.get(domain, 0) for domain in eligible)


def skew_allows(
    counts: Mapping[str, int],
    domain: str,
    max_skew: int,
    *,
    eligible_domains: Iterable[str],
    min_domains: int | None = None,
    is_hostname: bool = False,
    self_selecting: bool = True,
) -> bool:
    """Whether placing one more pod in ``domain`` keeps the skew within ``max_skew``.

    Args:
        counts: matching pods per domain (missing = 0).
        domain: the candidate domain.
        max_skew: the constraint's ``maxSkew``.
        eligible_domains: the domains the pod could be placed in (its node requirements and
            the pools' domains); the global minimum is taken over these.
        min_domains: the constraint's ``minDomains``.
        is_hostname: whether the topology key is ``kubernetes.io/hostname``.
        self_selecting: whether the pod matches its own label selector (then it counts).
    """
    minimum = global_min(counts, eligible_domains, min_domains=min_domains, is_hostname=is_hostname)
    count = counts.get(domain, 0) + (1 if self_selecting else 0)
    return count - minimum <= max_skew


def pick_domain(
    counts: Mapping[str, int],
    candidates: Iterable[str],
    max_skew: int,
    *,
    eligible_domains: Iterable[str],
    min_domains: int | None = None,
    is_hostname: bool = False,
    self_selecting: bool = True,
) -> str | None:
    """The admissible candidate domain with the fewest pods (ties by name), or None."""
    minimum = global_min(counts, eligible_domains, min_domains=min_domains, is_hostname=is_hostname)
    extra = 1 if self_selecting else 0
    admissible = [
        domain for domain in candidates if counts.get(domain, 0) + extra - minimum <= max_skew
    ]
    if not admissible:
        return None
    return min(admissible, key=lambda domain: (counts.get(domain, 0), domain))
