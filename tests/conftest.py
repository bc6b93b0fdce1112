"""Shared fixtures. Reference data lives in tests/data (see its README for where each file comes from)."""

from __future__ import annotations

from pathlib import Path

import pytest

import engine

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def reference_data() -> Path:
    """``tests/data``: trec_eval's test files and the UDCG reference fixture."""
    return DATA


@pytest.fixture
def eng(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> engine.Engine:
    """A fresh engine with default configuration, isolated from any slotwise.yaml."""
    monkeypatch.chdir(tmp_path)
    return engine.Engine(config={})
