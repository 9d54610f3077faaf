"""JobSet (``pod-groups.md`` §6, row 9): one group per replicated job.

The gang size is the Job's ``parallelism`` times ``replicatedjob-replicas``. ``parallelism`` comes
from the JobSet's replicated-job template, else from the pod's Job, else defaults to 1 (what
Kubernetes defaults it to); the replica count is on every pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from pydantic import Field

from provisioner.apis.base import LenientModel
from provisioner.apis.core import ObjectMeta, Pod
from provisioner.podgroups import keys
from provisioner.podgroups.model import Ecosystem, PodGroupRef

__all__ = ["Job", "JobSet", "detect", "jobset_key", "size", "suspended_reason"]

API_GROUP: Final = "jobset.x-k8s.io"


class JobSpec(LenientModel):
    """``parallelism`` (default 1) and ``suspend``."""

    parallelism: int | None = None
    suspend: bool | None = None


class JobTemplate(LenientModel):
    """A Job template."""

    spec: JobSpec = Field(default_factory=JobSpec)


class ReplicatedJob(LenientModel):
    """``spec.replicatedJobs[] {name, replicas, template}``."""

    name: str = ""
    replicas: int = 1
    template: JobTemplate = Field(default_factory=JobTemplate)


class JobSetSpec(LenientModel):
    """Replicated jobs and ``suspend``."""

    replicated_jobs: tuple[ReplicatedJob, ...] = ()
    suspend: bool | None = None


class JobSet(LenientModel):
    """A ``jobset.x-k8s.io/v1alpha2`` JobSet."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: JobSetSpec = Field(default_factory=JobSetSpec)


class Job(LenientModel):
    """A ``batch/v1`` Job (only ``parallelism`` and ``suspend`` are read)."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: JobSpec = Field(default_factory=JobSpec)


def _value(pod: Pod, key: str) -> str:
    return pod.metadata.labels.get(key) or pod.metadata.annotations.get(key) or ""


def jobset_key(pod: Pod) -> str | None:
    """``namespace/<jobset-name>`` of a JobSet pod."""
    name = _value(pod, keys.JOBSET_NAME)
    return f"{pod.metadata.namespace or 'default'}/{name}" if name else None


def detect(pod: Pod) -> PodGroupRef | None:
    """Row 9: ``jobset-name`` + ``replicatedjob-name`` + ``job-index`` (labels or annotations)."""
    name = _value(pod, keys.JOBSET_NAME)
    replicated = _value(pod, keys.JOBSET_REPLICATED_JOB_NAME)
    index = _value(pod, keys.JOBSET_JOB_INDEX)
    if not name or not replicated or not index:
        return None
    return PodGroupRef(
        ecosystem=Ecosystem.JOBSET,
        namespace=pod.metadata.namespace or "default",
        name=f"{name}-{replicated}",
        sub_group=index,
    )


def _parallelism(pod: Pod, jobset: JobSet | None, jobs: Mapping[str, Job]) -> int:
    replicated = _value(pod, keys.JOBSET_REPLICATED_JOB_NAME)
    if jobset is not None:
        for job in jobset.spec.replicated_jobs:
            if job.name == replicated and job.template.spec.parallelism is not None:
                return max(job.template.spec.parallelism, 0)
    namespace = pod.metadata.namespace or "default"
    for owner in pod.metadata.owner_references:
        owning = jobs.get(f"{namespace}/{owner.name}") if owner.kind == "Job" else None
        if owning is not None and owning.spec.parallelism is not None:
            return max(owning.spec.parallelism, 0)
    return 1


def _replicas(pod: Pod, jobset: JobSet | None) -> int:
    value = _value(pod, keys.JOBSET_REPLICATED_JOB_REPLICAS)
    try:
        return max(int(value.strip()), 0)
    except ValueError:
        pass
    replicated = _value(pod, keys.JOBSET_REPLICATED_JOB_NAME)
    if jobset is not None:
        for job in jobset.spec.replicated_jobs:
            if job.name == replicated:
                return job.replicas
    return 1


def size(pod: Pod, jobset: JobSet | None, jobs: Mapping[str, Job]) -> int | None:
    """``parallelism`` x ``replicatedjob-replicas`` of the pod's replicated job."""
    total = _parallelism(pod, jobset, jobs) * _replicas(pod, jobset)
    return total or None


def suspended_reason(jobset_name: str, jobset: JobSet | None) -> str | None:
    """A suspended JobSet is held back by its owner."""
    if jobset is not None and jobset.spec.suspend:
        return f"jobset {jobset_name} is suspended"
    return None
