"""Record every AWS API call the test suite makes through boto3, and who made it.

The least-privilege test (``tests/zz_least_privilege``) compares the actions the *controller*
calls with the generated controller policy, in both directions. This module collects them.

Hook: :class:`AwsCallRecorder` wraps ``botocore.client.BaseClient._make_api_call``, the one
method every generated client operation (``client.describe_instances(...)``, paginators and
waiters included) goes through, on every client of every session, including clients created
before the recorder was installed. A ``before-call`` event handler instead would have to be
registered on every session's event system (``boto3.session.Session`` and bare botocore sessions
alike), and botocore stops ``before-call`` at the first handler that answers (the fault hooks of
``tests/aws/harness.py`` and ``provisioner/simulation`` answer some CreateFleet calls
themselves), or that raises (the throttling hook). The wrapper sees every call as the caller made
it, records it, then delegates with the same arguments, so behaviour does not change; a failing
call is still recorded, because the caller attempted it.

Each call is recorded as ``(action, origin)``:

- ``action`` is the IAM action ``<prefix>:<OperationName>``; the prefix is the service's
  signing name (``ec2``, ``ssm``, ``iam``, ``sqs``, ``events``, ``pricing``, ``eks``, ``sts``:
  these equal the IAM service prefixes), with :data:`IAM_PREFIX_OVERRIDES` for services where the
  two differ.
- ``origin`` is ``"controller"`` or ``"test"``. The stack is walked from the call outwards; frames
  under ``tests/`` are skipped (test doubles and wrappers the controller code calls, such as the
  catalog test's counting client, act on the controller's behalf). The first remaining project
  frame decides: under ``cloudprovider/`` or ``provisioner/`` (but not
  ``provisioner/simulation/``, which seeds moto and reads it back) means ``"controller"``;
  anything else, or no such frame at all (test setup, fixtures, moto), means ``"test"``.

The recorder is thread-safe (a set under a lock): moto runs on its own thread and controller
code may call from worker threads; each thread's own stack decides its call's origin.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, Final, Literal

import pytest

__all__ = [
    "CONTROLLER",
    "HOOKED_METHOD",
    "IAM_PREFIX_OVERRIDES",
    "RECORDER_KEY",
    "TEST",
    "AwsCall",
    "AwsCallRecorder",
    "iam_action",
]

Origin = Literal["controller", "test"]
CONTROLLER: Final[Origin] = "controller"
TEST: Final[Origin] = "test"

# botocore signing name -> IAM service prefix, where they differ. The services Jointer and its
# tests use (ec2, ssm, iam, sqs, events, pricing, eks, sts) sign with their IAM prefix.
IAM_PREFIX_OVERRIDES: Final[dict[str, str]] = {"monitoring": "cloudwatch"}

AwsCall = tuple[str, Origin]
# The one method every generated client operation calls (botocore-stubs leave it out).
HOOKED_METHOD: Final = "_make_api_call"


def iam_action(service_model: Any, operation_name: str) -> str:
    """Return the IAM action ``<prefix>:<OperationName>`` of a botocore operation."""
    signing: str = service_model.signing_name or service_model.endpoint_prefix
    return f"{IAM_PREFIX_OVERRIDES.get(signing, signing)}:{operation_name}"


class AwsCallRecorder:
    """Records ``(action, origin)`` of every boto3 API call while installed."""

    def __init__(self, repo_root: Path) -> None:
        """Classify frames relative to `repo_root` (the checkout)."""
        root = str(repo_root.resolve())
        self._tests = f"{root}/tests/"
        self._simulation = f"{root}/provisioner/simulation/"
        self._controller = (f"{root}/cloudprovider/", f"{root}/provisioner/")
        self._root = f"{root}/"
        self._venv = f"{root}/.venv/"
        self._calls: set[AwsCall] = set()
        self._lock = threading.Lock()
        self._original: Callable[..., Any] | None = None

    @property
    def installed(self) -> bool:
        """Whether the wrapper is in place."""
        return self._original is not None

    def install(self) -> None:
        """Wrap ``BaseClient._make_api_call`` (idempotent)."""
        if self._original is not None:
            return
        from botocore.client import BaseClient  # noqa: PLC0415  -- only when recording

        original: Callable[..., Any] = getattr(BaseClient, HOOKED_METHOD)
        recorder = self

        def _make_api_call(client: Any, operation_name: str, api_params: Any) -> Any:
            recorder.record(iam_action(client.meta.service_model, operation_name))
            return original(client, operation_name, api_params)

        _make_api_call.__wrapped__ = original  # type: ignore[attr-defined]
        setattr(BaseClient, HOOKED_METHOD, _make_api_call)
        self._original = original

    def uninstall(self) -> None:
        """Restore the original method (idempotent)."""
        if self._original is None:
            return
        from botocore.client import BaseClient  # noqa: PLC0415

        setattr(BaseClient, HOOKED_METHOD, self._original)
        self._original = None

    def record(self, action: str) -> None:
        """Record `action` with the origin of the calling stack."""
        call = (action, self.origin(sys._getframe(1)))
        with self._lock:
            self._calls.add(call)

    def origin(self, frame: FrameType | None) -> Origin:
        """Return who made a call, walking outwards from `frame` (see the module docstring)."""
        while frame is not None:
            filename = frame.f_code.co_filename
            if (
                filename.startswith(self._root)
                and not filename.startswith(self._tests)
                and not filename.startswith(self._venv)
            ):
                if filename.startswith(self._simulation):
                    return TEST
                return CONTROLLER if filename.startswith(self._controller) else TEST
            frame = frame.f_back
        return TEST

    def calls(self) -> frozenset[AwsCall]:
        """Return the distinct calls recorded so far."""
        with self._lock:
            return frozenset(self._calls)

    def actions(self, origin: Origin) -> frozenset[str]:
        """Return the distinct actions recorded from `origin`."""
        return frozenset(action for action, who in self.calls() if who == origin)


RECORDER_KEY: Final = pytest.StashKey[AwsCallRecorder]()
"""Where ``tests/conftest.py`` keeps the session's recorder (``config.stash``)."""
