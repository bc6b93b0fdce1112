"""A SQLite cache of annotations, so that a killed run resumes where it stopped and a
re-run costs no model calls.

A row is keyed by the sha256 of (task, annotator, model, the annotator's settings, the
prompt version, and the sha256 of each input text: question, passage, answers...). Every
finished batch is committed at once. The database runs in WAL mode with a busy timeout,
and each thread (and process) opens its own connection, so concurrent workers neither
block each other for long nor corrupt the file.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

__all__ = ["Cache", "Entry", "cache_key", "sha256"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS annotations (
    key TEXT PRIMARY KEY,
    task TEXT NOT NULL,
    annotator TEXT NOT NULL,
    model TEXT NOT NULL,
    settings TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    inputs TEXT NOT NULL,
    value TEXT NOT NULL,
    truncated INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL
)
"""


def sha256(text: str) -> str:
    """Hex sha256 of UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(
    task: str, annotator: str, model: str, settings: str, prompt_version: str, texts: Sequence[str]
) -> tuple[str, str]:
    """(key, inputs): ``inputs`` is the comma-joined sha256 of each input text."""
    inputs = ",".join(sha256(t) for t in texts)
    parts = json.dumps([task, annotator, model, settings, prompt_version, inputs])
    return sha256(parts), inputs


@attrs.frozen
class Entry:
    """One cached annotation."""

    key: str
    task: str
    annotator: str
    model: str
    settings: str
    prompt_version: str
    inputs: str
    value: Any
    truncated: bool = False


class Cache:
    """The cache file at ``path`` (created with its directory if missing). ``look_only``:
    a cache that is only looked in (a plan, ``--dry-run``): nothing is created, and a
    missing file is an empty cache."""

    def __init__(self, path: str | Path, timeout: float = 60.0, *, look_only: bool = False) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._absent = look_only and not self.path.exists()
        if look_only:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as connection:
            connection.execute(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(self.path, timeout=self.timeout, check_same_thread=False)
            connection.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
        return connection

    def get_many(self, keys: Iterable[str]) -> dict[str, tuple[Any, bool]]:
        """key -> (value, truncated) for the keys that are cached."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, tuple[Any, bool]] = {}
        if self._absent:
            return found
        connection = self._connect()
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            rows = connection.execute(
                f"SELECT key, value, truncated FROM annotations WHERE key IN ({','.join('?' * len(chunk))})",
                chunk,
            )
            for key, value, truncated in rows:
                found[key] = (json.loads(value), bool(truncated))
        return found

    def put_many(self, entries: Sequence[Entry]) -> None:
        """Store entries in one committed transaction."""
        now = time.time()
        rows = [
            (
                e.key,
                e.task,
                e.annotator,
                e.model,
                e.settings,
                e.prompt_version,
                e.inputs,
                json.dumps(e.value),
                int(e.truncated),
                now,
            )
            for e in entries
        ]
        with self._connect() as connection:
            connection.executemany(
                "INSERT OR REPLACE INTO annotations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )

    def __len__(self) -> int:
        (count,) = self._connect().execute("SELECT COUNT(*) FROM annotations").fetchone()
        return int(count)

    def close(self) -> None:
        """Close every connection this object opened (from any thread)."""
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()
        self._local = threading.local()
