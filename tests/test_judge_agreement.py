"""The judge's graded agreement with people (engine/analysis/agreement.py), pinned against
scikit-learn's ``cohen_kappa_score`` and ``confusion_matrix`` and the ``krippendorff``
package on the same data: random graded labels skewed as relevance is (most pairs 0),
a judge that misses by a grade or two, one grade alone, labels missing."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, confusion_matrix

import engine
from engine.analysis.agreement import (
    LEVELS,
    MIN_TOPIC_PAIRS,
    Level,
    graded_agreement,
    judge_agreement,
    krippendorff_alpha,
    weighted_kappa,
)
from engine.analysis.defaults import MIN_AGREEMENT


def _skewed(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Human grades 0-3, 70% of them 0; the judge off by -1, 0 or +1 (clipped), and now
    and then by 2."""
    human = rng.choice(4, n, p=[0.7, 0.15, 0.1, 0.05])
    judge = np.clip(human + rng.choice([-2, -1, 0, 1, 2], n, p=[0.05, 0.15, 0.6, 0.15, 0.05]), 0, 3)
    return human, judge


def _peer_alpha(data: np.ndarray, level: Level) -> float | None:
    value = krippendorff.alpha(reliability_data=data.astype(float), level_of_measurement=level)
    return None if np.isnan(value) else float(value)


class TestAgainstPeers:
    def test_kappas_alphas_and_confusion(self) -> None:
        """Kappa (linear, quadratic, of relevance), alpha at the three levels and the
        confusion matrix equal the peers' on 50 random skewed label sets."""
        rng = np.random.default_rng(61)
        for _ in range(50):
            n = int(rng.integers(8, 300))
            human, judge = _skewed(rng, n)
            found = graded_agreement(human, judge, [f"q{i % 7}" for i in range(n)])
            for weights, value in (
                ("linear", found.kappa_linear),
                ("quadratic", found.kappa_quadratic),
            ):
                assert value == pytest.approx(
                    cohen_kappa_score(human, judge, weights=weights), abs=1e-12
                )
            assert found.kappa_binary == pytest.approx(
                cohen_kappa_score(human > 0, judge > 0), abs=1e-12
            )
            for level in LEVELS:
                expected = _peer_alpha(np.stack([human, judge]), level)
                assert found.alpha[level] == pytest.approx(expected, abs=1e-12)
            labels = np.unique(np.concatenate([human, judge]))
            assert found.categories == tuple(labels.astype(float))
            assert np.array_equal(
                np.array(found.confusion), confusion_matrix(human, judge, labels=labels)
            )
            assert found.exact == pytest.approx(np.mean(human == judge))

    def test_alpha_with_labels_missing_among_three_raters(self) -> None:
        """Three judges, 30% of their labels missing (NaN): alpha as the package's, units
        with one label alone left out as it leaves them out."""
        rng = np.random.default_rng(3)
        data = rng.choice(4, (3, 80), p=[0.6, 0.2, 0.1, 0.1]).astype(float)
        data[rng.random(data.shape) < 0.3] = np.nan
        for level in LEVELS:
            assert krippendorff_alpha(data, level) == pytest.approx(
                _peer_alpha(data, level), abs=1e-12
            )

    def test_a_category_one_side_never_uses_and_scales_apart(self) -> None:
        """People grade 1-5, the judge 0-3: the categories are the values either side
        used, as scikit-learn and the package read them."""
        human = np.array([5, 1, 3, 4, 1, 2, 5, 1])
        judge = np.array([3, 0, 2, 3, 0, 0, 2, 1])
        found = graded_agreement(human, judge, ["q"] * 8)
        assert found.categories == (0, 1, 2, 3, 4, 5)
        assert found.kappa_linear == pytest.approx(
            cohen_kappa_score(human, judge, weights="linear")
        )
        assert found.alpha["ordinal"] == pytest.approx(
            _peer_alpha(np.stack([human, judge]), "ordinal")
        )


class TestUndefined:
    def test_one_grade_only_is_undefined_not_zero(self) -> None:
        """Both sides say 0 on every pair: scikit-learn's kappa is NaN (its warning), the
        package's alpha NaN; here None, said "undefined (one grade only)"."""
        found = graded_agreement([0, 0, 0], [0, 0, 0], ["q1", "q1", "q2"])
        with pytest.warns(Warning):
            assert np.isnan(cohen_kappa_score([0, 0, 0], [0, 0, 0], weights="quadratic"))
        assert found.one_grade and found.kappa_linear is None and found.kappa_quadratic is None
        assert all(found.alpha[level] is None for level in LEVELS)
        assert found.exact == 1.0
        assert "one grade only: kappa and alpha are undefined" in "\n".join(found.lines())
        assert found.to_dict()["cohen_kappa"]["quadratic"] is None
        assert weighted_kappa([], []) is None and graded_agreement([], [], []).pairs == 0

    def test_each_side_constant_on_different_grades_is_zero(self) -> None:
        """People all 1, the judge all 0: kappa is defined and 0 (chance agreement is what
        was observed), as scikit-learn says."""
        found = graded_agreement([1, 1], [0, 0], ["q", "q"])
        assert found.kappa_quadratic == cohen_kappa_score([1, 1], [0, 0], weights="quadratic") == 0


class TestTopics:
    def test_unreliable_topics_are_named(self) -> None:
        """Topic a: 6 pairs, the judge off on half (kappa below 0.6); b: 6 pairs in full
        agreement; c: 4 pairs (too few to judge, however bad); d: 5 pairs, one grade on
        both sides (kappa undefined, not unreliable). Each topic's kappa is
        scikit-learn's on its own pairs, on the scale of all pairs (``labels=``: topic b
        never uses grade 1, yet 0 vs 2 stays two grades apart)."""
        rows = [
            ("a", [0, 1, 2, 3, 0, 1], [3, 0, 0, 3, 2, 1]),
            ("b", [0, 2, 2, 3, 0, 2], [0, 0, 2, 3, 0, 2]),
            ("c", [0, 3, 0, 3], [3, 0, 3, 0]),
            ("d", [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]),
        ]
        human = np.concatenate([r[1] for r in rows])
        judge = np.concatenate([r[2] for r in rows])
        topics = np.concatenate([[r[0]] * len(r[1]) for r in rows])
        found = graded_agreement(human, judge, topics)
        each = {t.id: t for t in found.topics}
        scale = [0, 1, 2, 3]
        kappa_a = cohen_kappa_score(rows[0][1], rows[0][2], weights="quadratic", labels=scale)
        assert kappa_a < MIN_AGREEMENT
        assert each["a"].kappa == pytest.approx(kappa_a) and each["a"].pairs == 6
        kappa_b = cohen_kappa_score(rows[1][1], rows[1][2], weights="quadratic", labels=scale)
        assert kappa_b != pytest.approx(
            cohen_kappa_score(rows[1][1], rows[1][2], weights="quadratic")
        )  # the scale matters
        assert each["b"].kappa == pytest.approx(kappa_b) and kappa_b >= MIN_AGREEMENT
        assert each["b"].exact == pytest.approx(5 / 6)
        assert each["c"].pairs == 4 < MIN_TOPIC_PAIRS
        assert each["d"].kappa is None
        # |0-3| + |1-0| + |2-0| + 0 + |0-2| + 0 = 8 over 6 pairs
        assert each["a"].mean_difference == pytest.approx(8 / 6)
        assert [t.id for t in found.unreliable] == ["a"]
        text = "\n".join(found.lines())
        assert "1 of 3 topics with at least 5 pairs" in text and "    a  kappa" in text
        assert found.to_dict()["topics"]["unreliable"] == ["a"]
        assert "Unreliable topics (at least 5 pairs, quadratic kappa below 0.6): a" in (
            found.to_markdown()
        )


def test_missing_judge_labels_are_counted_and_named() -> None:
    """People labelled q1's a, b, c and q2's d; the judge labelled a and b, could not
    read its answer for c (metadata.unjudged says why) and gave d nothing: 2 pairs
    compared, c and d named, with c's reason; q3, which the judge's dataset lacks, is
    not counted missing."""
    eng = engine.Engine(config={})
    human = eng.dataset(
        samples=[
            {"id": "q1", "expected_output": {"relevance": {"a": 2, "b": 0, "c": 1}}},
            {"id": "q2", "expected_output": {"relevance": {"d": 3}}},
            {"id": "q3", "expected_output": {"relevance": {"e": 3}}},
        ]
    )
    judged = eng.dataset(
        samples=[
            {
                "id": "q1",
                "expected_output": {"relevance": {"a": 2, "b": 1}},
                "metadata": {"unjudged": {"c": "unreadable answer"}},
            },
            {"id": "q2", "input": "q"},
        ]
    )
    found = judge_agreement(human, judged)
    assert found.pairs == 2 and found.samples == 1
    assert found.missing == ("q1/c (unreadable answer)", "q2/d")
    assert found.kappa == pytest.approx(cohen_kappa_score([2, 0], [2, 1], weights="quadratic"))
    text = "\n".join(found.lines())
    assert "2 human-labelled pair(s) have no judge label" in text and "q2/d" in text
    assert found.to_dict()["missing"] == ["q1/c (unreadable answer)", "q2/d"]
    assert found.to_dict()["graded"]["cohen_kappa"]["linear"] == pytest.approx(
        cohen_kappa_score([2, 0], [2, 1], weights="linear")
    )
