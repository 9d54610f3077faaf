"""Structured logging: one-line JSON in a cluster, readable lines on a terminal.

JSON lines carry Karpenter's keys (``level``, ``time``, ``logger``, ``message``,
``controller`` and the object fields), so log queries written for Karpenter keep working.
Nothing is configured globally: :func:`build_logger` returns a logger that is injected.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Final, Literal, TextIO

import structlog
from structlog.typing import FilteringBoundLogger

__all__ = ["LogFormat", "build_logger"]

LogFormat = Literal["json", "console", "auto"]

_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def build_logger(
    *,
    level: str = "info",
    log_format: LogFormat = "auto",
    stream: TextIO | None = None,
    name: str = "controller",
) -> FilteringBoundLogger:
    """Build a structlog logger writing to ``stream`` (default standard error).

    Args:
        level: ``debug``, ``info``, ``warn`` or ``error`` (Karpenter's LOG_LEVEL values).
        log_format: ``json`` for one JSON object per line, ``console`` for people, ``auto`` to
            pick ``console`` when ``stream`` is a terminal.
        stream: where to write.
        name: the ``logger`` field.

    Raises:
        ValueError: for an unknown level.
    """
    try:
        threshold = _LEVELS[level.lower()]
    except KeyError:
        raise ValueError(
            f"LOG_LEVEL: must be one of debug, info, warn, error, got {level!r}"
        ) from None
    out = stream or sys.stderr
    if log_format == "auto":
        log_format = "console" if out.isatty() else "json"
    processors: list[Any] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="time"),
    ]
    if log_format == "json":
        processors += [
            structlog.processors.EventRenamer("message"),
            structlog.processors.dict_tracebacks,
            structlog.processors.JSONRenderer(sort_keys=False),
        ]
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=False))
    logger: FilteringBoundLogger = structlog.wrap_logger(
        structlog.PrintLogger(out),
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        cache_logger_on_first_use=False,
    )
    return logger.bind(logger=name)
