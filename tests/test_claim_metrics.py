"""context-recall-at-k and claim-precision-at-k, pinned by hand: a sample's claims are
``expected_output.claims``, the passages that support a claim the group named by its id.
Each expected value is derived in the test's docstring or comments."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.cli import main
from engine.errors import InputError
from engine.io.columns import ContentHash
from engine.io.documents import parse_samples
from engine.testing import make_batch
from metrics_plugins.rag import ClaimPrecisionAtK, ContextRecallAtK, CoverageRecallAtK


def _claims(*ids: str) -> list[dict[str, str]]:
    return [{"id": claim, "text": f"claim {claim}"} for claim in ids]


def _sample(
    sample_id: str, claims: list[str] | None, groups: dict[str, list[str]] | None, **metadata: Any
) -> dict[str, Any]:
    expected: dict[str, Any] = {"answers": ["x"]}
    if claims is not None:
        expected["claims"] = _claims(*claims)
    if groups is not None:
        expected["groups"] = groups
    sample: dict[str, Any] = {"id": sample_id, "expected_output": expected}
    if metadata:
        sample["metadata"] = metadata
    return sample


def _scores(
    samples: list[dict[str, Any]], outputs: dict[str, Any], **params: Any
) -> dict[str, list[float]]:
    batch = make_batch(samples, outputs)
    return {
        name: metric(**params).score(batch).tolist()
        for name, metric in (
            ("recall", ContextRecallAtK),
            ("precision", ClaimPrecisionAtK),
            ("coverage", CoverageRecallAtK),
        )
    }


#: The course module's example: four reference claims; the tower's height is supported by
#: c1 or c2, the year by c3, the designer only by c8 (never retrieved), the visitor
#: statistic by c5. Retrieved: c1, c3, c4, c5, c6.
EIFFEL = _sample(
    "eiffel",
    ["height", "year", "designer", "visitors"],
    {"height": ["c1", "c2"], "year": ["c3"], "designer": ["c8"], "visitors": ["c5"]},
)
EIFFEL_RUN = {"eiffel": ["c1", "c3", "c4", "c5", "c6"]}


class TestByHand:
    def test_course_module_example(self) -> None:
        """Top 5 holds a supporting passage for height (c1), year (c3) and visitors (c5),
        none for the designer: context recall 3/4. Of the five passages, c1, c3 and c5
        support a claim, c4 and c6 none: claim precision 3/5."""
        scores = _scores([EIFFEL], EIFFEL_RUN, k=5)
        assert scores["recall"] == [0.75]
        assert scores["precision"] == [pytest.approx(3 / 5)]

    def test_smaller_k(self) -> None:
        """k = 2: top 2 = c1, c3: height and year supported (2/4); both passages support
        a claim (2/2). k = 1: c1 alone: 1/4 and 1/1."""
        assert _scores([EIFFEL], EIFFEL_RUN, k=2)["recall"] == [0.5]
        assert _scores([EIFFEL], EIFFEL_RUN, k=2)["precision"] == [1.0]
        assert _scores([EIFFEL], EIFFEL_RUN, k=1) == {
            "recall": [0.25],
            "precision": [1.0],
            "coverage": [0.25],
        }

    def test_unsupported_claims_count(self) -> None:
        """An empty group and a missing group both count as unsupported claims: claims a,
        b, c with groups a: [d1], b: []; top 2 = d1, d2: 1 of 3 claims supported; d1 of
        the 2 passages supports one (1/2). Coverage sees 2 groups, 1 covered (1/2)."""
        sample = _sample("s", ["a", "b", "c"], {"a": ["d1"], "b": []})
        scores = _scores([sample], {"s": ["d1", "d2"]}, k=2)
        assert scores["recall"] == [pytest.approx(1 / 3)]
        assert scores["precision"] == [0.5]
        assert scores["coverage"] == [0.5]

    def test_groups_not_named_by_a_claim_are_ignored(self) -> None:
        """A facet group ``f`` beside claim ``a``: context recall counts a alone (d2 does
        not support it: 0/1) and d2 supports no claim (precision 0/2); coverage counts
        both groups and f is covered (1/2)."""
        sample = _sample("s", ["a"], {"a": ["d1"], "f": ["d2"]})
        assert _scores([sample], {"s": ["d2", "d3"]}, k=5) == {
            "recall": [0.0],
            "precision": [0.0],
            "coverage": [0.5],
        }

    def test_a_passage_supporting_two_claims_counts_once(self) -> None:
        """d1 supports a and b, d2 supports b: top 3 = d1, z, d2: both claims supported
        (2/2); supporting passages d1 and d2 of 3 (2/3), d1 not counted twice."""
        sample = _sample("s", ["a", "b"], {"a": ["d1"], "b": ["d1", "d2"]})
        scores = _scores([sample], {"s": ["d1", "z", "d2"]}, k=3)
        assert scores["recall"] == [1.0]
        assert scores["precision"] == [pytest.approx(2 / 3)]

    def test_repeated_ids_keep_their_first_rank(self) -> None:
        """d1, d1, z, d2 deduplicates to d1, z, d2: top 2 = d1, z: claim a (d1) supported,
        b (d2) not: 1/2; d1 of the two passages supports: 1/2."""
        sample = _sample("s", ["a", "b"], {"a": ["d1"], "b": ["d2"]})
        scores = _scores([sample], {"s": ["d1", "d1", "z", "d2"]}, k=2)
        assert scores["recall"] == [0.5] and scores["precision"] == [0.5]

    def test_metadata_k_cuts_only_an_open_k(self) -> None:
        """metadata.k = 1 with k open cuts at d1: a supported (1/2), d1 supports (1/1); an
        explicit k = 5 is 5: a and b supported (2/2), d1 and d2 support (2/2)."""
        sample = _sample("s", ["a", "b"], {"a": ["d1"], "b": ["d2"]}, k=1)
        scores = _scores([sample], {"s": ["d1", "d2"]})
        assert scores["recall"] == [0.5] and scores["precision"] == [1.0]
        scores = _scores([sample], {"s": ["d1", "d2"]}, k=5)
        assert scores["recall"] == [1.0] and scores["precision"] == [1.0]

    def test_na_rules(self) -> None:
        """NA without claims, with claims none of which has a group (support never
        judged), and for claim precision with an empty top k; context recall of a sample
        with judged claims and no output, or an empty ranking, is 0."""
        samples = [
            _sample("no-claims", None, {"f": ["d1"]}),
            _sample("empty-claims", [], {"f": ["d1"]}),
            _sample("unjudged", ["a"], None),
            _sample("other-groups", ["a"], {"f": ["d1"]}),
            _sample("no-output", ["a"], {"a": ["d1"]}),
            _sample("empty-ranking", ["a"], {"a": ["d1"]}),
        ]
        outputs = {
            name: ["d1"] for name in ("no-claims", "empty-claims", "unjudged", "other-groups")
        }
        outputs["empty-ranking"] = []
        scores = _scores(samples, outputs, k=5)
        nan = math.nan
        np.testing.assert_array_equal(scores["recall"], [nan, nan, nan, nan, 0.0, 0.0])
        np.testing.assert_array_equal(scores["precision"], [nan, nan, nan, nan, nan, nan])

    def test_a_sample_scores_alone_as_in_a_batch(self) -> None:
        """Each row depends on its own claims and groups only: the Eiffel sample and the
        two-claim sample keep their values when scored together, in either order."""
        other = _sample("s", ["a", "b"], {"a": ["d1"], "b": ["d1", "d2"]})
        outputs = {**EIFFEL_RUN, "s": ["d1", "z", "d2"]}
        together = _scores([EIFFEL, other], outputs, k=3)
        # Eiffel at k = 3: c1, c3, c4: height and year (2/4), c1 and c3 of 3 (2/3)
        assert together["recall"] == [0.5, 1.0]
        assert together["precision"] == [pytest.approx(2 / 3), pytest.approx(2 / 3)]
        assert _scores([other, EIFFEL], outputs, k=3)["recall"] == [1.0, 0.5]


class TestValidation:
    def test_duplicate_claim_ids_name_the_sample_and_pointer(self) -> None:
        """Two claims with one id: an InputError with the sample id and JSON pointer."""
        sample = {"id": "s", "expected_output": {"claims": _claims("a", "b", "a")}}
        with pytest.raises(InputError) as info:
            make_batch([sample], {})
        (problem,) = info.value.problems
        assert problem.sample_id == "s"
        assert problem.pointer == "/0/expected_output/claims/2/id"
        assert "duplicate claim id 'a' (first at claims/0)" in problem.message

    @pytest.mark.parametrize(
        ("expected", "pointer"),
        [
            ({"claims": [{"id": "a"}]}, "/0/expected_output/claims/0"),
            ({"claims": [{"id": "a", "text": ""}]}, "/0/expected_output/claims/0/text"),
            ({"claims": "a"}, "/0/expected_output/claims"),
            ({"reference": ""}, "/0/expected_output/reference"),
            ({"claims": [{"id": "a", "text": "t", "why": 1}]}, "/0/expected_output/claims/0"),
        ],
    )
    def test_malformed_claims_are_schema_errors(
        self, expected: dict[str, Any], pointer: str
    ) -> None:
        """Claims are [{id, text}] with non-empty strings; a reference is a non-empty string."""
        with pytest.raises(InputError) as info:
            make_batch([{"id": "s", "expected_output": expected}], {})
        assert [(p.sample_id, p.pointer) for p in info.value.problems] == [("s", pointer)]

    def test_claims_alone_are_the_long_form(self) -> None:
        """``{claims, reference}`` without other labels is read as labels, not as a gain map."""
        sample = {"id": "s", "expected_output": {"reference": "A. B.", "claims": _claims("a")}}
        batch = make_batch([sample], {"s": ["d1"]})
        assert batch.columns.column("claims").to_pylist() == [["a"]]
        assert batch.has("relevance").tolist() == [False]


def test_slotwise_run_scores_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """From the command line, by alias: the Eiffel sample (3/4, 3/5) and a sample without
    claims (NA) give means over n = 1 with na = 1."""
    dataset, outputs = tmp_path / "d.json", tmp_path / "o.json"
    dataset.write_text(json.dumps({"samples": [EIFFEL, _sample("plain", None, None)]}))
    outputs.write_text(json.dumps({**EIFFEL_RUN, "plain": ["c1"]}))
    code = main(
        [
            "run", str(dataset), "--outputs", str(outputs), "--format", "json",
            "--metrics", "context-recall-at-k@5,claim-precision-at-k@5",
        ]
    )  # fmt: skip
    assert code == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["context-recall-at-k@5"]["mean"] == 0.75
    assert summary["claim-precision-at-k@5"]["mean"] == pytest.approx(0.6)
    assert (summary["context-recall-at-k@5"]["n"], summary["context-recall-at-k@5"]["na"]) == (1, 1)


def test_claim_ids_are_part_of_the_dataset_hash() -> None:
    """Adding or removing a claim changes the dataset's hash (context recall's
    denominator changes with it); a claim's text, which no metric reads, does not."""

    def digest(claims: list[dict[str, str]] | None) -> str:
        expected: dict[str, Any] = {"groups": {"a": ["d1"]}}
        if claims is not None:
            expected["claims"] = claims
        content = ContentHash()
        content.update(parse_samples([({"id": "s", "expected_output": expected}, None)]))
        return content.hexdigest()

    one, two = _claims("a"), _claims("a", "b")
    assert len({digest(None), digest(one), digest(two)}) == 3
    assert digest([{"id": "a", "text": "reworded"}]) == digest(one)
