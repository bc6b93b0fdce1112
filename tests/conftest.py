"""Shared fixtures. Reference data lives in ../shared/data beside the project."""

from __future__ import annotations

from pathlib import Path

import pytest

import engine

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data``: trec_eval's test files and the UDCG reference fixture."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"reference data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture
def eng(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> engine.Engine:
    """A fresh engine with default configuration, isolated from any slotwise.yaml."""
    monkeypatch.chdir(tmp_path)
    return engine.Engine(config={})
