"""RAGAS ``EvaluationDataset``s as slotwise datasets: :func:`from_ragas` and the
``ragas:`` source plugin."""

from __future__ import annotations

import hashlib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import ragas

import engine
from engine.errors import InputError
from engine.evaluation.source_plugins import GROUP, SourceRegistry
from engine.integrations.ragas import from_ragas

METRICS = ["retrieval-mrr", "retrieval-recall-at-k@2", "retrieval-precision-at-k@2"]


def by_ids() -> ragas.EvaluationDataset:
    """Four samples judged by context ids."""
    return ragas.EvaluationDataset(
        samples=[
            # the relevant d1 at rank 2: MRR 1/2, recall@2 1/1, precision@2 1/2
            ragas.SingleTurnSample(
                user_input="What is the capital of France?",
                retrieved_contexts=["Lyon is in France.", "Paris is the capital.", "Nice."],
                retrieved_context_ids=["d7", "d1", "d3"],
                reference_context_ids=["d1"],
            ),
            # d2 of {d2, d4} at rank 1: MRR 1, recall@2 1/2, precision@2 1/2
            ragas.SingleTurnSample(
                user_input="Who wrote Hamlet?",
                retrieved_context_ids=["d2", "d5"],
                reference_context_ids=["d2", "d4"],
            ),
            # integer ids, read as strings: 4 at rank 2: MRR 1/2, recall@2 1, precision@2 1/2
            ragas.SingleTurnSample(
                user_input="How many moons has Mars?",
                retrieved_context_ids=[9, 4],
                reference_context_ids=[4],
            ),
            # nothing retrieved: an empty ranking, every score 0
            ragas.SingleTurnSample(user_input="Unanswered?", reference_context_ids=["d6"]),
        ]
    )


# means over the four samples of by_ids()
EXPECTED = {
    "retrieval-mrr": (0.5 + 1 + 0.5 + 0) / 4,
    "retrieval-recall-at-k@2": (1 + 0.5 + 1 + 0) / 4,
    "retrieval-precision-at-k@2": (0.5 + 0.5 + 0.5 + 0) / 4,
}


def means(results: engine.Results) -> dict[str, float]:
    return {label: row["mean"] for label, row in results.summary().items()}


def text_id(text: str) -> str:
    return "ctx-" + hashlib.sha1(text.encode()).hexdigest()[:12]


def test_context_ids_are_the_labels_and_the_ranking():
    loaded = from_ragas(by_ids(), name="toy")
    assert loaded.name == "toy"
    assert [s["id"] for s in loaded.samples] == ["0", "1", "2", "3"]
    assert loaded.samples[0] == {
        "id": "0",
        "input": "What is the capital of France?",
        "expected_output": {"relevance": ["d1"]},
    }
    assert loaded.outputs["0"][1] == {"id": "d1", "text": "Paris is the capital."}
    assert loaded.outputs["2"] == ["9", "4"]
    assert loaded.outputs["3"] == []
    results = (
        engine.Engine(config={})
        .dataset(samples=loaded.samples)
        .with_metrics(METRICS)
        .evaluate(loaded.outputs)
    )
    assert means(results) == pytest.approx(EXPECTED)
    assert [r["scores"]["retrieval-mrr"] for r in results.per_sample()] == [0.5, 1, 0.5, 0]


def test_contexts_without_ids_are_matched_by_normalised_text():
    """Rank 1 matches a reference context up to whitespace (relevant); rank 2 matches none
    (unjudged). Two relevant contexts: MRR 1, recall@2 1/2, precision@2 1/2, judged@2 1/2."""
    dataset = ragas.EvaluationDataset(
        samples=[
            ragas.SingleTurnSample(
                user_input="What is the capital of France?",
                retrieved_contexts=["  Paris is the\ncapital of  France. ", "Berlin is German."],
                reference_contexts=[
                    "Paris is the capital of France.",
                    "France is in Europe.",
                    "France is\tin Europe.",
                ],
            )
        ]
    )
    loaded = from_ragas(dataset)
    paris, europe = text_id("Paris is the capital of France."), text_id("France is in Europe.")
    assert loaded.samples[0]["expected_output"] == {"relevance": [paris, europe]}
    assert loaded.outputs["0"] == [
        {"id": paris, "text": "  Paris is the\ncapital of  France. "},
        {"id": text_id("Berlin is German."), "text": "Berlin is German."},
    ]
    results = (
        engine.Engine(config={})
        .dataset(samples=loaded.samples)
        .with_metrics([*METRICS, "retrieval-judged-at-k@2"])
        .evaluate(loaded.outputs)
    )
    assert means(results) == pytest.approx(
        {
            "retrieval-mrr": 1.0,
            "retrieval-recall-at-k@2": 0.5,
            "retrieval-precision-at-k@2": 0.5,
            "retrieval-judged-at-k@2": 0.5,
        }
    )


def test_samples_without_references_are_all_reported():
    dataset = ragas.EvaluationDataset(
        samples=[
            ragas.SingleTurnSample(user_input="ok", reference_contexts=["a"]),
            ragas.SingleTurnSample(user_input="no labels", retrieved_contexts=["a"]),
            ragas.SingleTurnSample(user_input="none either", reference_contexts=[]),
            ragas.SingleTurnSample(
                user_input="texts without ids",
                retrieved_contexts=["a", "b"],
                reference_context_ids=["x"],
            ),
        ]
    )
    with pytest.raises(InputError) as raised:
        from_ragas(dataset)
    problems = raised.value.problems
    assert [(p.sample_id, p.pointer) for p in problems] == [
        ("1", "/reference_contexts"),
        ("2", "/reference_contexts"),
        ("3", "/retrieved_contexts"),
    ]
    assert "sample '1' /reference_contexts: neither reference_context_ids nor" in str(raised.value)


def plugin_engine() -> engine.Engine:
    found = [EntryPoint("ragas", "engine.integrations.ragas:load", GROUP)]
    return engine.Engine(config={}, sources=SourceRegistry(entry_points=lambda: found))


def test_the_plugin_reads_what_to_jsonl_wrote(tmp_path: Path):
    path = tmp_path / "eval.jsonl"
    by_ids().to_jsonl(path)
    dataset = plugin_engine().dataset(f"ragas:{path}")
    assert (dataset.name, dataset.ids) == ("eval", ["0", "1", "2", "3"])
    results = dataset.with_metrics(METRICS).evaluate(dataset.outputs)
    assert means(results) == pytest.approx(EXPECTED)


def test_the_plugin_locates_problems_by_line(tmp_path: Path):
    path = tmp_path / "eval.jsonl"
    ragas.EvaluationDataset(
        samples=[
            ragas.SingleTurnSample(user_input="ok", reference_context_ids=["a"]),
            ragas.SingleTurnSample(user_input="no labels", retrieved_context_ids=["a"]),
        ]
    ).to_jsonl(path)
    with pytest.raises(InputError) as raised:
        plugin_engine().dataset(f"ragas:{path}")
    (problem,) = raised.value.problems
    assert (problem.source, problem.line, problem.sample_id) == (str(path), 2, "1")


def test_the_plugin_reads_only_jsonl(tmp_path: Path):
    path = tmp_path / "eval.csv"
    by_ids().to_csv(path)
    with pytest.raises(InputError, match="no CSV reader"):
        plugin_engine().dataset(f"ragas:{path}")
    with pytest.raises(InputError, match="no such file"):
        plugin_engine().dataset(f"ragas:{tmp_path / 'missing.jsonl'}")


def test_multi_turn_samples_are_refused():
    from ragas.messages import HumanMessage

    dataset = ragas.EvaluationDataset(
        samples=[ragas.MultiTurnSample(user_input=[HumanMessage(content="hi")])]
    )
    with pytest.raises(InputError) as raised:
        from_ragas(dataset)
    assert [(p.sample_id, p.pointer) for p in raised.value.problems] == [("0", "/user_input")]


def test_reference_is_the_answer_and_loaded_is_a_dataset():
    """RAGAS's reference answer becomes the sample's answer: answer-containment-at-k is
    1 when a top-k context contains it (case- and whitespace-insensitive), else 0; and
    engine.dataset() takes what from_ragas returns (a Loaded) with its outputs."""
    loaded = from_ragas(
        ragas.EvaluationDataset(
            samples=[
                ragas.SingleTurnSample(
                    user_input="What is the capital of France?",
                    retrieved_contexts=["Lyon is in France.", "PARIS  is the capital."],
                    retrieved_context_ids=["d7", "d1"],
                    reference_context_ids=["d1"],
                    reference="Paris is the capital",
                ),
                ragas.SingleTurnSample(
                    user_input="Who wrote Hamlet?",
                    retrieved_contexts=["Marlowe wrote plays."],
                    retrieved_context_ids=["d5"],
                    reference_context_ids=["d2"],
                    reference="Shakespeare",
                ),
            ]
        ),
        name="refs",
    )
    dataset = engine.Engine(config={}).dataset(loaded)
    assert (dataset.name, len(dataset)) == ("refs", 2)
    results = dataset.with_metrics(["answer-containment-at-k@2", "context-recall-at-k"]).evaluate(
        dataset.outputs
    )
    assert results.values("answer-containment-at-k@2").tolist() == [1.0, 0.0]
    assert loaded.samples[0]["expected_output"]["reference"] == "Paris is the capital"
    # no claims in RAGAS data: context recall is NA everywhere, and the table says why
    (note,) = results.na_notes()
    assert note.startswith("context-recall-at-k is NA on every sample; it is NA when the sample")
    assert note in str(results.table())


def test_a_relative_reference_is_recorded_absolute(tmp_path: Path, monkeypatch):
    """`ragas:eval.jsonl` read from its folder is recorded as `ragas:/abs/eval.jsonl`, so
    the results find their dataset (and explain a sample) from another directory."""
    from engine.analysis.explain import explain

    (tmp_path / "data").mkdir()
    by_ids().to_jsonl(tmp_path / "data" / "eval.jsonl")
    monkeypatch.chdir(tmp_path / "data")
    eng = plugin_engine()
    dataset = eng.dataset("ragas:eval.jsonl")
    results = dataset.with_metrics(["retrieval-mrr"]).evaluate(dataset.outputs, keep_outputs=True)
    assert results.provenance["dataset_source"] == f"ragas:{tmp_path / 'data' / 'eval.jsonl'}"
    monkeypatch.chdir(tmp_path)
    (found,) = explain([results], ["1"], engine=eng)
    assert [slot.id for slot in found.systems[0].slots][:2] == ["d2", "d5"]
