"""Datasets read by plugins of the ``slotwise.sources`` group: ``scheme:reference``."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

import engine
from engine.errors import InputError
from engine.evaluation.source_plugins import (
    GROUP,
    Loaded,
    SourceLoadError,
    SourceRegistry,
    is_reference,
)


def toy(reference: str) -> Loaded:
    """A source plugin: qrels with one relevant document per query, and a run."""
    queries = reference.split(",")
    return Loaded(
        samples={q: {f"{q}-rel": 2, f"{q}-other": 0} for q in queries},
        outputs={q: [f"{q}-other", f"{q}-rel"] for q in queries},
        name=f"toy-{len(queries)}",
    )


def failing(reference: str) -> Loaded:
    raise ConnectionError(f"cannot reach {reference}")


def wrong_type(reference: str) -> dict[str, str]:
    return {"not": "Loaded"}


def _engine(*entry_points: tuple[str, str]) -> engine.Engine:
    found = [
        EntryPoint(name, f"test_source_plugins:{target}", GROUP) for name, target in entry_points
    ]
    return engine.Engine(config={}, sources=SourceRegistry(entry_points=lambda: found))


def test_a_reference_is_read_by_its_plugin():
    """The plugin's samples and outputs: the relevant document at rank 2 gives MRR 1/2."""
    eng = _engine(("toy", "toy"))
    dataset = eng.dataset("toy:q1,q2,q3")
    assert (dataset.name, dataset.ids) == ("toy-3", ["q1", "q2", "q3"])
    results = dataset.with_metrics(["retrieval-mrr"]).evaluate(dataset.outputs)
    assert results.summary()["retrieval-mrr"]["mean"] == 0.5


def test_unknown_scheme_lists_the_installed_ones():
    with pytest.raises(InputError) as raised:
        _engine(("toy", "toy")).dataset("nope:x")
    assert "installed: toy:" in str(raised.value.problems[0])


def test_a_broken_plugin_fails_alone():
    """A plugin that cannot be imported, or fails, or returns the wrong thing, is an error
    naming it; the working plugin beside it still reads."""
    eng = _engine(
        ("toy", "toy"),
        ("gone", "no_such_function"),
        ("down", "failing"),
        ("odd", "wrong_type"),
    )
    with pytest.raises(SourceLoadError, match="gone: failed to load"):
        eng.dataset("gone:x")
    with pytest.raises(SourceLoadError, match="down: failed reading 'x': ConnectionError"):
        eng.dataset("down:x")
    with pytest.raises(SourceLoadError, match="returned dict, not Loaded"):
        eng.dataset("odd:x")
    assert eng.dataset("toy:q1").ids == ["q1"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("irds:vaswani", True), ("ragas:eval.jsonl", True), ("C:\\data\\x.yaml", False), ("x", False)],
)
def test_what_counts_as_a_reference(text, expected):
    assert is_reference(text) is expected


def test_an_existing_file_wins_over_a_scheme(tmp_path, monkeypatch):
    """A file named like a reference is still read as the file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "toy:q9.jsonl").write_text('{"id": "file", "expected_output": ["a"]}\n')
    assert _engine(("toy", "toy")).dataset("toy:q9.jsonl").ids == ["file"]
