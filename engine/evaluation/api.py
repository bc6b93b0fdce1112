"""The engine: resolves metrics, loads datasets, and scores outputs against them through
the one evaluation path of :mod:`engine.evaluation.pipeline`."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import (
    InputError,
    MetricParameterError,
    MetricRequirementError,
    Problem,
    RunInterrupted,
    SlotwiseError,
    UnknownMetricError,
)
from engine.evaluation.batch import Batch, Shape
from engine.evaluation.calls import Collected, call_in_threads, call_on_loop, progress_bar
from engine.evaluation.executors import IN_PROCESS, Executor, RayExecutor, resolve_executor
from engine.evaluation.hops import at_hop
from engine.evaluation.ir_measures_names import suggest
from engine.evaluation.label_sources import HUMAN, REPORT, SOURCES_KEY, label_source_report
from engine.evaluation.metric import Metric, check_metric_class, metric_label, parse_spec
from engine.evaluation.pipeline import (
    DEFAULT_CHUNK_SIZE,
    MissingOutputs,
    Plan,
    Source,
    StreamingError,
    aligned,
    check_overlap,
    chunk_size_of,
    default_chunk_size,
    evaluate,
    first_pass,
    prefetched,
    slices,
    streamed_chunks,
)
from engine.evaluation.ppi import Report as PPIReport
from engine.evaluation.registry import MetricInfo, Registry
from engine.evaluation.results import Results, few
from engine.evaluation.scorer import OnError, Outcomes, Scorer
from engine.evaluation.source_plugins import Loaded, SourceRegistry, is_reference
from engine.evaluation.systems import Query, System, SystemRegistry, resolve
from engine.io import documents, sources
from engine.io.columns import Columns, ContentHash
from engine.io.config import CONFIG_ENV, Config
from engine.io.files import format_suffix
from engine.io.hops import final_context
from engine.io.records import Sample, outputs_of, samples_of
from engine.io.regrouped import regrouped
from engine.io.sharded import Long
from engine.io.shards import is_sharded
from engine.io.sinks import open_sink
from engine.io.writer import note_inputs
from engine.logs import log

__all__ = ["Dataset", "Engine", "Evaluation"]

if TYPE_CHECKING:
    from engine.evaluation.distributed_documents import Documents

FloatArray = npt.NDArray[np.float64]


class Engine:
    """An evaluation engine: a configuration plus a metric registry.

    ``config`` is a :class:`Config`, a mapping in the ``slotwise.yaml`` shape, a path to
    such a file, or None: the file the ``SLOTWISE_CONFIG`` environment variable names,
    else the built-in defaults. No file is searched for: :meth:`from_config` finds the
    nearest ``slotwise.yaml`` as the CLI does.
    ``executor`` scores chunks of samples: ``"threads"`` (the default: a thread per CPU
    of this process), ``"local"`` (this thread), ``"ray"`` (a Ray cluster) or an
    :class:`~engine.evaluation.executors.Executor`; one that is not in this process makes
    :meth:`Evaluation.evaluate` score in chunks. ``sources`` finds the plugins that read
    ``scheme:reference`` datasets (entry-point group ``slotwise.sources``), ``systems``
    the adapters that run framework retrievers (entry-point group ``slotwise.systems``).
    """

    def __init__(
        self,
        config: Config | Mapping[str, Any] | str | Path | None = None,
        registry: Registry | None = None,
        executor: str | Executor | None = None,
        sources: SourceRegistry | None = None,
        systems: SystemRegistry | None = None,
    ) -> None:
        if isinstance(config, Config):
            self.config = config
        elif isinstance(config, Mapping):
            self.config = Config.from_mapping(config)
        elif config is not None:
            self.config = Config.load(config)
        else:
            self.config = Config.from_environment()
        self.registry = registry or Registry()
        self.executor = resolve_executor(
            "threads" if executor is None else executor, self.config.ray
        )
        self.sources = sources or SourceRegistry()
        self.systems = systems or SystemRegistry()

    @classmethod
    def from_config(cls, config: str | Path | None = None, **options: Any) -> Engine:
        """An engine configured as the CLI is: by the file ``config``, else the one
        ``SLOTWISE_CONFIG`` names, else the nearest ``slotwise.yaml`` from the working
        directory upward (the defaults when there is none). ``options`` as for ``Engine``."""
        found = Config.load(config) if config is not None else Config.discover()
        return cls(config=found, **options)

    # -- metrics -------------------------------------------------------------------------

    def metric(self, spec: str, **params: Any) -> Metric:
        """A metric instance from an alias or spec; ``params`` override the spec's.

        Parameters not given come from the config's ``metrics.params.<alias>``, then the
        metric's defaults. ir_measures names (``nDCG@10``, ``P(rel=2)@5``) stand for the
        slotwise spec of docs/metrics.md's table; an unknown alias is an
        :class:`~engine.errors.UnknownMetricError` suggesting close aliases and close
        ir_measures names.
        """
        parsed = parse_spec(spec)
        try:
            cls = self.registry.get(parsed.alias)
        except UnknownMetricError as error:
            hints = [
                s for s in suggest(parsed.alias, error.available) if s not in error.suggestions
            ]
            if not hints:
                raise
            raise UnknownMetricError(
                error.alias, error.available, [*hints, *error.suggestions]
            ) from None
        merged = {**self.config.metric_params.get(parsed.alias, {}), **parsed.params, **params}
        if "hop" in merged and "hop" not in attrs.fields_dict(cls):
            cls = at_hop(cls)  # the metric at one hop (docs/agents.md)
        known = [a.name for a in attrs.fields(cls)]
        unknown = sorted(set(merged) - set(known))
        if unknown:
            raise MetricParameterError(
                f"{spec}: unknown parameter {', '.join(map(repr, unknown))} for {parsed.alias} "
                f"(its parameters: {', '.join(known) or 'none'})"
            )
        try:
            return cls(**merged)  # type: ignore[no-any-return]
        except (MetricParameterError, TypeError, ValueError) as error:
            raise MetricParameterError(f"{spec}: {error}") from None

    def metrics(self) -> list[MetricInfo]:
        """Every installed or registered metric, with broken plugins marked by their error."""
        return self.registry.describe()

    def register_metric(self, cls: type[Any]) -> type[Any]:
        """Register an in-process metric class (usable as a decorator)."""
        return self.registry.register(cls)

    def plan(self, metrics: Sequence[str | Metric]) -> Plan:
        """Resolved metrics with their labels and provenance; repeated labels and an empty
        list are errors."""
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
        return Plan.of(instances, self.registry.provenance, self.config.default_k)

    def provenance(self, dataset_source: str | None = None) -> dict[str, Any]:
        """What a results' provenance records of this engine: the config and what set each
        default (:meth:`Config.provenance`), and where the dataset came from."""
        found = self.config.provenance()
        if dataset_source is not None:
            found["dataset_source"] = dataset_source
        return found

    # -- datasets ------------------------------------------------------------------------

    def dataset(
        self, source: Any = None, *, samples: Any = None, name: str | None = None
    ) -> Dataset:
        """A dataset declared in the engine's config, a dataset file, a ``scheme:reference``
        read by a source plugin (``irds:<dataset-id>``, ``ragas:<file>``), or, in Python,
        ``samples=[...]`` (raw samples), pytrec_eval-shaped qrels ``{qid: {docid:
        label}}``, a labels frame (pandas, polars, Arrow), a ranx ``Qrels``, or what a
        source plugin returns (a ``Loaded``: its outputs become ``dataset.outputs``). A
        dataset read from a file or reference records it (``source``), for the results."""
        if (source is None) == (samples is None):
            raise TypeError("pass exactly one of a dataset name/path or samples=[...]")
        if samples is not None:
            return Dataset(sources.dataset_columns(samples), self, name=name)
        if isinstance(source, Loaded):
            return self._loaded(source, name, None)
        if is_sharded(source):
            file_name, columns = sources.read_dataset(source)
            return Dataset(columns, self, name or file_name, source=_source_of(source))
        if not isinstance(source, str | Path):
            return Dataset(sources.dataset_columns(source), self, name=name)
        declared = self.config.datasets.get(str(source))
        if declared is not None:
            note_inputs(declared.path, declared.outputs)  # the CLI writes over neither
            _, columns = sources.read_dataset(declared.path)
            return Dataset(
                columns,
                self,
                name or declared.name,
                declared.metrics,
                declared.outputs,
                source=str(declared.path.resolve()),
            )
        path = Path(source)
        if not path.exists() and is_reference(str(source)):
            scheme, rest = str(source).split(":", 1)
            where = f"{scheme}:{Path(rest).resolve()}" if Path(rest).exists() else str(source)
            return self._loaded(self.sources.load(str(source)), name, where)
        if not path.exists() and format_suffix(path) not in sources.DATASET_SUFFIXES:
            known = ", ".join(self.config.datasets) or "none"
            where = self.config.origin or (
                f"no config: name one with Engine.from_config(), Engine(config=...) or {CONFIG_ENV}"
            )
            message = f"no dataset named {str(source)!r} is declared ({where}; declared: {known}) and no such file"
            raise InputError([Problem(message)], summary="unknown dataset")
        file_name, columns = sources.read_dataset(path)
        return Dataset(columns, self, name or file_name, source=str(path.resolve()))

    def _loaded(self, loaded: Loaded, name: str | None, reference: str | None) -> Dataset:
        """The dataset of what a source plugin loaded (samples, and outputs if it has any)."""
        columns = sources.dataset_columns(loaded.samples)
        return Dataset(
            columns,
            self,
            name or loaded.name or reference,
            outputs=loaded.outputs,
            source=reference,
        )

    def evaluate_trec(
        self,
        qrels: Any,
        run: Any,
        metrics: Sequence[str | Metric],
        *,
        strict: bool = False,
        name: str | None = None,
        chunk_size: int | None = None,
    ) -> Results:
        """Score a TREC run against qrels. Each is a TREC file path, or in Python:
        pytrec_eval's dicts ``{qid: {docid: label}}`` and ``{qid: {docid: score}}`` (or
        already ranked ``{qid: [docid, ...]}``), a ranx ``Qrels``/``Run``, a frame
        (pandas, polars, Arrow) with ir_measures' columns ``query_id``, ``doc_id`` and
        ``relevance`` / ``score``, or ir_measures' ``Qrel``/``ScoredDoc`` namedtuples (a
        list or an iterator). Documents are ranked as trec_eval ranks them, and a query
        of the qrels that the run lacks is an empty ranking, as trec_eval's ``-c`` scores
        it (``missing="empty"``; listed in ``diagnostics.missing_outputs``); anything else
        is an :class:`~engine.errors.InputError`.

        A file may be sharded: a directory, a glob or a list of files, local or remote
        (``s3://``, ``gs://``, ...), read as their lines one after the other. On the
        ``ray`` executor, files are read by the workers (docs/scale.md). ``name`` names
        the dataset (default: the qrels file's name), ``chunk_size`` as for
        :meth:`Evaluation.evaluate`."""
        if _files(qrels) and _files(run) and isinstance(self.executor, RayExecutor):
            samples = Long.of(qrels, "qrels", trec=True)
            ranked = Long.of(run, "run", trec=True)
            return self._sharded(
                self.plan(metrics),
                samples,
                ranked,
                name or sources.input_name(qrels),
                keep=True,
                chunk_size=chunk_size_of(chunk_size or DEFAULT_CHUNK_SIZE),
                strict=strict,
                missing="empty",
                provenance=self.provenance(),
            )
        if _files(qrels):
            dataset = Dataset(
                sources.read_qrels(qrels), self, name=name or sources.input_name(qrels)
            )
        else:
            dataset = Dataset(_trec_input(sources.dataset_columns, qrels, "qrels"), self, name=name)
        if _files(run):
            outputs = sources.read_run(run)
        else:
            outputs = _trec_input(sources.read_outputs, run, "run")
        return dataset.with_metrics(metrics).evaluate(
            outputs, strict=strict, missing="empty", chunk_size=chunk_size
        )

    def evaluate_stream(
        self,
        metrics: Sequence[str | Metric],
        *,
        dataset: Any = None,
        outputs: Any = None,
        qrels: Any = None,
        run: Any = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        strict: bool = False,
        scores: str | Path | IO[Any] | None = None,
        scores_format: str | None = None,
        progress: bool | None = None,
        name: str | None = None,
        missing: MissingOutputs | None = None,
    ) -> Results:
        """Score outputs against a dataset too large for memory, chunk by chunk on the
        engine's executor, with the same numbers as in memory, bit for bit.

        The dataset is a ``dataset`` file or TREC ``qrels``, the outputs an ``outputs``
        file or TREC ``run`` (JSONL, Parquet/Arrow and TREC are read as streams; YAML and
        JSON whole). Each input is read twice: a first pass for the padding shape, the
        content hash and repeated ids, then the scoring pass. Per-sample rows go to
        ``scores`` (a path or an open file; ``json``, ``jsonl``, ``csv`` or ``parquet`` by
        suffix or ``scores_format``) as they are scored; the returned :class:`Results` has
        the summaries (with confidence intervals) but not the rows. A sample with no
        output is an error row (``missing="error"``, the default with a JSON or JSONL
        ``outputs`` file) or an empty ranking (``"empty"``, the default with a TREC
        ``run`` or a run table: trec_eval's ``-c``).

        Each input may be sharded: a directory, a glob or a list of files, local or
        remote, read as their lines one after the other (a query's lines may go on from
        one file into the next). On the ``ray`` executor, TREC files, labels and run
        tables, and dataset and outputs documents (JSONL, JSON, YAML, mixed) are read by
        the workers, with no order asked of their lines, and the rows written here as the
        driver merges them (docs/scale.md).
        """
        if (dataset is None) == (qrels is None) or (outputs is None) == (run is None):
            raise TypeError("pass one of dataset= or qrels=, and one of outputs= or run=")
        policy = _missing(missing or ("empty" if run is not None else _missing_by_default(outputs)))
        plan = self.plan(metrics)
        custom = plan.custom_aggregates()
        if custom:
            raise StreamingError(
                f"metric {custom[0]!r} has its own aggregate(), which cannot be merged over "
                "chunks: evaluate it in memory (without --stream)"
            )
        size = chunk_size_of(chunk_size)
        data_path = dataset if dataset is not None else qrels
        output_path = outputs if outputs is not None else run
        dataset_source = _source_of(data_path) if dataset is not None else None
        if isinstance(self.executor, RayExecutor):  # files the workers can read
            samples: Long | Documents | None
            samples = sources.long_input(data_path, "labels", trec_file=qrels is not None)
            ranked: Long | Documents | None
            ranked = sources.long_input(output_path, "run", trec_file=run is not None)
            if samples is None and ranked is None and dataset is not None:  # documents
                from engine.evaluation.distributed_documents import Documents

                samples, ranked = Documents.of(dataset, "sample"), Documents.of(outputs, "output")
            else:  # (documents: named by what the workers read)
                name = name or sources.input_name(data_path)
            if samples is not None and ranked is not None:
                return self._sharded(
                    plan,
                    samples,
                    ranked,
                    name,
                    keep=False,
                    chunk_size=size,
                    strict=strict,
                    missing=policy,
                    sink=open_sink(scores, scores_format) if scores is not None else None,
                    progress=progress,
                    provenance=self.provenance(dataset_source),
                )

        def sample_blocks() -> Any:
            return sources.stream_dataset(data_path, qrels=qrels is not None)

        def output_blocks() -> Any:
            return sources.stream_outputs(output_path, run=run is not None)

        lengths = sources.stream_output_lengths(output_path, run=run is not None)
        trec_inputs = {"sample": data_path if qrels is not None else None}
        trec_inputs["output"] = output_path if run is not None else None

        def locate(what: str, ids: list[str]) -> list[Problem]:  # TREC lines out of order
            found = trec_inputs[what]
            return [] if found is None else regrouped(found, ids)

        first = first_pass(prefetched(sample_blocks()), prefetched(lengths), locate)
        check_overlap(first.outputs, first.unknown, first.ids, str(output_path))
        sink = open_sink(scores, scores_format) if scores is not None else None
        results = evaluate(
            plan,
            prefetched(streamed_chunks(sample_blocks(), output_blocks(), first, size)),
            Source(
                name or sources.input_name(data_path), first.digest, len(first.ids), first.unknown
            ),
            shape=first.shape,
            executor=self.executor,
            strict=strict,
            sink=sink,
            keep=False,
            progress=progress,
            missing=policy,
            provenance={
                **self.provenance(dataset_source),
                "chunk_size": size,
                "executor": self.executor.name,
                "missing_outputs": policy,
            },
        )
        log.info(
            "evaluation.finished",
            dataset=results.dataset_name,
            samples=len(first.ids),
            streamed=True,
        )
        return results

    def _sharded(
        self,
        plan: Plan,
        samples: Long | Documents,
        outputs: Long | Documents,
        name: str | None,
        *,
        keep: bool,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        **options: Any,
    ) -> Results:
        """Score files on the Ray cluster, its workers reading them."""
        from engine.evaluation.distributed import Scoring, evaluate_sharded
        from engine.evaluation.distributed_documents import Documents, evaluate_documents

        assert isinstance(self.executor, RayExecutor)
        scoring = Scoring(self.executor, name, keep=keep, chunk_size=chunk_size, **options)
        results = (evaluate_documents if isinstance(samples, Documents) else evaluate_sharded)(
            plan,
            samples,  # type: ignore[arg-type]
            outputs,  # type: ignore[arg-type]
            scoring,
        )
        log.info("evaluation.finished", dataset=results.dataset_name, samples=results.samples)
        return results


def _files(value: Any) -> bool:
    """Whether ``value`` names files: a path, a URI, a glob, or a list of them."""
    return isinstance(value, str | os.PathLike) or is_sharded(value)


def _source_of(spec: Any) -> str:
    """An input as a results' provenance records it: a local path resolved, a URI or a
    glob as given, a list of them joined."""
    if isinstance(spec, list | tuple):
        return ", ".join(map(_source_of, spec))
    text = os.fspath(spec)
    return text if "://" in text or any(c in text for c in "*?[") else str(Path(text).resolve())


_HASHER = ThreadPoolExecutor(1, thread_name_prefix="slotwise-hash")


def _content_hash(columns: Columns) -> str:
    digest = ContentHash()
    digest.update(columns)
    return digest.hexdigest()


@attrs.define(eq=False, repr=False)
class Dataset:
    """Validated samples, in columns, plus what a declaration says about them (name,
    metrics, default outputs: a file, or outputs a source plugin read with the samples)."""

    columns: Columns
    engine: Engine = attrs.field(repr=False)
    name: str | None = None
    metrics: tuple[str, ...] = ()
    outputs: Any = None
    source: str | None = None  # where it was read from: an absolute path or scheme:reference

    def __len__(self) -> int:
        return len(self.columns)

    def __repr__(self) -> str:
        declared = f"; metrics {', '.join(self.metrics)}" if self.metrics else ""
        return f"<Dataset {self.name or '(unnamed)'}: {len(self)} samples{declared}>"

    _hashing: Future[str] | None = attrs.field(default=None, init=False)

    @property
    def hash(self) -> str:
        """sha256 of the content: equal content gives an equal hash, whatever the source."""
        if self._hashing is None:
            self._hashing = Future()
            self._hashing.set_result(_content_hash(self.columns))
        return self._hashing.result()

    def hash_ahead(self) -> None:
        """Start computing :attr:`hash` on a thread of its own, to overlap with other work
        (the command line: while it reads the run and scores); reading ``hash`` waits."""
        if self._hashing is None:
            self._hashing = _HASHER.submit(_content_hash, self.columns)

    @cached_property
    def samples(self) -> tuple[Sample, ...]:
        """The samples one by one (for work that goes sample by sample)."""
        return tuple(samples_of(self.columns))

    @property
    def ids(self) -> list[str]:
        return self.columns.ids.to_pylist()  # type: ignore[no-any-return]

    def to_arrow(self) -> Any:
        """The labels as a long Arrow table (``query_id``, ``doc_id``, ``relevance``,
        ``utility``, ``grades``); write it with ``engine.io.frames.write_table``."""
        from engine.io.frames import labels_table

        return labels_table(self.columns)

    def with_metrics(self, metrics: Sequence[str | Metric]) -> Evaluation:
        """Bind metrics (aliases, ``alias@K``, ``alias(k=..., ...)`` specs or instances)."""
        return Evaluation(dataset=self, plan=self.engine.plan(metrics))

    def evaluate(self, outputs: Any, **options: Any) -> Results:
        """Score ``outputs`` with the metrics declared for this dataset."""
        return self.with_metrics(self.metrics).evaluate(outputs, **options)

    def run(self, system: Any, **options: Any) -> Results:
        """Run the system on every sample and score the outputs with the declared metrics
        (:meth:`Evaluation.run`)."""
        return self.with_metrics(self.metrics).run(system, **options)

    def collect(
        self,
        system: Any,
        *,
        concurrency: int = 8,
        timeout: float | None = None,
        query: Query = None,
        id_key: str | None = None,
        on_error: OnError = "record",
        progress: bool | None = None,
        save_outputs: str | os.PathLike[str] | None = None,
    ) -> Collected:
        """Call the system for every sample and keep what it returns, without scoring
        (no labels needed): the first step of label-free evaluation.

        ``system`` is a function of the sample's ``input`` (an ``async def`` one is
        awaited on an event loop; inside a running loop, ``await`` :meth:`acollect`), or a
        framework retriever an adapter recognises (LangChain retrievers and runnables,
        LlamaIndex retrievers, Haystack components and pipelines), which gets the query:
        the input when it is a string, else ``input["question"]``. ``query`` (a field
        name of the input, or a function of it) chooses the query instead, for any system.
        Framework documents become ``{"id", "text", "score"}`` items, the id from the
        metadata key ``id_key`` when it is given, else the document's own.

        At most ``concurrency`` calls run at a time; a call still running ``timeout``
        seconds after it started, a cancelled call, a failing one and an invalid output
        are error rows (``on_error="raise"``: the first one stops the run); every output
        invalid raises :class:`InputError` naming the first. ``save_outputs`` writes the
        outputs file (:meth:`Collected.write`) when the calls are done, or interrupted.
        Ctrl-C stops at once: :class:`RunInterrupted` holds what was gathered."""
        _check_on_error(on_error)
        resolved, outcomes, arguments = self._prepared(system, query, id_key, on_error)
        if resolved.asynchronous:
            import asyncio  # here: most commands never call a system (20 ms of a process)

            try:
                asyncio.get_running_loop()
            except RuntimeError:
                pass
            else:
                raise RuntimeError(
                    "run() or collect() was called inside a running event loop: use "
                    "`await evaluation.arun(system)` (or `await dataset.acollect(system)`)"
                )
        try:
            with progress_bar(progress, len(arguments)) as advance:
                if resolved.asynchronous:
                    calls = call_on_loop(
                        resolved,
                        arguments,
                        outcomes,
                        advance,
                        concurrency=concurrency,
                        timeout=timeout,
                    )
                    asyncio.run(calls)
                else:
                    call_in_threads(
                        resolved,
                        arguments,
                        outcomes,
                        advance,
                        concurrency=concurrency,
                        timeout=timeout,
                    )
        except KeyboardInterrupt:
            raise RunInterrupted(self._collected(outcomes, save_outputs)) from None
        outcomes.check_any_valid()
        return self._collected(outcomes, save_outputs)

    async def acollect(
        self,
        system: Any,
        *,
        concurrency: int = 8,
        timeout: float | None = None,
        query: Query = None,
        id_key: str | None = None,
        on_error: OnError = "record",
        progress: bool | None = None,
        save_outputs: str | os.PathLike[str] | None = None,
    ) -> Collected:
        """:meth:`collect` inside a running event loop: ``async def`` systems and framework
        retrievers are awaited, plain functions run on threads."""
        _check_on_error(on_error)
        resolved, outcomes, arguments = self._prepared(system, query, id_key, on_error)
        with progress_bar(progress, len(arguments)) as advance:
            await call_on_loop(
                resolved, arguments, outcomes, advance, concurrency=concurrency, timeout=timeout
            )
        outcomes.check_any_valid()
        return self._collected(outcomes, save_outputs)

    def _prepared(
        self, system: Any, query: Query, id_key: str | None, on_error: OnError
    ) -> tuple[System, Outcomes, list[tuple[str, Any]]]:
        """The system resolved, its outcomes to fill, and what each sample sends it; a
        sample whose input gives no query is an error row, and when none gives one the
        run stops before any call."""
        resolved = resolve(system, self.engine.systems, query=query, id_key=id_key)
        outcomes = Outcomes(on_error, read=resolved.output)
        arguments, first = [], None
        for sample in self.samples:
            try:
                arguments.append((sample.id, resolved.argument(sample.input)))
            except Exception as error:
                outcomes.fail(sample.id, error)
                first = first or Problem(str(error), sample_id=sample.id, pointer="/input")
        if first is not None and not arguments:
            raise InputError([first], summary="no sample's input gives a query")
        return resolved, outcomes, arguments

    def _collected(
        self, outcomes: Outcomes, save_outputs: str | os.PathLike[str] | None
    ) -> Collected:
        """What was gathered, in dataset order, written to ``save_outputs`` if given."""
        rows = {sample_id: row for row, sample_id in enumerate(self.ids)}
        collected = Collected(
            outputs=dict(sorted(outcomes.outputs.items(), key=lambda item: rows[item[0]])),
            errors=dict(sorted(outcomes.errors.items(), key=lambda item: rows[item[0]])),
            samples=len(self),
            dataset=self.name,
        )
        if save_outputs is not None:
            collected.write(save_outputs)
        return collected

    def batch(self, outputs: Any) -> Batch:
        """The samples and ``outputs`` compiled into one :class:`Batch` (for analyses that
        work on the batch itself, e.g. meta-evaluation)."""
        joined, _ = aligned(self.columns, _outputs(outputs))
        return Batch.compile(joined, self.engine.config.default_k)


def _human_predictions(predictions: Dataset, outputs: Sequence[Any]) -> tuple[str, ...]:
    """Notes when PPI's predictions record label sources and some are a person's: on
    documents the systems retrieved, the judge's values are then not the judge's alone
    (PPI wants the judge's label on every pooled pair); on documents they did not
    retrieve, the labels enter only the metrics that read labels beyond the ranking."""
    if not any(SOURCES_KEY in s.metadata for s in predictions.samples):
        return ()
    human = [
        (sample.id, doc)
        for sample in predictions.samples
        for doc in sample.relevance or {}
        if sample.metadata.get(SOURCES_KEY, {}).get(doc, HUMAN) == HUMAN
    ]
    retrieved = {
        (sample_id, doc)
        for found in outputs
        if found is not None
        for sample_id, output in outputs_of(_outputs(found)).items()
        for doc in output.retrieved
    }
    pooled = sum(pair in retrieved for pair in human)
    notes = []
    if pooled:
        notes.append(
            f"{pooled} relevance label(s) of the predictions on documents the systems "
            "retrieved are human labels: PPI wants the judge's label on every pooled pair "
            "(slotwise annotate --runs without --holes)"
        )
    if len(human) > pooled:
        notes.append(
            f"{len(human) - pooled} relevance label(s) of the predictions are human labels "
            "of documents the systems did not retrieve: they count only in metrics that "
            "read labels beyond the ranking (recall's number of relevant documents)"
        )
    return tuple(notes)


def subset_outputs(outputs: Any, ids: Sequence[str]) -> Columns:
    """The outputs of these sample ids (so that scoring a subset of a dataset does not
    report the others' outputs as unknown)."""
    columns = _outputs(outputs)
    kept = pc.is_in(columns.ids, value_set=pa.array(list(ids), pa.string()))
    return columns.take(np.flatnonzero(kept.to_numpy(zero_copy_only=False)))


def _trec_input(read: Callable[[Any], Columns], value: Any, what: str) -> Columns:
    """``read(value)``, a shape it does not know being an :class:`InputError`."""
    try:
        return read(value)
    except (TypeError, AttributeError) as error:
        shapes = (
            "a TREC file path, pytrec_eval's dict, a ranx object, a frame with query_id, "
            "doc_id and relevance/score, or ir_measures' Qrel/ScoredDoc tuples"
        )
        message = f"cannot read {type(value).__name__} as {what} ({error}); pass {shapes}"
        raise InputError([Problem(message)], summary=f"unknown {what} shape") from None


def _outputs(outputs: Any) -> Columns:
    """Outputs in columns; earlier results' (in Python or a results file) with an error
    row for each sample that failed, so that re-scoring keeps it an error."""
    if isinstance(outputs, Columns):
        return outputs
    if isinstance(outputs, Results):
        if outputs.outputs is None:
            raise InputError([Problem("these results kept no outputs to re-score")])
        return documents.with_errors(
            sources.read_outputs(outputs.outputs), outputs.diagnostics.errors
        )
    if isinstance(outputs, Collected):
        return documents.with_errors(sources.read_outputs(dict(outputs.outputs)), outputs.errors)
    return sources.read_outputs(outputs)


def _missing_by_default(outputs: Any) -> MissingOutputs:
    """``"empty"`` for a TREC run (trec_eval's convention for a query the run lacks),
    ``"error"`` for slotwise outputs: a mapping of outputs, an outputs file, a Collected."""
    if isinstance(outputs, Collected | Results):
        return "error"
    if is_sharded(outputs):
        outputs = sources.first_file(outputs)
    if isinstance(outputs, str | os.PathLike):
        return "error" if format_suffix(Path(outputs)) in (".json", ".jsonl") else "empty"
    if isinstance(outputs, Mapping):
        first = next(iter(outputs.values()), None)
        pytrec_eval = isinstance(first, Mapping) and "retrieved" not in first
        return "empty" if pytrec_eval else "error"
    return "empty"  # Columns (a read run), a run table or frame, a ranx Run, ScoredDocs


def _missing(policy: str) -> MissingOutputs:
    if policy not in ("error", "empty"):
        raise ValueError(f"missing must be 'error' or 'empty', not {policy!r}")
    return policy  # type: ignore[return-value]


@attrs.frozen(repr=False)
class Evaluation:
    """A dataset with its metrics, ready to score outputs or to run a system."""

    dataset: Dataset
    plan: Plan

    def __repr__(self) -> str:
        return (
            f"<Evaluation of {self.dataset.name or '(unnamed)'} ({len(self.dataset)} samples): "
            f"{', '.join(self.plan.labels)}>"
        )

    @property
    def metrics(self) -> tuple[Metric, ...]:
        return self.plan.metrics

    @property
    def engine(self) -> Engine:
        return self.dataset.engine

    def at_k(self, ks: Sequence[int]) -> Evaluation:
        """The same evaluation with every metric that has a ``k`` parameter left unset
        evaluated at each of ``ks`` (labels ``alias@K``), in one pass: the curve Metric@K.
        A metric given its own cutoff (``retrieval-ndcg-at-k@10``) keeps it, as the CLI's
        ``--k`` does; metrics without ``k`` are kept once; each K is K for every sample (a
        sample's ``metadata.k`` applies only to a metric whose k is left open)."""
        if isinstance(ks, int) or not ks:
            raise TypeError("at_k takes a non-empty list of cutoffs, e.g. at_k([1, 3, 5, 10])")
        cutoffs = list(dict.fromkeys(ks))
        if any(isinstance(k, bool) or not isinstance(k, int) or k <= 0 for k in cutoffs):
            raise MetricParameterError(f"at_k: cutoffs must be positive integers, got {ks!r}")
        expanded: dict[str, Metric] = {}
        for metric in self.metrics:
            has_k = any(f.name == "k" for f in attrs.fields(type(metric)))  # type: ignore[arg-type]
            unset = has_k and getattr(metric, "k", None) is None
            variants = [attrs.evolve(metric, k=k) for k in cutoffs] if unset else [metric]  # type: ignore[misc]
            for instance in variants:
                expanded.setdefault(metric_label(instance), instance)
        return attrs.evolve(self, plan=self.engine.plan(list(expanded.values())))

    def evaluate(
        self,
        outputs: Any,
        *,
        strict: bool = False,
        chunk_size: int | None = None,
        keep_outputs: bool = False,
        missing: MissingOutputs | None = None,
        id_key: str | None = None,
    ) -> Results:
        """Score outputs: ``{sample_id: actual_output}``, pytrec_eval's ``{qid: {docid:
        score}}``, an outputs file, a run frame, a ranx ``Run``, what
        :meth:`Dataset.collect` gathered (its errors as error rows), or earlier results
        that kept their outputs. Framework documents in an output (LangChain, LlamaIndex,
        Haystack) are read as ``run`` reads them, their ids from ``id_key`` when given.

        A sample with no output is an error row with the reason ``no output``
        (``missing="error"``), counted in the summary's errors, or scored as an empty
        ranking (``missing="empty"``), as trec_eval's ``-c`` does, listed in
        ``diagnostics.missing_outputs`` and counted in the summary's ``missing_outputs``.
        By default slotwise outputs (a mapping of outputs, an outputs file, what
        ``collect`` gathered) are ``"error"`` and TREC runs (read_run's columns, a run
        table or frame, pytrec_eval's ``{qid: {docid: score}}``, a ranx ``Run``)
        ``"empty"``; re-scored results keep what they recorded in
        ``provenance["missing_outputs"]``.

        ``strict`` turns duplicate retrieved ids and outputs for unknown samples into
        errors. ``chunk_size`` (or an engine executor other than local) scores the samples
        in chunks on the engine's executor: the same numbers, no run-level reports. More
        than 16,384 samples are scored in chunks of 16,384 unless a metric makes a
        run-level report (``summarize``).
        ``keep_outputs`` keeps the outputs in the results (as ``run`` does), so they can be
        re-scored and explained (``engine.explain(results, id)``) from the results alone. Re-scored
        results keep their error rows (failed calls) as errors, NA, not empty rankings.
        """
        columns = self._read(outputs, id_key)
        kept, recorded = None, None
        if isinstance(outputs, Results):
            kept, recorded = outputs.outputs, outputs.provenance.get("missing_outputs")
        elif isinstance(outputs, Collected):
            kept = dict(outputs.outputs)
        if keep_outputs and kept is None:
            kept = {i: output.to_json() for i, output in outputs_of(columns).items()}
        return self._score(
            columns,
            strict=strict,
            chunk_size=chunk_size,
            keep=kept,
            missing=_missing(missing or recorded or _missing_by_default(outputs)),
            where=str(outputs) if isinstance(outputs, str | os.PathLike) else None,
        )

    def _read(self, outputs: Any, id_key: str | None) -> Columns:
        """The outputs as columns; a mapping whose outputs hold framework documents is
        read again with them read as ``run`` reads them."""
        try:
            return _outputs(outputs)
        except InputError:
            if not isinstance(outputs, Mapping):
                raise
            systems = self.engine.systems
            read = {k: systems.read_documents(v, id_key, str(k)) for k, v in outputs.items()}
            if all(read[k] is outputs[k] for k in outputs):
                raise
            return _outputs(read)

    def ppi(
        self,
        outputs: Any,
        predictions: Dataset,
        *,
        baseline: Any = None,
        level: float = 0.95,
        design: Any = None,
    ) -> PPIReport:
        """Prediction-powered inference (PPI++; :mod:`engine.evaluation.ppi`) of each
        metric's mean over every sample of ``predictions``: this dataset's labels are the
        human (gold) labels, and its samples that carry labels are the labelled subset;
        ``predictions`` holds an LLM's labels for every sample, made the same way on the
        labelled samples as on the others (``slotwise annotate --runs``, without
        ``--holes``). With ``baseline`` (a second system's outputs), the paired
        comparison: PPI on the per-sample differences ``outputs - baseline``. ``design``:
        the sample the human labels were drawn by (:func:`engine.analysis.sampling.read_sample`),
        weighted as drawn (:mod:`engine.evaluation.ppi_design`)."""
        from engine.evaluation import ppi, ppi_design

        labels = self.dataset.columns
        has_labels = np.zeros(len(labels), dtype=np.bool_)
        for kind in ("relevance", "utility", "grades"):
            has_labels |= labels.column(kind).is_valid().to_numpy(zero_copy_only=False)
        gold = attrs.evolve(self.dataset, columns=labels.take(np.flatnonzero(has_labels)))
        human_scores = attrs.evolve(self, dataset=gold)._values(
            subset_outputs(outputs, gold.ids),
            None if baseline is None else subset_outputs(baseline, gold.ids),
        )
        llm_scores = Evaluation(dataset=predictions, plan=self.plan)._values(outputs, baseline)
        position = {sample_id: i for i, sample_id in enumerate(gold.ids)}
        rows = np.array([position.get(i, -1) for i in predictions.ids], dtype=np.int64)
        labelled = rows >= 0
        human = {
            label: np.where(labelled, values[np.maximum(rows, 0)], np.nan)
            for label, values in human_scores.items()
        }
        weighed: tuple[str, ...] = ()
        try:
            if design is None:
                found = ppi.estimate_metrics(human, llm_scores, labelled, level=level)
            else:
                found, weighed = ppi_design.estimate_with_design(
                    human, llm_scores, labelled, predictions.ids, design, level=level
                )
        except ValueError as error:
            raise InputError([Problem(str(error))], summary="cannot estimate by PPI") from None
        notes = weighed + _human_predictions(predictions, (outputs, baseline))
        return ppi.Report(tuple(found), level, paired=baseline is not None, notes=notes)

    def _values(self, outputs: Any, baseline: Any) -> dict[str, FloatArray]:
        """Per metric label, the per-sample values of ``outputs`` (minus ``baseline``'s)."""
        results = self.evaluate(outputs)
        found = {label: results.values(label) for label in results.labels}
        if baseline is not None:
            other = self.evaluate(baseline)
            found = {label: values - other.values(label) for label, values in found.items()}
        return found

    def run(
        self,
        system: Any,
        *,
        concurrency: int = 8,
        on_error: OnError = "record",
        progress: bool | None = None,
        strict: bool = False,
        timeout: float | None = None,
        query: Query = None,
        id_key: str | None = None,
        save_outputs: str | os.PathLike[str] | None = None,
    ) -> Results:
        """Call the system for every sample (:meth:`Dataset.collect`: a function of the
        sample's input, or a LangChain, LlamaIndex or Haystack retriever, with
        ``concurrency``, ``timeout``, ``query``, ``id_key`` and ``save_outputs`` as there)
        and score the outputs; inside a running event loop, ``await`` :meth:`arun`
        instead. A failing, timed-out or cancelled call (or an invalid output) becomes an
        error row with NA scores (``on_error="record"``) or stops the run (``"raise"``);
        when every output is invalid the run raises :class:`InputError` naming the first.
        The outputs are kept in the results, to be re-scored without calling the system
        again. Samples that lack what the metrics require (labels) raise
        :class:`MetricRequirementError` with the outputs kept on it (``error.outputs``)
        and the next command named; Ctrl-C raises :class:`RunInterrupted` with the outputs
        gathered and those samples scored (``.results``)."""
        try:
            collected = self.dataset.collect(
                system,
                concurrency=concurrency,
                timeout=timeout,
                query=query,
                id_key=id_key,
                on_error=on_error,
                progress=progress,
                save_outputs=save_outputs,
            )
        except RunInterrupted as stop:
            stop.results = self._interrupted(stop.outputs, strict)
            raise
        return self._score_run(collected, strict, save_outputs)

    async def arun(
        self,
        system: Any,
        *,
        concurrency: int = 8,
        on_error: OnError = "record",
        progress: bool | None = None,
        strict: bool = False,
        timeout: float | None = None,
        query: Query = None,
        id_key: str | None = None,
        save_outputs: str | os.PathLike[str] | None = None,
    ) -> Results:
        """:meth:`run` for code already inside an event loop (Jupyter, web servers, agent
        frameworks): ``async def`` systems and framework retrievers are awaited
        (``ainvoke``, ``aretrieve``, ``run_async``), plain functions run on threads, at
        most ``concurrency`` at a time. The same results, error rows and progress bar; a
        cancelled ``arun`` stops its calls and propagates the cancellation."""
        collected = await self.dataset.acollect(
            system,
            concurrency=concurrency,
            on_error=on_error,
            progress=progress,
            timeout=timeout,
            query=query,
            id_key=id_key,
            save_outputs=save_outputs,
        )
        return self._score_run(collected, strict, save_outputs)

    def collect(self, system: Any, **options: Any) -> Collected:
        """The system's outputs for every sample, not scored: :meth:`Dataset.collect`."""
        return self.dataset.collect(system, **options)

    async def acollect(self, system: Any, **options: Any) -> Collected:
        """:meth:`collect` inside an event loop: :meth:`Dataset.acollect`."""
        return await self.dataset.acollect(system, **options)

    def _score_run(
        self, collected: Collected, strict: bool, saved: str | os.PathLike[str] | None
    ) -> Results:
        """Score what a run collected; samples lacking what the metrics require raise a
        :class:`MetricRequirementError` that keeps the outputs and names the next step."""
        try:
            results = self._score_collected(collected, strict)
        except MetricRequirementError as error:
            raise self._unmet(error, collected, saved) from None
        self._warn_unjudged(collected)
        return results

    def _warn_unjudged(self, collected: Collected) -> None:
        """Warn when labels exist but not one retrieved document has one: the ids most
        likely do not match (a vector store or a splitter made its own)."""
        labelled = {
            doc
            for sample in self.dataset.samples
            for labels in (sample.relevance, sample.grades, sample.utility)
            for doc in labels or ()
        }
        retrieved = {
            str(item["id"] if isinstance(item, Mapping) else item)
            for output in collected.outputs.values()
            for item in (final_context(output) if isinstance(output, Mapping) else output)
        }
        if labelled and retrieved and not labelled & retrieved:
            log.warning(
                "outputs.none_labelled",
                retrieved=len(retrieved),
                labelled=len(labelled),
                examples=sorted(retrieved)[:3],
                hint="the system's document ids match no labelled id: does it make its own "
                "(a vector store, a splitter)? id_key= names the metadata key of yours",
            )

    def _score_collected(
        self, collected: Collected, strict: bool, only: Sequence[int] | None = None
    ) -> Results:
        columns = documents.outputs_columns(collected.outputs, collected.errors)
        return self._score(columns, strict=strict, keep=collected.outputs, only=only)

    def _interrupted(self, collected: Collected, strict: bool) -> Results | None:
        """The samples an interrupted run finished, scored as partial results (None when
        there are none, or they cannot be scored)."""
        done = {*collected.outputs, *collected.errors}
        rows = [row for row, sample_id in enumerate(self.dataset.ids) if sample_id in done]
        if not rows:
            return None
        try:
            return self._score_collected(collected, strict, only=rows)
        except SlotwiseError:
            return None

    def _unmet(
        self,
        error: MetricRequirementError,
        collected: Collected,
        saved: str | os.PathLike[str] | None,
    ) -> MetricRequirementError:
        """``error`` told in one line per metric and need, with the outputs kept on it and
        what to do next: label the samples (``slotwise annotate``), then evaluate."""
        lacking: dict[tuple[str, str], list[str]] = {}
        for problem in error.problems:
            lacking.setdefault((problem.message, problem.pointer), []).append(
                str(problem.sample_id)
            )
        problems = [
            Problem(
                f"{message}: {len(ids)} of {len(self.dataset)} samples lack it ({few(ids)})",
                pointer=pointer,
            )
            for (message, pointer), ids in lacking.items()
        ]
        outputs = str(saved) if saved is not None else "outputs.json"
        kept = f"written to {saved}" if saved is not None else f"error.outputs.write({outputs!r})"
        lines = [
            f"The system's outputs are kept ({len(collected.outputs)} outputs, "
            f"{len(collected.errors)} errors): error.outputs, {kept}."
        ]
        if any(p.pointer.startswith("/expected_output") for p in error.problems):
            dataset = self.dataset.source or self.dataset.name or "DATASET"
            lines += [
                "Label them (docs/annotation.md), then score them without calling the system again:",
                f"  slotwise annotate {dataset} --task relevance --holes --runs {outputs} "
                "--output labelled.yaml --annotator openai-compatible --base-url URL --model MODEL",
                f"  engine.dataset('labelled.yaml').with_metrics({list(self.plan.labels)!r})"
                f".evaluate({outputs!r})",
            ]
        unmet = MetricRequirementError(problems, summary=error.summary, hint="\n".join(lines))
        unmet.outputs = collected
        return unmet

    def scorer(self, *, strict: bool = False) -> Scorer:
        """A :class:`Scorer` for outputs that arrive one at a time (an agent loop, a
        streaming harness): ``add(sample_id, output)`` returns that sample's scores at
        once, ``results()`` the whole evaluation, as if every output were scored together."""
        return Scorer(self, strict=strict)

    def score_outcomes(
        self, outcomes: Outcomes, strict: bool, only: Sequence[int] | None = None
    ) -> Results:
        """Score what a system returned, its failures as error rows, its outputs kept;
        ``only``: the dataset rows to score (a partial run), padded as the whole dataset.
        When every output failed validation this raises instead (see
        :meth:`Outcomes.check_any_valid`)."""
        outcomes.check_any_valid()
        columns = documents.outputs_columns(outcomes.outputs, outcomes.errors)
        return self._score(columns, strict=strict, keep=outcomes.outputs, only=only)

    def evaluate_aligned(self, joined: Columns, *, chunk_size: int | None = None) -> Results:
        """Score outputs already put beside this evaluation's samples, row for row
        (``dataset.columns.beside(outputs)``, rows as the dataset's): for a caller that
        needed the joined table itself first (``slotwise trec-eval``)."""
        if not joined.ids.equals(self.dataset.columns.ids):
            raise ValueError("evaluate_aligned needs the dataset's rows, in order")
        return self._score(
            joined, strict=False, chunk_size=chunk_size, beside=True, missing="empty"
        )

    def _score(
        self,
        outputs: Columns,
        *,
        strict: bool,
        chunk_size: int | None = None,
        keep: Mapping[str, Any] | None = None,
        only: Sequence[int] | None = None,
        beside: bool = False,
        missing: MissingOutputs = "error",
        where: str | None = None,
    ) -> Results:
        """Score ``outputs`` (with ``beside``: already beside the samples); a sample
        without one is an error row or an empty ranking, as ``missing`` says (``where``:
        the file the outputs were read from, for the error when none is for a sample)."""
        dataset, executor = self.dataset, self.engine.executor
        joined, unknown = (outputs, []) if beside else aligned(dataset.columns, outputs)
        if not beside:
            check_overlap(len(outputs), unknown, dataset.columns.ids, where)
        shape, extra = None, {}
        if only is not None:  # a partial run: padded as the whole dataset, labelled so
            shape = Shape.of(joined)
            joined = joined.take(np.asarray(only, dtype=np.int64))
            extra = {"partial": {"samples_scored": len(joined), "samples_in_dataset": len(dataset)}}
        if chunk_size is None and executor.name not in IN_PROCESS:
            chunk_size = DEFAULT_CHUNK_SIZE
        elif chunk_size is None and not self.plan.reports:  # the same numbers, sooner
            chunk_size = default_chunk_size(joined)
        size = chunk_size_of(chunk_size) if chunk_size is not None else None
        chunks = slices(joined, size)
        results = evaluate(
            self.plan,
            chunks,
            Source(dataset.name, lambda: dataset.hash, len(joined), unknown, keep),
            shape=shape or (Shape.of(joined) if len(chunks) > 1 else None),
            executor=executor,
            strict=strict,
            missing=missing,
            provenance={
                **self.engine.provenance(dataset.source),
                **({"chunk_size": size, "executor": executor.name} if size is not None else {}),
                **extra,
                "missing_outputs": missing,
            },
        )
        cutoffs = {k for m in self.metrics if isinstance(k := getattr(m, "k", None), int)}
        found = {
            f"{REPORT}@{k}": report
            for k in sorted(cutoffs or {self.engine.config.default_k})
            if (report := label_source_report(joined, k)) is not None
        }
        if found:
            results = attrs.evolve(results, reports={**results.reports, **found})
        log.info(
            "evaluation.finished",
            dataset=dataset.name,
            samples=len(dataset),
            metrics=len(self.plan.labels),
            missing_outputs=len(results.diagnostics.missing_outputs),
            errors=len(results.diagnostics.errors),
        )
        return results


def _check_on_error(on_error: str) -> None:
    if on_error not in ("record", "raise"):
        raise ValueError("on_error must be 'record' or 'raise'")
