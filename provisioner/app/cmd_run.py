"""``jointer run``: the in-cluster controller.

Settings come from the environment variables of Karpenter's chart (``CLUSTER_NAME``,
``INTERRUPTION_QUEUE``, ``BATCH_IDLE_DURATION``, ``METRICS_PORT``, ...); each also has a flag
(``--cluster-name``, ``--batch-idle-duration``, ...; ``JOINTER_`` variables drop the prefix:
``--policy``) that overrides it. The cluster is reached through ``--kubeconfig`` or, in a pod,
the service account.

Exit status: 0 after SIGTERM/SIGINT and a graceful shutdown (stop taking work, finish the
in-flight reconciles within ``--graceful-shutdown-timeout``, release the Lease); 1 when the
controller cannot connect or loses its Lease; 2 for bad settings, with one line naming the
variable. A second signal during the shutdown exits at once with status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import fields
from types import FrameType
from typing import Final

from provisioner.app.settings import Settings, SettingsError, parse_go_duration
from provisioner.app.wiring import (
    DEFAULT_SHUTDOWN_TIMEOUT,
    Seams,
    WiringError,
    build_controller,
)

__all__ = ["EXIT_FAILURE", "EXIT_USAGE", "add_arguments", "execute", "flag_for", "run"]

EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2
_PREFIX: Final = "JOINTER_"
_DEST: Final = "setting_"
_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)


def flag_for(variable: str) -> str:
    """The flag of an environment variable: ``BATCH_MAX_DURATION`` -> ``--batch-max-duration``."""
    return "--" + variable.removeprefix(_PREFIX).lower().replace("_", "-")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--kubeconfig``, ``--graceful-shutdown-timeout`` and one flag per setting."""
    parser.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig to use (default: in-cluster service account, else $KUBECONFIG)",
    )
    parser.add_argument(
        "--graceful-shutdown-timeout",
        metavar="DURATION",
        default=f"{int(DEFAULT_SHUTDOWN_TIMEOUT.total_seconds())}s",
        help="how long in-flight reconciles may finish after SIGTERM (default: %(default)s)",
    )
    settings = parser.add_argument_group("settings (each overrides its environment variable)")
    for setting in fields(Settings):
        variable = setting.metadata["env"]
        settings.add_argument(
            flag_for(variable),
            dest=_DEST + variable,
            metavar="VALUE",
            help=f"{setting.metadata['help']} (${variable}, default {setting.default!r})",
        )


def run(args: argparse.Namespace) -> int:
    """Run the controller until SIGTERM or SIGINT; return the exit status."""
    return execute(args, environ=os.environ)


def execute(
    args: argparse.Namespace,
    *,
    environ: Mapping[str, str],
    seams: Seams | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Build the controller from ``environ`` and the flags in ``args`` and run it.

    Signal handlers are installed only on the main thread; elsewhere, set ``stop`` to stop.

    Returns:
        The exit status.
    """
    overrides = {
        name.removeprefix(_DEST): value
        for name, value in vars(args).items()
        if name.startswith(_DEST) and value is not None
    }
    try:
        settings = Settings.from_environment({**environ, **overrides})
        timeout = parse_go_duration(
            args.graceful_shutdown_timeout, name="--graceful-shutdown-timeout"
        )
        process = build_controller(
            settings, kubeconfig=args.kubeconfig, shutdown_timeout=timeout, seams=seams
        )
    except SettingsError as error:
        sys.stderr.write(f"jointer run: {error}\n")
        return EXIT_USAGE
    except WiringError as error:
        sys.stderr.write(f"jointer run: {error}\n")
        return EXIT_FAILURE
    stop = stop or threading.Event()
    with _stop_on_signals(stop):
        return process.run(stop)


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        del frame
        if stop.is_set():
            sys.stderr.write(f"jointer run: second signal {signum}, exiting at once\n")
            os._exit(EXIT_FAILURE)
        # Set from another thread: the main thread may hold the event's lock right now.
        threading.Thread(target=stop.set, name="signal", daemon=True).start()

    previous = {signum: signal.signal(signum, handle) for signum in _SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
