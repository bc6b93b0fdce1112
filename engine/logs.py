"""slotwise's log events, handed to the stdlib logger ``slotwise`` as structured records.
The library never configures logging: unconfigured, only warnings reach stderr
(stdlib's last-resort handler). A harness's own handlers get one ``LogRecord`` per
event, with no timestamp or level rendered into it: ``record.event`` (the event name,
e.g. ``outputs.duplicates_dropped``), ``record.fields`` (its fields, a dict) and each
field as an attribute of its own (``record.samples``; a field whose name a LogRecord
already uses is only in ``fields``), so a JSON formatter gets them as keys; the message
is the event name and its fields as ``key=value``. No field shows a secret
(:func:`engine.redact.redact`). The CLI calls :func:`configure`.
structlog is imported at the first event that is logged: most commands log none, and its
import (with rich's) is some 40 ms of a fresh process."""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
from collections.abc import Collection, Iterator, MutableMapping
from datetime import UTC, datetime
from typing import Any, Literal

from engine.redact import redact

__all__ = ["configure", "log", "muted", "say"]

_LOGGER = logging.getLogger("slotwise")
_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
_PASSED = ("exc_info", "stack_info", "stacklevel")  # keywords of Logger.log itself


def _redacted(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog's processor that hides secrets: a text field redacted; another that
    shows one (a list of URLs) becomes its redacted text."""
    for key, value in event_dict.items():
        if isinstance(value, str):
            event_dict[key] = redact(value)
        elif key not in _PASSED and not isinstance(value, int | float | None):
            shown = redact(repr(value))
            if shown != repr(value):
                event_dict[key] = shown
    return event_dict


def _to_record(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> tuple[Any, ...]:
    """structlog's last processor: the stdlib call for one event (message and extras)."""
    passed = {key: event_dict.pop(key) for key in _PASSED if key in event_dict}
    event = str(event_dict.pop("event"))
    fields = dict(event_dict)
    message = " ".join([event, *(f"{key}={value!r}" for key, value in fields.items())])
    extra = {key: value for key, value in fields.items() if key not in _RESERVED}
    return (message,), {**passed, "extra": {**extra, "event": event, "fields": fields}}


class _Log:
    """The library's logger: ``log.warning("event.name", key=value, ...)``. An event of a
    disabled level costs one check; the others go through structlog with processors of
    its own, so a harness's ``structlog.configure`` neither changes nor breaks them."""

    def __getattr__(self, method: str) -> Any:
        level = logging.getLevelName(method.upper())
        if isinstance(level, int) and not _LOGGER.isEnabledFor(level):
            return _ignored
        return getattr(_structured(), method)


def _ignored(*_: Any, **__: Any) -> None:
    """An event of a disabled level."""


@functools.cache
def _structured() -> Any:
    import structlog

    return structlog.wrap_logger(
        _LOGGER,
        processors=[structlog.stdlib.filter_by_level, _redacted, _to_record],
        wrapper_class=structlog.stdlib.BoundLogger,
    )


log: Any = _Log()


class _Formatter(logging.Formatter):
    """The CLI's rendering of a record: console lines or JSON objects, with its time and
    level added here, by the handler, not by the library."""

    def __init__(self, fmt: Literal["console", "json"]) -> None:
        super().__init__()
        self.fmt = fmt

    @functools.cached_property
    def render(self) -> Any:
        import structlog

        if self.fmt == "json":
            return structlog.processors.JSONRenderer()
        return structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())

    def format(self, record: logging.LogRecord) -> str:
        level = record.levelname.lower()
        event = {
            "event": getattr(record, "event", record.getMessage()),
            **getattr(record, "fields", {}),
            "level": level,
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(),
        }
        if record.exc_info:
            event["exception"] = redact(self.formatException(record.exc_info))
        return str(self.render(None, level, event))


@contextlib.contextmanager
def muted(events: Collection[str]) -> Iterator[None]:
    """Drop these events while the block runs: for the CLI, where the results it prints
    say the same (a warning said once, not twice)."""

    def kept(record: logging.LogRecord) -> bool:
        return getattr(record, "event", None) not in events

    _LOGGER.addFilter(kept)
    try:
        yield
    finally:
        _LOGGER.removeFilter(kept)


def say(event: str, text: str, **fields: Any) -> None:
    """Tell the command line's user something whatever the level (CLI only): ``text`` on
    stderr, or, with JSON logs (:func:`configure`), the event and its fields as a JSON
    object like the other events."""
    rendered = [
        handler
        for handler in _LOGGER.handlers
        if isinstance(handler.formatter, _Formatter) and handler.formatter.fmt == "json"
    ]
    if not rendered:
        print(text, file=sys.stderr)
        return
    record = logging.makeLogRecord(
        {"name": _LOGGER.name, "levelno": logging.INFO, "levelname": "INFO", "msg": event}
    )
    record.event, record.fields = event, fields
    for handler in rendered:
        handler.handle(record)


def configure(fmt: Literal["console", "json"] = "console", level: int = logging.WARNING) -> None:
    """Render slotwise's events to stderr as console lines or JSON objects (CLI only)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(fmt))
    _LOGGER.handlers[:] = [handler]
    _LOGGER.setLevel(level)
    _LOGGER.propagate = False
