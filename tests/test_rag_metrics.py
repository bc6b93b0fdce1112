"""The RAG family (METRICS.md "RAG family"): context precision, coverage / nugget recall,
chunk attribution and answer containment, pinned by hand derivations from the definitions."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
from engine import MetricParameterError, MetricRequirementError, Results

NA = None  # how results.per_sample() shows an NA value


def evaluate(
    eng: engine.Engine,
    samples: Sequence[Mapping[str, Any]],
    outputs: Mapping[str, Any],
    metrics: Sequence[str],
) -> Results:
    evaluation = eng.dataset(samples=list(samples)).with_metrics(list(metrics))
    return evaluation.evaluate(dict(outputs), missing="empty")  # no output: an empty ranking


def values(results: Results, label: str | None = None) -> list[float | None]:
    """Per-sample values of one metric (the only one unless ``label`` is given), NA as None."""
    label = label or results.labels[0]
    return [row["scores"][label] for row in results.per_sample()]


def score_one(
    eng: engine.Engine, expected: Any, actual: Any, metric: str, metadata: Any = None
) -> float | None:
    """The value of ``metric`` for a single sample (``actual`` None: q1 has no output,
    beside a sample q0 with an empty one, since a run of no output is refused)."""
    sample: dict[str, Any] = {"id": "q1", "expected_output": expected}
    if metadata is not None:
        sample["metadata"] = metadata
    if actual is not None:
        return values(evaluate(eng, [sample], {"q1": actual}, [metric]))[0]
    other = {"id": "q0", "expected_output": expected}
    empty = {"retrieved": [], "cited": []}
    return values(evaluate(eng, [sample, other], {"q0": empty}, [metric]))[0]


def passages(*texts: str, prefix: str = "d") -> list[dict[str, str]]:
    """Retrieved items d1, d2, ... with the given texts."""
    return [{"id": f"{prefix}{i}", "text": t} for i, t in enumerate(texts, start=1)]


class TestContextPrecision:
    """context-precision-at-k: Σ P@i·v_i over i ≤ k, divided by |D_k ∩ Rel|."""

    def test_mean_precision_at_the_relevant_ranks(self, eng: engine.Engine) -> None:
        """Relevant at ranks 1 and 3 of four: (P@1 + P@3) / 2."""
        value = score_one(eng, ["d1", "d3"], ["d1", "d2", "d3", "d4"], "context-precision-at-k")
        assert value == pytest.approx((1 / 1 + 2 / 3) / 2)

    def test_three_relevant_in_five(self, eng: engine.Engine) -> None:
        """Relevant at ranks 1, 3, 5: (1/1 + 2/3 + 3/5) / 3 (not the course module's 0.533)."""
        value = score_one(
            eng, ["a", "c", "e"], ["a", "b", "c", "d", "e"], "context-precision-at-k@5"
        )
        assert value == pytest.approx((1 / 1 + 2 / 3 + 3 / 5) / 3)

    def test_divides_by_relevant_retrieved_not_all_relevant(self, eng: engine.Engine) -> None:
        """Relevant ids never retrieved do not lower the value: one hit at rank 2 gives P@2."""
        value = score_one(eng, ["d2", "x", "y"], ["d1", "d2", "d3"], "context-precision-at-k")
        assert value == pytest.approx(1 / 2)

    def test_zero_when_no_relevant_item_in_top_k(self, eng: engine.Engine) -> None:
        """A relevant item just below the cutoff does not count: 0, not NA."""
        value = score_one(eng, ["d3"], ["d1", "d2", "d3"], "context-precision-at-k@2")
        assert value == 0.0

    def test_zero_when_the_sample_has_no_relevant_label(self, eng: engine.Engine) -> None:
        """Labels that are all non-relevant give 0."""
        value = score_one(eng, {"d1": 0, "d2": -1}, ["d1", "d2"], "context-precision-at-k")
        assert value == 0.0

    @pytest.mark.parametrize(
        ("k", "expected"),
        [
            (1, 0.0),
            (2, (1 / 2) / 1),
            (3, (1 / 2) / 1),
            (4, (1 / 2 + 2 / 4) / 2),
            (10, (1 / 2 + 2 / 4 + 3 / 5) / 3),
        ],
    )
    def test_cutoff(self, eng: engine.Engine, k: int, expected: float) -> None:
        """Relevant at ranks 2, 4, 5: only ranks ≤ k enter the sum and the divisor."""
        ranking = ["n1", "r1", "n2", "r2", "r3"]
        value = score_one(eng, ["r1", "r2", "r3"], ranking, f"context-precision-at-k@{k}")
        assert value == pytest.approx(expected)

    def test_default_k_is_five(self, eng: engine.Engine) -> None:
        """Without k the config default (5) applies: the relevant item at rank 6 is cut."""
        ranking = ["r1", "n1", "n2", "n3", "n4", "r2"]
        value = score_one(eng, ["r1", "r2"], ranking, "context-precision-at-k")
        assert value == pytest.approx((1 / 1) / 1)

    def test_metadata_k_cuts_only_an_open_k(self, eng: engine.Engine) -> None:
        """metadata.k = 2 with k open: only rank 1 counts, 1/1; an explicit @4 is 4:
        d1 (1/1) and d3 (2/3), (1 + 2/3) / 2."""
        relevant, ranking, k2 = ["d1", "d3"], ["d1", "d2", "d3"], {"k": 2}
        assert score_one(eng, relevant, ranking, "context-precision-at-k", metadata=k2) == (
            pytest.approx(1 / 1)
        )
        assert score_one(eng, relevant, ranking, "context-precision-at-k@4", metadata=k2) == (
            pytest.approx((1 + 2 / 3) / 2)
        )

    @pytest.mark.parametrize(
        ("threshold", "expected"),
        [
            (1, (1 / 1 + 2 / 2 + 3 / 3) / 3),
            (2, (1 / 2 + 2 / 3) / 2),
            (3, (1 / 3) / 1),
            (4, 0.0),
        ],
    )
    def test_relevance_threshold(self, eng: engine.Engine, threshold: int, expected: float) -> None:
        """Graded labels 1, 2, 3 at ranks 1, 2, 3: Rel = labels ≥ relevance_threshold."""
        value = score_one(
            eng,
            {"d1": 1, "d2": 2, "d3": 3},
            ["d1", "d2", "d3"],
            f"context-precision-at-k(relevance_threshold={threshold})",
        )
        assert value == pytest.approx(expected)

    def test_unjudged_ids_are_not_relevant(self, eng: engine.Engine) -> None:
        """An unjudged id at rank 1 pushes the relevant one to rank 2: P@2 = 1/2."""
        value = score_one(eng, {"d2": 1}, ["u", "d2"], "context-precision-at-k")
        assert value == pytest.approx(1 / 2)

    def test_duplicates_are_dropped_before_ranking(self, eng: engine.Engine) -> None:
        """[d1, d1, d3] ranks as [d1, d3]: (1/1 + 2/2) / 2."""
        value = score_one(eng, ["d1", "d3"], ["d1", "d1", "d3"], "context-precision-at-k@2")
        assert value == pytest.approx((1 / 1 + 2 / 2) / 2)

    @pytest.mark.parametrize("actual", [None, []], ids=["no-output", "empty-ranking"])
    def test_no_output_scores_zero(self, eng: engine.Engine, actual: Any) -> None:
        """A missing output is an empty ranking: no relevant item in D_k, so 0."""
        assert score_one(eng, ["d1"], actual, "context-precision-at-k") == 0.0

    def test_requires_relevance_labels(self, eng: engine.Engine) -> None:
        """A sample with only groups lacks relevance labels: an error naming it."""
        with pytest.raises(MetricRequirementError) as caught:
            evaluate(
                eng,
                [{"id": "g1", "expected_output": {"groups": {"a": ["d1"]}}}],
                {"g1": ["d1"]},
                ["context-precision-at-k"],
            )
        assert [p.sample_id for p in caught.value.problems] == ["g1"]

    @pytest.mark.parametrize("params", [{"relevance_threshold": "high"}, {"k": 0}])
    def test_rejects_bad_parameters(self, eng: engine.Engine, params: dict[str, Any]) -> None:
        """A non-numeric threshold or a non-positive k is a parameter error."""
        with pytest.raises(MetricParameterError):
            eng.metric("context-precision-at-k", **params)


def grouped(groups: Mapping[str, Sequence[str]] | None, sample_id: str = "q1") -> dict[str, Any]:
    expected: dict[str, Any] = {"relevance": []}
    if groups is not None:
        expected["groups"] = dict(groups)
    return {"id": sample_id, "expected_output": expected}


class TestCoverageRecall:
    """coverage-recall-at-k (alias nugget-recall-at-k): share of groups hit by D_k."""

    def test_fraction_of_groups_hit(self, eng: engine.Engine) -> None:
        """Groups a (d1 or d2), b (d3), c (d9); ranking d2, d5, d3 hits a and b: 2/3."""
        groups = {"a": ["d1", "d2"], "b": ["d3"], "c": ["d9"]}
        results = evaluate(
            eng, [grouped(groups)], {"q1": ["d2", "d5", "d3"]}, ["coverage-recall-at-k"]
        )
        assert values(results) == [pytest.approx(2 / 3)]

    def test_one_id_can_cover_several_groups(self, eng: engine.Engine) -> None:
        """d1 belongs to both groups, so retrieving d1 alone covers 2/2."""
        groups = {"a": ["d1"], "b": ["d7", "d1"]}
        results = evaluate(eng, [grouped(groups)], {"q1": ["d1"]}, ["coverage-recall-at-k"])
        assert values(results) == [pytest.approx(2 / 2)]

    def test_a_group_without_ids_is_never_covered(self, eng: engine.Engine) -> None:
        """An empty group stays in the divisor: 1/2."""
        groups: dict[str, list[str]] = {"a": ["d1"], "empty": []}
        results = evaluate(eng, [grouped(groups)], {"q1": ["d1"]}, ["coverage-recall-at-k"])
        assert values(results) == [pytest.approx(1 / 2)]

    @pytest.mark.parametrize("groups", [None, {}], ids=["no-groups-key", "empty-map"])
    def test_na_without_groups(self, eng: engine.Engine, groups: Any) -> None:
        """No groups (absent or an empty map) is NA, skipped by the aggregate."""
        samples = [grouped(groups, "na"), grouped({"a": ["d1"]}, "ok")]
        results = evaluate(eng, samples, {"na": ["d1"], "ok": ["d1"]}, ["coverage-recall-at-k"])
        assert values(results) == [NA, 1.0]
        assert results.summary()["coverage-recall-at-k"] == {
            "mean": 1.0,
            "n": 1,
            "na": 1,
            "errors": 0,  # NA by definition, not a failure
            "error_rate": 0.0,
            "ci": None,
        }

    def test_needs_no_relevance_labels(self, eng: engine.Engine) -> None:
        """Groups alone are enough; a sample with only relevance labels is NA."""
        samples: list[dict[str, Any]] = [
            {"id": "g", "expected_output": {"groups": {"a": ["d1"], "b": ["d2"]}}},
            {"id": "r", "expected_output": ["d1"]},
        ]
        results = evaluate(eng, samples, {"g": ["d2"], "r": ["d1"]}, ["coverage-recall-at-k"])
        assert values(results) == [pytest.approx(1 / 2), NA]

    @pytest.mark.parametrize(
        ("k", "expected"), [(1, 0 / 3), (2, 1 / 3), (3, 1 / 3), (4, 2 / 3), (5, 3 / 3)]
    )
    def test_cutoff(self, eng: engine.Engine, k: int, expected: float) -> None:
        """Groups first hit at ranks 2, 4, 5: coverage grows as k passes each."""
        groups = {"a": ["d2"], "b": ["d4"], "c": ["d5"]}
        ranking = ["d1", "d2", "d3", "d4", "d5"]
        results = evaluate(eng, [grouped(groups)], {"q1": ranking}, [f"coverage-recall-at-k@{k}"])
        assert values(results) == [pytest.approx(expected)]

    def test_metadata_k_cuts_only_an_open_k(self, eng: engine.Engine) -> None:
        """metadata.k = 1 with k open: only d1 is in D_k, covering 1 of 2 groups; an
        explicit @3 is 3: d1 and d3 cover both."""
        sample = {**grouped({"a": ["d1"], "b": ["d3"]}), "metadata": {"k": 1}}
        specs = ["coverage-recall-at-k", "coverage-recall-at-k@3"]
        results = evaluate(eng, [sample], {"q1": ["d1", "d2", "d3"]}, specs)
        assert results.values(specs[0]).tolist() == [pytest.approx(1 / 2)]
        assert results.values(specs[1]).tolist() == [pytest.approx(2 / 2)]

    def test_duplicates_do_not_take_slots(self, eng: engine.Engine) -> None:
        """[d9, d9, d9, d3] ranks as [d9, d3], so k = 2 reaches d3: 2/2."""
        groups = {"a": ["d9"], "b": ["d3"]}
        results = evaluate(
            eng, [grouped(groups)], {"q1": ["d9", "d9", "d9", "d3"]}, ["coverage-recall-at-k@2"]
        )
        assert values(results) == [pytest.approx(2 / 2)]

    @pytest.mark.parametrize(
        "outputs", [{"q0": ["d1"]}, {"q0": ["d1"], "q1": []}], ids=["no-output", "empty-ranking"]
    )
    def test_no_output_scores_zero(self, eng: engine.Engine, outputs: dict[str, Any]) -> None:
        """A missing output is an empty ranking: no group is covered, 0 (not NA)."""
        samples = [grouped({"a": ["d1"]}), grouped({"a": ["d1"]}, "q0")]
        results = evaluate(eng, samples, outputs, ["coverage-recall-at-k"])
        assert values(results) == [0.0, 1.0]

    def test_samples_do_not_share_rankings(self, eng: engine.Engine) -> None:
        """d1 retrieved for q2 does not cover q1's group, and vice versa."""
        samples = [grouped({"a": ["d1"]}, "q1"), grouped({"a": ["d2"]}, "q2")]
        results = evaluate(eng, samples, {"q1": ["d2"], "q2": ["d1"]}, ["coverage-recall-at-k"])
        assert values(results) == [0.0, 0.0]

    def test_integer_ids_match_their_strings(self, eng: engine.Engine) -> None:
        """Ids given as integers compare as their decimal strings."""
        sample = {"id": "q1", "expected_output": {"groups": {"a": [1, 2], "b": [3]}}}
        results = evaluate(eng, [sample], {"q1": [2, "3"]}, ["coverage-recall-at-k"])
        assert values(results) == [pytest.approx(2 / 2)]

    def test_many_samples_mixed(self, eng: engine.Engine) -> None:
        """A batch mixing NA, no output, empty groups and hits keeps each row's value."""
        samples = [
            grouped({"a": ["x"], "b": ["y"], "c": ["z"]}, "s1"),
            grouped(None, "s2"),
            grouped({"a": ["x"]}, "s3"),
            grouped({"a": [], "b": []}, "s4"),
            grouped({"a": ["p", "q"], "b": ["q"]}, "s5"),
        ]
        outputs = {"s1": ["z", "y"], "s2": ["x"], "s4": ["x"], "s5": ["r", "q"]}
        results = evaluate(eng, samples, outputs, ["coverage-recall-at-k"])
        assert values(results) == [
            pytest.approx(2 / 3),
            NA,
            0.0,
            0.0,
            pytest.approx(2 / 2),
        ]

    @pytest.mark.parametrize("k", [1, 2, 3])
    def test_nugget_recall_is_the_same_value(self, eng: engine.Engine, k: int) -> None:
        """nugget-recall-at-k is an alias: identical per-sample values, including NA."""
        samples = [
            grouped({"a": ["d1"], "b": ["d3"], "c": ["d8"]}, "q1"),
            grouped(None, "q2"),
        ]
        outputs = {"q1": ["d3", "d2", "d1"], "q2": ["d1"]}
        coverage = f"coverage-recall-at-k@{k}"
        nugget = f"nugget-recall-at-k@{k}"
        results = evaluate(eng, samples, outputs, [coverage, nugget])
        assert values(results, coverage) == values(results, nugget)
        assert eng.metric("nugget-recall-at-k").alias == "nugget-recall-at-k"


def cited(retrieved: list[Any], cites: list[Any] | None) -> dict[str, Any]:
    output: dict[str, Any] = {"retrieved": retrieved}
    if cites is not None:
        output["cited"] = cites
    return output


class TestChunkAttribution:
    """chunk-attribution-rate: |cited ∩ D_k| / |D_k|, NA when D_k is empty."""

    def test_share_of_slots_cited(self, eng: engine.Engine) -> None:
        """Four slots, d2 and d4 cited (d9 cited but not retrieved): 2/4."""
        actual = cited(["d1", "d2", "d3", "d4"], ["d2", "d4", "d9"])
        assert score_one(eng, ["d1"], actual, "chunk-attribution-rate") == pytest.approx(2 / 4)

    @pytest.mark.parametrize(("k", "expected"), [(1, 0 / 1), (2, 1 / 2), (3, 1 / 3), (10, 2 / 4)])
    def test_cutoff_divides_by_the_slots_filled(
        self, eng: engine.Engine, k: int, expected: float
    ) -> None:
        """|D_k| = min(k, n): with four items and k = 10 the divisor is 4."""
        actual = cited(["d1", "d2", "d3", "d4"], ["d2", "d4"])
        value = score_one(eng, ["d1"], actual, f"chunk-attribution-rate@{k}")
        assert value == pytest.approx(expected)

    def test_metadata_k_cuts_only_an_open_k(self, eng: engine.Engine) -> None:
        """metadata.k = 2 with k open: one of the first two slots is cited, 1/2; an
        explicit @4 is 4: three of four, 3/4."""
        actual = cited(["d1", "d2", "d3", "d4"], ["d1", "d3", "d4"])
        k2 = {"k": 2}
        assert score_one(eng, ["d1"], actual, "chunk-attribution-rate", metadata=k2) == (
            pytest.approx(1 / 2)
        )
        assert score_one(eng, ["d1"], actual, "chunk-attribution-rate@4", metadata=k2) == (
            pytest.approx(3 / 4)
        )

    def test_nothing_cited_scores_zero(self, eng: engine.Engine) -> None:
        """An empty cited list over a full top k is 0."""
        actual = cited(["d1", "d2"], [])
        assert score_one(eng, ["d1"], actual, "chunk-attribution-rate") == 0.0

    @pytest.mark.parametrize(
        "actual", [None, cited([], ["d1"])], ids=["no-output", "empty-ranking"]
    )
    def test_na_when_top_k_is_empty(self, eng: engine.Engine, actual: Any) -> None:
        """No output, or an empty ranking, leaves D_k empty: NA."""
        assert score_one(eng, ["d1"], actual, "chunk-attribution-rate") is NA

    def test_duplicates_counted_once(self, eng: engine.Engine) -> None:
        """Retrieved [d1, d1, d2] is two slots; citing d1 twice still covers one: 1/2."""
        actual = cited(["d1", "d1", "d2"], ["d1", "d1"])
        assert score_one(eng, ["d1"], actual, "chunk-attribution-rate") == pytest.approx(1 / 2)

    def test_needs_no_labels(self, eng: engine.Engine) -> None:
        """Attribution reads only the output: a sample with only answers is scored."""
        expected = {"answers": ["yes"]}
        actual = cited(["d1", "d2", "d3"], ["d3"])
        assert score_one(eng, expected, actual, "chunk-attribution-rate") == pytest.approx(1 / 3)

    @pytest.mark.parametrize(
        "actual", [["d1", "d2"], {"retrieved": ["d1"]}], ids=["bare", "object"]
    )
    def test_requires_cited(self, eng: engine.Engine, actual: Any) -> None:
        """An output without cited ids is an error naming the sample."""
        samples = [
            {"id": "ok", "expected_output": ["d1"]},
            {"id": "bad", "expected_output": ["d1"]},
        ]
        outputs = {"ok": cited(["d1"], ["d1"]), "bad": actual}
        with pytest.raises(MetricRequirementError) as caught:
            evaluate(eng, samples, outputs, ["chunk-attribution-rate"])
        assert [p.sample_id for p in caught.value.problems] == ["bad"]
        assert "'bad'" in str(caught.value)


def answer_sample(answers: Any, sample_id: str = "q1", **extra: Any) -> dict[str, Any]:
    return {"id": sample_id, "expected_output": {"answers": answers}, **extra}


def containment(
    eng: engine.Engine, samples: list[dict[str, Any]], outputs: dict[str, Any], metric: str
) -> list[tuple[float | None, int | None]]:
    """(value, details matched_rank) per sample."""
    results = evaluate(eng, samples, outputs, [metric])
    label = results.labels[0]
    return [
        (row["scores"][label], row["details"][label]["matched_rank"])
        for row in results.per_sample()
    ]


class TestAnswerContainment:
    """answer-containment-at-k: an answer is a substring of a top-k passage's text."""

    @pytest.mark.parametrize(
        ("answer", "text"),
        [
            ("New  York", "flights to new\n\tyork today"),
            ("  Paris ", "PARIS is the capital"),
            ("Straße", "DIE STRASSE"),
            ("Ünïcode", "ünïcode"),
        ],
    )
    def test_collapses_whitespace_and_case_folds(
        self, eng: engine.Engine, answer: str, text: str
    ) -> None:
        """Runs of whitespace become one space, ends are stripped, and case is folded."""
        got = containment(
            eng, [answer_sample(answer)], {"q1": passages(text)}, "answer-containment-at-k"
        )
        assert got == [(1.0, 1)]

    @pytest.mark.parametrize(
        ("answer", "text", "expected"),
        [
            ("Paris", "paris is the capital", (0.0, None)),
            ("Paris", "to  Paris\nand back", (1.0, 1)),
            ("STRASSE", "Straße", (0.0, None)),
        ],
    )
    def test_case_sensitive(
        self, eng: engine.Engine, answer: str, text: str, expected: tuple[float, int | None]
    ) -> None:
        """case_sensitive=True keeps case but still collapses whitespace."""
        got = containment(
            eng,
            [answer_sample(answer)],
            {"q1": passages(text)},
            "answer-containment-at-k(case_sensitive=True)",
        )
        assert got == [expected]

    def test_matched_rank_is_the_first_match(self, eng: engine.Engine) -> None:
        """Answers at ranks 2 and 3: the details record rank 2."""
        texts = passages("nothing here", "the answer is 42", "again 42")
        got = containment(eng, [answer_sample("42")], {"q1": texts}, "answer-containment-at-k")
        assert got == [(1.0, 2)]

    def test_any_of_several_answers(self, eng: engine.Engine) -> None:
        """A list of answers matches if any one of them is contained."""
        texts = passages("alpha", "beta gamma")
        got = containment(
            eng, [answer_sample(["delta", "gamma"])], {"q1": texts}, "answer-containment-at-k"
        )
        assert got == [(1.0, 2)]

    @pytest.mark.parametrize(("k", "expected"), [(2, (0.0, None)), (3, (1.0, 3))])
    def test_cutoff(self, eng: engine.Engine, k: int, expected: tuple[float, int | None]) -> None:
        """The answer at rank 3 counts only when k ≥ 3."""
        texts = passages("a", "b", "the answer")
        got = containment(
            eng, [answer_sample("answer")], {"q1": texts}, f"answer-containment-at-k@{k}"
        )
        assert got == [expected]

    def test_metadata_k_cuts_only_an_open_k(self, eng: engine.Engine) -> None:
        """metadata.k = 1 with k open: the answer at rank 2 is cut; an explicit @3 is 3:
        found at rank 2."""
        sample = answer_sample("answer", metadata={"k": 1})
        texts = passages("a", "the answer")
        got = containment(eng, [sample], {"q1": texts}, "answer-containment-at-k")
        assert got == [(0.0, None)]
        got = containment(eng, [sample], {"q1": texts}, "answer-containment-at-k@3")
        assert got == [(1.0, 2)]

    def test_duplicate_keeps_the_first_text(self, eng: engine.Engine) -> None:
        """A repeated id is dropped with its text; the later d2 is rank 2."""
        items = [
            {"id": "d1", "text": "no"},
            {"id": "d1", "text": "the answer"},
            {"id": "d2", "text": "answer again"},
        ]
        got = containment(eng, [answer_sample("answer")], {"q1": items}, "answer-containment-at-k")
        assert got == [(1.0, 2)]

    def test_no_output_scores_zero(self, eng: engine.Engine) -> None:
        """A missing output is an empty ranking: nothing contains the answer, 0."""
        samples = [answer_sample("x"), answer_sample("x", "q0")]
        got = containment(eng, samples, {"q0": passages("x")}, "answer-containment-at-k")
        assert got == [(0.0, None), (1.0, 1)]

    def test_whitespace_only_answer_never_matches(self, eng: engine.Engine) -> None:
        """An answer that collapses to the empty string is not contained in everything."""
        got = containment(
            eng, [answer_sample(["  "])], {"q1": passages("text")}, "answer-containment-at-k"
        )
        assert got == [(0.0, None)]

    @pytest.mark.parametrize(
        "expected", [["d1"], {"groups": {"a": ["d1"]}}], ids=["relevance-only", "groups-only"]
    )
    def test_sample_without_answers_is_an_error(self, eng: engine.Engine, expected: Any) -> None:
        """A sample with no answers raises MetricRequirementError naming it."""
        samples = [answer_sample("x", "fine"), {"id": "lacking", "expected_output": expected}]
        outputs = {"fine": passages("x"), "lacking": passages("x")}
        with pytest.raises(MetricRequirementError) as caught:
            evaluate(eng, samples, outputs, ["answer-containment-at-k"])
        assert [p.sample_id for p in caught.value.problems] == ["lacking"]
        assert "'lacking'" in str(caught.value)

    @pytest.mark.parametrize(
        "items",
        [["d1", "d2"], [{"id": "d1", "text": "x"}, {"id": "d2"}]],
        ids=["bare-ids", "one-item-without-text"],
    )
    def test_item_without_text_is_an_error(self, eng: engine.Engine, items: list[Any]) -> None:
        """An output item without text raises MetricRequirementError naming the sample."""
        samples = [answer_sample("x", "fine"), answer_sample("x", "textless")]
        outputs = {"fine": passages("x"), "textless": items}
        with pytest.raises(MetricRequirementError) as caught:
            evaluate(eng, samples, outputs, ["answer-containment-at-k"])
        assert [p.sample_id for p in caught.value.problems] == ["textless"]
        assert "'textless'" in str(caught.value)

    def test_rejects_non_bool_case_sensitive(self, eng: engine.Engine) -> None:
        """case_sensitive must be a bool."""
        with pytest.raises(MetricParameterError):
            eng.metric("answer-containment-at-k", case_sensitive="yes")


class TestMetadata:
    """The family's registration: aliases, families, requirements, resolved k."""

    @pytest.mark.parametrize(
        ("alias", "requires"),
        [
            ("context-precision-at-k", {"relevance"}),
            ("coverage-recall-at-k", set()),
            ("nugget-recall-at-k", set()),
            ("chunk-attribution-rate", {"cited"}),
            ("answer-containment-at-k", {"answers", "texts"}),
        ],
    )
    def test_registered(self, eng: engine.Engine, alias: str, requires: set[str]) -> None:
        """Each alias loads, is in the rag family and declares what it reads."""
        metric = eng.metric(alias)
        assert metric.alias == alias
        assert type(metric).family == "rag"  # type: ignore[attr-defined]
        assert metric.requires == requires
        assert metric.higher_is_better is True

    def test_results_record_the_resolved_k(self, eng: engine.Engine) -> None:
        """An unset k is recorded as the config default it resolved to."""
        results = evaluate(eng, [grouped({"a": ["d1"]})], {"q1": ["d1"]}, ["coverage-recall-at-k"])
        assert results.metrics[0].params["k"] == 5


# -- properties ---------------------------------------------------------------------------

_ENGINE = engine.Engine(config={})
_IDS = st.sampled_from([f"d{i}" for i in range(8)])


@st.composite
def rag_cases(draw: st.DrawFn) -> tuple[list[str], list[str], dict[str, list[str]], int]:
    """(ranking of distinct ids, cited ids, groups, k)."""
    ranking = draw(st.lists(_IDS, unique=True, max_size=8))
    cites = draw(st.lists(_IDS, max_size=6))
    groups = draw(
        st.dictionaries(
            st.sampled_from(["g1", "g2", "g3", "g4"]), st.lists(_IDS, max_size=3), max_size=4
        )
    )
    return ranking, cites, groups, draw(st.integers(min_value=1, max_value=10))


def _rag_values(
    ranking: list[str], cites: list[str], groups: dict[str, list[str]], k: int
) -> tuple[float, float]:
    sample = {"id": "q", "expected_output": {"groups": groups}}
    results = evaluate(
        _ENGINE,
        [sample],
        {"q": {"retrieved": ranking, "cited": cites}},
        [f"coverage-recall-at-k@{k}", f"chunk-attribution-rate@{k}"],
    )
    coverage, attribution = (results.scores[label][0] for label in results.labels)
    return float(coverage), float(attribution)


@pytest.mark.slow
class TestProperties:
    """Invariants over random rankings, citations and groups."""

    @settings(max_examples=60, deadline=None)
    @given(rag_cases())
    def test_values_are_rates_or_na(self, case: tuple[Any, ...]) -> None:
        """Coverage and attribution lie in [0, 1]; NA exactly when groups / D_k are empty."""
        ranking, cites, groups, k = case
        coverage, attribution = _rag_values(ranking, cites, groups, k)
        assert math.isnan(coverage) == (not groups)
        assert math.isnan(attribution) == (not ranking)
        for value in (coverage, attribution):
            assert math.isnan(value) or 0.0 <= value <= 1.0

    @settings(max_examples=60, deadline=None)
    @given(rag_cases(), st.randoms(use_true_random=False))
    def test_order_within_top_k_does_not_matter(self, case: tuple[Any, ...], rng: Any) -> None:
        """Shuffling the first k items leaves coverage and attribution unchanged."""
        ranking, cites, groups, k = case
        head = ranking[:k]
        rng.shuffle(head)
        shuffled = head + ranking[k:]
        before = _rag_values(ranking, cites, groups, k)
        after = _rag_values(shuffled, cites, groups, k)
        assert before == pytest.approx(after, nan_ok=True)

    @settings(max_examples=60, deadline=None)
    @given(rag_cases())
    def test_match_set_definitions(self, case: tuple[Any, ...]) -> None:
        """Both equal a direct set computation of their definitions."""
        ranking, cites, groups, k = case
        top = set(ranking[:k])
        coverage, attribution = _rag_values(ranking, cites, groups, k)
        if groups:
            expected = sum(bool(top & set(ids)) for ids in groups.values()) / len(groups)
            assert coverage == pytest.approx(expected)
        if top:
            assert attribution == pytest.approx(len(top & set(cites)) / len(top))

    @settings(max_examples=60, deadline=None)
    @given(
        st.lists(_IDS, unique=True, max_size=8),
        st.dictionaries(_IDS, st.integers(min_value=-1, max_value=3), max_size=8),
        st.integers(min_value=1, max_value=10),
    )
    def test_context_precision_matches_its_definition(
        self, ranking: list[str], labels: dict[str, int], k: int
    ) -> None:
        """Context precision equals Σ P@i·v_i / |D_k ∩ Rel| computed rank by rank, in [0, 1]."""
        results = evaluate(
            _ENGINE,
            [{"id": "q", "expected_output": {"relevance": labels}}],
            {"q": ranking},
            [f"context-precision-at-k@{k}"],
        )
        value = results.scores[results.labels[0]][0]
        relevant = [labels.get(d, 0) >= 1 for d in ranking[:k]]
        total = sum(sum(relevant[:i]) / i for i in range(1, len(relevant) + 1) if relevant[i - 1])
        expected = total / sum(relevant) if any(relevant) else 0.0
        assert value == pytest.approx(expected)
        assert 0.0 <= value <= 1.0
