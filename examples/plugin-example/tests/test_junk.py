"""example-junk-at-k: the slotwise conformance suite plus hand-derived values."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from engine.testing import OUTPUTS, SAMPLES, MetricConformance, make_batch

from slotwise_example_plugin import JunkAtK


class TestJunkAtKConformance(MetricConformance):
    """The contract every slotwise metric plugin must meet."""

    metric_class = JunkAtK
    params: ClassVar[dict[str, Any]] = {"k": 3}


class TestJunkAtK:
    """Values derived by hand."""

    SAMPLE: ClassVar[dict[str, Any]] = {"id": "q", "expected_output": {"a": 2, "b": 0, "c": -1}}
    # After dropping the repeated "b": b (label 0), x (unjudged), a (2), c (-1).
    RANKING: ClassVar[list[str]] = ["b", "x", "a", "c", "b"]

    @pytest.mark.parametrize(
        ("k", "expected"),
        [(1, 1.0), (2, 0.5), (3, 1 / 3), (4, 0.5), (10, 0.2)],
    )
    def test_hand_derived(self, k: int, expected: float) -> None:
        """Judged labels <= 0 in the top k, divided by k (also when fewer were retrieved)."""
        batch = make_batch([self.SAMPLE], {"q": self.RANKING})
        assert JunkAtK(k=k).score(batch) == pytest.approx([expected])

    def test_conformance_fixture(self) -> None:
        """On engine.testing's fixture at k=3 (the 'cutoff' sample's metadata.k = 2 wins)."""
        values = JunkAtK(k=3).score(make_batch(SAMPLES, OUTPUTS))
        by_id = dict(zip([s["id"] for s in SAMPLES], values.tolist(), strict=True))
        assert by_id == pytest.approx(
            {
                "graded": 1 / 3,  # d4 (-1); d1 relevant, d5 unjudged
                "binary": 0.0,
                "duplicates": 0.0,  # c1, c3 (unjudged), c2 after deduplication
                "no-relevant": 2 / 3,  # n2 (-2), n1 (0); n3 unjudged
                "empty-output": 0.0,
                "no-output": 0.0,
                "cutoff": 0.0,  # k4 unjudged, k1 relevant
                "deep": 2 / 3,  # p1 (0), p2 (0); p3 unjudged
            }
        )

    def test_lower_is_better(self) -> None:
        """Junk is a cost: the results mark the metric as lower-is-better."""
        assert JunkAtK.higher_is_better is False
