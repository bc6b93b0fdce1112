"""Hops in a Batch (docs/agents.md): any metric at one hop of each sample (``hop=first``,
``last``, ``2``, or ``union``: every hop's ranking in order of arrival, each id once),
and where each piece of evidence went hop by hop, for the agentic metrics and the
per-hop diagnosis.

A sample's hops come from its output's ``hops`` (:mod:`engine.io.hops`); an output
without them is one hop, its ``retrieved`` (and ``pool``); a sample without an output
has none. Everything here is whole-batch numpy over flat arrays.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import MetricParameterError, Problem
from engine.evaluation.batch import Batch, Flat, Shape
from engine.evaluation.metric import REQUIREMENTS, MetricBase, lacks, metric_label
from engine.io.columns import Columns, lengths, list_array, offsets_of

__all__ = [
    "Evidence",
    "HopView",
    "Hops",
    "at_hop",
    "evidence",
    "hop_batch",
    "hop_selector",
]

IntArray = npt.NDArray[np.int64]
CodeArray = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

_SHIFT = np.int64(32)
#: Output columns that describe the top-level ranking item by item (not a hop's).
_ITEMWISE = ("texts", "tied", "run_order", "positive_scores", "zero_scores", "cited")


def hop_selector(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """``first``, ``last``, ``union`` or a hop number 1, 2, ..."""
    number = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    if not number and value not in ("first", "last", "union"):
        raise MetricParameterError(
            f"hop must be first, last, union or a hop number 1, 2, ..., got {value!r}"
        )


def _ragged(starts: IntArray, sizes: IntArray) -> IntArray:
    """The indices ``starts[i] .. starts[i] + sizes[i] - 1`` of every i, one after the other."""
    total = int(sizes.sum())
    shift = np.repeat(starts - offsets_of(sizes)[:-1], sizes)
    return shift + np.arange(total, dtype=np.int64)


def _flat(column: pa.Array) -> CodeArray:
    return pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(np.int32, copy=False)


@attrs.frozen
class Hops:
    """Every hop of a batch's samples, hop after hop, sample after sample: ``count`` and
    ``first`` (the index of its first hop) per sample; per hop its ``owner`` row and
    ``number`` (1-based); per list (``retrieved``, ``pool``, ``selected``) the flat
    document codes and, per hop, ``starts``, ``sizes`` and ``given`` (False: the hop has
    no such list; a hop's selected ids default to its retrieved ones)."""

    count: IntArray
    first: IntArray
    owner: IntArray
    number: IntArray
    codes: Mapping[str, CodeArray]
    starts: Mapping[str, IntArray]
    sizes: Mapping[str, IntArray]
    given: Mapping[str, BoolArray]

    @classmethod
    def of(cls, batch: Batch) -> Hops:
        """The hops of ``batch`` (made once per batch and shared)."""
        return batch.shared("hops", lambda: cls._of(batch.columns))  # type: ignore[no-any-return]

    @classmethod
    def _of(cls, columns: Columns) -> Hops:
        rows = len(columns)
        hops = columns.column("hops")
        listed = lengths(hops)
        plain = columns.valid("retrieved") & ~hops.is_valid().to_numpy(zero_copy_only=False)
        count = np.where(plain, 1, listed).astype(np.int64)
        first = offsets_of(count)[:-1]
        owner = np.repeat(np.arange(rows, dtype=np.int64), count)
        number = np.arange(owner.size, dtype=np.int64) - first[owner] + 1
        entries = pc.list_flatten(hops)
        plain_hop = plain[owner]  # the hops that are a plain output's retrieved
        codes, starts, sizes, given = {}, {}, {}, {}
        for name, top in (
            ("retrieved", "retrieved"),
            ("pool", "pool"),
            ("selected", None),
        ):
            listed_codes = _flat(columns.column(f"hop_{name}"))
            field = entries.field(name)
            hop_sizes = field.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            hop_given = field.is_valid().to_numpy(zero_copy_only=False)
            top_codes = _flat(columns.column(top)) if top else np.zeros(0, np.int32)
            top_sizes = lengths(columns.column(top)) if top else np.zeros(rows, np.int64)
            top_given = columns.valid(top) if top else np.zeros(rows, np.bool_)
            # listed hops' lists, then plain outputs' top-level ones
            within = offsets_of(hop_sizes)[:-1]
            top_starts = offsets_of(top_sizes)[:-1] + listed_codes.size
            sizes[name] = np.zeros(owner.size, np.int64)
            starts[name] = np.zeros(owner.size, np.int64)
            given[name] = np.zeros(owner.size, np.bool_)
            for target, listed_values, plain_values in (
                (sizes[name], hop_sizes, top_sizes),
                (starts[name], within, top_starts),
                (given[name], hop_given, top_given),
            ):
                target[~plain_hop] = listed_values
                target[plain_hop] = plain_values[owner[plain_hop]]
            codes[name] = np.concatenate([listed_codes, top_codes])
        return cls(count, first, owner, number, codes, starts, sizes, given)

    def prompted(self) -> tuple[CodeArray, IntArray, IntArray]:
        """(codes, starts, sizes) of what each hop put into the prompt: its selected ids,
        else its retrieved ones."""
        given = self.given["selected"]
        offset = self.codes["selected"].size
        starts = np.where(given, self.starts["selected"], self.starts["retrieved"] + offset)
        sizes = np.where(given, self.sizes["selected"], self.sizes["retrieved"])
        return (
            np.concatenate([self.codes["selected"], self.codes["retrieved"]]),
            starts,
            sizes,
        )

    def keys(self, name: str) -> tuple[IntArray, IntArray]:
        """Every entry of one list (``retrieved``, ``pool``, ``prompted``, ``reached``:
        retrieved and pool) as a key ``owner << 32 | code``, and its hop's number."""
        if name == "reached":
            keys, hops = zip(self.keys("retrieved"), self.keys("pool"), strict=True)
            return np.concatenate(keys), np.concatenate(hops)
        if name == "prompted":
            codes, starts, sizes = self.prompted()
        else:
            codes, starts, sizes = self.codes[name], self.starts[name], self.sizes[name]
        taken = codes[_ragged(starts, sizes)]
        hop = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
        return (self.owner[hop] << _SHIFT) | taken, self.number[hop]


def _first_hops(keys: IntArray, hops: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """Per distinct key: the key (sorted), the first and the last hop it is in."""
    if not keys.size:
        return keys, hops, hops
    bits = int(hops.max()).bit_length()
    if int(keys.max()).bit_length() + bits <= 62:  # one sort of keys and hops packed
        packed = np.sort((keys << bits) | hops)
        keys, hops = packed >> bits, packed & ((1 << bits) - 1)
    else:
        order = np.lexsort((hops, keys))
        keys, hops = keys[order], hops[order]
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    ends = np.concatenate((starts[1:], [keys.size])) - 1
    return keys[starts], hops[starts], hops[ends]


def _distinct(batch: Batch, hops: Hops, name: str) -> tuple[IntArray, IntArray, IntArray]:
    """:func:`_first_hops` of one list of :meth:`Hops.keys`, shared per batch (reached and
    prompted are the retrieved ids when no hop gives a pool or a selection)."""
    if name == "reached" and not hops.given["pool"].any():
        name = "retrieved"
    if name == "prompted" and not hops.given["selected"].any():
        name = "retrieved"
    found: tuple[IntArray, IntArray, IntArray] = batch.shared(
        ("hop-firsts", name), lambda: _first_hops(*hops.keys(name))
    )
    return found


def _lookup(sorted_keys: IntArray, values: IntArray, wanted: IntArray) -> IntArray:
    """The value of each wanted key among sorted keys; 0 when it is not there."""
    if not sorted_keys.size:
        return np.zeros(wanted.size, np.int64)
    slot = np.minimum(np.searchsorted(sorted_keys, wanted), sorted_keys.size - 1)
    return np.where(sorted_keys[slot] == wanted, values[slot], 0)


@attrs.frozen
class Evidence:
    """Each piece of evidence of a batch (a label >= the threshold), sample by sample:
    its ``row`` and document ``code``; the first hop that retrieved it, that reached it
    (retrieved or pooled), that put it into the prompt and the last that did (0: none);
    and whether it is in the final context (the output's ``retrieved``)."""

    row: IntArray
    code: IntArray
    retrieved: IntArray
    reached: IntArray
    prompted: IntArray
    last_prompted: IntArray
    final: BoolArray

    #: The classes of :meth:`classes`, in their codes' order.
    CLASSES = ("found", "retrieval", "selection", "context")

    def classes(self) -> IntArray:
        """Per piece of evidence: 0 found (in the final context); else why it was missed:
        1 retrieval (no hop retrieved or pooled it), 2 selection (a hop reached it, none
        put it into a prompt), 3 context (a hop put it into a prompt, the final context
        dropped it)."""
        missed = np.where(self.reached == 0, 1, np.where(self.prompted == 0, 2, 3))
        return np.where(self.final, 0, missed)

    def per_sample(self, values: npt.ArrayLike, rows: int) -> FloatArray:
        """Per sample, the sum of a value per piece of evidence."""
        weights = np.broadcast_to(np.asarray(values, np.float64), self.row.shape)
        sums: FloatArray = np.bincount(self.row, weights=weights, minlength=rows).astype(np.float64)
        return sums


def evidence(batch: Batch, threshold: float) -> Evidence:
    """The :class:`Evidence` of ``batch`` at a relevance threshold (shared per batch)."""
    return batch.shared(("evidence", float(threshold)), lambda: _evidence(batch, threshold))  # type: ignore[no-any-return]


def _evidence(batch: Batch, threshold: float) -> Evidence:
    rows, codes, values = batch.labels("relevance")
    keep = values >= threshold
    rows, codes = rows[keep], codes[keep].astype(np.int64)
    wanted = (rows << _SHIFT) | codes
    hops = Hops.of(batch)
    found = {}
    for name in ("retrieved", "reached", "prompted"):
        keys, first, last = _distinct(batch, hops, name)
        found[name] = _lookup(keys, first, wanted)
        if name == "prompted":
            found["last"] = _lookup(keys, last, wanted)
    final = batch.ranked_at(rows, codes) >= 0
    return Evidence(
        rows,
        codes,
        found["retrieved"],
        found["reached"],
        found["prompted"],
        found["last"],
        final,
    )


def redundant_hops(batch: Batch) -> tuple[IntArray, IntArray]:
    """Per sample: how many of its hops after the first retrieved no id an earlier hop
    had not (an empty hop included), and its hop count."""
    hops = Hops.of(batch)
    distinct, first, _ = _distinct(batch, hops, "retrieved")
    owner = (distinct >> _SHIFT).astype(np.int64)
    new = np.bincount(hops.first[owner] + first - 1, minlength=hops.owner.size)  # per hop
    redundant = (new == 0) & (hops.number > 1)
    return np.bincount(hops.owner[redundant], minlength=len(batch)).astype(np.int64), hops.count


# -- a metric at one hop ---------------------------------------------------------------------


@attrs.frozen
class HopView:
    """A batch whose outputs are one hop of each sample's (``batch``), and the samples
    that have no such hop (``missing``: scored NA)."""

    batch: Batch
    missing: BoolArray


def hop_batch(batch: Batch, hop: str | int) -> HopView:
    """``batch`` with each output's ``retrieved`` and ``pool`` those of hop ``hop``
    (shared per batch). Texts, scores and cited ids belong to the final context and are
    dropped from a listed hop; a plain output's one hop keeps them."""
    return batch.shared(("hop-batch", hop), lambda: _hop_batch(batch, hop))  # type: ignore[no-any-return]


def _hop_batch(batch: Batch, hop: str | int) -> HopView:
    hops = Hops.of(batch)
    columns = batch.columns
    listed = columns.valid("hops")
    replaced: dict[str, pa.Array] = {}
    if hop == "union":
        replaced["retrieved"], codes, sizes = _union(hops, len(batch))
        missing = hops.count == 0
    else:
        number = hops.count if hop == "last" else 1 if hop == "first" else hop
        at = np.broadcast_to(np.asarray(number, np.int64), hops.count.shape)
        missing = at > hops.count
        chosen = np.where(missing, 0, hops.first + at - 1)
        replaced["retrieved"], codes, sizes = _lists(hops, "retrieved", chosen, missing)
        pooled = _take(hops.given["pool"], chosen) & ~missing
        if pooled.any():
            replaced["pool"], *_ = _lists(hops, "pool", chosen, ~pooled)
    table = columns.table
    for name in ("retrieved", "pool", *_ITEMWISE):
        if not columns.has(name):
            continue
        new = replaced.get(name)
        if new is None:  # a listed hop's: none; a plain output's: its own
            old = columns.column(name)
            if old.null_count == len(old):
                continue
            new = pc.if_else(pa.array(listed | missing), pa.nulls(len(old), old.type), old)
        table = table.set_column(table.schema.get_field_index(name), name, new)
    widths = {**batch.shape.widths, "retrieved": int(sizes.max(initial=0))}
    widths.pop("pool", None)
    shape = Shape(widths, batch.shape.max_label)
    base = batch.shared("flat", lambda: Flat.of(columns))  # labels and k: every hop's
    flat = attrs.evolve(base, retrieved=codes, retrieved_lengths=sizes, has_output=~missing)
    view = Batch.compile(Columns(table, columns.docs), batch.default_k, shape, flat)
    return HopView(view, missing)


def _take(values: npt.NDArray[Any], chosen: IntArray) -> npt.NDArray[Any]:
    """``values[chosen]``; zeros when there is no hop at all (every sample missing)."""
    return values[chosen] if values.size else np.zeros(chosen.size, values.dtype)


def _lists(
    hops: Hops, name: str, chosen: IntArray, null: BoolArray
) -> tuple[pa.Array, CodeArray, IntArray]:
    """One hop per sample (``chosen``) of a list: a list array (null where ``null``),
    its flat codes and its lengths."""
    sizes = np.where(null, 0, _take(hops.sizes[name], chosen))
    taken = hops.codes[name][_ragged(_take(hops.starts[name], chosen), sizes)]
    return list_array(offsets_of(sizes), pa.array(taken), null), taken, sizes


def _union(hops: Hops, rows: int) -> tuple[pa.Array, CodeArray, IntArray]:
    """Per sample, every hop's retrieved ids in order of arrival, each once: a list
    array, its flat codes and its lengths."""
    keys, _ = hops.keys("retrieved")
    keep = np.zeros(keys.size, np.bool_)
    keep[np.unique(keys, return_index=True)[1]] = True
    kept = keys[keep]
    owner = (kept >> _SHIFT).astype(np.int64)
    codes = (kept & np.int64(0xFFFFFFFF)).astype(np.int32)
    sizes = np.bincount(owner, minlength=rows).astype(np.int64)
    return list_array(offsets_of(sizes), pa.array(codes), hops.count == 0), codes, sizes


_CLASSES: dict[type[Any], type[Any]] = {}
#: Requirements a hop, not the sample, must meet.
_OUTPUT_NEEDS = frozenset({"pool", "cited", "texts"})


def at_hop(cls: type[Any]) -> type[Any]:
    """The metric class ``cls`` with a parameter ``hop`` (:func:`hop_selector`): it
    scores the batch of :func:`hop_batch`, a sample without that hop NA. Made once per
    class; its label is ``alias@K(hop=...)``."""
    found = _CLASSES.get(cls)
    if found is not None:
        return found

    needs = sorted(frozenset(cls.requires) & _OUTPUT_NEEDS)

    @attrs.frozen
    class AtHop(cls):  # type: ignore[valid-type,misc]
        hop: str | int = attrs.field(kw_only=True, validator=hop_selector)
        #: What the output holds is checked on the hop (check), the rest on the sample.
        requires: ClassVar[frozenset[str]] = frozenset(cls.requires) - _OUTPUT_NEEDS

        def score(self, batch: Batch) -> FloatArray:
            view = hop_batch(batch, self.hop)
            values = np.asarray(super().score(view.batch), np.float64)
            return np.where(view.missing, np.nan, values)

        def check(self, batch: Batch) -> Iterator[Problem]:
            view = hop_batch(batch, self.hop)
            yield from super().check(view.batch)
            label = metric_label(self)
            for need in needs:
                for row in np.flatnonzero(lacks(need, view.batch) & ~view.missing).tolist():
                    message = f"metric {label!r} needs {REQUIREMENTS[need]} of hop {self.hop}"
                    yield Problem(message, batch.sample_ids[row], "/actual_output/hops")

        def details(self, batch: Batch) -> Sequence[Mapping[str, Any] | None] | None:
            return super().details(hop_batch(batch, self.hop).batch)  # type: ignore[no-any-return]

        def __reduce__(self) -> tuple[Any, ...]:  # a class made here: pickled by its parts
            return (_rebuilt, (cls, attrs.asdict(self, recurse=False)))

        def summarize(self, batch: Batch, values: FloatArray) -> Mapping[str, Any] | None:
            return super().summarize(hop_batch(batch, self.hop).batch, values)  # type: ignore[no-any-return]

    for hook in ("details", "summarize", *(() if needs else ("check",))):
        if getattr(cls, hook, None) is getattr(MetricBase, hook):  # nothing to say: none
            setattr(AtHop, hook, getattr(MetricBase, hook))
    AtHop.__name__ = AtHop.__qualname__ = f"{cls.__name__}AtHop"
    AtHop.__module__ = cls.__module__
    _CLASSES[cls] = AtHop
    return AtHop


def _rebuilt(cls: type[Any], fields: Mapping[str, Any]) -> Any:
    """A metric of :func:`at_hop` ``(cls)`` with these fields (how one is unpickled)."""
    return at_hop(cls)(**fields)
