"""Datasets and outputs: formats, and every kind of bad input reported together."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
from engine.io import schemas


def _problems(error: engine.InputError) -> list[tuple[str | None, str, str]]:
    return [(p.sample_id, p.pointer, p.message) for p in error.problems]


SAMPLES = [
    {
        "id": "q-1",
        "input": {"question": "?"},
        "expected_output": ["doc-3", "doc-9"],
        "metadata": {"k": 5, "stratum": "a"},
    },
    {"id": "q-2", "expected_output": {"doc-3": 3, "doc-9": 1}},
    {
        "id": 7,
        "expected_output": {"relevance": {"d": 2}, "answers": "Paris", "groups": {"g": ["d"]}},
    },
]


class TestFormats:
    @pytest.mark.parametrize("suffix", [".yaml", ".json", ".jsonl"])
    def test_same_samples_in_every_format(self, eng, tmp_path, suffix):
        """YAML, JSON and JSONL datasets load to the same samples and the same content hash."""
        path = tmp_path / f"data{suffix}"
        if suffix == ".jsonl":
            path.write_text("\n".join(json.dumps(s) for s in SAMPLES) + "\n\n")
        elif suffix == ".json":
            path.write_text(json.dumps({"name": "demo", "samples": SAMPLES}))
        else:
            import yaml

            path.write_text(yaml.safe_dump({"name": "demo", "samples": SAMPLES}))
        dataset = eng.dataset(path)
        assert dataset.ids == ["q-1", "q-2", "7"]
        assert dataset.hash == eng.dataset(samples=SAMPLES).hash
        assert dataset.samples[0].relevance == {"doc-3": 1.0, "doc-9": 1.0}
        assert dataset.samples[1].relevance == {"doc-3": 3.0, "doc-9": 1.0}
        assert dataset.samples[2].answers == ("Paris",)
        assert dataset.samples[2].groups == {"g": ("d",)}
        assert dataset.samples[0].k == 5

    def test_utility_long_form(self, eng):
        """Utility labels: u directly, or (relevant, p_no_response) -> ±(1 - p)."""
        sample = {
            "id": "u",
            "expected_output": {
                "utility": {
                    "a": -0.5,
                    "b": {"relevant": True, "p_no_response": 0.25},
                    "c": {"relevant": False, "p_no_response": 0.75},
                }
            },
        }
        parsed = eng.dataset(samples=[sample]).samples[0]
        assert parsed.utility == {"a": -0.5, "b": 0.75, "c": -0.25}
        assert parsed.relevance is None


class TestBadDatasets:
    def test_all_problems_reported_together(self, eng):
        """Every invalid sample is reported with its id, pointer and reason, in one error."""
        bad = [
            {"id": "a", "expected_output": {"d1": "3", "d2": math.nan, "d3": math.inf}},
            {"id": "a", "expected_output": ["x"]},
            {"expected_output": ["x"]},
            {"id": "b", "metadata": {"k": 0}},
            {"id": "c", "metadata": {"k": 2.5}},
            {"id": "d", "expected_output": {"relevance": ["x"], "utility": {"x": 1.5}}},
            {"id": "e", "expected_output": {"relevance": ["x"], "answers": []}},
            {"id": "f", "unexpected": 1},
        ]
        with pytest.raises(engine.InputError) as info:
            eng.dataset(samples=bad)
        problems = _problems(info.value)
        assert ("a", "/0/expected_output/d1", "'3' is not of type 'number'") in problems
        assert ("a", "/0/expected_output/d2", "must be a finite number, got nan") in problems
        assert ("a", "/0/expected_output/d3", "must be a finite number, got inf") in problems
        assert ("a", "/1/id", "duplicate sample id (first at item 0)") in problems
        assert (None, "/2", "'id' is a required property") in problems
        assert ("b", "/3/metadata/k", "0 is less than the minimum of 1") in problems
        assert ("c", "/4/metadata/k", "2.5 is not of type 'integer'") in problems
        assert (
            "d",
            "/5/expected_output/utility/x",
            "1.5 is greater than the maximum of 1",
        ) in problems
        assert ("e", "/6/expected_output/answers", "[] should be non-empty") in problems
        assert any(p[0] == "f" and "unexpected" in p[2] for p in problems)
        assert len(problems) == 10
        assert "10 problems" in str(info.value)

    def test_empty_dataset(self, eng, tmp_path):
        """A dataset with no samples is an error, not an average over nothing."""
        path = tmp_path / "empty.yaml"
        path.write_text("samples: []\n")
        with pytest.raises(engine.InputError, match="no samples"):
            eng.dataset(path)

    def test_malformed_yaml_has_line(self, eng, tmp_path):
        """Malformed YAML is reported with its line number."""
        path = tmp_path / "bad.yaml"
        path.write_text("samples:\n  - id: a\n    expected_output: [a, b\n  - id: b\n")
        with pytest.raises(engine.InputError) as info:
            eng.dataset(path)
        problem = info.value.problems[0]
        assert problem.line is not None and problem.line >= 3
        assert "malformed YAML" in problem.message

    def test_malformed_json_has_line(self, eng, tmp_path):
        """Malformed JSON is reported with its line number."""
        path = tmp_path / "bad.json"
        path.write_text('{"samples": [\n {"id": "a"},\n {"id": }\n]}')
        with pytest.raises(engine.InputError) as info:
            eng.dataset(path)
        assert info.value.problems[0].line == 3

    def test_malformed_jsonl_lines_all_reported(self, eng, tmp_path):
        """Every malformed JSONL line is reported with its number."""
        path = tmp_path / "bad.jsonl"
        path.write_text('{"id": "a"}\n{oops\n{"id": "b"}\n[1,\n')
        with pytest.raises(engine.InputError) as info:
            eng.dataset(path)
        assert [p.line for p in info.value.problems] == [2, 4]

    def test_jsonl_schema_errors_name_line_and_id(self, eng, tmp_path):
        """Schema problems in JSONL carry the line number and the sample id."""
        path = tmp_path / "bad.jsonl"
        path.write_text(
            '{"id": "a", "expected_output": ["x"]}\n{"id": "b", "expected_output": {"x": "high"}}\n'
        )
        with pytest.raises(engine.InputError) as info:
            eng.dataset(path)
        (problem,) = info.value.problems
        assert (problem.line, problem.sample_id, problem.pointer) == (2, "b", "/expected_output/x")
        assert str(problem).startswith(f"{path}:2 sample 'b' /expected_output/x:")

    def test_envelope_errors(self, eng, tmp_path):
        """A dataset file must be an object with a samples list."""
        path = tmp_path / "bad.json"
        path.write_text('{"name": 3, "samples": []}')
        with pytest.raises(engine.InputError, match="/name"):
            eng.dataset(path)

    def test_unknown_dataset_name(self, eng):
        """A name that is neither declared nor a file is a clear error."""
        with pytest.raises(engine.InputError, match="no dataset named 'nope'"):
            eng.dataset("nope")

    def test_unknown_suffix(self, eng, tmp_path):
        """Unsupported file types are rejected with the supported list."""
        path = tmp_path / "data.tsv"
        path.write_text("id\n")
        with pytest.raises(engine.InputError, match="unknown dataset format"):
            eng.dataset(path)


class TestOutputs:
    def _dataset(self, eng):
        return eng.dataset(
            samples=[{"id": "a", "expected_output": ["d1"]}, {"id": "b", "expected_output": ["d2"]}]
        )

    @pytest.mark.parametrize(
        "actual",
        [
            ["d1", "d2"],
            {"retrieved": ["d1", "d2"]},
            {
                "retrieved": [{"id": "d1", "text": "t", "score": 2.0}, {"id": "d2"}],
                "pool": ["d1", "d2", "d3"],
                "cited": ["d1"],
            },
        ],
    )
    def test_output_shapes(self, eng, actual):
        """Bare lists, objects and items with text/score are all accepted."""
        results = (
            self._dataset(eng).with_metrics(["retrieval-mrr"]).evaluate({"a": actual, "b": []})
        )
        assert results.scores["retrieval-mrr"].tolist() == [1.0, 0.0]

    def test_jsonl_and_json_files(self, eng, tmp_path):
        """Outputs load from a JSON object file and from JSONL lines alike."""
        json_path = tmp_path / "out.json"
        json_path.write_text(json.dumps({"a": ["x", "d1"], "b": ["d2"]}))
        jsonl_path = tmp_path / "out.jsonl"
        jsonl_path.write_text(
            '{"id": "a", "actual_output": ["x", "d1"]}\n{"id": "b", "actual_output": {"retrieved": ["d2"]}}\n'
        )
        evaluation = self._dataset(eng).with_metrics(["retrieval-mrr"])
        for path in (json_path, jsonl_path):
            assert evaluation.evaluate(path).scores["retrieval-mrr"].tolist() == [0.5, 1.0]

    def test_bad_outputs_reported_together(self, eng, tmp_path):
        """Invalid outputs and duplicate JSONL ids are all reported with line and id."""
        path = tmp_path / "out.jsonl"
        path.write_text(
            '{"id": "a", "actual_output": [1.5]}\n{"id": "b", "actual_output": {"retrieved": "d2"}}\n'
            '{"id": "b", "actual_output": []}\n{"actual_output": []}\n'
        )
        with pytest.raises(engine.InputError) as info:
            self._dataset(eng).with_metrics(["retrieval-mrr"]).evaluate(path)
        lines = sorted(p.line for p in info.value.problems)
        assert lines == [1, 2, 3, 4]

    def test_missing_output_is_an_error_row(self, eng):
        """A sample without output is an error row, "no output", counted in the errors."""
        results = self._dataset(eng).with_metrics(["retrieval-recall-at-k"]).evaluate({"a": ["d1"]})
        assert results.scores["retrieval-recall-at-k"].tolist()[0] == 1.0
        assert math.isnan(results.scores["retrieval-recall-at-k"][1])
        assert results.diagnostics.errors == {"b": "no output"}
        assert results.summary()["retrieval-recall-at-k"]["errors"] == 1
        assert results.provenance["missing_outputs"] == "error"

    def test_missing_output_scored_as_empty_when_asked(self, eng):
        """With missing="empty" a sample without output is an empty ranking (trec_eval's
        -c), listed in diagnostics, counted in the summary and recorded in provenance."""
        evaluation = self._dataset(eng).with_metrics(["retrieval-recall-at-k"])
        results = evaluation.evaluate({"a": ["d1"]}, missing="empty")
        assert results.scores["retrieval-recall-at-k"].tolist() == [1.0, 0.0]
        assert results.diagnostics.missing_outputs == ("b",)
        assert results.summary()["retrieval-recall-at-k"]["missing_outputs"] == 1
        assert results.provenance["missing_outputs"] == "empty"

    def test_unknown_output_ids(self, eng):
        """Outputs for ids not in the dataset are ignored with a diagnostic, or rejected in strict mode."""
        evaluation = self._dataset(eng).with_metrics(["retrieval-mrr"])
        results = evaluation.evaluate({"a": ["d1"], "b": ["d2"], "zzz": ["d1"]})
        assert results.diagnostics.unknown_output_ids == ("zzz",)
        with pytest.raises(engine.InputError, match="not in the dataset"):
            evaluation.evaluate({"a": ["d1"], "zzz": ["d1"]}, strict=True)

    def test_duplicate_retrieved_ids(self, eng):
        """Duplicates keep their first occurrence and are counted; strict mode rejects them."""
        evaluation = self._dataset(eng).with_metrics(["retrieval-mrr", "retrieval-hit-at-k@2"])
        results = evaluation.evaluate({"a": ["x", "x", "x", "d1"], "b": ["d2", "d2"]})
        # after dropping duplicates a = [x, d1]: first relevant at rank 2, inside the top 2
        assert results.scores["retrieval-mrr"].tolist() == [0.5, 1.0]
        assert results.scores["retrieval-hit-at-k@2"].tolist() == [1.0, 1.0]
        assert results.diagnostics.duplicate_ids_dropped == 3
        with pytest.raises(engine.InputError, match="repeats a document id"):
            evaluation.evaluate({"a": ["x", "x"]}, strict=True)

    def test_outputs_file_must_be_an_object(self, eng, tmp_path):
        """A JSON outputs file that is not an object is a clear error."""
        path = tmp_path / "out.json"
        path.write_text("[1, 2]")
        with pytest.raises(engine.InputError, match="JSON object"):
            self._dataset(eng).with_metrics(["retrieval-mrr"]).evaluate(path)


class TestRequirements:
    def test_missing_requirements_name_samples(self, eng):
        """A metric's requirements are checked before scoring, per sample."""
        dataset = eng.dataset(
            samples=[
                {"id": "ok", "expected_output": {"relevance": ["d"], "answers": ["Paris"]}},
                {"id": "no-answers", "expected_output": ["d"]},
                {"id": "no-text", "expected_output": {"answers": "x"}},
            ]
        )
        outputs = {
            "ok": {"retrieved": [{"id": "d", "text": "Paris is the capital"}]},
            "no-answers": {"retrieved": [{"id": "d", "text": "..."}]},
            "no-text": ["d"],
        }
        with pytest.raises(engine.MetricRequirementError) as info:
            dataset.with_metrics(["answer-containment-at-k", "retrieval-mrr"]).evaluate(outputs)
        found = {(p.sample_id, p.pointer) for p in info.value.problems}
        assert found == {
            ("no-answers", "/expected_output/answers"),
            ("no-text", "/actual_output/retrieved"),
            ("no-text", "/expected_output"),
        }

    def test_problems_by_metric_then_sample_then_need(self, eng):
        """Each metric reports its own problems, even for a need another metric shares
        (found once per chunk): samples in order, and a sample's needs in name order."""
        dataset = eng.dataset(
            samples=[
                {"id": "a", "expected_output": {"utility": {"d": 1.0}}},
                {"id": "b", "expected_output": {"relevance": ["d"], "answers": ["x"]}},
            ]
        )
        with pytest.raises(engine.MetricRequirementError) as info:
            dataset.with_metrics(["retrieval-mrr", "answer-containment-at-k"]).evaluate(
                {"a": ["d"], "b": ["d"]}
            )
        found = [(p.message.split("'")[1], p.sample_id, p.pointer) for p in info.value.problems]
        assert found == [
            ("retrieval-mrr", "a", "/expected_output"),
            ("answer-containment-at-k", "a", "/expected_output/answers"),
            ("answer-containment-at-k", "a", "/actual_output/retrieved"),
            ("answer-containment-at-k", "b", "/actual_output/retrieved"),
        ]

    def test_no_metrics(self, eng):
        """Evaluating with no metrics at all is a clear error."""
        with pytest.raises(engine.InputError, match="no metrics"):
            eng.dataset(samples=[{"id": "a"}]).with_metrics([])


def test_dataset_file_relative_to_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A declared dataset's path is relative to slotwise.yaml, which Engine.from_config()
    finds from a subdirectory."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "d.jsonl").write_text('{"id": "a", "expected_output": ["x"]}\n')
    (tmp_path / "data" / "out.json").write_text('{"a": ["y", "x"]}')
    (tmp_path / "slotwise.yaml").write_text(
        "datasets:\n  rag.retrieval:\n    path: data/d.jsonl\n    outputs: data/out.json\n"
        "    metrics: [retrieval-mrr, retrieval-hit-at-k@1]\nmetrics:\n  retrieval:\n    default_k: 3\n"
    )
    sub = tmp_path / "deep" / "er"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    eng = engine.Engine.from_config()
    dataset = eng.dataset("rag.retrieval")
    assert dataset.metrics == ("retrieval-mrr", "retrieval-hit-at-k@1")
    results = dataset.evaluate(dataset.outputs)
    assert results.summary()["retrieval-mrr"]["mean"] == 0.5
    assert results.summary()["retrieval-hit-at-k@1"]["mean"] == 0.0
    assert eng.config.default_k == 3


_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(["", "d1", "id", "relevance", "k"])
)
_json = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "id",
                    "text",
                    "score",
                    "retrieved",
                    "pool",
                    "cited",
                    "input",
                    "expected_output",
                    "metadata",
                    "k",
                    "stratum",
                    "d1",
                    "relevance",
                    "answers",
                    "x",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=12,
)


class TestValidationShortcuts:
    @given(_json)
    @settings(max_examples=400)
    def test_shortcuts_never_accept_what_the_schema_rejects(self, value):
        """The fast shape checks accept only values the JSON Schemas accept."""
        if schemas.certainly_valid_sample(value):
            assert not list(schemas.validator("sample").iter_errors(value))
        if schemas.certainly_valid_output(value):
            assert not list(schemas.validator("outputs", "actualOutput").iter_errors(value))

    @given(
        st.fixed_dictionaries(
            {"id": st.just("a")},
            optional={
                "expected_output": st.fixed_dictionaries(
                    {},
                    optional={
                        "relevance": _json,
                        "utility": st.dictionaries(
                            st.sampled_from(["d1", "d2"]),
                            _json
                            | st.fixed_dictionaries({"relevant": _json, "p_no_response": _json}),
                            max_size=3,
                        ),
                        "answers": _json,
                        "groups": st.dictionaries(st.sampled_from(["g", "h"]), _json, max_size=2),
                    },
                )
            },
        )
    )
    @settings(max_examples=400)
    def test_long_form_shortcut_never_accepts_what_the_schema_rejects(self, value):
        """The long-form fast check (utility, answers, groups) agrees with the schema."""
        if schemas.certainly_valid_sample(value):
            assert not list(schemas.validator("sample").iter_errors(value))

    @pytest.mark.parametrize(
        "value",
        [
            {"id": "a", "expected_output": ["d1", "d2"], "metadata": {"k": 3, "stratum": "s"}},
            {"id": "a", "expected_output": {"d1": 2, "d2": 0.5, "d3": -1}},
            {
                "id": "a",
                "expected_output": {
                    "relevance": ["d1"],
                    "utility": {"d1": 0.5, "d2": {"relevant": False, "p_no_response": 0.25}},
                    "answers": ["Paris"],
                    "groups": {"g": ["d1"]},
                },
            },
        ],
    )
    def test_common_samples_take_the_shortcut(self, value):
        """Plain samples skip jsonschema."""
        assert schemas.certainly_valid_sample(value)

    @pytest.mark.parametrize(
        "value",
        [
            ["d1", "d2"],
            {"retrieved": [{"id": "d1", "text": "t", "score": 1.5}], "pool": ["d1"], "cited": []},
        ],
    )
    def test_common_outputs_take_the_shortcut(self, value):
        """Plain outputs skip jsonschema."""
        assert schemas.certainly_valid_output(value)

    @pytest.mark.parametrize(
        ("items", "plain"),
        [
            (
                [{"id": "d1", "text": "t"}, {"id": "d2", "score": 2}, {"id": "d3", "score": 0.5}],
                True,
            ),
            (["d1", {"id": "d2"}], True),
            ([], True),
            ([{"id": "d1"}, {"id": ""}], False),
            ([{"id": "d1"}, {"text": "no id"}], False),
            ([{"id": "d1", "score": True}], False),
            ([{"id": "d1", "score": float("nan")}], False),
            ([{"id": "d1", "text": 5}], False),
            ([{"id": "d1", "rank": 1}], False),
            ([{"id": 7}], False),
            (["d1", ""], False),
        ],
    )
    def test_item_lists_are_checked_as_item_by_item(self, items, plain):
        """A ranked list of ``{id, text?, score?}`` dicts is checked in passes over the
        list, with the answer of checking each item."""
        assert schemas._plain_items(items) is plain
        assert all(map(schemas._plain_item, items)) is plain
        assert schemas.certainly_valid_output({"retrieved": items}) is plain
