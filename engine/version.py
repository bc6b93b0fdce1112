"""The installed slotwise version (``0.0.0+unknown`` in a source tree never installed)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["VERSION"]

try:
    VERSION = version("slotwise")
except PackageNotFoundError:
    VERSION = "0.0.0+unknown"
