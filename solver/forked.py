"""Run a pure function in a forked child on the other core while this process goes on.

The planner's greedy phase makes independent plans (Karpenter's first-fit-decreasing, the
cost-aware one) and a lower bound, each from the same problem. On two cores one of them can
be computed in a child process forked from this one: the child shares the problem (copy on
write, nothing to send), computes, and sends its answer back pickled. The answer is the
same as calling the function here; only the time differs.

A fork is only made where it is safe and worth it (``fork_allowed``): POSIX, one Python
thread (a lock another thread holds would stay held in the child: the controller's
informers, the API clients), and the caller's own judgement of the work's size. When the
child fails or runs past its deadline the caller computes the answer itself.
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import signal
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar, cast

T = TypeVar("T")


def fork_allowed() -> bool:
    """Return whether this process may fork a worker: POSIX and only one Python thread."""
    return hasattr(os, "fork") and threading.active_count() == 1


class Forked(Generic[T]):
    """A function running in a forked child; ``result`` waits for its answer."""

    def __init__(self, pid: int, readable: int) -> None:
        self._pid, self._readable = pid, readable

    @classmethod
    def start(cls, fn: Callable[[], T]) -> Forked[T] | None:
        """Fork a child that computes ``fn()``; None when the fork fails."""
        readable, writable = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(readable)
            os.close(writable)
            return None
        if pid == 0:  # pragma: no cover - the child process (its answer is checked by the parent)
            status = 1
            try:
                # a short life: collecting would only copy the parent's pages it touches
                gc.disable()
                os.close(readable)
                try:
                    answer: tuple[bool, object] = (True, fn())
                except Exception as error:  # noqa: BLE001 - sent to the parent, which raises it
                    answer = (False, error)
                data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
                with os.fdopen(writable, "wb") as out:
                    out.write(data)
                status = 0
            finally:
                os._exit(status)
        os.close(writable)
        return cls(pid, readable)

    def result(self, deadline: float | None) -> tuple[bool, T | None]:
        """Return ``(True, answer)``, or ``(False, None)`` when the child failed or is late.

        Waits until ``deadline`` (a ``time.monotonic()`` value; None: as long as it takes) at
        most; a late child is killed. An exception the child raised is raised here.
        """
        chunks: list[bytes] = []
        done = False
        try:
            while True:
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    break
                if not select.select([self._readable], [], [], wait)[0]:
                    break
                chunk = os.read(self._readable, 1 << 20)
                if not chunk:
                    done = True
                    break
                chunks.append(chunk)
        finally:
            os.close(self._readable)
            if not done:
                os.kill(self._pid, signal.SIGKILL)
            _, status = os.waitpid(self._pid, 0)
        if not done or status != 0:
            return False, None
        ok, answer = pickle.loads(b"".join(chunks))  # noqa: S301 - our own child's output
        if not ok:
            raise cast("Exception", answer)
        return True, cast("T", answer)
