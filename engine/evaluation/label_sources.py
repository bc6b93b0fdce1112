"""What a system's scores stand on: how many of its top-k slots hold a document labelled
by a person, by each LLM judge (``metadata.label_sources``, written by ``slotwise
annotate --runs``), or not at all, and judged@k with the human labels alone and with all.

A label's source is ``metadata.label_sources[doc]`` of its sample; a label without an
entry is a human's (``human``). Datasets without any ``label_sources`` get no report.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.io.columns import Columns, labelled_codes, offsets_of

__all__ = ["HUMAN", "REPORT", "SOURCES_KEY", "label_source_report", "slot_sources"]

HUMAN = "human"
#: The metadata key that maps a sample's labelled documents to their label's source.
SOURCES_KEY = "label_sources"
#: The key of the report in ``Results.reports``.
REPORT = "label sources"


def _declares_sources(columns: Columns) -> bool:
    metadata = columns.column("metadata")
    found = pc.any(pc.match_substring(metadata.fill_null(""), f'"{SOURCES_KEY}"')).as_py()
    return bool(found)


def slot_sources(columns: Columns, k: int | None = None) -> pa.Array:
    """For a table of samples with their outputs: each retrieved slot's label source
    (``human``, an LLM source, or null when unjudged), flat in row order, as retrieved.
    ``k`` keeps only the top k of each sample."""
    codes, sizes = columns.doc_codes("retrieved")
    rows = np.repeat(np.arange(len(columns), dtype=np.int64), sizes)
    rank = np.arange(codes.size, dtype=np.int64) - np.repeat(offsets_of(sizes)[:-1], sizes)
    if k is not None:
        kept = rank < k
        codes, rows = codes[kept], rows[kept]
    size = np.int64(max(len(columns.docs), 1))
    slots = rows * size + codes
    label_codes, label_sizes = columns.doc_codes("relevance")
    label_rows = np.repeat(np.arange(len(columns), dtype=np.int64), label_sizes)
    labelled = np.isin(slots, label_rows * size + label_codes)
    names = [HUMAN]
    source = np.where(labelled, 0, -1)  # an index into names; -1: unjudged
    declared, ids = _declared(columns, np.unique(rows[labelled]), size, names)
    if declared.size:
        at = np.minimum(np.searchsorted(declared, slots), declared.size - 1)
        hit = labelled & (declared[at] == slots)
        source[hit] = ids[at[hit]]
    labels = pa.array(names, pa.string()).take(pa.array(np.maximum(source, 0)))
    return pc.if_else(pa.array(source >= 0), labels, pa.nulls(len(labels), pa.string()))


def _declared(
    columns: Columns, rows: np.ndarray, size: np.int64, names: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """The (row * size + doc code) keys that ``metadata.label_sources`` of ``rows`` name,
    sorted, and each one's index into ``names`` (extended with new sources)."""
    metadata = columns.column("metadata").take(pa.array(rows, pa.int64())).to_pylist()
    key_rows, docs, ids = [], [], []
    for row, text in zip(rows.tolist(), metadata, strict=True):
        if text is None or SOURCES_KEY not in text:
            continue
        for doc, name in json.loads(text).get(SOURCES_KEY, {}).items():
            if name not in names:
                names.append(name)
            key_rows.append(row)
            docs.append(doc)
            ids.append(names.index(name))
    counts = np.bincount(np.array(key_rows, dtype=np.int64), minlength=len(columns))
    codes = labelled_codes(columns, offsets_of(counts), pa.array(docs, pa.string()))
    known = codes >= 0
    keys = np.array(key_rows, dtype=np.int64)[known] * size + codes[known]
    order = np.argsort(keys)
    return keys[order], np.array(ids, dtype=np.int64)[known][order]


def label_source_report(columns: Columns, k: int) -> dict[str, Any] | None:
    """Counts of the top-k slots by label source (``unjudged`` for none), and judged@k
    (the mean over samples of judged slots / k) with the human labels alone and with all;
    None when the dataset declares no label sources."""
    if not _declares_sources(columns) or not len(columns):
        return None
    sources = slot_sources(columns, k)
    counts = pc.value_counts(sources.fill_null("unjudged")).to_pylist()
    by_source = {c["values"]: int(c["counts"]) for c in counts}
    samples = len(columns)
    unjudged = by_source.get("unjudged", 0)
    total = len(sources)
    human = by_source.get(HUMAN, 0)
    return {
        "k": k,
        "slots": total,
        "sources": dict(sorted(by_source.items())),
        "judged@k (human labels)": human / (samples * k),
        "judged@k (all labels)": (total - unjudged) / (samples * k),
    }
