"""Why a sample scored what it did: for each system, its top K slots (labels, pool rank,
a snippet), the relevant documents it missed and where they sat in its pool, its scores
and, for the set-based metrics, the G_obs, G_pool and G_oracle behind the diagnosis.

:func:`explain` builds it for ``slotwise explain``, the HTML report and
:func:`explain_sample` (``engine.explain(results, sample_id)``) alike, from results, the
outputs they scored and their dataset. A document is *relevant* when its relevance
label is at least 1 or its set-based grade at least 3.
"""

from __future__ import annotations

import difflib
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pyarrow.compute as pc

from engine.errors import InputError, Problem
from engine.evaluation.api import Dataset, Engine
from engine.evaluation.batch import DEFAULT_K, Batch
from engine.evaluation.hops import Hops, evidence
from engine.evaluation.label_sources import HUMAN, SOURCES_KEY
from engine.evaluation.pipeline import aligned
from engine.evaluation.results import MetricRecord, Results
from engine.evaluation.source_plugins import is_reference
from engine.io import sources
from engine.io.columns import Columns
from engine.io.documents import canonical_json
from engine.io.records import Sample, samples_of

__all__ = [
    "Diagnosis",
    "Explanation",
    "Hop",
    "Missed",
    "Slot",
    "SystemView",
    "explain",
    "explain_sample",
    "labels_at",
    "worst",
]

SNIPPET_CHARS = 80
DIAGNOSIS = "diagnosis-at-k"
#: Set-based metrics whose parameters give G_obs, G_pool and G_oracle (the diagnosis first).
SET_BASED = (DIAGNOSIS, "proc-at-k", "pct-proc-at-k", "ra-nwg-at-k")
_CLASSES = ("fine", "retrieval", "selection")
#: A document's (relevance, grade, utility) labels, None where it has none.
Labels = tuple[float | None, float | None, float | None]
_UNLABELED: Labels = (None, None, None)


@attrs.frozen
class Slot:
    """One prompt slot: its document, the document's labels (None: unlabeled) and its rank
    in the candidate pool (None: not in the pool)."""

    rank: int
    id: str
    relevance: float | None
    grade: float | None
    utility: float | None
    in_pool: bool
    pool_rank: int | None
    snippet: str | None
    source: str | None = None
    """Who labelled its relevance: ``human`` or an LLM judge (``metadata.label_sources``);
    None when it has no relevance label or the dataset declares no label sources."""
    text: str | None = None
    """The whole text the output gave (``snippet`` is its start, on one line)."""


@attrs.frozen
class Missed:
    """A relevant document that did not reach the top K, and where it sat in the pool."""

    id: str
    relevance: float | None
    grade: float | None
    pool_rank: int | None


@attrs.frozen
class Diagnosis:
    """The set-based gains of one sample (see docs/set-based.md): RA-nWG = G_obs / G_oracle,
    PROC = G_pool / G_oracle; ``verdict`` is the diagnosis class (fine, retrieval,
    selection), None when NA or when only the ratios were scored."""

    label: str
    g_obs: float
    g_pool: float
    g_oracle: float
    verdict: str | None


@attrs.frozen
class Hop:
    """One retrieval call of an agent's output (docs/agents.md): its number and query,
    the ids it ranked, how many it pooled (None: no pool), the ids it put into the
    prompt, the evidence it was first to retrieve, and each piece of evidence lost at
    it with why (``selection``: first reached here, never prompted; ``context``: last
    prompted here, dropped from the final context)."""

    number: int
    query: str | None
    retrieved: tuple[str, ...]
    pool: int | None
    prompted: tuple[str, ...]
    found: tuple[str, ...]
    lost: tuple[tuple[str, str], ...]

    def line(self) -> str:
        """The hop as one line of text (``slotwise explain``, the report)."""
        query = "" if self.query is None else f" {json.dumps(self.query, ensure_ascii=False)}"
        pool = "" if self.pool is None else f"; pool {self.pool}"
        lost = ", ".join(f"{doc} ({why})" for doc, why in self.lost) or "none"
        return (
            f"hop {self.number}{query}: ranked {', '.join(self.retrieved) or 'nothing'}{pool}; "
            f"prompted {', '.join(self.prompted) or 'nothing'}; first found "
            f"{', '.join(self.found) or 'none'}; lost here {lost}"
        )


@attrs.frozen
class SystemView:
    """What one system did with one sample: ``k`` slots out of ``retrieved`` ranked
    documents, from a pool of ``pool`` candidates (None: the ranking is the pool);
    ``error``: why the system failed on it (an error row, NA), None when it did not."""

    name: str
    k: int
    retrieved: int
    pool: int | None
    has_output: bool
    slots: tuple[Slot, ...]
    missed: tuple[Missed, ...]
    scores: Mapping[str, float | None]
    diagnosis: Diagnosis | None
    error: str | None = None
    hops: tuple[Hop, ...] = ()
    """An agent's hops, when its output lists them (the per-hop diagnosis)."""


@attrs.frozen
class Explanation:
    """One sample as every system saw it, the first system being the baseline."""

    sample_id: str
    input: Any
    metadata: Mapping[str, Any]
    systems: tuple[SystemView, ...]

    @property
    def question(self) -> str:
        """The input as one line: its ``question`` or ``query`` when it has one."""
        value = self.input
        if isinstance(value, Mapping):
            value = value.get("question", value.get("query", value))
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return " ".join(text.split())

    def moved(self, index: int) -> tuple[list[str], list[str]]:
        """The ids that entered and left the top K of system ``index`` against the first."""
        base = [s.id for s in self.systems[0].slots]
        mine = [s.id for s in self.systems[index].slots]
        return [i for i in mine if i not in base], [i for i in base if i not in mine]

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready): ``moved_in`` / ``moved_out`` for every system after the first."""
        document = attrs.asdict(self)
        document["question"] = self.question
        for index, system in enumerate(document["systems"][1:], start=1):
            system["moved_in"], system["moved_out"] = self.moved(index)
        return document


def labels_at(metrics: Sequence[MetricRecord], k: int) -> list[str]:
    """The labels to show at cutoff ``k``: of a metric scored at several K (a curve), the
    one at ``k`` only; every other label."""
    families: dict[str, list[MetricRecord]] = {}
    for record in metrics:
        others = {name: v for name, v in record.params.items() if name != "k"}
        families.setdefault(canonical_json([record.alias, others]), []).append(record)
    return [
        record.label
        for family in families.values()
        for record in family
        if len(family) == 1 or record.params.get("k") in (k, None)
    ]


def worst(results: Sequence[Results], label: str, count: int) -> list[tuple[str, float]]:
    """The ``count`` samples where ``label`` is worst, with their values: the lowest (the
    highest for a metric where lower is better) of one results, or the largest drops
    from the first results to the last (only samples that got worse). NA is left out;
    ties go by id."""
    records = {m.label: m for m in results[0].metrics}
    if not all(label in r.labels for r in results):
        close = difflib.get_close_matches(label, list(records), n=3, cutoff=0.5)
        hint = f"; did you mean: {', '.join(close)}?" if close else ""
        raise InputError(
            [
                Problem(
                    f"no metric label {label!r} in every results{hint} (labels: {', '.join(records)})"
                )
            ],
            summary="unknown metric label",
        )
    sign = 1.0 if records[label].higher_is_better else -1.0
    first, last = (
        dict(zip(r.sample_ids, r.values(label).tolist(), strict=True))
        for r in (results[0], results[-1])
    )
    if len(results) == 1:
        found = {i: v for i, v in first.items() if not math.isnan(v)}
    else:
        found = {
            i: last[i] - v for i, v in first.items() if i in last and not math.isnan(last[i] - v)
        }
        found = {i: d for i, d in found.items() if d * sign < 0}
    return sorted(found.items(), key=lambda item: (item[1] * sign, item[0]))[:count]


def explain_sample(
    results: Results,
    sample_id: str,
    *,
    dataset: Dataset | str | os.PathLike[str] | None = None,
    outputs: Any = None,
    k: int | None = None,
    name: str = "system",
) -> Explanation:
    """Why ``sample_id`` scored what it did in one system's results: the top K slots, the
    relevant documents missed, the scores and the set-based diagnosis. Needs the outputs
    (kept in the results, or ``outputs=``) and the dataset (``dataset=``, else the one
    the results record); :func:`explain` does several systems and samples at once."""
    given = None if outputs is None else [outputs]
    return explain([results], [sample_id], names=[name], dataset=dataset, outputs=given, k=k)[0]


def explain(
    results: Sequence[Results],
    sample_ids: Sequence[str] | None = None,
    *,
    names: Sequence[str] | None = None,
    dataset: Dataset | str | os.PathLike[str] | None = None,
    outputs: Sequence[Any] | None = None,
    k: int | None = None,
    engine: Engine | None = None,
) -> list[Explanation]:
    """One :class:`Explanation` per sample id (default: every sample of the dataset).

    ``outputs``: per results, the outputs it scored (a file or mapping; None: the
    outputs the results kept). ``dataset``: the dataset they were scored on, or its
    name in ``slotwise.yaml`` or file (default: the results' dataset name, as declared).
    ``k``: the cutoff for every sample (default: a sample's ``metadata.k``, else each
    results' configured default). Raises :class:`InputError` saying how to fix what is missing.
    """
    engine = engine or Engine()
    names = list(names) if names is not None else [f"system {i + 1}" for i in range(len(results))]
    found, given = _inputs(engine, results, names, dataset, outputs)
    rows = _rows(found, found.ids if sample_ids is None else sample_ids)
    samples_columns = found.columns.take(rows)
    samples = samples_of(samples_columns)
    judged = [_judgements(s) for s in samples]
    declared = [s.metadata.get(SOURCES_KEY) for s in samples]
    by_source = (
        [{**dict.fromkeys(j, HUMAN), **(d or {})} for j, d in zip(judged, declared, strict=True)]
        if any(declared)
        else None
    )
    views = [
        _views(
            result, name, sources.read_outputs(raw), samples_columns, judged, k, engine, by_source
        )
        for result, name, raw in zip(results, names, given, strict=True)
    ]
    return [
        Explanation(s.id, s.input, s.metadata, tuple(v[row] for v in views))
        for row, s in enumerate(samples)
    ]


def _source(
    label_sources: Sequence[Mapping[str, str]] | None,
    row: int,
    labels: Mapping[str, Labels],
    doc: str,
) -> str | None:
    """The source of the document's relevance label (None: no label, or no sources)."""
    if label_sources is None or labels.get(doc, _UNLABELED)[0] is None:
        return None
    return label_sources[row].get(doc, HUMAN)


# -- finding the inputs --------------------------------------------------------------------


def _inputs(
    engine: Engine,
    results: Sequence[Results],
    names: Sequence[str],
    dataset: Dataset | str | os.PathLike[str] | None,
    outputs: Sequence[Any] | None,
) -> tuple[Dataset, list[Any]]:
    """The dataset and, per results, the outputs to read; every problem found at once."""
    given = list(outputs) if outputs is not None else [None] * len(results)
    if len(given) != len(results):
        message = f"{len(given)} outputs for {len(results)} results: give one per results, in order"
        raise InputError([Problem(message)], summary="nothing to explain")
    missing = [
        Problem(
            f"{name} kept no outputs: pass the outputs file it scored (--outputs FILE, once per "
            "results file, in order; outputs= in Python), or score with Evaluation.run(system), "
            "whose results keep them"
        )
        for result, name, raw in zip(results, names, given, strict=True)
        if raw is None and result.outputs is None
    ]
    try:
        found = _dataset(engine, results, names, dataset)
    except InputError as error:
        raise InputError([*missing, *error.problems], summary="nothing to explain") from error
    if missing:
        raise InputError(missing, summary="nothing to explain")
    kept = [raw if raw is not None else r.outputs for r, raw in zip(results, given, strict=True)]
    return found, kept


def _dataset(
    engine: Engine,
    results: Sequence[Results],
    names: Sequence[str],
    dataset: Dataset | str | os.PathLike[str] | None,
) -> Dataset:
    """The dataset every results was scored on (checked by content hash)."""
    hint = "pass the dataset they were scored on (--dataset PATH or NAME; dataset= in Python)"
    first = results[0]
    recorded = first.provenance.get("dataset_source")
    if isinstance(dataset, Dataset):
        found = dataset
    elif dataset is not None:
        found = engine.dataset(dataset)
    elif recorded is not None and (is_reference(recorded) or Path(recorded).exists()):
        found = engine.dataset(recorded)
    elif first.dataset_name is None:
        raise InputError([Problem(f"{names[0]} does not name its dataset: {hint}")])
    else:
        try:
            found = engine.dataset(first.dataset_name)
        except InputError as error:
            gone = f" (it was read from {recorded}, which no longer exists)" if recorded else ""
            found_not = f"cannot find dataset {first.dataset_name!r} of {names[0]}{gone}: {hint}"
            raise InputError([*error.problems, Problem(found_not)]) from error
    problems = [
        Problem(
            f"{name} was scored on {r.dataset_name} ({r.dataset_hash[:19]}...), not on "
            f"{found.name} ({found.hash[:19]}...): {hint}"
        )
        for name, r in zip(names, results, strict=True)
        if r.dataset_hash != found.hash
    ]
    if problems:
        raise InputError(problems, summary="a different dataset")
    return found


def _rows(dataset: Dataset, ids: Sequence[str]) -> list[int]:
    where = {sample_id: row for row, sample_id in enumerate(dataset.ids)}
    problems = []
    for sample_id in ids:
        if sample_id not in where:
            close = difflib.get_close_matches(sample_id, list(where), n=3, cutoff=0.6)
            hint = f"; did you mean: {', '.join(close)}?" if close else ""
            problems.append(Problem(f"no such sample in {dataset.name}{hint}", sample_id=sample_id))
    if problems:
        raise InputError(problems, summary="unknown sample id")
    return [where[sample_id] for sample_id in ids]


# -- one system ----------------------------------------------------------------------------


def _views(
    result: Results,
    name: str,
    outputs: Columns,
    samples_columns: Columns,
    judged: Sequence[Mapping[str, Labels]],
    k: int | None,
    engine: Engine,
    label_sources: Sequence[Mapping[str, str]] | None = None,
) -> list[SystemView]:
    """The view of every sample for one system (``label_sources``: per sample, each
    labelled document's label source)."""
    joined, _ = aligned(samples_columns, outputs)
    cutoff = k or int(result.provenance.get("config_default_k") or DEFAULT_K)
    batch = Batch.compile(joined, cutoff)
    shown = labels_at(result.metrics, cutoff)
    position = {sample_id: i for i, sample_id in enumerate(result.sample_ids)}
    values = {label: result.values(label) for label in shown}
    diagnoses = _diagnoses(result, shown, batch, cutoff, engine)
    docs = joined.docs.to_pylist()
    pools = joined.column("pool").to_pylist()
    texts = batch.ranked_texts
    cutoffs = batch.cutoffs(k).tolist()  # k given: k for every sample; else metadata.k first
    codes, lengths = batch.doc_codes.tolist(), batch.lengths.tolist()
    hop_views = _hops(batch, docs)
    views = []
    for row, (sample_id, labels) in enumerate(zip(batch.sample_ids, judged, strict=True)):
        ranked = [docs[c] for c in codes[row][: lengths[row]]]
        pool = ranked if pools[row] is None else [docs[c] for c in pools[row]]
        pool_rank: dict[str, int] = {}
        for rank, doc in enumerate(pool, start=1):
            pool_rank.setdefault(doc, rank)
        top = ranked[: cutoffs[row]]
        at = position.get(sample_id)
        views.append(
            SystemView(
                name=name,
                k=cutoffs[row],
                retrieved=len(ranked),
                pool=None if pools[row] is None else len(pool_rank),
                has_output=bool(batch.has_output[row]),
                slots=tuple(
                    Slot(
                        rank,
                        doc,
                        *labels.get(doc, _UNLABELED),
                        doc in pool_rank,
                        pool_rank.get(doc),
                        _snippet(text),
                        _source(label_sources, row, labels, doc),
                        text,
                    )
                    for rank, (doc, text) in enumerate(zip(top, texts[row], strict=False), start=1)
                ),
                missed=tuple(
                    Missed(doc, *labels[doc][:2], pool_rank.get(doc))
                    for doc in _relevant(labels)
                    if doc not in top
                ),
                scores={
                    label: None if at is None or math.isnan(v[at]) else float(v[at])
                    for label, v in values.items()
                },
                diagnosis=diagnoses[row] if diagnoses else None,
                error=result.diagnostics.errors.get(sample_id),
                hops=hop_views[row],
            )
        )
    return views


def _hops(batch: Batch, docs: Sequence[str]) -> list[tuple[Hop, ...]]:
    """Per sample, its hops when its output lists them (else none), with the evidence
    (relevance >= 1) each was first to retrieve and each lost at it."""
    listed = batch.columns.valid("hops").tolist()
    if not any(listed):
        return [()] * len(batch)
    hops = Hops.of(batch)
    found = evidence(batch, 1.0)
    classes = found.classes().tolist()
    queries = iter(pc.list_flatten(batch.columns.column("hops")).field("query").to_pylist())
    prompted = hops.prompted()
    pieces: dict[int, list[tuple[str, int, int, int, int]]] = {}
    for row, code, first, reached, last, c in zip(
        found.row.tolist(),
        found.code.tolist(),
        found.retrieved.tolist(),
        found.reached.tolist(),
        found.last_prompted.tolist(),
        classes,
        strict=True,
    ):
        pieces.setdefault(row, []).append((docs[code], first, reached, last, c))

    def ids(codes: Any, start: int, size: int) -> tuple[str, ...]:
        return tuple(docs[c] for c in codes[start : start + size].tolist())

    out: list[tuple[Hop, ...]] = []
    for row, has in enumerate(listed):
        if not has:
            out.append(())
            continue
        mine = pieces.get(row, [])
        views = []
        for g in range(int(hops.first[row]), int(hops.first[row] + hops.count[row])):
            number = int(hops.number[g])
            lost = [(d, "selection") for d, _, r, _, c in mine if c == 2 and r == number]
            lost += [(d, "context") for d, _, _, p, c in mine if c == 3 and p == number]
            views.append(
                Hop(
                    number,
                    next(queries),
                    ids(
                        hops.codes["retrieved"],
                        hops.starts["retrieved"][g],
                        hops.sizes["retrieved"][g],
                    ),
                    int(hops.sizes["pool"][g]) if hops.given["pool"][g] else None,
                    ids(prompted[0], prompted[1][g], prompted[2][g]),
                    tuple(d for d, f, *_ in mine if f == number),
                    tuple(lost),
                )
            )
        out.append(tuple(views))
    return out


def _diagnoses(
    result: Results, labels: Sequence[str], batch: Batch, cutoff: int, engine: Engine
) -> list[Diagnosis] | None:
    """Per sample, the gains of the results' set-based metric at this cutoff (the
    diagnosis when scored), with its parameters; None without one."""
    records = {
        m.label: m
        for m in result.metrics
        if m.label in labels and m.alias in SET_BASED and m.params.get("k") in (cutoff, None)
    }
    if not records:
        return None
    label, record = min(records.items(), key=lambda item: SET_BASED.index(item[1].alias))
    metric = engine.metric(record.label)  # as scored: a k left open stays open
    observed, pool, oracle = metric.gains(batch)  # type: ignore[attr-defined]
    classify = getattr(metric, "classify", None)
    classes = classify(batch)[0].tolist() if classify else [-1] * len(batch)
    return [
        Diagnosis(label, round(o, 6), round(p, 6), round(g, 6), _CLASSES[c] if c >= 0 else None)
        for o, p, g, c in zip(
            observed.tolist(), pool.tolist(), oracle.tolist(), classes, strict=True
        )
    ]


def _judgements(sample: Sample) -> dict[str, Labels]:
    """Each labeled document of the sample: its (relevance, grade, utility)."""
    kinds = (sample.relevance or {}, sample.grades or {}, sample.utility or {})
    docs = dict.fromkeys(doc for kind in kinds for doc in kind)
    return {doc: (kinds[0].get(doc), kinds[1].get(doc), kinds[2].get(doc)) for doc in docs}


def _relevant(labels: Mapping[str, Labels]) -> list[str]:
    """The relevant documents, most relevant first (relevance, grade, then id)."""
    found = sorted(
        (-(relevance or 0.0), -(grade or 0.0), doc)
        for doc, (relevance, grade, _) in labels.items()
        if (relevance or 0.0) >= 1 or (grade or 0.0) >= 3
    )
    return [doc for *_, doc in found]


def _snippet(text: str | None) -> str | None:
    """The text on one line, cut to :data:`SNIPPET_CHARS` (an ellipsis marks the cut)."""
    if text is None:
        return None
    line = " ".join(text.split())
    return line if len(line) <= SNIPPET_CHARS else line[: SNIPPET_CHARS - 1].rstrip() + "…"
