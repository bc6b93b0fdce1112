"""Outputs as they arrive: each system call's outcome recorded (an output or an error row),
and the :class:`Scorer` that scores one output at a time for harnesses that see them so."""

from __future__ import annotations

import functools
import itertools
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from typing import TYPE_CHECKING, Any, Literal

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InputError, MetricRequirementError, Problem
from engine.evaluation.batch import Batch, Flat, Shape
from engine.evaluation.pipeline import score_batch
from engine.io import documents
from engine.io.columns import (
    HOP_COLUMNS,
    LABEL_KINDS,
    OUTPUT_COLUMNS,
    SAMPLE_COLUMNS,
    Columns,
    chunks_of,
    label_lists,
    lengths,
    list_array,
    offsets_of,
    owned_codes,
)
from engine.logs import log

if TYPE_CHECKING:
    import asyncio

    from engine.evaluation.api import Dataset, Evaluation
    from engine.evaluation.results import Results

__all__ = ["OnError", "Outcomes", "Scorer"]

OnError = Literal["record", "raise"]


class Outcomes:
    """What a system returned for each sample: valid outputs, and error rows. ``read``
    turns what a system returned into an output (e.g. a framework's documents into
    ``{"id", "text", "score"}`` items), raising :class:`InputError` where it cannot."""

    def __init__(self, on_error: OnError, read: Callable[[Any, str], Any] | None = None) -> None:
        self.on_error = on_error
        self.read = read
        self.outputs: dict[str, Any] = {}
        self.errors: dict[str, str] = {}
        self.first_invalid: Problem | None = None  # the first output that failed validation

    def add(self, sample_id: str, done: Future[Any] | asyncio.Future[Any]) -> None:
        """Record one finished call (a cancelled one is an error row); with
        ``on_error="raise"``, its error is raised."""
        if done.cancelled():
            self.fail(sample_id, CancelledError("the call was cancelled"))
            return
        try:
            actual = done.result()
        except Exception as error:
            self.fail(sample_id, error)
            return
        try:
            if self.read is not None:
                actual = self.read(actual, sample_id)
        except InputError as unread:
            if self.on_error == "raise":
                raise
            self.errors[sample_id] = f"invalid output: {'; '.join(map(str, unread.problems))}"
            self.first_invalid = self.first_invalid or unread.problems[0]
            return
        actual = documents.plain_output(actual)
        try:
            documents.parse_outputs([(sample_id, actual, None)])
        except InputError as invalid:
            if self.on_error == "raise":
                raise
            reasons = "; ".join(str(p) for p in invalid.problems)
            self.errors[sample_id] = f"invalid output ({type(actual).__name__}): {reasons}"
            if self.first_invalid is None:
                self.first_invalid = Problem(
                    f"the system returned {type(actual).__name__} {_shown(actual)}; accepted: "
                    f"{documents.ACCEPTED_OUTPUTS}",
                    sample_id=sample_id,
                    pointer="/actual_output",
                )
            return
        self.outputs[sample_id] = actual

    def fail(self, sample_id: str, error: BaseException) -> None:
        """Record a failed call as an error row (``on_error="raise"``: raise ``error``)."""
        if self.on_error == "raise" or not isinstance(error, Exception):
            raise error
        self.errors[sample_id] = f"{type(error).__name__}: {error}"

    def check_any_valid(self) -> None:
        """A run whose every output failed validation is a broken harness, not a result:
        raise :class:`InputError` naming the first bad output, its type and the accepted
        types."""
        if self.first_invalid is not None and not self.outputs:
            invalid = sum(e.startswith("invalid output") for e in self.errors.values())
            raise InputError(
                [self.first_invalid],
                summary=f"every output failed validation ({invalid} invalid, "
                f"{len(self.errors) - invalid} failed calls); the first",
            )


def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Scorer:
    """Scores one output at a time and gathers them: :meth:`add` returns a sample's
    scores as soon as its output arrives, :meth:`results` the :class:`Results` of all of
    them, identical, bit for bit, to scoring them at once. Safe to share between threads.

    Build with :meth:`Evaluation.scorer`. Dataset-wide statistics (the padding shape of
    the labels, the largest label that ERR's ``max_grade`` defaults to) come from the
    whole dataset, so a sample scores as it would among all the others.
    """

    def __init__(self, evaluation: Evaluation, *, strict: bool = False) -> None:
        self.evaluation = evaluation
        self.strict = strict
        self._lock = threading.Lock()
        self._outcomes = Outcomes("record")
        self._rows = {sample_id: row for row, sample_id in enumerate(evaluation.dataset.ids)}
        self._shape = Shape.of(evaluation.dataset.columns)  # labels' widths, largest label

    @functools.cached_property
    def _local(self) -> _Local:
        return _local_of(self.evaluation.dataset)

    def _batch(self, row: int, actual: Any, *, bare: bool) -> Batch:
        """The dataset's row ``row`` with ``actual`` beside it (``bare``: a list of string
        ids, :func:`documents.bare_ids`), compiled: coded into a vocabulary of only the
        documents they name (the cost of one sample, whatever the dataset's size), with
        the row's labels and ``k`` sliced from the dataset's arrays, and compiled by code
        (:meth:`Batch.one`)."""
        local = self._local
        start, end = local.bounds[row], local.bounds[row + 1]
        labelled = local.ids.slice(start, end - start)
        codes = dict(zip(labelled.to_pylist(), itertools.count()))
        coded = documents.ranked_codes if bare else documents.output_codes
        output = coded(actual, codes)
        retrieved = output.lists["retrieved"]
        first, last = local.label_bounds[row : row + 2].tolist()
        flat = Flat(
            retrieved=retrieved,
            retrieved_lengths=np.array([retrieved.size], dtype=np.int64),
            label_codes=local.label_codes[first:last],
            label_values=local.label_values[first:last],
            label_lengths=local.label_lengths[row : row + 1],
            k=local.k[row : row + 1],
            has_output=np.ones(1, dtype=np.bool_),
        )
        columns = _Beside(local, row, labelled, output)
        vocabulary = len(labelled) + len(output.placed)  # the codes of docs
        return Batch.one(columns, flat, vocabulary, self._shape, self.evaluation.plan.default_k)

    def __len__(self) -> int:
        """How many samples have an output or an error so far."""
        with self._lock:
            return len(self._outcomes.outputs) + len(self._outcomes.errors)

    def add(self, sample_id: str, actual_output: Any) -> dict[str, float]:
        """Validate one sample's output, record it, and return its scores by metric label
        (NaN where a metric has no value, or failed: logged, and recorded by
        :meth:`results`). An invalid output, an id not in the dataset or
        already added, or (``strict``) a ranking that repeats an id raises
        :class:`InputError` and records nothing."""
        sample_id = str(sample_id)
        with self._lock:
            row = self._check_new(sample_id)
        bare = documents.bare_ids(actual_output)  # valid, and plain, as it is
        if not bare:
            actual_output = documents.plain_output(actual_output)
            documents.parse_outputs([(sample_id, actual_output, None)])
        plan = self.evaluation.plan
        scores = score_batch(self._batch(row, actual_output, bare=bare), plan, judged=False)
        if scores.problems:
            raise MetricRequirementError(
                list(scores.problems), summary="the sample cannot be scored as the metrics need"
            )
        for label, reason in scores.failures.items():  # NaN here; recorded by results()
            log.warning("metric.failed", metric=label, sample_id=sample_id, error=reason)
        if self.strict and scores.duplicates[0]:
            problem = Problem(
                "the ranked list repeats a document id",
                sample_id=sample_id,
                pointer="/actual_output/retrieved",
            )
            raise InputError([problem], summary="duplicate ids in rankings")
        with self._lock:
            self._check_new(sample_id)
            self._outcomes.outputs[sample_id] = actual_output
        return {label: float(scores.values[label][0]) for label in plan.labels}

    def add_error(self, sample_id: str, error: BaseException | str) -> None:
        """Record that the system failed on a sample: an error row with NA scores, as
        :meth:`Evaluation.run` records a failing call."""
        sample_id = str(sample_id)
        reason = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        with self._lock:
            self._check_new(sample_id)
            self._outcomes.errors[sample_id] = reason

    def results(self, *, partial: bool = False) -> Results:
        """Every sample's outcome scored as :meth:`Evaluation.run` would score it: the same
        values, summaries, confidence intervals, diagnostics and provenance.

        Before every sample is added this refuses (:class:`InputError` naming how many
        are missing), so that a sample not added yet is never scored as an empty ranking;
        ``partial=True`` scores only the samples added so far (outputs and error rows),
        padded and labelled as among the whole dataset, and marks the results partial
        (``provenance["partial"]``: samples scored and samples in the dataset)."""
        with self._lock:
            outcomes = Outcomes("record")
            order = sorted(self._outcomes.outputs, key=self._rows.__getitem__)
            outcomes.outputs = {i: self._outcomes.outputs[i] for i in order}
            outcomes.errors = dict(self._outcomes.errors)
        added = len(outcomes.outputs) + len(outcomes.errors)
        if added == len(self._rows):
            return self.evaluation.score_outcomes(outcomes, self.strict)
        if not partial:
            waiting = [
                i for i in self._rows if i not in outcomes.outputs and i not in outcomes.errors
            ]
            shown = ", ".join(map(repr, waiting[:3])) + (", ..." if len(waiting) > 3 else "")
            message = (
                f"{len(waiting)} of {len(self._rows)} samples not added yet ({shown}): add them, "
                "or call results(partial=True) to score only the samples added so far"
            )
            raise InputError([Problem(message)], summary="incomplete run")
        rows = sorted(self._rows[i] for i in (*outcomes.outputs, *outcomes.errors))
        return self.evaluation.score_outcomes(outcomes, self.strict, only=rows)

    def _check_new(self, sample_id: str) -> int:
        """The sample's row in the dataset; an unknown or already added id is an error."""
        row = self._rows.get(sample_id)
        if row is None:
            raise InputError(
                [Problem("no sample with this id in the dataset", sample_id=sample_id)],
                summary="unknown sample",
            )
        if sample_id in self._outcomes.outputs or sample_id in self._outcomes.errors:
            raise InputError(
                [Problem("this sample was already added", sample_id=sample_id)],
                summary="sample added twice",
            )
        return row


_LOCAL: weakref.WeakKeyDictionary[Dataset, _Local] = weakref.WeakKeyDictionary()
_LOCAL_LOCK = threading.Lock()


def _local_of(dataset: Dataset) -> _Local:
    """The dataset's :class:`_Local` form, built on first use and shared by its scorers
    (a harness may make one scorer per sample, as the Inspect integration does)."""
    with _LOCAL_LOCK:
        found = _LOCAL.get(dataset)
        if found is None:
            found = _LOCAL[dataset] = _Local.of(dataset.columns)
    return found


@attrs.frozen
class _Local:
    """A dataset's sample columns with each row's documents coded 0, 1, ... in that row
    alone: row ``r``'s local code ``c`` is document ``ids[bounds[r] + c]``. Built once, in
    whole-array operations, so a row can be taken with its own small vocabulary (the
    table has null output columns, for a row's output to be set into); with the
    relevance labels (local codes, values; row ``r``'s from ``label_bounds[r]``, its count
    ``label_lengths[r]``), ``k`` (0 when unset) and whether each row holds each sample
    column (``valid``) as read-only numpy arrays, to slice a row's without Arrow."""

    table: pa.Table
    ids: pa.Array
    bounds: npt.NDArray[np.int64]
    label_codes: npt.NDArray[np.int64]
    label_values: npt.NDArray[np.float64]
    label_bounds: npt.NDArray[np.int64]
    label_lengths: npt.NDArray[np.int64]
    k: npt.NDArray[np.int64]
    valid: dict[str, npt.NDArray[np.bool_]]

    @classmethod
    def of(cls, columns: Columns) -> _Local:
        names = [name for name in (*LABEL_KINDS, "groups") if columns.has(name)]
        found = {name: owned_codes(columns.column(name)) for name in names}
        keys = [(owners << 32) | codes for owners, codes in found.values()]
        ordered = np.sort(np.concatenate(keys)) if keys else np.zeros(0, np.int64)
        unique = ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))[: ordered.size]]
        bounds = np.searchsorted(unique, np.arange(len(columns) + 1, dtype=np.int64) << 32)
        table = columns.table
        for name, key in zip(names, keys, strict=True):
            local = np.searchsorted(unique, key) - bounds[key >> 32]
            column = _with_codes(columns.column(name), local.astype(np.int32))
            table = table.set_column(table.column_names.index(name), name, column)
        for name in ("retrieved", "texts", "pool", "cited", *HOP_COLUMNS):  # null until set
            table = table.append_column(name, pa.nulls(len(columns), OUTPUT_COLUMNS[name]))
        ids = columns.docs.cast(pa.string()).take(pa.array(unique & 0xFFFFFFFF))
        sample = Columns(table, ids)
        coded = Flat.of(sample)  # no outputs yet: only the labels and k are read
        for array in (coded.label_codes, coded.label_values, coded.label_lengths, coded.k):
            array.flags.writeable = False  # a row's are views
        valid = {name: sample.valid(name) for name in SAMPLE_COLUMNS if columns.has(name)}
        return cls(
            table=table,
            ids=ids,
            bounds=bounds,
            label_codes=coded.label_codes,
            label_values=coded.label_values,
            label_bounds=offsets_of(coded.label_lengths),
            label_lengths=coded.label_lengths,
            k=coded.k,
            valid=valid,
        )


class _Beside(Columns):
    """A dataset row's columns (its documents coded in the row alone) with one coded
    output beside them, whose table and vocabulary are built only when read: the
    classic metrics read only the row's length and which sample columns it has, and
    the Batch's arrays."""

    _local: _Local
    _row: int
    _labelled: pa.Array
    _output: documents.OutputCodes

    def __init__(
        self, local: _Local, row: int, labelled: pa.Array, output: documents.OutputCodes
    ) -> None:
        fields = {"_local": local, "_row": row, "_labelled": labelled, "_output": output}
        for name, value in fields.items():
            object.__setattr__(self, name, value)  # a frozen class

    def __len__(self) -> int:
        return 1

    def has(self, name: str) -> bool:
        return self._local.table.schema.get_field_index(name) >= 0  # outputs' columns too

    def valid(self, name: str) -> npt.NDArray[np.bool_]:
        found = self._local.valid.get(name)
        return super().valid(name) if found is None else found[self._row : self._row + 1]

    @functools.cached_property
    def table(self) -> pa.Table:  # type: ignore[override]
        table = self._local.table.slice(self._row, 1)
        for name, column in self._output.columns().items():
            table = table.set_column(table.schema.get_field_index(name), name, column)
        return table

    @functools.cached_property
    def docs(self) -> pa.ChunkedArray:  # type: ignore[override]
        placed = pa.array(self._output.placed, pa.string())
        return pa.chunked_array([*chunks_of(self._labelled), placed])


def _with_codes(column: pa.Array, codes: npt.NDArray[np.int32]) -> pa.Array:
    """A label or ``groups`` column with its document codes replaced, in order."""
    offsets = offsets_of(lengths(column))
    mask = column.is_null().to_numpy(zero_copy_only=False)
    flat = pc.list_flatten(column)
    if flat.type.get_field_index("doc") >= 0:
        return label_lists(offsets, codes, flat.field("label"), mask)
    members = flat.field("docs")
    inner = list_array(
        offsets_of(lengths(members)),
        pa.array(codes, pa.int32()),
        members.is_null().to_numpy(zero_copy_only=False),
    )
    entries = pa.StructArray.from_arrays([flat.field("group"), inner], names=["group", "docs"])
    return list_array(offsets, entries, mask)
