"""Meta-evaluation (UDCG paper §7.2): which metric best predicts end-to-end RAG outcomes.

The input is an ordinary slotwise dataset in which each sample is one (question, context)
pair: ``metadata.question`` groups the contexts of one question and ``metadata.outcome``
is what the LLM did with that context: ``"correct" > "abstained" > "wrong"``, or a number
(higher is better). The sample's output is the context. :func:`read_contexts` builds such
a dataset from a more compact "contexts file" (see docs/utility.md).

- :func:`correlate`: per question, the Spearman correlation between a metric's scores of
  the contexts and their outcomes; the mean over questions with a seeded bootstrap CI,
  and the mean Kendall tau-b, for any list of metrics, ranked.
- :func:`fit_udcg_theta`: UDCG_theta's position weights from a linear ranking SVM on
  within-question pairwise differences of ``[u1⁺..uk⁺, u1⁻..uk⁻]``.
- :func:`calibrate`: grid search of one metric parameter (UDCG's gamma) maximising the mean
  Spearman correlation on training questions, reported on held-out questions.
"""

from __future__ import annotations

import json
import math
import platform
import warnings
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt

from engine.errors import InputError, MissingDependencyError, Problem
from engine.evaluation.api import Dataset, Engine
from engine.evaluation.batch import Batch
from engine.io.files import read_document, read_jsonl
from engine.io.writer import atomic_write

if TYPE_CHECKING:
    from engine.evaluation.metric import Metric
    from metrics_plugins.utility import ThetaParams

__all__ = [
    "GAMMA_GRID",
    "OUTCOMES",
    "Calibration",
    "Correlation",
    "MetricCorrelation",
    "MissingDependencyError",
    "QuestionGroups",
    "bootstrap_ci",
    "calibrate",
    "context_features",
    "contexts_to_raw",
    "correlate",
    "fit_udcg_theta",
    "per_question",
    "question_groups",
    "read_contexts",
    "split_questions",
    "write_theta",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: The outcome order of §7.2 as numbers (higher is better).
OUTCOMES: Mapping[str, float] = {"correct": 2.0, "abstained": 1.0, "wrong": 0.0}

#: The gamma grid of §7.2: 0, 0.05, ..., 1.
GAMMA_GRID: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(21))

_LABEL_KEYS = ("relevance", "utility", "answers", "groups")


# -- grouping -------------------------------------------------------------------------------


@attrs.frozen
class QuestionGroups:
    """Per sample: the index of its question in ``keys``, and its outcome as a number."""

    keys: tuple[str, ...]
    codes: IntArray
    outcomes: FloatArray

    def mask(self, questions: Sequence[str]) -> BoolArray:
        """True for the samples (contexts) of the given questions."""
        wanted = np.isin(np.asarray(self.keys, dtype=object), list(questions))
        return np.asarray(wanted[self.codes], dtype=np.bool_)


def _outcome(value: Any) -> float | None:
    if isinstance(value, str):
        return OUTCOMES.get(value.strip().lower())
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def question_groups(dataset: Dataset) -> QuestionGroups:
    """Read ``metadata.question`` and ``metadata.outcome`` of every sample.

    Raises :class:`~engine.InputError` naming each sample that lacks either or has an
    outcome that is neither correct/abstained/wrong nor a finite number.
    """
    problems: list[Problem] = []
    keys: dict[str, int] = {}
    codes, outcomes = [], []
    for sample in dataset.samples:
        question = sample.metadata.get("question")
        value = _outcome(sample.metadata.get("outcome"))
        if not isinstance(question, str | int) or isinstance(question, bool) or question == "":
            problems.append(
                Problem(
                    "meta-evaluation needs metadata.question (the question this context belongs to)",
                    sample_id=sample.id,
                    pointer="/metadata/question",
                )
            )
        if value is None:
            problems.append(
                Problem(
                    "metadata.outcome must be correct, abstained, wrong or a finite number; "
                    f"got {sample.metadata.get('outcome')!r}",
                    sample_id=sample.id,
                    pointer="/metadata/outcome",
                )
            )
        if not problems:
            codes.append(keys.setdefault(str(question), len(keys)))
            outcomes.append(value)
    if problems:
        raise InputError(problems, summary="not a meta-evaluation dataset")
    return QuestionGroups(
        keys=tuple(keys),
        codes=np.asarray(codes, dtype=np.int64),
        outcomes=np.asarray(outcomes, dtype=np.float64),
    )


# -- statistics -------------------------------------------------------------------------------


def per_question(
    scores: FloatArray,
    outcomes: FloatArray,
    codes: IntArray,
    *,
    statistic: str = "spearman",
    include: BoolArray | None = None,
) -> FloatArray:
    """One correlation per question code (``0..codes.max()``) between ``scores`` and
    ``outcomes`` of its contexts: ``scipy.stats.spearmanr`` or ``kendalltau`` (tau-b).

    NaN (NA) for a question with fewer than two contexts, or where the scores or the
    outcomes are constant. Contexts whose score is NA, or not in ``include``, are left out.
    """
    from scipy import stats

    correlate_ = {"spearman": stats.spearmanr, "kendall": stats.kendalltau}[statistic]
    n_groups = int(codes.max()) + 1 if codes.size else 0
    keep = ~np.isnan(scores)
    if include is not None:
        keep &= include
    order = np.argsort(codes[keep], kind="stable")
    x, y = scores[keep][order], outcomes[keep][order]
    bounds = np.searchsorted(codes[keep][order], np.arange(n_groups + 1))
    out = np.full(n_groups, np.nan)
    for group in range(n_groups):
        lo, hi = bounds[group], bounds[group + 1]
        gx, gy = x[lo:hi], y[lo:hi]
        if hi - lo < 2 or gx.min() == gx.max() or gy.min() == gy.max():
            continue
        out[group] = float(correlate_(gx, gy).statistic)
    return out


def bootstrap_ci(
    values: FloatArray, *, confidence: float = 0.95, resamples: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of the non-NA ``values`` (NaNs when none)."""
    values = values[~np.isnan(values)]
    if values.size == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, size=(resamples, values.size))].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return (float(low), float(high))


def _mean(values: FloatArray) -> float:
    values = values[~np.isnan(values)]
    return float(values.mean()) if values.size else math.nan


# -- correlate --------------------------------------------------------------------------------


@attrs.frozen
class MetricCorrelation:
    """How well one metric orders each question's contexts by outcome.

    ``spearman`` and ``kendall`` are means over the ``n`` questions with a value; ``na``
    questions had one context, or constant scores or outcomes. ``ci`` is the bootstrap
    CI of the Spearman mean. Scores of a lower-is-better metric are negated first.
    """

    label: str
    alias: str
    params: Mapping[str, Any]
    spearman: float
    ci: tuple[float, float]
    kendall: float
    n: int
    na: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "alias": self.alias,
            "params": dict(self.params),
            "spearman": _number(self.spearman),
            "ci": [_number(self.ci[0]), _number(self.ci[1])],
            "kendall": _number(self.kendall),
            "n": self.n,
            "na": self.na,
        }


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value


def _correlation(
    label: str,
    alias: str,
    params: Mapping[str, Any],
    scores: FloatArray,
    groups: QuestionGroups,
    include: BoolArray | None,
    *,
    confidence: float,
    resamples: int,
    seed: int,
) -> MetricCorrelation:
    spearman = per_question(scores, groups.outcomes, groups.codes, include=include)
    kendall = per_question(
        scores, groups.outcomes, groups.codes, statistic="kendall", include=include
    )
    used = np.ones(len(groups.keys), dtype=np.bool_)
    if include is not None:
        used = np.bincount(groups.codes[include], minlength=len(groups.keys)) > 0
    spearman, kendall = spearman[used], kendall[used]
    na = int(np.isnan(spearman).sum())
    return MetricCorrelation(
        label=label,
        alias=alias,
        params=params,
        spearman=_mean(spearman),
        ci=bootstrap_ci(spearman, confidence=confidence, resamples=resamples, seed=seed),
        kendall=_mean(kendall),
        n=int(spearman.size - na),
        na=na,
    )


@attrs.frozen
class Correlation:
    """Metrics ranked by their mean per-question Spearman correlation with the outcomes."""

    dataset_name: str | None
    dataset_hash: str
    questions: int
    contexts: int
    rows: tuple[MetricCorrelation, ...]
    confidence: float
    resamples: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        """The ``slotwise.correlation/v1`` document (NA is null)."""
        return {
            "schema": "slotwise.correlation/v1",
            "dataset": {"name": self.dataset_name, "hash": self.dataset_hash},
            "questions": self.questions,
            "contexts": self.contexts,
            "confidence": self.confidence,
            "resamples": self.resamples,
            "seed": self.seed,
            "metrics": [{"rank": i + 1, **row.to_dict()} for i, row in enumerate(self.rows)],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"

    def table(self) -> Any:
        """A rich Table for the console."""
        from rich.table import Table

        title = (
            f"{self.dataset_name or 'dataset'}: {self.questions} questions, {self.contexts} "
            "contexts; mean per-question correlation with the outcome"
        )
        caption = (
            f"ci: {self.confidence:.0%} bootstrap CI of the Spearman mean "
            f"({self.resamples} resamples, seed {self.seed})"
        )
        table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
        for column, justify in (
            ("rank", "right"),
            ("metric", "left"),
            ("spearman", "right"),
            ("ci", "right"),
            ("kendall", "right"),
            ("n", "right"),
            ("na", "right"),
        ):
            table.add_column(
                column,
                justify=justify,  # type: ignore[arg-type]
                overflow="fold",
                no_wrap=column != "metric",
            )
        for rank, row in enumerate(self.rows, 1):
            ci = "NA" if math.isnan(row.ci[0]) else f"[{row.ci[0]:.3f}, {row.ci[1]:.3f}]"
            table.add_row(
                str(rank),
                row.label,
                _fixed(row.spearman),
                ci,
                _fixed(row.kendall),
                str(row.n),
                str(row.na),
            )
        return table


def _fixed(value: float) -> str:
    return "NA" if math.isnan(value) else f"{value:.3f}"


def _ranked(rows: Sequence[MetricCorrelation]) -> tuple[MetricCorrelation, ...]:
    return tuple(
        sorted(rows, key=lambda r: (math.isnan(r.spearman), -np.nan_to_num(r.spearman), r.label))
    )


def correlate(
    dataset: Dataset,
    outputs: Mapping[str, Any] | str | Path,
    metrics: Sequence[str | Metric],
    *,
    confidence: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
) -> Correlation:
    """Score the contexts with each metric and rank the metrics by how well they order
    each question's contexts by outcome (see :class:`MetricCorrelation`)."""
    _check_interval(confidence, "confidence")
    groups = question_groups(dataset)
    results = dataset.with_metrics(metrics).evaluate(outputs)
    rows = []
    for record in results.metrics:
        scores = results.values(record.label)
        rows.append(
            _correlation(
                record.label,
                record.alias,
                record.params,
                scores if record.higher_is_better else -scores,
                groups,
                None,
                confidence=confidence,
                resamples=resamples,
                seed=seed,
            )
        )
    return Correlation(
        dataset_name=dataset.name,
        dataset_hash=dataset.hash,
        questions=len(groups.keys),
        contexts=len(dataset),
        rows=_ranked(rows),
        confidence=confidence,
        resamples=resamples,
        seed=seed,
    )


def _check_interval(value: float, name: str) -> None:
    if not 0.0 < value < 1.0:
        raise InputError([Problem(f"{name} must lie strictly between 0 and 1, got {value!r}")])


# -- calibrate --------------------------------------------------------------------------------


def split_questions(
    keys: Sequence[str], test_fraction: float = 0.3, seed: int = 0
) -> tuple[list[str], list[str]]:
    """A seeded random split of the questions: (train, test), each kept in input order.
    The test side gets ``round(test_fraction * n)`` questions, at least one on each side."""
    _check_interval(test_fraction, "test_fraction")
    if len(keys) < 2:
        raise InputError(
            [Problem(f"a train/test split needs at least 2 questions, got {len(keys)}")]
        )
    n_test = min(max(1, round(test_fraction * len(keys))), len(keys) - 1)
    chosen = set(np.random.default_rng(seed).permutation(len(keys))[:n_test].tolist())
    train = [k for i, k in enumerate(keys) if i not in chosen]
    test = [k for i, k in enumerate(keys) if i in chosen]
    return train, test


@attrs.frozen
class Calibration:
    """A grid search of ``param`` of ``alias``: mean Spearman on the training questions
    per grid value, the best value, and its correlation on the held-out questions (beside
    that of the metric's default, for comparison)."""

    alias: str
    param: str
    grid: tuple[float, ...]
    train_spearman: tuple[float, ...]
    best: float
    test: MetricCorrelation
    default: MetricCorrelation
    train_questions: tuple[str, ...]
    test_questions: tuple[str, ...]
    test_fraction: float
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "slotwise.calibration/v1",
            "metric": self.alias,
            "param": self.param,
            "best": self.best,
            "grid": [
                {"value": v, "train_spearman": _number(s)}
                for v, s in zip(self.grid, self.train_spearman, strict=True)
            ],
            "test": self.test.to_dict(),
            "default": self.default.to_dict(),
            "train_questions": list(self.train_questions),
            "test_questions": list(self.test_questions),
            "test_fraction": self.test_fraction,
            "seed": self.seed,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def calibrate(
    dataset: Dataset,
    outputs: Mapping[str, Any] | str | Path,
    alias: str = "udcg",
    param: str = "gamma",
    *,
    grid: Sequence[float] = GAMMA_GRID,
    test_fraction: float = 0.3,
    seed: int = 0,
    confidence: float = 0.95,
    resamples: int = 1000,
) -> Calibration:
    """Pick the ``param`` value in ``grid`` with the best mean Spearman correlation on a
    seeded training split of the questions, and report it on the held-out questions.
    Ties go to the first value of the grid."""
    if not grid:
        raise InputError([Problem("the grid has no values")])
    groups = question_groups(dataset)
    train, test = split_questions(groups.keys, test_fraction, seed)
    engine = dataset.engine
    candidates = [engine.metric(alias, **{param: value}) for value in grid]
    default = engine.metric(alias)
    metrics = [*candidates, default] if default not in candidates else candidates
    results = dataset.with_metrics(metrics).evaluate(outputs)
    by_metric = dict(zip(metrics, results.metrics, strict=True))
    train_mask, test_mask = groups.mask(train), groups.mask(test)

    def correlation(metric: Metric, include: BoolArray) -> MetricCorrelation:
        record = by_metric[metric]
        scores = results.values(record.label)
        return _correlation(
            record.label,
            record.alias,
            record.params,
            scores if record.higher_is_better else -scores,
            groups,
            include,
            confidence=confidence,
            resamples=resamples,
            seed=seed,
        )

    train_spearman = [correlation(m, train_mask).spearman for m in candidates]
    if all(math.isnan(s) for s in train_spearman):
        raise InputError(
            [Problem("every training question is NA (one context, or constant outcomes)")],
            summary="nothing to calibrate on",
        )
    best = int(np.nanargmax(train_spearman))
    return Calibration(
        alias=alias,
        param=param,
        grid=tuple(float(v) for v in grid),
        train_spearman=tuple(train_spearman),
        best=float(grid[best]),
        test=correlation(candidates[best], test_mask),
        default=correlation(default, test_mask),
        train_questions=tuple(train),
        test_questions=tuple(test),
        test_fraction=test_fraction,
        seed=seed,
    )


# -- fit UDCG_theta -------------------------------------------------------------------------------


def context_features(batch: Batch, k: int) -> FloatArray:
    """``[u1⁺..uk⁺, u1⁻..uk⁻]`` per sample (ranks past the context or past k are 0)."""
    from metrics_plugins.utility import utility_parts

    positive, negative, _ = utility_parts(batch, k)
    width = min(positive.shape[1], k)
    features = np.zeros((len(batch), 2 * k))
    features[:, :width] = positive[:, :width]
    features[:, k : k + width] = negative[:, :width]
    return features


def _pairs(
    features: FloatArray, groups: QuestionGroups, include: BoolArray | None
) -> tuple[FloatArray, IntArray, int]:
    """SVMrank's training set: within each question, ``x_i - x_j`` for every pair with
    ``outcome_i > outcome_j``, every other pair mirrored so both classes occur; and the
    number of questions that gave a pair."""
    diffs, questions = [], 0
    for group in range(len(groups.keys)):
        members = groups.codes == group
        if include is not None:
            members &= include
        index = np.flatnonzero(members)
        outcome = groups.outcomes[index]
        better, worse = np.nonzero(outcome[:, None] > outcome[None, :])
        if better.size:
            questions += 1
            diffs.append(features[index[better]] - features[index[worse]])
    if not diffs:
        return np.zeros((0, features.shape[1])), np.zeros(0, dtype=np.int64), 0
    stacked = np.concatenate(diffs)
    labels = np.where(np.arange(len(stacked)) % 2 == 0, 1, -1).astype(np.int64)
    return stacked * labels[:, None], labels, questions


def _linear_svc() -> Any:
    try:
        from sklearn.svm import LinearSVC
    except ImportError as error:
        raise MissingDependencyError("fitting UDCG_theta (scikit-learn)", "meta", error) from error
    return LinearSVC


def fit_udcg_theta(
    dataset: Dataset,
    outputs: Mapping[str, Any] | str | Path,
    k: int,
    *,
    c: float = 1.0,
    questions: Sequence[str] | None = None,
) -> ThetaParams:
    """Learn UDCG_theta's weights ``alpha`` (for u⁺) and ``beta`` (for u⁻) at ranks 1..k.

    A linear ranking SVM as SVMrank fits one: ``sklearn.svm.LinearSVC(C=c,
    fit_intercept=False)`` on within-question pairwise differences of
    :func:`context_features` (only the given ``questions``, when given). Every sample
    needs utility labels. Needs scikit-learn (``pip install 'slotwise[meta]'``).
    """
    from metrics_plugins.utility import ThetaParams

    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise InputError([Problem(f"k must be a positive integer, got {k!r}")])
    svc = _linear_svc()
    groups = question_groups(dataset)
    unlabeled = [
        Problem(
            "fitting UDCG_theta needs utility labels", sample_id=s.id, pointer="/expected_output"
        )
        for s in dataset.samples
        if s.utility is None
    ]
    if unlabeled:
        raise InputError(unlabeled, summary="the samples lack utility labels")
    features = context_features(dataset.batch(outputs), k)
    include = groups.mask(questions) if questions is not None else None
    x, y, used = _pairs(features, groups, include)
    if len(y) < 2:
        raise InputError(
            [Problem("no question has two contexts with different outcomes")],
            summary="nothing to fit",
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = svc(C=c, fit_intercept=False, max_iter=100_000, random_state=0).fit(x, y)
    coef = model.coef_[0]
    return ThetaParams(
        k=k,
        alpha=tuple(float(v) for v in coef[:k]),
        beta=tuple(float(v) for v in coef[k:]),
        provenance={
            "method": "sklearn.svm.LinearSVC(fit_intercept=False) on within-question "
            "pairwise feature differences (SVMrank)",
            "C": c,
            "converged": not any("converge" in str(w.message) for w in caught),
            "dataset": dataset.name,
            "dataset_hash": dataset.hash,
            "questions": used,
            "contexts": int(len(dataset) if include is None else include.sum()),
            "pairs": len(y),
            "scikit_learn": _version("scikit-learn"),
            "slotwise": _version("slotwise"),
            "python": platform.python_version(),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    )


def _version(distribution: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def write_theta(params: ThetaParams, path: str | Path) -> None:
    """Write a parameter file that ``udcg-theta(params_file=...)`` loads (atomically)."""
    atomic_write(path, json.dumps(params.to_dict(), indent=2) + "\n")


# -- contexts files ---------------------------------------------------------------------------


def contexts_to_raw(
    records: Sequence[Any], source: str | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Expand contexts-file records into raw samples and outputs, one per (question, context).

    A record: ``{"id", "question"?, "utility": {doc: u or {relevant, p_no_response}},
    "relevance"?, "answers"?, "texts"?: {doc: text}, "contexts": [{"id"?, "passages":
    [doc, ...], "outcome"}]}``; its labels (utility, relevance, answers, groups) become
    the ``expected_output`` of each of its contexts.
    A sample's id is ``"<question id>/<context id>"`` (context id: its 1-based position
    when not given); its ``metadata.k`` is the context's length, so every metric scores
    exactly the passages the LLM was given.
    """
    problems: list[Problem] = []
    samples: list[dict[str, Any]] = []
    outputs: dict[str, Any] = {}
    for index, record in enumerate(records):
        where = f"/{index}"
        if not isinstance(record, Mapping) or not isinstance(record.get("contexts"), list):
            problems.append(
                Problem(
                    "a contexts-file record is an object with id, utility and a contexts list",
                    pointer=where,
                    source=source,
                )
            )
            continue
        qid = str(record.get("id", index + 1))
        texts = record.get("texts") if isinstance(record.get("texts"), Mapping) else {}
        assert isinstance(texts, Mapping)
        for position, context in enumerate(record["contexts"]):
            at = f"{where}/contexts/{position}"
            if not isinstance(context, Mapping) or not isinstance(context.get("passages"), list):
                problems.append(
                    Problem(
                        "a context is an object with passages (a list of ids) and an outcome",
                        sample_id=qid,
                        pointer=at,
                        source=source,
                    )
                )
                continue
            sample_id = f"{qid}/{context.get('id', position + 1)}"
            passages = [str(p) for p in context["passages"]]
            sample: dict[str, Any] = {
                "id": sample_id,
                "input": {"question": record.get("question")},
                "metadata": {"question": qid, "outcome": context.get("outcome")},
            }
            labels = {key: record[key] for key in _LABEL_KEYS if key in record}
            if labels:
                sample["expected_output"] = labels
            if passages:
                sample["metadata"]["k"] = len(passages)
            samples.append(sample)
            outputs[sample_id] = [
                {"id": p, "text": texts[p]} if p in texts else {"id": p} for p in passages
            ]
    if problems:
        raise InputError(problems, summary=f"invalid contexts file{f' {source}' if source else ''}")
    return samples, outputs


def read_contexts(path: str | Path, engine: Engine | None = None) -> tuple[Dataset, dict[str, Any]]:
    """A meta-evaluation dataset and its outputs from a contexts file: a JSON list of
    records, ``{"questions": [...]}``, or JSONL with one record per line (see
    :func:`contexts_to_raw`)."""
    path = Path(path)
    if path.suffix.lower() == ".jsonl":
        records: Any = [record for _, record in read_jsonl(path)]
    else:
        document = read_document(path)
        records = document.get("questions") if isinstance(document, Mapping) else document
    if not isinstance(records, list) or not any(
        isinstance(r, Mapping) and "contexts" in r for r in records
    ):
        raise InputError(
            [
                Problem(
                    "not a contexts file (a list of question records, or {questions: [...]}); "
                    "for a slotwise dataset, pass its outputs with --outputs",
                    source=str(path),
                )
            ],
            summary="invalid contexts file",
        )
    samples, outputs = contexts_to_raw(records, source=str(path))
    dataset = (engine or Engine(config={})).dataset(samples=samples, name=path.stem)
    return dataset, outputs
