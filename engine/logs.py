"""slotwise's log events, handed to the stdlib logger ``slotwise`` as structured records.
The library never configures logging: unconfigured, only warnings reach stderr
(stdlib's last-resort handler). A harness's own handlers get one ``LogRecord`` per
event, with no timestamp or level rendered into it: ``record.event`` (the event name,
e.g. ``outputs.duplicates_dropped``), ``record.fields`` (its fields, a dict) and each
field as an attribute of its own (``record.samples``; a field whose name a LogRecord
already uses is only in ``fields``), so a JSON formatter gets them as keys; the message
is the event name and its fields as ``key=value``. The CLI calls :func:`configure`."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from datetime import UTC, datetime
from typing import Any, Literal

import structlog

__all__ = ["configure", "log"]

_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
_PASSED = ("exc_info", "stack_info", "stacklevel")  # keywords of Logger.log itself


def _to_record(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> tuple[Any, ...]:
    """structlog's last processor: the stdlib call for one event (message and extras)."""
    passed = {key: event_dict.pop(key) for key in _PASSED if key in event_dict}
    event = str(event_dict.pop("event"))
    fields = dict(event_dict)
    message = " ".join([event, *(f"{key}={value!r}" for key, value in fields.items())])
    extra = {key: value for key, value in fields.items() if key not in _RESERVED}
    return (message,), {**passed, "extra": {**extra, "event": event, "fields": fields}}


#: The library's logger: ``log.warning("event.name", key=value, ...)``. Its processors are
#: its own, so a harness's ``structlog.configure`` neither changes nor breaks them.
log: Any = structlog.wrap_logger(
    logging.getLogger("slotwise"),
    processors=[structlog.stdlib.filter_by_level, _to_record],  # disabled levels cost nothing
    wrapper_class=structlog.stdlib.BoundLogger,
)


class _Formatter(logging.Formatter):
    """The CLI's rendering of a record: console lines or JSON objects, with its time and
    level added here, by the handler, not by the library."""

    def __init__(self, fmt: Literal["console", "json"]) -> None:
        super().__init__()
        self.render: Any = (
            structlog.processors.JSONRenderer()
            if fmt == "json"
            else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        )

    def format(self, record: logging.LogRecord) -> str:
        level = record.levelname.lower()
        event = {
            "event": getattr(record, "event", record.getMessage()),
            **getattr(record, "fields", {}),
            "level": level,
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(),
        }
        if record.exc_info:
            event["exception"] = self.formatException(record.exc_info)
        return str(self.render(None, level, event))


def configure(fmt: Literal["console", "json"] = "console", level: int = logging.WARNING) -> None:
    """Render slotwise's events to stderr as console lines or JSON objects (CLI only)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(fmt))
    logger = logging.getLogger("slotwise")
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False
