"""Progress bars on standard error (rich): `simulate` over virtual time, `plan` by stage.

Shown only on a terminal and without ``--quiet`` (:func:`wanted`); the bars never write to
standard output, so JSON output stays clean.
"""

from __future__ import annotations

from typing import Any, Final, TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

__all__ = ["LARGE_PLAN_PODS", "PlanProgress", "SimulationProgress", "wanted"]

LARGE_PLAN_PODS: Final = 200
"""`jointer plan` shows its stages from this many pods on."""


def wanted(stream: TextIO, *, quiet: bool) -> bool:
    """Whether to draw a bar on ``stream``: not quiet and a terminal."""
    if quiet:
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600:d}h{whole % 3600 // 60:02d}m{whole % 60:02d}s"


def _console(stream: TextIO) -> Console:
    return Console(file=stream, force_terminal=True, highlight=False, soft_wrap=False)


class SimulationProgress:
    """A bar over a run's virtual time: clock, pending pods, nodes by capacity type, cost.

    Args:
        stream: a terminal (standard error).
        label: what runs (``scenario / policy``).
        duration: virtual seconds to the end.
    """

    def __init__(self, stream: TextIO, *, label: str, duration: float) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[clock]}"),
            TextColumn("{task.fields[detail]}"),
            console=_console(stream),
            auto_refresh=False,
        )
        self._task: TaskID = self._progress.add_task(
            label, total=max(duration, 1.0), clock=_clock(0), detail=""
        )
        self._progress.start()

    def __call__(self, snapshot: Any) -> None:
        """Show one snapshot of the run (a `provisioner.simulation.runner.Progress`)."""
        nodes = " ".join(f"{kind} {count}" for kind, count in snapshot.nodes.items()) or "none"
        self._progress.update(
            self._task,
            completed=snapshot.at,
            clock=_clock(snapshot.at),
            detail=f"pending {snapshot.pending_pods}  nodes {nodes}  ${snapshot.cost:,.2f}",
        )
        self._progress.refresh()

    def finish(self) -> None:
        """Leave the bar at its last state and end the line."""
        self._progress.stop()


class PlanProgress:
    """`jointer plan`'s stages as a bar, drawn once the input proves large.

    Args:
        stream: a terminal (standard error).
        threshold: the fewest pods worth a bar.
    """

    STAGES: Final = ("building the cluster state", "resolving NodePools", "planning", "done")

    def __init__(self, stream: TextIO, *, threshold: int = LARGE_PLAN_PODS) -> None:
        self._stream = stream
        self._threshold = threshold
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def __call__(self, stage: str, pods: int) -> None:
        """Enter ``stage`` (one of :attr:`STAGES`) of planning ``pods`` pods."""
        if self._progress is None:
            if pods < self._threshold:
                return
            self._progress = Progress(
                TextColumn("plan {task.fields[pods]} pods"),
                BarColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=_console(self._stream),
                auto_refresh=True,
                refresh_per_second=4,
            )
            self._task = self._progress.add_task(stage, total=len(self.STAGES) - 1, pods=pods)
            self._progress.start()
        assert self._task is not None  # noqa: S101 - set with the bar
        index = self.STAGES.index(stage) if stage in self.STAGES else 0
        self._progress.update(self._task, completed=index, description=stage)
        self._progress.refresh()

    def finish(self) -> None:
        """Stop the bar (if one was drawn)."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
