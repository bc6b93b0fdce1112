"""Hole filling: the (sample, document) pairs that the top ``depth`` documents of several
runs pool, which of them already have a relevance label, and the source of each label.

A label's source is ``metadata.label_sources[doc]`` of its sample: ``"human"``, or
``"ANNOTATOR:MODEL:PROMPT_VERSION"`` for a label an LLM wrote
(:func:`~engine.annotate.relevance.source_of`); a label with no entry there is a
human's. The pairs the judge could not label (an unreadable answer, a failed call) are
listed in ``metadata.unjudged`` with why, and asked for again by the next run. Pooling is vectorised over all runs at once
(document codes in one vocabulary, one int64 key per pair, one sort), so 100,000 queries
x 3 runs x depth 10 pool in about a second.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from engine.annotate.base import Annotator
from engine.annotate.claims import Agreement
from engine.annotate.jobs import estimate
from engine.annotate.outcomes import Failure
from engine.annotate.records import long_form, mark_human, set_relevance, set_unjudged, sources_of
from engine.annotate.relevance import choose_judge, source_of
from engine.annotate.runner import Runner
from engine.annotate.tasks import listing, problem_of
from engine.errors import InputError
from engine.evaluation.system_order import means_and_tau
from engine.io.columns import Columns, lengths, merge_vocabularies, offsets_of
from engine.io.records import Sample

__all__ = [
    "Filling",
    "Pool",
    "Ranking",
    "RelevanceAgreement",
    "fill_holes",
    "pool",
    "relevance_agreement",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@attrs.frozen
class Pool:
    """The distinct (sample row, document) pairs in the top ``depth`` of the runs, in
    key order. ``labelled``: the sample has a relevance label for the document;
    ``has_text``: some run gave the document's text for that sample."""

    rows: IntArray
    docs: pa.Array
    labelled: BoolArray
    has_text: BoolArray
    depth: int
    unknown: int
    """Rows of the runs whose sample id is not in the dataset (left out)."""
    _text_run: IntArray = attrs.field(repr=False)
    _text_at: IntArray = attrs.field(repr=False)
    _texts: Sequence[pa.Array] = attrs.field(repr=False)

    def __len__(self) -> int:
        return int(self.rows.size)

    @property
    def holes(self) -> BoolArray:
        """Pairs without a label that can be judged (they have a text)."""
        return ~self.labelled & self.has_text

    def texts(self, selected: BoolArray) -> list[str]:
        """The text of each selected pair (which must have one), in order."""
        indices = np.flatnonzero(selected)
        found: list[str | None] = [None] * indices.size
        runs = self._text_run[indices]
        for number, texts in enumerate(self._texts):
            mine = np.flatnonzero(runs == number)
            if mine.size:
                taken = texts.take(pa.array(self._text_at[indices[mine]])).to_pylist()
                for position, text in zip(mine.tolist(), taken, strict=True):
                    found[position] = text
        return found  # type: ignore[return-value]


def _flat_texts(
    run: Columns, rows: IntArray, rank: IntArray
) -> tuple[pa.Array, IntArray, BoolArray]:
    """The run's texts flattened, and for each (run row, rank) its position there and
    whether it has a text."""
    column = run.column("texts")
    flat = pc.list_flatten(column)
    starts = offsets_of(lengths(column))[:-1]
    present = column.is_valid().to_numpy(zero_copy_only=False)[rows]
    at = np.where(present, starts[rows] + rank, 0)
    valid = flat.is_valid().to_numpy(zero_copy_only=False) if len(flat) else np.zeros(0, bool)
    has = present & (valid[at] if valid.size else False)
    return flat, at, np.asarray(has, dtype=np.bool_)


def _member(sorted_keys: IntArray, keys: IntArray) -> BoolArray:
    """Which of the (sorted, distinct) ``sorted_keys`` are among ``keys``."""
    if not keys.size or not sorted_keys.size:
        return np.zeros(sorted_keys.size, dtype=np.bool_)
    found = np.zeros(sorted_keys.size, dtype=np.bool_)
    at = np.searchsorted(sorted_keys, keys)
    inside = at < sorted_keys.size
    at = at[inside]
    found[at[sorted_keys[at] == keys[inside]]] = True
    return found


def pool(samples: Columns, runs: Sequence[Columns], depth: int) -> Pool:
    """The pairs the top ``depth`` documents of ``runs`` pool (see :class:`Pool`)."""
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    vocabulary, remaps = merge_vocabularies([samples.docs, *(run.docs for run in runs)])
    size = np.int64(len(vocabulary))
    keys, text_runs, text_at, has_text, texts = [], [], [], [], []
    unknown = 0
    for number, (run, remap) in enumerate(zip(runs, remaps[1:], strict=True)):
        row_of = pc.index_in(run.ids, value_set=samples.ids).fill_null(-1)
        row_of = row_of.to_numpy(zero_copy_only=False).astype(np.int64)
        codes, sizes = run.doc_codes("retrieved")
        unknown += int(((row_of < 0) & (sizes > 0)).sum())
        run_rows = np.repeat(np.arange(len(run), dtype=np.int64), sizes)
        rank = np.arange(codes.size, dtype=np.int64) - np.repeat(offsets_of(sizes)[:-1], sizes)
        kept = (rank < depth) & (row_of[run_rows] >= 0)
        run_rows, rank = run_rows[kept], rank[kept]
        keys.append(row_of[run_rows] * size + remap[codes[kept]])
        flat, at, has = _flat_texts(run, run_rows, rank)
        texts.append(flat)
        text_at.append(at)
        has_text.append(has)
        text_runs.append(np.full(at.size, number, dtype=np.int64))
    every = np.concatenate(keys) if keys else np.zeros(0, np.int64)
    has_any = np.concatenate(has_text) if has_text else np.zeros(0, np.bool_)
    order = np.argsort(every * 2 + ~has_any, kind="stable")  # by key, one with a text first
    every, has_any = every[order], has_any[order]
    first = np.ones(every.size, dtype=np.bool_)
    first[1:] = every[1:] != every[:-1]
    chosen = order[first]
    unique = every[first]
    label_codes, label_sizes = samples.doc_codes("relevance")
    label_rows = np.repeat(np.arange(len(samples), dtype=np.int64), label_sizes)
    labelled_keys = label_rows * size + remaps[0][label_codes]
    doc_codes = unique % size
    return Pool(
        rows=unique // size,
        docs=vocabulary.take(pa.array(doc_codes)),
        labelled=_member(unique, labelled_keys),
        has_text=has_any[first],
        depth=depth,
        unknown=unknown,
        text_run=np.concatenate(text_runs)[chosen] if text_runs else np.zeros(0, np.int64),
        text_at=np.concatenate(text_at)[chosen] if text_at else np.zeros(0, np.int64),
        texts=texts,
    )


@attrs.define
class Filling:
    """What hole filling found and did: pooled pairs, those already labelled, the ones
    sent to the judge (and how many of those the cache had), what it could not judge;
    ``every``: every pooled pair was judged, not only the holes."""

    source: str
    every: bool = False
    judge: str = ""
    pooled: int = 0
    labelled: int = 0
    without_text: int = 0
    judged: int = 0
    cached: int = 0
    written: int = 0
    unreadable: list[str] = attrs.field(factory=list)
    failed: list[str] = attrs.field(factory=list)
    last_failure: str | None = None
    computed: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    cost: float | None = None

    @property
    def _subject(self) -> str:
        return "pool" if self.every else "holes"

    def plan_line(self, max_tokens: int) -> str:
        """What will be sent to the model, said before any call."""
        cost = (
            ""
            if self.cost is None
            else f"; estimated cost at most ${self.cost:.4f} (~{self.prompt_tokens} prompt "
            f"tokens at 4 characters a token, at most {max_tokens} completion tokens each)"
        )
        return (
            f"{self._subject}: {self.pooled} pooled pairs, {self.labelled} already labelled, "
            f"{self.without_text} without a text (skipped); {self.judged} to judge: "
            f"{self.cached} from the cache, {self.computed} to compute in "
            f"{self.calls} model calls{cost}; {self.judge}"
        )

    def lines(self) -> list[str]:
        lines = [f"{self._subject}: {self.written} labels written, source {self.source}"]
        if self.unreadable:
            lines.append(
                listing(
                    self.unreadable,
                    "judge answer(s) could not be read and were left unlabelled (listed in "
                    "metadata.unjudged; not cached: asked again on the next run)",
                )
            )
        if self.failed:
            lines.append(
                listing(
                    self.failed,
                    "call(s) failed for good and were left unlabelled (listed in "
                    "metadata.unjudged; asked again on the next run)",
                )
            )
            lines.append(f"the last failure: {self.last_failure}")
        return lines


def fill_holes(
    raws: Sequence[Mapping[str, Any]],
    samples: Sequence[Sample],
    pooled: Pool,
    annotator: Annotator,
    runner: Runner,
    *,
    every: bool = False,
    only: BoolArray | None = None,
    judge: str = "auto",
    judge_max_tokens: int = 256,
    announce: Callable[[str], None] | None = None,
) -> tuple[list[dict[str, Any]], Filling]:
    """The raw samples with the judge's relevance label on each pooled pair that had none
    (``every``: on every pooled pair, replacing the labels it had), and each label's
    source in ``metadata.label_sources``. ``judge``: ``auto``, ``umbrela`` (grades 0-3,
    no reference answers) or ``answers`` (Figure 5, 1 or 0), see
    :mod:`engine.annotate.relevance`. Labels already there are kept (a human's get the
    source ``human``); the judge's answers come from the cache where it has them. A pair
    the judge could not label (unreadable answer, failed call) goes to the sample's
    ``metadata.unjudged`` with why. ``only`` (a mask over the pool's pairs) limits the
    judging to those pairs. ``announce(line)`` hears the plan (pairs, cache hits, judge,
    cost) before any model call."""
    wanted = pooled.has_text if every else pooled.holes
    considered = np.ones(len(pooled), dtype=np.bool_) if only is None else only
    wanted = wanted & considered
    rows = pooled.rows[wanted].tolist()
    docs = pooled.docs.filter(pa.array(wanted)).to_pylist()
    texts = pooled.texts(wanted)
    chosen = choose_judge(judge, [samples[row] for row in dict.fromkeys(rows)])
    filling = Filling(source_of(annotator.name, annotator.model, chosen.version), every=every)
    filling.judge = chosen.describe()
    filling.pooled = len(pooled)
    filling.labelled = int(pooled.labelled.sum())
    filling.without_text = int((~pooled.has_text & (every | ~pooled.labelled) & considered).sum())
    problems = chosen.problems([samples[row] for row in dict.fromkeys(rows)])
    if problems:
        raise InputError(problems, summary="cannot fill the holes")
    job = chosen.job(
        annotator, [(samples[r], t) for r, t in zip(rows, texts, strict=True)], judge_max_tokens
    )
    filling.judged = len(rows)
    cached, fresh = runner.lookup(job)  # the same question and passage twice: computed once
    filling.cached = sum(1 for e in job.entries if e.key in cached)
    filling.computed = len(fresh)
    filling.prompt_tokens, filling.cost = estimate(
        annotator, [job.prompts[i] for i in fresh], judge_max_tokens
    )
    filling.calls = -(-len(fresh) // runner.batch_size)
    if announce is not None:
        announce(filling.plan_line(judge_max_tokens))
    values = runner.run(job)
    result = [copy.deepcopy(dict(raw)) for raw in raws]
    for raw in result:
        mark_human(raw)
    for row, doc, (value, _) in zip(rows, docs, values, strict=True):
        why = problem_of(value)
        if why is not None:
            where = f"{samples[row].id}/{doc}"
            if isinstance(value, Failure):
                filling.failed.append(where)
                filling.last_failure = value.reason
            else:
                filling.unreadable.append(where)
            set_unjudged(result[row], doc, why)
            continue
        set_relevance(result[row], doc, chosen.label(value["value"]), filling.source)
        filling.written += 1
    return result, filling


@attrs.frozen
class Ranking:
    """One metric's mean per run under the human labels and under the judge's, and
    Kendall's tau-b between the two orders of the runs (None: fewer than 2 runs, or a
    constant side)."""

    metric: str
    human: Mapping[str, float]
    llm: Mapping[str, float]
    tau: float | None


@attrs.frozen
class RelevanceAgreement:
    """The judge (``source``) against the human relevance labels on the pooled pairs both
    labelled (``table``: Cohen's kappa), and the runs' rankings under each (``rankings``)."""

    source: str
    table: Agreement
    samples: int
    rankings: tuple[Ranking, ...]

    def lines(self) -> list[str]:
        t = self.table
        lines = [
            f"agreement of {self.source} with the human relevance labels: {t.pairs} pooled "
            f"pairs of {self.samples} samples labelled by both",
            f"  Cohen's kappa  {_number(t.kappa)}  (observed {_number(t.observed)}, chance "
            f"{_number(t.chance)})",
            f"  pairs          {t.both} both relevant, {t.llm_only} LLM only, "
            f"{t.human_only} human only, {t.neither} neither",
        ]
        for ranking in self.rankings:
            lines.append(
                f"  {ranking.metric}: Kendall's tau {_number(ranking.tau)} between the runs' "
                "order under the human and the LLM labels"
            )
            lines += [
                f"    {run}  human {ranking.human[run]:.4f}  LLM {ranking.llm[run]:.4f}"
                for run in ranking.human
            ]
        return lines


def _number(value: float | None) -> str:
    return "NA" if value is None else f"{value:.4f}"


def relevance_agreement(
    raws: Sequence[Mapping[str, Any]],
    judged: Sequence[Mapping[str, Any]],
    filling: Filling,
    runs: Mapping[str, Any],
    metrics: Sequence[str],
    engine: Any,
) -> RelevanceAgreement:
    """Compare the judge's labels (``judged``: the samples after :func:`fill_holes` with
    ``every``) with the human labels of ``raws``, on the samples that have human relevance
    labels: Cohen's kappa over the pairs both labelled (relevant: label > 0), and per
    metric the runs' means under each set of labels with Kendall's tau between their
    orders. ``runs``: run name -> outputs the engine reads."""
    table = Agreement()
    rows = []
    for row, (raw, after) in enumerate(zip(raws, judged, strict=True)):
        human = long_form(copy.deepcopy(dict(raw))).get("relevance")
        if not human:
            continue
        rows.append(row)
        if isinstance(human, list):
            human = dict.fromkeys(human, 1)
        sources = sources_of(after.get("metadata"))
        llm = long_form(copy.deepcopy(dict(after))).get("relevance") or {}
        verdicts = {
            str(doc): llm[doc] > 0
            for doc in human
            if sources.get(str(doc)) == filling.source and doc in llm
        }
        table.add(
            str(raw["id"]), "relevance", verdicts, [str(d) for d, v in human.items() if v > 0]
        )
    human_data = engine.dataset(samples=[raws[r] for r in rows])
    llm_data = engine.dataset(samples=[judged[r] for r in rows])
    rankings = tuple(
        Ranking(spec, *means_and_tau(human_data, llm_data, runs, spec)) for spec in metrics
    )
    return RelevanceAgreement(filling.source, table, len(rows), rankings)
