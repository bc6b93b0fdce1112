"""structlog events under the stdlib logger ``slotwise``. The library never configures
logging: unconfigured, only warnings reach stderr (stdlib's last-resort handler). The
CLI calls :func:`configure`."""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal

import structlog

__all__ = ["configure", "log"]

log: Any = structlog.wrap_logger(logging.getLogger("slotwise"))


def configure(fmt: Literal["console", "json"] = "console", level: int = logging.WARNING) -> None:
    """Render slotwise's events to stderr as console lines or JSON objects (CLI only)."""
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("slotwise")
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False
