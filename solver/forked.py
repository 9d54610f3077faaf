"""Run a pure function in a forked child on the other core while this process goes on.

The planner's greedy phase makes independent plans (Karpenter's first-fit-decreasing, the
cost-aware one) and a lower bound, each from the same problem. On two cores one of them can
be computed in a child process forked from this one: the child shares the problem (copy on
write, nothing to send), computes, and sends back pickled each value as it has it (the
cost-aware plan, then the bound the parent needs later). The answers are the same as
calling the function here; only the time differs.

A fork is only made where it is safe and worth it (``fork_allowed``): POSIX, one Python
thread (a lock another thread holds would stay held in the child: the controller's
informers, the API clients), and the caller's own judgement of the work's size. When the
child fails or runs past its deadline the caller computes the answer itself.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import select
import signal
import struct
import threading
import time
from collections.abc import Callable, Iterable
from typing import BinaryIO, Generic, TypeVar, cast

T = TypeVar("T")


def fork_allowed() -> bool:
    """Return whether this process may fork a worker: POSIX and only one Python thread."""
    return hasattr(os, "fork") and threading.active_count() == 1


_HEADER = struct.Struct("<Q")
"""A message's length before its pickled bytes."""


class Forked(Generic[T]):
    """A function running in a forked child, sending back what it yields, one by one.

    ``next`` waits for the next value; ``close`` ends the child (killed if still running)
    and must be called once whatever happened (``result`` does both for a single value).
    """

    def __init__(self, pid: int, readable: int) -> None:
        self._pid, self._readable = pid, readable
        self._buffer = b""
        self._closed = False

    @classmethod
    def start(cls, fn: Callable[[], Iterable[T]]) -> Forked[T] | None:
        """Fork a child that sends each value ``fn()`` yields; None when the fork fails."""
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
                with os.fdopen(writable, "wb") as out:
                    _send_all(fn, out)
                status = 0
            finally:
                os._exit(status)
        os.close(writable)
        return cls(pid, readable)

    def next(self, deadline: float | None) -> tuple[bool, T | None]:
        """Return ``(True, value)`` for the next value, or ``(False, None)`` if none comes.

        None comes when the child ended without it, failed, or is not done by ``deadline``
        (a ``time.monotonic()`` value; None: wait as long as it takes); the child is then
        closed. An exception the child raised is raised here (the child closed).
        """
        header = self._read(_HEADER.size, deadline)
        size = None if header is None else _HEADER.unpack(header)[0]
        data = None if size is None else self._read(size, deadline)
        if data is None:
            self.close()
            return False, None
        ok, value = pickle.loads(data)  # noqa: S301 - our own child's output
        if not ok:
            self.close()
            raise cast("Exception", value)
        return True, cast("T", value)

    def ready(self) -> bool:
        """Return whether the child has started sending its next value (or has ended).

        ``next`` then returns at once, unless the value is still being written.
        """
        if self._closed or self._buffer:
            return True
        return bool(select.select([self._readable], [], [], 0)[0])

    def result(self, deadline: float | None) -> tuple[bool, T | None]:
        """Return the first value as ``next`` does, and close the child."""
        try:
            return self.next(deadline)
        finally:
            self.close()

    def close(self) -> None:
        """End the child: killed unless it has ended; its exit status is collected."""
        if self._closed:
            return
        self._closed = True
        os.close(self._readable)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._pid, signal.SIGKILL)
        os.waitpid(self._pid, 0)

    def _read(self, size: int, deadline: float | None) -> bytes | None:
        """Return the next ``size`` bytes from the child, or None (ended, or late)."""
        if self._closed:
            return None
        while len(self._buffer) < size:
            # past the deadline what the child has sent already is still taken
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._readable], [], [], wait)[0]:
                return None
            chunk = os.read(self._readable, 1 << 20)
            if not chunk:
                return None
            self._buffer += chunk
        out, self._buffer = self._buffer[:size], self._buffer[size:]
        return out


def _send_all(fn: Callable[[], Iterable[object]], out: BinaryIO) -> None:  # pragma: no cover
    """Send each value ``fn()`` yields, then its exception if it raises one (in the child)."""

    def send(message: tuple[bool, object]) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        out.write(_HEADER.pack(len(data)) + data)
        out.flush()

    try:
        for value in fn():
            send((True, value))
    except Exception as error:  # noqa: BLE001 - sent to the parent, which raises it
        send((False, error))
