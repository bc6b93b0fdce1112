"""The columnar Batch every metric scores: rankings joined with labels once, as padded
2-D numpy arrays (one row per sample, one column per rank)."""

from __future__ import annotations

import gc
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cached_property

import attrs
import numpy as np
import numpy.typing as npt

from engine.records import Output, Sample

__all__ = ["DEFAULT_K", "Batch"]

DEFAULT_K = 5
_SHIFT = np.int64(32)  # key = sample_index << 32 | doc_code

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class _Vocabulary:
    """Document id -> unique integer code (< 2**32), shared by rankings and every label kind."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}
        self._next = 0

    def codes(self, ids: Iterable[str], count: int) -> IntArray:
        """Codes of ``count`` ids, in one C-level pass (no intermediate list)."""
        # setdefault keeps an id's first code; fresh ids take the next unused numbers
        fresh = itertools.count(self._next)
        self._next += count
        return np.fromiter(map(self._codes.setdefault, ids, fresh), dtype=np.int64, count=count)


def _flatten(
    lists: Sequence[Sequence[str] | Mapping[str, float]],
) -> tuple[Iterator[str], IntArray, IntArray]:
    """Concatenate per-sample lists: (an iterator over all items, owning sample index,
    per-sample lengths); the item count is ``lengths.sum()``."""
    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    flat = itertools.chain.from_iterable(lists)
    owners = np.repeat(np.arange(len(lists), dtype=np.int64), lengths)
    return flat, owners, lengths


@contextmanager
def _no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector: compiling allocates millions of acyclic objects,
    which would otherwise trigger repeated full collections over the whole heap."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _first_occurrences(keys: IntArray) -> BoolArray:
    """True at the first occurrence of each key; a sort-and-compare shortcut when no key
    repeats (the common case), else np.unique's first indices."""
    keep = np.ones(keys.size, dtype=np.bool_)
    ordered = np.sort(keys)
    if keys.size < 2 or not (ordered[1:] == ordered[:-1]).any():
        return keep
    keep[:] = False
    keep[np.unique(keys, return_index=True)[1]] = True
    return keep


def _columns(owners: IntArray, n_rows: int) -> tuple[IntArray, IntArray]:
    """For items grouped by owner (non-decreasing): each item's column, and row lengths."""
    lengths = np.bincount(owners, minlength=n_rows).astype(np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) if n_rows else lengths
    return np.arange(owners.size, dtype=np.int64) - np.repeat(starts, lengths), lengths


@attrs.define(slots=False, eq=False)
class Batch:
    """Samples and their outputs, compiled into arrays of shape ``(Q, L)`` (L = longest
    deduplicated ranking) and ``(Q, M)`` (M = most judged labels of any sample).

    Build with :meth:`compile`. Padding: ``doc_codes == -1``; ``ranked_labels`` is NaN
    for padding and for unjudged documents.
    """

    samples: tuple[Sample, ...]
    outputs: tuple[Output | None, ...]
    doc_codes: IntArray
    positions: IntArray
    lengths: IntArray
    ranked_labels: FloatArray
    label_values: FloatArray
    sample_k: IntArray
    duplicates_dropped: IntArray
    default_k: int = DEFAULT_K
    _vocab: _Vocabulary = attrs.field(factory=_Vocabulary, repr=False)
    _label_counts: dict[tuple[float, ...], IntArray] = attrs.field(
        factory=dict, init=False, repr=False
    )

    @classmethod
    def compile(
        cls,
        samples: Sequence[Sample],
        outputs: Sequence[Output | None],
        default_k: int = DEFAULT_K,
    ) -> Batch:
        """Join each sample's ranking (``outputs[i]``, None = no output) with its labels."""
        if len(samples) != len(outputs):
            raise ValueError("samples and outputs must be aligned")
        with _no_gc():
            return cls._compile(samples, outputs, default_k)

    @classmethod
    def _compile(
        cls, samples: Sequence[Sample], outputs: Sequence[Output | None], default_k: int
    ) -> Batch:
        n = len(samples)
        vocab = _Vocabulary()
        flat, owners, raw_lengths = _flatten([o.retrieved if o else () for o in outputs])
        codes = vocab.codes(flat, int(raw_lengths.sum()))
        keep = _first_occurrences((owners << _SHIFT) | codes)
        width = int(raw_lengths.max()) if n else 0
        if keep.all() and n and (raw_lengths == width).all():  # rectangular: no scatter
            lengths = raw_lengths
            doc_codes = codes.reshape(n, width)
            positions = np.broadcast_to(np.arange(width, dtype=np.int64), (n, width))
        else:
            original_col, _ = _columns(owners, n)
            col, lengths = _columns(owners[keep], n)
            width = int(lengths.max()) if n else 0
            doc_codes = np.full((n, width), -1, dtype=np.int64)
            doc_codes[owners[keep], col] = codes[keep]
            positions = np.full((n, width), -1, dtype=np.int64)
            positions[owners[keep], col] = original_col[keep]
        relevance = [s.relevance or {} for s in samples]
        batch = cls(
            samples=tuple(samples),
            outputs=tuple(outputs),
            doc_codes=doc_codes,
            positions=positions,
            lengths=lengths,
            ranked_labels=np.empty((n, width)),
            label_values=_sorted_values(relevance),
            sample_k=np.fromiter((s.k or 0 for s in samples), dtype=np.int64, count=n),
            duplicates_dropped=np.bincount(owners[~keep], minlength=n).astype(np.int64),
            default_k=default_k,
            vocab=vocab,
        )
        batch.ranked_labels = batch.join(relevance)
        return batch

    # -- shape and cutoffs -------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.samples)

    @property
    def sample_ids(self) -> list[str]:
        return [s.id for s in self.samples]

    @cached_property
    def ranks(self) -> IntArray:
        """1-based rank of each column, shape ``(L,)``."""
        return np.arange(1, self.doc_codes.shape[1] + 1, dtype=np.int64)

    @cached_property
    def valid(self) -> BoolArray:
        """True where a column holds a retrieved document (not padding)."""
        return self.doc_codes >= 0

    @cached_property
    def has_output(self) -> BoolArray:
        return np.fromiter((o is not None for o in self.outputs), dtype=np.bool_, count=len(self))

    def cutoffs(self, k: int | None = None) -> IntArray:
        """Per-sample k: ``metadata.k``, else the metric's ``k``, else the config default."""
        fallback = self.default_k if k is None else k
        return np.where(self.sample_k > 0, self.sample_k, fallback)

    def top_k(self, k: int | None = None) -> BoolArray:
        """Mask of ``D_k``: the first ``min(k, n)`` retrieved documents of each sample."""
        return (self.ranks[None, :] <= self.cutoffs(k)[:, None]) & self.valid

    # -- labels ------------------------------------------------------------------------

    @cached_property
    def gains(self) -> FloatArray:
        """Gain at each rank: the label if > 0, else 0 (unjudged and padding: 0)."""
        return np.where(self.ranked_labels > 0, self.ranked_labels, 0.0)

    @cached_property
    def judged(self) -> BoolArray:
        return ~np.isnan(self.ranked_labels)

    def relevant(self, threshold: float = 1.0) -> BoolArray:
        """True at ranks holding a judged document with label >= threshold."""
        with np.errstate(invalid="ignore"):
            return self.ranked_labels >= threshold

    def num_relevant(self, threshold: float = 1.0) -> IntArray:
        """|Rel| per sample: judged documents with label >= threshold."""
        with np.errstate(invalid="ignore"):
            return (self.label_values >= threshold).sum(axis=1).astype(np.int64)

    def label_counts(self, values: Sequence[float]) -> IntArray:
        """How many judged labels of each sample equal each of ``values`` (e.g. per-sample
        grade counts): shape ``(Q, len(values))``, read-only, cached per ``values``."""
        key = tuple(map(float, values))
        counts = self._label_counts.get(key)
        if counts is None:
            counts = np.zeros((len(self), len(key)), dtype=np.int64)
            for column, value in enumerate(key):
                counts[:, column] = (self.label_values == value).sum(axis=1)
            counts.flags.writeable = False
            self._label_counts[key] = counts
        return counts

    @cached_property
    def ideal_gains(self) -> FloatArray:
        """All judged gains of each sample sorted descending, zero-padded: shape ``(Q, M)``."""
        return np.where(self.label_values > 0, self.label_values, 0.0)

    @cached_property
    def max_label(self) -> float:
        """The largest label in the batch (0 when there is none)."""
        values = self.label_values[~np.isnan(self.label_values)]
        return float(values.max()) if values.size else 0.0

    # -- other per-rank columns -----------------------------------------------------------

    def join(self, maps: Sequence[Mapping[str, float] | None]) -> FloatArray:
        """Look up each ranked document in its sample's map: shape ``(Q, L)``, NaN if absent."""
        flat_ids, owners, values = _flatten_maps(maps)
        map_keys = (owners << _SHIFT) | self._vocab.codes(flat_ids, values.size)
        order = np.argsort(map_keys, kind="stable")
        map_keys, values = map_keys[order], values[order]
        out = np.full(self.doc_codes.shape, np.nan)
        if map_keys.size == 0:
            return out
        ranked_keys = self._ranked_keys()
        slot = np.minimum(np.searchsorted(map_keys, ranked_keys), map_keys.size - 1)
        found = map_keys[slot] == ranked_keys
        valid = self.valid
        out[valid] = np.where(found, values[slot], np.nan)
        return out

    def member(self, lists: Sequence[Sequence[str] | None]) -> BoolArray:
        """True where the ranked document is in its sample's list (e.g. pool, cited ids)."""
        flat, owners, lengths = _flatten([lst or () for lst in lists])
        list_keys = np.sort((owners << _SHIFT) | self._vocab.codes(flat, int(lengths.sum())))
        out = np.zeros(self.doc_codes.shape, dtype=np.bool_)
        if list_keys.size:  # sorted lookup: far faster than np.isin on int64 keys
            ranked_keys = self._ranked_keys()
            slot = np.minimum(np.searchsorted(list_keys, ranked_keys), list_keys.size - 1)
            out[self.valid] = list_keys[slot] == ranked_keys
        return out

    @cached_property
    def utilities(self) -> FloatArray:
        """Utility label at each rank (NaN where the passage has none)."""
        return self.join([s.utility for s in self.samples])

    @cached_property
    def ranked_texts(self) -> list[list[str | None]]:
        """Passage text of each deduplicated ranked document, per sample (no padding)."""
        texts: list[list[str | None]] = []
        for output, pos, length in zip(self.outputs, self.positions, self.lengths, strict=True):
            source = output.texts if output is not None else None
            kept = pos[:length].tolist()
            texts.append([source[p] for p in kept] if source else [None] * len(kept))
        return texts

    def _ranked_keys(self) -> IntArray:
        rows = np.broadcast_to(np.arange(len(self), dtype=np.int64)[:, None], self.doc_codes.shape)
        valid = self.valid
        keys: IntArray = (rows[valid] << _SHIFT) | self.doc_codes[valid]
        return keys


def _flatten_maps(
    maps: Sequence[Mapping[str, float] | None],
) -> tuple[Iterator[str], IntArray, FloatArray]:
    """(an iterator over all keys, owning sample index, all values) of per-sample maps."""
    present = [m or {} for m in maps]
    flat, owners, lengths = _flatten(present)  # iterating a mapping yields its keys
    values = np.fromiter(
        itertools.chain.from_iterable(m.values() for m in present),
        dtype=np.float64,
        count=int(lengths.sum()),
    )
    return flat, owners, values


def _sorted_values(maps: Sequence[Mapping[str, float]]) -> FloatArray:
    """Each sample's label values sorted descending, NaN-padded to a common width."""
    _, owners, values = _flatten_maps(maps)
    order = np.lexsort((-values, owners))
    col, lengths = _columns(owners[order], len(maps))
    width = int(lengths.max()) if len(maps) else 0
    out = np.full((len(maps), width), np.nan)
    out[owners[order], col] = values[order]
    return out
