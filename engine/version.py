"""The slotwise version: the one place it is written (``pyproject.toml`` reads it from
here), so that knowing it costs a fresh process nothing (looking it up in the installed
metadata took 15-25 ms)."""

from __future__ import annotations

__all__ = ["VERSION"]

VERSION = "0.1.0"
