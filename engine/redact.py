"""Secrets out of what slotwise shows: :func:`redact` replaces with ``***`` the
credentials of a URL (``scheme://***@host``), the values of query parameters that look
like keys (``?api_key=***``, ``&token=``, ``&sig=``...), ``Authorization`` header values
and ``Bearer`` tokens, and every value :func:`secret` was told of (an API key), so that
the user still sees where something was. Messages, log events, exceptions shown to the
user and files the annotation commands write go through it. The bottom of the engine:
it imports nothing of it."""

from __future__ import annotations

import functools
import re

__all__ = ["redact", "secret"]

MASK = "***"
#: Shorter values are not redacted as themselves: they would garble every message.
SHORTEST_SECRET = 4

_PATTERNS = (
    # scheme://user:password@host (or a token as the user)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s@'\"<>]+@"), rf"\1{MASK}@"),
    # ?api_key=..., &access_token=..., &X-Amz-Signature=...: a parameter named like a key
    (
        re.compile(
            r"(?i)([?&][\w.-]*(?:key|token|secret|sig|signature|password|passwd|pwd|auth|"
            r"credential)=)[^&\s#'\"]+"
        ),
        rf"\1{MASK}",
    ),
    # Authorization: ..., "authorization": "..." (a header, as text or JSON)
    (
        re.compile(r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)[^\"'\r\n]+"),
        rf"\1{MASK}",
    ),
    (re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+"), rf"\1{MASK}"),
)
_secrets: tuple[str, ...] = ()


def secret(value: str | None) -> None:
    """Redact this exact value wherever it appears from now on (not when shorter than
    :data:`SHORTEST_SECRET` characters)."""
    global _secrets
    if value and len(value) >= SHORTEST_SECRET and value not in _secrets:
        _secrets = (*_secrets, value)


@functools.cache
def _known(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    """One pattern for the known values, the longest first (None: none known)."""
    if not secrets:
        return None
    return re.compile("|".join(re.escape(s) for s in sorted(secrets, key=len, reverse=True)))


def redact(text: str) -> str:
    """``text`` with every secret it shows replaced by ``***``."""
    known = _known(_secrets)
    if known is not None:
        text = known.sub(MASK, text)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text
