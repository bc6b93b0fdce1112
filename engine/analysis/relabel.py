"""Relabel any chunking by overlap with labelled spans, so that labels survive a re-chunk
without a new judge call.

The rule (``max-covered``, with ``f`` = ``min_coverage``, default
:data:`MIN_COVERAGE`), for each sample and each chunk:

1. A chunk **covers** a span when their overlap is at least ``f`` of the shorter of the
   two (so a small chunk inside a long labelled passage covers it, and so does a long
   chunk that holds a whole short span); a smaller overlap is no coverage.
2. A chunk that covers a relevant span (grade > 0) gets the **highest grade** among the
   spans it covers.
3. A chunk that covers no relevant span gets the highest grade among the spans it covers
   (0, or a negative grade) only when labelled text (the union of the sample's spans)
   makes up at least ``f`` of the chunk: a chunk mostly over unlabelled text stays
   **unjudged**, never non-relevant.
4. A chunk that covers no span stays unjudged; a chunk that cannot be aligned to its
   source is listed (:attr:`Relabelled.unaligned`) and stays unjudged.

Each label carries its provenance: the span that decided it (its index in the sample's
spans, and the passage it was lifted from), its coverage, the labelled share of the chunk
and the rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from engine.analysis.defaults import MIN_COVERAGE
from engine.errors import InputError, Problem
from engine.io.spans import Alignment, Span, lift, span_of

__all__ = ["MIN_COVERAGE", "RULE", "Relabelled", "relabel"]


#: The rule's name, as provenance records it.
RULE = "max-covered"

_SHIFT = np.int64(1 << 32)
Ints = npt.NDArray[np.int64]


@attrs.frozen
class Relabelled:
    """Per sample, the chunks' new labels (``{chunk id: grade}``) and each label's
    provenance; ``unaligned``: the chunks placed nowhere, with why."""

    labels: Mapping[str, dict[str, float]]
    provenance: Mapping[str, dict[str, dict[str, Any]]]
    unaligned: Mapping[str, str]
    min_coverage: float

    def counts(self) -> dict[str, int]:
        """Labels written, relevant among them, and chunks unaligned."""
        values = [g for found in self.labels.values() for g in found.values()]
        return {
            "labels": len(values),
            "relevant": sum(g > 0 for g in values),
            "unaligned": len(self.unaligned),
        }


def relabel(
    spans: Mapping[str, Sequence[Span]],
    alignment: Alignment,
    min_coverage: float = MIN_COVERAGE,
) -> Relabelled:
    """New labels for the aligned chunks from each sample's labelled ``spans`` (see the
    module's docstring for the rule)."""
    if not 0 < min_coverage <= 1:
        raise ValueError(f"min_coverage must lie in (0, 1], not {min_coverage!r}")
    chunk_ids = list(alignment.placed)
    docs = sorted({d for d, _, _, _ in alignment.placed.values()})
    code = {d: i for i, d in enumerate(docs)}
    c_doc = np.array([code[alignment.placed[c][0]] for c in chunk_ids], dtype=np.int64)
    c_start = np.array([alignment.placed[c][1] for c in chunk_ids], dtype=np.int64)
    c_end = np.array([alignment.placed[c][2] for c in chunk_ids], dtype=np.int64)
    order = np.lexsort((c_start, c_doc))
    chunks = (c_doc[order], c_start[order], c_end[order])

    samples = list(spans)
    flat = [
        (q, i, s)
        for q, sample in enumerate(samples)
        for i, s in enumerate(spans[sample])
        if s.doc in code
    ]
    s_query = np.array([q for q, _, _ in flat], dtype=np.int64)
    s_index = np.array([i for _, i, _ in flat], dtype=np.int64)
    s_doc = np.array([code[s.doc] for _, _, s in flat], dtype=np.int64)
    s_start = np.array([s.start for _, _, s in flat], dtype=np.int64)
    s_end = np.array([s.end for _, _, s in flat], dtype=np.int64)
    s_grade = np.array([s.grade for _, _, s in flat], dtype=np.float64)

    labels: dict[str, dict[str, float]] = {sample: {} for sample in samples}
    provenance: dict[str, dict[str, dict[str, Any]]] = {sample: {} for sample in samples}
    if not flat or not chunk_ids:
        return Relabelled(labels, provenance, dict(alignment.unaligned), min_coverage)

    # every (span, chunk) pair that overlaps, and the coverage of each
    span_at, chunk_at, overlap = _overlaps(chunks, s_doc, s_start, s_end)
    length = chunks[2] - chunks[1]
    shorter = np.minimum((s_end - s_start)[span_at], length[chunk_at])
    coverage = overlap / np.maximum(shorter, 1)
    pair = s_query[span_at] * np.int64(len(chunk_ids)) + chunk_at

    # the labelled share of each (sample, chunk): the union of the sample's spans
    m_query, m_doc, m_start, m_end = _merged(s_query, s_doc, s_start, s_end)
    u_span, u_chunk, u_overlap = _overlaps(chunks, m_doc, m_start, m_end)
    u_pair = m_query[u_span] * np.int64(len(chunk_ids)) + u_chunk
    keys, inverse = np.unique(u_pair, return_inverse=True)
    labelled = np.bincount(inverse, weights=u_overlap).astype(np.float64)
    share = labelled / np.maximum(length[keys % len(chunk_ids)], 1)

    covered = coverage >= min_coverage - 1e-12
    pair, span_at, chunk_at = pair[covered], span_at[covered], chunk_at[covered]
    coverage = coverage[covered]
    grade = s_grade[span_at]
    # per pair: the highest grade first, then the highest coverage
    first = np.lexsort((-coverage, -grade, pair))
    head = first[np.r_[True, pair[first][1:] != pair[first][:-1]]] if first.size else first
    pair_share = share[np.searchsorted(keys, pair[head])]
    keep = (grade[head] > 0) | (pair_share >= min_coverage - 1e-12)
    head, pair_share = head[keep], pair_share[keep]

    ids_sorted = [chunk_ids[i] for i in order.tolist()]
    rows = zip(
        s_query[span_at[head]].tolist(),
        s_index[span_at[head]].tolist(),
        chunk_at[head].tolist(),
        np.round(coverage[head], 4).tolist(),
        np.round(np.minimum(pair_share, 1.0), 4).tolist(),
        strict=True,
    )
    for q, index, at, cover, labelled_share in rows:
        sample, chunk = samples[q], ids_sorted[at]
        span = spans[sample][index]
        labels[sample][chunk] = span.grade
        record = {
            "rule": RULE,
            "min_coverage": min_coverage,
            "span": index,
            "coverage": cover,
            "labelled_share": labelled_share,
        }
        if span.passage is not None:
            record["passage"] = span.passage
        provenance[sample][chunk] = record
    return Relabelled(labels, provenance, dict(alignment.unaligned), min_coverage)


def _overlaps(
    chunks: tuple[Ints, Ints, Ints], doc: Ints, start: Ints, end: Ints
) -> tuple[Ints, Ints, Ints]:
    """(interval index, chunk position, overlap) of every overlapping pair; chunks sorted
    by (doc, start): the candidates of an interval are the chunks of its document that
    start before its end and no earlier than the longest chunk before its start."""
    c_doc, c_start, c_end = chunks
    keys = c_doc * _SHIFT + c_start
    longest = int((c_end - c_start).max())
    low = np.searchsorted(keys, doc * _SHIFT + np.maximum(start - longest + 1, 0), "left")
    high = np.searchsorted(keys, doc * _SHIFT + end, "left")
    counts = np.maximum(high - low, 0)
    interval = np.repeat(np.arange(doc.size, dtype=np.int64), counts)
    offsets = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(
        np.cumsum(counts) - counts, counts
    )
    chunk = low[interval] + offsets
    overlap = np.minimum(c_end[chunk], end[interval]) - np.maximum(c_start[chunk], start[interval])
    hit = overlap > 0
    return interval[hit], chunk[hit], overlap[hit]


def _merged(query: Ints, doc: Ints, start: Ints, end: Ints) -> tuple[Ints, Ints, Ints, Ints]:
    """The union of each sample's spans per document, as disjoint intervals."""
    order = np.lexsort((start, doc, query))
    query, doc, start, end = query[order], doc[order], start[order], end[order]
    group = np.r_[True, (query[1:] != query[:-1]) | (doc[1:] != doc[:-1])]
    group_id = np.cumsum(group) - 1
    # the running end within a group: shift each group above the last so one running
    # maximum over the whole array never carries an end across groups
    lift = group_id.astype(np.int64) * (int(end.max()) + 1)
    reach = np.maximum.accumulate(end + lift) - lift
    new = group | np.r_[True, start[1:] > reach[:-1]]
    first = np.flatnonzero(new)
    run_end = np.maximum.reduceat(end, first)
    return query[first], doc[first], start[first], run_end


# -- datasets ------------------------------------------------------------------------------

#: The ``expected_output`` fields keyed by passage id that a relabel cannot carry over.
PASSAGE_KEYED = ("grades", "groups", "utility")


@attrs.frozen
class DatasetRelabel:
    """A relabelled dataset's samples and what happened to each: ``spans`` each
    sample's span labels (those it had, given and lifted), ``relabelled`` the result, ``lifted`` span labels lifted from passage labels, ``not_lifted`` per sample
    the passage labels that could not be (why), ``no_spans`` the samples with no span
    label (kept as they were), ``dropped`` per sample the passage-keyed fields removed."""

    samples: list[dict[str, Any]]
    spans: Mapping[str, list[Span]]
    relabelled: Relabelled
    alignment: Alignment
    lifted: int
    not_lifted: Mapping[str, Mapping[str, str]]
    no_spans: tuple[str, ...]
    dropped: Mapping[str, tuple[str, ...]]

    def lines(self) -> list[str]:
        """What the relabel did, as sentences for the console."""
        placed = self.alignment.counts()
        counts = self.relabelled.counts()
        found = [
            f"chunks aligned: {placed['offsets']:,} by their offsets, {placed['exact']:,} by "
            f"exact text, {placed['fuzzy']:,} fuzzily; {placed['unaligned']:,} unaligned",
            f"labels written: {counts['labels']:,} ({counts['relevant']:,} relevant) over "
            f"{len(self.samples) - len(self.no_spans):,} samples by the rule {RULE} "
            f"(min coverage {self.relabelled.min_coverage:g}); chunks not labelled stay unjudged",
        ]
        if self.lifted:
            found.append(f"span labels lifted from passage labels: {self.lifted:,}")
        left = sum(len(v) for v in self.not_lifted.values())
        if left:
            first = next(iter(self.not_lifted.items()))
            passage, why = next(iter(first[1].items()))
            found.append(
                f"WARNING: {left:,} passage label(s) could not be lifted (e.g. sample "
                f"{first[0]!r}, passage {passage!r}: {why})"
            )
        for chunk, why in list(self.relabelled.unaligned.items())[:10]:
            found.append(f"WARNING: chunk {chunk!r} unaligned, left unjudged: {why}")
        if len(self.relabelled.unaligned) > 10:
            found.append(f"... and {len(self.relabelled.unaligned) - 10:,} more unaligned chunks")
        if self.no_spans:
            found.append(
                f"{len(self.no_spans):,} sample(s) have no span label and were kept as they "
                f"were: {', '.join(self.no_spans[:5])}{', ...' if len(self.no_spans) > 5 else ''}"
            )
        if self.dropped:
            fields = sorted({f for v in self.dropped.values() for f in v})
            found.append(
                f"{len(self.dropped):,} sample(s) lost their passage-keyed {', '.join(fields)} "
                "(their ids name the old passages; set-based metrics fall back to relevance)"
            )
        return found


def relabel_dataset(
    samples: Sequence[Mapping[str, Any]],
    documents: Mapping[str, str],
    alignment: Alignment,
    *,
    passages: Alignment | None = None,
    spans: Mapping[str, Sequence[Span]] | None = None,
    min_coverage: float = MIN_COVERAGE,
) -> DatasetRelabel:
    """Relabel raw (schema-valid) samples for the chunks of ``alignment``: each sample's
    span labels (``expected_output.spans``, those of ``spans`` for its id, and its
    passage labels lifted through ``passages``) decide the new ``relevance``; the spans
    are kept, so the labels survive the next re-chunk too."""
    known = {str(s["id"]) for s in samples}
    stray = sorted(set(spans or {}) - known)
    if stray:
        raise InputError(
            [
                Problem("span labels for a sample the dataset does not have", sample_id=q)
                for q in stray
            ],
            summary="span labels for unknown samples",
        )
    problems = []
    by_sample: dict[str, list[Span]] = {}
    lifted = 0
    not_lifted: dict[str, dict[str, str]] = {}
    for raw in samples:
        sample = str(raw["id"])
        expected = raw.get("expected_output")
        found: list[Span] = list((spans or {}).get(sample, ()))
        for index, item in enumerate(_spans_of(expected)):
            span = span_of(item, documents)
            if isinstance(span, str):
                problems.append(
                    Problem(span, sample_id=sample, pointer=f"/expected_output/spans/{index}")
                )
            else:
                found.append(span)
        if passages is not None:
            up, left = lift(_relevance_of(expected), passages)
            lifted += len(up)
            found += up
            if left:
                not_lifted[sample] = left
        by_sample[sample] = list(dict.fromkeys(found))
    if problems:
        raise InputError(problems, summary="span labels that name no text of the documents")
    spans_of = {s: v for s, v in by_sample.items() if v}
    result = relabel(spans_of, alignment, min_coverage)
    out, dropped = [], {}
    for raw in samples:
        sample = str(raw["id"])
        if not by_sample[sample]:
            out.append(dict(raw))
            continue
        new, gone = _relabelled(raw, by_sample[sample], result, sample)
        out.append(new)
        if gone:
            dropped[sample] = gone
    no_spans = tuple(str(s["id"]) for s in samples if not by_sample[str(s["id"])])
    return DatasetRelabel(out, spans_of, result, alignment, lifted, not_lifted, no_spans, dropped)


def _spans_of(expected: Any) -> list[Mapping[str, Any]]:
    return list(expected.get("spans", ())) if _long(expected) else []


def _long(expected: Any) -> bool:
    from engine.io.schemas import LONG_FORM

    return isinstance(expected, Mapping) and bool(LONG_FORM & expected.keys())


def _relevance_of(expected: Any) -> dict[str, float]:
    """A sample's passage labels as ``{id: grade}`` (a list of ids: grade 1)."""
    labels = expected.get("relevance") if _long(expected) else expected
    if labels is None:
        return {}
    if isinstance(labels, list):
        return {str(i): 1.0 for i in labels}
    return {str(i): float(g) for i, g in labels.items()}


def _relabelled(
    raw: Mapping[str, Any], spans: Sequence[Span], result: Relabelled, sample: str
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The sample with its new relevance, its spans and the labels' provenance."""
    expected = raw.get("expected_output")
    long: dict[str, Any] = (
        dict(expected) if isinstance(expected, Mapping) and _long(expected) else {}
    )
    gone = tuple(f for f in PASSAGE_KEYED if f in long)
    for field in gone:
        del long[field]
    long["relevance"] = {c: _number(g) for c, g in result.labels.get(sample, {}).items()}
    long["spans"] = [s.to_dict() for s in spans]
    metadata = dict(raw.get("metadata") or {})
    sources = metadata.pop("label_sources", None) or {}
    if metadata.pop("unjudged", None) is not None:
        gone += ("metadata.unjudged",)
    provenance = result.provenance.get(sample, {})
    carried = {
        chunk: sources[p]
        for chunk, record in provenance.items()
        if (p := record.get("passage")) is not None and p in sources
    }
    if carried:
        metadata["label_sources"] = carried
    metadata["relabel"] = provenance
    new = {k: v for k, v in raw.items() if k not in ("expected_output", "metadata")}
    new["expected_output"] = long
    new["metadata"] = metadata
    return new, gone


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value
