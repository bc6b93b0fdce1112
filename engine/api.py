"""The engine: resolves metrics, loads datasets, and scores outputs against them."""

from __future__ import annotations

import platform
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import attrs
import numpy as np

from engine import trec
from engine.batch import Batch
from engine.config import Config
from engine.dataset import DATASET_SUFFIXES, Dataset, load_samples
from engine.errors import (
    InputError,
    MetricParameterError,
    MetricRequirementError,
    MetricScoreError,
    Problem,
)
from engine.executors import Executor, resolve_executor
from engine.logs import log
from engine.metric import (
    Metric,
    check_metric_class,
    metric_label,
    metric_params,
    missing_requirements,
    parse_spec,
)
from engine.outputs import load_outputs, parse_outputs
from engine.records import Output
from engine.registry import MetricInfo, Registry
from engine.results import Diagnostics, MetricRecord, Results

__all__ = ["Engine", "Evaluation"]


OnError = Literal["record", "raise"]


def _version() -> str:
    from engine import __version__

    return __version__


class Engine:
    """An evaluation engine: a configuration plus a metric registry.

    ``config`` is a :class:`Config`, a mapping in the ``slotwise.yaml`` shape, a path to
    such a file, or None to use the nearest ``slotwise.yaml`` (or the defaults).
    ``executor`` scores chunks of samples: ``"local"`` (this process), ``"ray"`` (a Ray
    cluster) or an :class:`~engine.executors.Executor`; any but local makes
    :meth:`Evaluation.evaluate` score in chunks (see :mod:`engine.streaming`).
    """

    def __init__(
        self,
        config: Config | Mapping[str, Any] | str | Path | None = None,
        registry: Registry | None = None,
        executor: str | Executor | None = None,
    ) -> None:
        if isinstance(config, Config):
            self.config = config
        elif isinstance(config, Mapping):
            self.config = Config.from_mapping(config)
        elif config is not None:
            self.config = Config.load(config)
        else:
            self.config = Config.discover()
        self.registry = registry or Registry()
        self.executor = resolve_executor(executor)

    # -- metrics -------------------------------------------------------------------------

    def metric(self, spec: str, **params: Any) -> Metric:
        """A metric instance from an alias or spec; ``params`` override the spec's.

        Parameters not given come from the config's ``metrics.params.<alias>``, then the
        metric's defaults.
        """
        parsed = parse_spec(spec)
        cls = self.registry.get(parsed.alias)
        merged = {**self.config.metric_params.get(parsed.alias, {}), **parsed.params, **params}
        known = [a.name for a in attrs.fields(cls)]
        unknown = sorted(set(merged) - set(known))
        if unknown:
            raise MetricParameterError(
                f"{spec}: unknown parameter {', '.join(map(repr, unknown))} for {parsed.alias} "
                f"(its parameters: {', '.join(known) or 'none'})"
            )
        try:
            return cls(**merged)  # type: ignore[no-any-return]
        except MetricParameterError as error:
            raise MetricParameterError(f"{spec}: {error}") from None
        except (TypeError, ValueError) as error:
            raise MetricParameterError(f"{spec}: {error}") from None

    def metrics(self) -> list[MetricInfo]:
        """Every installed or registered metric, with broken plugins marked by their error."""
        return self.registry.describe()

    def register_metric(self, cls: type[Any]) -> type[Any]:
        """Register an in-process metric class (usable as a decorator)."""
        return self.registry.register(cls)

    # -- datasets ------------------------------------------------------------------------

    def dataset(
        self,
        source: str | Path | None = None,
        *,
        samples: Sequence[Mapping[str, Any]] | None = None,
        name: str | None = None,
    ) -> Dataset:
        """A dataset declared in ``slotwise.yaml``, a dataset file, or ``samples=[...]``."""
        if (source is None) == (samples is None):
            raise TypeError("pass exactly one of a dataset name/path or samples=[...]")
        if samples is not None:
            return Dataset.from_raw(self, samples, name=name)
        declared = self.config.datasets.get(str(source))
        if declared is not None:
            file_name, file_samples = load_samples(declared.path)
            return Dataset(
                samples=tuple(file_samples),
                engine=self,
                name=name or declared.name,
                metrics=declared.metrics,
                outputs=declared.outputs,
            )
        path = Path(source)  # type: ignore[arg-type]
        if path.suffix.lower() not in DATASET_SUFFIXES and not path.exists():
            known = ", ".join(self.config.datasets) or "none"
            where = self.config.source or "no slotwise.yaml found"
            raise InputError(
                [
                    Problem(
                        f"no dataset named {str(source)!r} is declared ({where}; declared: {known}) and no such file"
                    )
                ],
                summary="unknown dataset",
            )
        file_name, file_samples = load_samples(path)
        return Dataset(samples=tuple(file_samples), engine=self, name=name or file_name)

    def evaluate_trec(
        self,
        qrels: Mapping[str, Mapping[str, float]] | str | Path,
        run: Mapping[str, Mapping[str, float]] | Mapping[str, Sequence[str]] | str | Path,
        metrics: Sequence[str | Metric],
        *,
        strict: bool = False,
    ) -> Results:
        """Score a TREC run against qrels, each a file path or a mapping in pytrec_eval's
        shape: ``{qid: {docid: label}}`` and ``{qid: {docid: score}}`` (or already ranked
        ``{qid: [docid, ...]}``). Documents are ranked as trec_eval ranks them; input is
        validated as for any dataset and outputs."""
        name = None
        if not isinstance(qrels, Mapping):
            name = Path(qrels).stem
            qrels = trec.read_qrels(qrels)
        if not isinstance(run, Mapping):
            ranked: Mapping[str, Sequence[str]] | None = trec.read_run(run)
        elif run and all(isinstance(v, Mapping) for v in run.values()):
            ranked = trec.rank_scored(run)  # type: ignore[arg-type]
        else:
            ranked = None  # ranked lists from the caller: validated as any outputs are
        # ids from the reader or rank_scored are already checked: straight to Output objects
        outputs = run if ranked is None else {q: Output(tuple(d)) for q, d in ranked.items()}
        del ranked
        dataset = Dataset.from_raw(self, trec.qrels_samples(qrels), name=name)
        return dataset.with_metrics(metrics).evaluate(outputs, strict=strict)

    def evaluation(self, dataset: Dataset, metrics: Sequence[str | Metric]) -> Evaluation:
        """Bind resolved metric instances to a dataset."""
        if isinstance(metrics, str):
            raise TypeError("with_metrics takes a list of metrics, e.g. ['retrieval-ndcg-at-k@10']")
        instances = []
        for metric in metrics:
            if isinstance(metric, str):
                instances.append(self.metric(metric))
            elif check_metric_class(type(metric)):
                raise TypeError(f"{metric!r} is neither a metric spec nor a metric instance")
            else:
                instances.append(metric)
        if not instances:
            raise InputError(
                [
                    Problem(
                        "no metrics: pass with_metrics([...]) or declare metrics for the dataset in slotwise.yaml"
                    )
                ],
                summary="nothing to evaluate",
            )
        labels = [metric_label(m) for m in instances]
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        if repeated:
            raise MetricParameterError(f"metric given more than once: {', '.join(repeated)}")
        return Evaluation(dataset=dataset, metrics=tuple(instances), engine=self)


@attrs.frozen
class Evaluation:
    """A dataset with its metrics, ready to score outputs or to run a system."""

    dataset: Dataset
    metrics: tuple[Metric, ...]
    engine: Engine = attrs.field(repr=False)

    def at_k(self, ks: Sequence[int]) -> Evaluation:
        """The same evaluation with every metric that has a ``k`` parameter evaluated at
        each of ``ks`` (labels ``alias@K``), in one pass: the curve Metric@K. Metrics
        without ``k`` are kept once; a sample's ``metadata.k`` still overrides K."""
        if isinstance(ks, int) or not ks:
            raise TypeError("at_k takes a non-empty list of cutoffs, e.g. at_k([1, 3, 5, 10])")
        cutoffs = list(dict.fromkeys(ks))
        if any(isinstance(k, bool) or not isinstance(k, int) or k <= 0 for k in cutoffs):
            raise MetricParameterError(f"at_k: cutoffs must be positive integers, got {ks!r}")
        expanded: dict[str, Metric] = {}
        for metric in self.metrics:
            has_k = any(f.name == "k" for f in attrs.fields(type(metric)))  # type: ignore[arg-type]
            variants = [attrs.evolve(metric, k=k) for k in cutoffs] if has_k else [metric]  # type: ignore[misc]
            for instance in variants:
                expanded.setdefault(metric_label(instance), instance)
        return attrs.evolve(self, metrics=tuple(expanded.values()))

    def evaluate(
        self,
        outputs: Mapping[str, Any] | str | Path | Results,
        *,
        strict: bool = False,
        chunk_size: int | None = None,
    ) -> Results:
        """Score outputs (id -> actual_output, an outputs file, or earlier results).

        ``strict`` turns duplicate retrieved ids and outputs for unknown samples into errors.
        ``chunk_size`` (or an engine executor other than local) scores the samples in
        chunks on the engine's executor: the same per-sample values and aggregates, no
        run-level reports; see :mod:`engine.streaming` (and ``evaluate_stream`` for
        datasets larger than memory).
        """
        if isinstance(outputs, Results):
            if outputs.outputs is None:
                raise InputError([Problem("these results kept no outputs to re-score")])
            outputs = outputs.outputs
        if chunk_size is not None or self.engine.executor.name != "local":
            from engine.streaming import evaluate_chunked

            return evaluate_chunked(
                self, load_outputs(outputs), strict=strict, chunk_size=chunk_size
            )
        return self._score(load_outputs(outputs), strict=strict)

    def run(
        self,
        system: Callable[[Any], Any],
        *,
        concurrency: int = 8,
        on_error: OnError = "record",
        progress: bool | None = None,
        strict: bool = False,
    ) -> Results:
        """Call ``system(sample.input)`` for every sample on a thread pool and score the
        outputs. A failing call (or an invalid output) becomes an error row with NA scores
        (``on_error="record"``) or stops the run (``"raise"``). The raw outputs are kept in
        the results so they can be re-scored without calling the system again."""
        if on_error not in ("record", "raise"):
            raise ValueError("on_error must be 'record' or 'raise'")
        samples = self.dataset.samples
        raw_outputs: dict[str, Any] = {}
        errors: dict[str, str] = {}

        with (
            _progress(progress, len(samples)) as advance,
            ThreadPoolExecutor(max(1, concurrency)) as pool,
        ):
            futures = [pool.submit(system, sample.input) for sample in samples]
            for sample_id, future in zip(self.dataset.ids, futures, strict=True):
                try:
                    actual = future.result()
                except Exception as error:
                    if on_error == "raise":
                        for pending in futures:
                            pending.cancel()
                        raise
                    errors[sample_id] = f"{type(error).__name__}: {error}"
                else:
                    try:
                        parse_outputs([(sample_id, actual, None)])
                        raw_outputs[sample_id] = actual
                    except InputError as invalid:
                        if on_error == "raise":
                            raise
                        errors[sample_id] = "invalid output: " + "; ".join(
                            str(p) for p in invalid.problems
                        )
                advance()
        outputs = {sample_id: Output.from_raw(actual) for sample_id, actual in raw_outputs.items()}
        return self._score(outputs, strict=strict, errors=errors, keep=raw_outputs)

    def _score(
        self,
        outputs: Mapping[str, Output],
        *,
        strict: bool,
        errors: Mapping[str, str] | None = None,
        keep: Mapping[str, Any] | None = None,
    ) -> Results:
        started = time.perf_counter()
        errors = errors or {}
        samples = self.dataset.samples
        known = set(self.dataset.ids)
        unknown = sorted(set(outputs) - known)
        if unknown:
            if strict:
                raise InputError(
                    [
                        Problem("output for a sample id not in the dataset", sample_id=i)
                        for i in unknown
                    ],
                    summary="outputs do not match the dataset",
                )
            log.warning("outputs.unknown_ids", count=len(unknown), examples=unknown[:5])
        aligned = [outputs.get(s.id) for s in samples]
        missing = tuple(
            s.id for s, o in zip(samples, aligned, strict=True) if o is None and s.id not in errors
        )
        batch = Batch.compile(samples, aligned, default_k=self.engine.config.default_k)
        self._check_duplicates(batch, strict)
        labels = [metric_label(m) for m in self.metrics]
        problems = [
            p
            for m, label in zip(self.metrics, labels, strict=True)
            for p in missing_requirements(m, label, batch)
        ]
        checked = (getattr(m, "check", lambda b: ())(batch) for m in self.metrics)
        problems += dict.fromkeys(p for found in checked for p in found)  # once, not per metric
        if problems:
            raise MetricRequirementError(
                problems, summary="the samples lack what the metrics require"
            )
        failed = np.array([s.id in errors for s in samples], dtype=np.bool_)
        scores, aggregates, details, reports, records = {}, {}, {}, {}, []
        for metric, label in zip(self.metrics, labels, strict=True):
            distribution, version = self.engine.registry.provenance(metric.alias)
            values = _call_score(metric, label, distribution, batch)
            values[failed] = np.nan
            scores[label] = values
            aggregates[label] = float(metric.aggregate(values))
            explained = getattr(metric, "details", lambda b: None)(batch)
            if explained is not None:
                details[label] = list(explained)
            report = getattr(metric, "summarize", lambda b, v: None)(batch, values)
            if report is not None:
                reports[label] = dict(report)
            records.append(metric_record(metric, label, (distribution, version), batch))
        with_labels = [s.relevance is not None for s in samples]
        no_relevant = tuple(
            s.id
            for s, has, count in zip(samples, with_labels, batch.num_relevant(), strict=True)
            if has and count == 0
        )
        results = Results(
            dataset_name=self.dataset.name,
            dataset_hash=self.dataset.hash,
            sample_ids=self.dataset.ids,
            metrics=records,
            scores=scores,
            aggregates=aggregates,
            details=details,
            reports=reports,
            diagnostics=Diagnostics(
                missing_outputs=missing,
                duplicate_ids_dropped=int(batch.duplicates_dropped.sum()),
                no_relevant=no_relevant,
                unknown_output_ids=tuple(unknown),
                errors=dict(errors),
            ),
            provenance={
                "slotwise": _version(),
                "python": platform.python_version(),
                "created": datetime.now(UTC).isoformat(timespec="seconds"),
                "config_default_k": self.engine.config.default_k,
            },
            outputs=dict(keep) if keep is not None else None,
            metadata=tuple(s.metadata for s in samples),
        )
        log.info(
            "evaluation.finished",
            dataset=self.dataset.name,
            samples=len(samples),
            metrics=len(labels),
            missing_outputs=len(missing),
            errors=len(errors),
            seconds=round(time.perf_counter() - started, 4),
        )
        return results

    def _check_duplicates(self, batch: Batch, strict: bool) -> None:
        dropped = np.flatnonzero(batch.duplicates_dropped)
        if dropped.size == 0:
            return
        ids = [batch.samples[i].id for i in dropped]
        if strict:
            raise InputError(
                [
                    Problem(
                        "the ranked list repeats a document id",
                        sample_id=i,
                        pointer="/actual_output/retrieved",
                    )
                    for i in ids
                ],
                summary="duplicate ids in rankings",
            )
        log.warning(
            "outputs.duplicates_dropped",
            samples=len(ids),
            dropped=int(batch.duplicates_dropped.sum()),
            examples=ids[:5],
        )


def _call_score(metric: Metric, label: str, distribution: str | None, batch: Batch) -> np.ndarray:
    """Run ``metric.score`` and check what it returns; any failure names the metric and plugin."""
    source = f" (distribution {distribution})" if distribution else ""
    try:
        values = metric.score(batch)
    except Exception as error:
        raise MetricScoreError(
            f"metric {label!r}{source} failed while scoring: {type(error).__name__}: {error}"
        ) from error
    array = np.asarray(values)
    if array.shape != (len(batch),) or not np.issubdtype(array.dtype, np.floating):
        raise MetricScoreError(
            f"metric {label!r}{source} returned {array.dtype} of shape {array.shape}; "
            f"expected one float per sample, shape ({len(batch)},)"
        )
    return array.astype(np.float64, copy=True)


def metric_record(
    metric: Metric, label: str, provenance: tuple[str | None, str | None], batch: Batch
) -> MetricRecord:
    """How a metric of a run is described in its results: label, resolved parameters,
    direction and the plugin's (distribution, version)."""
    distribution, version = provenance
    return MetricRecord(
        label=label,
        alias=metric.alias,
        params=_resolved_params(metric, batch),
        higher_is_better=metric.higher_is_better,
        distribution=distribution,
        version=version,
    )


def _resolved_params(metric: Metric, batch: Batch) -> dict[str, Any]:
    """Every parameter, with an unset ``k`` shown as the config default it resolves to
    (unless the metric has no cutoff without one)."""
    params = metric_params(metric)
    if params.get("k", 0) is None and not getattr(metric, "uncut_by_default", False):
        params["k"] = batch.default_k
    return params


class _progress:
    """A rich progress bar on a terminal (or when forced); a no-op otherwise."""

    def __init__(self, enabled: bool | None, total: int) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.total = total

    def __enter__(self) -> Callable[[], None]:
        if not self.enabled:
            return lambda: None
        from rich.console import Console
        from rich.progress import Progress

        self._bar = Progress(console=Console(stderr=True), transient=False)
        self._bar.start()
        task = self._bar.add_task("running system", total=self.total)
        return lambda: self._bar.advance(task)

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._bar.stop()
