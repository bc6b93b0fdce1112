"""64-bit keys of strings, computed with numpy from an Arrow string array's bytes in
place: how ids are compared and ordered without a vocabulary.

- fingerprints: equal strings always have equal fingerprints; different strings almost
  never do (every byte and the length are mixed in, so ids that differ only in their
  middle, as URLs and ClueWeb's do, are told apart), and a caller compares the strings
  exactly wherever two fingerprints meet: a meeting costs time, never a wrong answer;
- prefixes: a few bytes of each string read as a big-endian number order strings as
  their bytes do, and :func:`order_within` sorts the strings of each group by them,
  leaving to Arrow the groups where two prefixes are equal.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "fingerprints",
    "first_equals",
    "order_within",
    "same_strings",
    "sorted_rows",
    "with_rows",
]

Fingerprints = npt.NDArray[np.uint64]
Places = npt.NDArray[np.int64]

_MIX = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9)
_BYTES = np.array([(1 << (8 * n)) - 1 for n in range(9)], dtype=np.uint64)  # n low bytes
_SLICE = 1 << 16  # strings fingerprinted at a time: the temporaries stay in cache
_PAD = np.iinfo(np.uint64).max  # no key of UTF-8 text (0xFF is never one of its bytes)
_PADDING = 4  # the most padded cells per key of a table of two sides' keys


def _bytes_of(ids: pa.Array) -> tuple[Places, Fingerprints, int]:
    """Each string's offsets (``len(ids) + 1``), every unaligned 8-byte word of the bytes
    as a little-endian number, and the last place a whole word starts."""
    ids = ids.cast(pa.string())
    offsets = np.frombuffer(ids.buffers()[1], dtype=np.int32)[
        ids.offset : ids.offset + len(ids) + 1
    ]
    end = int(offsets[-1]) if len(ids) else 0
    data = np.zeros(8, dtype=np.uint8)  # a short array's bytes, padded to one word
    if end >= 8:
        data = np.frombuffer(ids.buffers()[2], dtype=np.uint8)[:end]
    elif end:
        data[:end] = np.frombuffer(ids.buffers()[2], dtype=np.uint8)[:end]
    limit = data.size - 8
    words = np.ndarray((limit + 1,), dtype="<u8", buffer=data, strides=(1,))  # unaligned
    return offsets.astype(np.int64), words, limit


def fingerprints(ids: pa.Array) -> Fingerprints:
    """A 64-bit fingerprint of each string of ``ids``, from its length and every one of its
    8-byte words, read in place a slice of strings at a time."""
    offsets, words, limit = _bytes_of(ids)
    out = np.empty(len(ids), dtype=np.uint64)
    for start in range(0, len(ids), _SLICE):
        bounds = offsets[start : start + _SLICE + 1]
        at, size = bounds[:-1], np.diff(bounds)
        mixed = size.astype(np.uint64) * np.uint64(_MIX[2])
        for word in range(0, int(size.max(initial=0)), 8):
            live = slice(None) if size.min() > word else np.flatnonzero(size > word)
            read = _word_at(words, at[live] + word, limit)
            read &= _BYTES[np.minimum(size[live] - word, 8)]  # the string's bytes only
            mixed[live] = _mixed(mixed[live] ^ read, _MIX[0])
        out[start : start + size.size] = _mixed(mixed, _MIX[1])
    return out


def same_strings(left: pa.Array, at_left: Places, right: pa.Array, at_right: Places) -> bool:
    """Whether ``left[at_left[i]]`` and ``right[at_right[i]]`` are the same string for
    every ``i``, compared a word at a time in place."""
    left_offsets, left_words, left_limit = _bytes_of(left)
    right_offsets, right_words, right_limit = _bytes_of(right)
    left_at, right_at = left_offsets[at_left], right_offsets[at_right]
    size = left_offsets[at_left + 1] - left_at
    if not (size == right_offsets[at_right + 1] - right_at).all():
        return False
    for word in range(0, int(size.max(initial=0)), 8):
        live = slice(None) if size.min() > word else np.flatnonzero(size > word)
        differ = _word_at(left_words, left_at[live] + word, left_limit)
        differ ^= _word_at(right_words, right_at[live] + word, right_limit)
        if (differ & _BYTES[np.minimum(size[live] - word, 8)]).any():
            return False
    return True


def order_within(ids: pa.Array, sizes: npt.NDArray[np.integer]) -> Places:
    """The order that sorts each group of strings (``sizes[g]`` consecutive strings of
    ``ids`` each) by their UTF-8 bytes, as Arrow sorts them, the groups staying in place.
    Past the bytes every string shares, each string's next bytes are read as a big-endian
    number beside its place in its group, and the groups sorted as the rows of a padded
    table; a group where two of those numbers are equal is sorted by Arrow. Groups already
    in order, as NIST's qrels files list each topic's documents, are left as they are."""
    count = len(ids)
    if _in_order(ids, sizes):
        return np.arange(count)
    width = int(sizes.max(initial=0))
    index_bits = max(width - 1, 1).bit_length()
    kept = (64 - index_bits) // 8  # bytes of each string beside its place in the key
    group, place = _places(sizes)
    if count < 2 or kept < 1:
        return _arrow_order(ids, group, np.arange(count))
    offsets, words, limit = _bytes_of(ids)
    at, size = offsets[:-1], np.diff(offsets)
    skip, word = _shared(words, at, size, limit)
    if word is None:
        word = _word_at(words, at + skip, limit)
    read = word & _BYTES[np.minimum(size - skip, 8)]
    prefix = read.byteswap() >> np.uint64(8 * (8 - kept))  # the first bytes, big-endian
    table = sorted_rows((prefix << np.uint64(index_bits)) | place.astype(np.uint64), sizes)
    inside = np.arange(width) < sizes[:, None]
    same = (table[:, 1:] >> np.uint64(index_bits)) == (table[:, :-1] >> np.uint64(index_bits))
    unsure = (same & inside[:, 1:]).any(axis=1) | ((table == _PAD) & inside).any(axis=1)
    starts = np.arange(count) - place
    order = starts + (table[inside] & np.uint64((1 << index_bits) - 1)).astype(np.int64)
    if unsure.any():
        rows = np.flatnonzero(unsure[group])
        order[rows] = _arrow_order(ids.take(pa.array(rows)), group[rows], rows)
    return order


def _in_order(ids: pa.Array, sizes: npt.NDArray[np.integer]) -> bool:
    """Whether each group's strings are already in the order of their bytes (Arrow
    compares strings byte by byte), one comparison of each string with the next."""
    count = len(ids)
    if count < 2:
        return True
    descending = pc.less(ids.slice(1), ids.slice(0, count - 1)).to_numpy(zero_copy_only=False)
    ends = np.cumsum(sizes)[:-1] - 1  # the last string of a group and the next group's first
    descending[ends[(ends >= 0) & (ends < count - 1)]] = False
    return not descending.any()


def sorted_rows(keys: Fingerprints, sizes: npt.NDArray[np.integer]) -> Fingerprints:
    """Each group's keys (``sizes[g]`` consecutive keys each) sorted, as the rows of a
    table padded to the longest group with the largest value, so a group's own keys come
    first: numpy sorts short rows several times faster than one long array (rows of up to
    256 keys take 1-2 ns a key here, one array of millions 35-55)."""
    group, place = _places(sizes)
    table = np.full((sizes.size, int(sizes.max(initial=0))), _PAD, dtype=np.uint64)
    table[group, place] = keys
    table.sort(axis=1)
    return table


def first_equals(
    found: Fingerprints,
    found_sizes: npt.NDArray[np.integer],
    wanted: Fingerprints,
    wanted_sizes: npt.NDArray[np.integer],
) -> tuple[Places, Places] | None:
    """For keys in groups (``found_sizes[g]`` and ``wanted_sizes[g]`` consecutive keys of
    each side per group): the pairs ``(i, j)`` where ``found[i]`` is the first key of
    ``wanted[j]``'s group whose high bits equal its own: the candidates for
    ``found[i] == wanted[j]`` (the keys' low bits hold places; a caller compares the
    strings). Each group's keys of both sides are sorted as a row of a padded table,
    ``found`` before ``wanted`` among equal keys; None when a few long groups would make
    the table mostly padding."""
    count = max(found.size, wanted.size)
    width = int((found_sizes + wanted_sizes).max(initial=0))
    if not count or width * found_sizes.size > _PADDING * (found.size + wanted.size):
        return None
    bits = count.bit_length()  # the place's bits; above them, the side
    low = np.uint64((1 << bits) - 1)
    high = ~np.uint64((1 << (bits + 1)) - 1)
    table = np.full((found_sizes.size, width), _PAD, dtype=np.uint64)
    group, place = _places(found_sizes)
    table[group, place] = (found & high) | np.arange(found.size, dtype=np.uint64)
    group, place = _places(wanted_sizes)
    side = np.uint64(1 << bits) | np.arange(wanted.size, dtype=np.uint64)
    table[group, place + found_sizes[group]] = (wanted & high) | side
    table.sort(axis=1)
    cells = table.ravel()
    heads = np.ones(cells.size, dtype=bool)  # the first cell of a row or of equal keys
    np.not_equal(cells[1:] & high, cells[:-1] & high, out=heads[1:])
    heads[::width] = True
    head = np.maximum.accumulate(np.where(heads, np.arange(cells.size), 0))
    wanted_side = ((cells >> np.uint64(bits)) & np.uint64(1)).astype(bool) & (cells != _PAD)
    asked = np.flatnonzero(wanted_side & ~heads)
    first = cells[head[asked]]
    met = (first & (low + np.uint64(1))) == 0  # the group's first key is ``found``'s
    return (first[met] & low).astype(np.int64), (cells[asked[met]] & low).astype(np.int64)


def _places(sizes: npt.NDArray[np.integer]) -> tuple[Places, Places]:
    """For groups of ``sizes`` consecutive items: each item's group and place in it."""
    group = np.repeat(np.arange(sizes.size), sizes)
    return group, np.arange(group.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)


def _arrow_order(ids: pa.Array, group: Places, places: Places) -> Places:
    """``places`` in the order that sorts ``ids`` (given in group order) by group, then
    by text: Arrow's sort."""
    table = pa.table({"group": group, "id": ids})
    by = pc.sort_indices(table, sort_keys=[("group", "ascending"), ("id", "ascending")])
    return places[by.to_numpy()]  # type: ignore[no-any-return]


def _shared(
    words: Fingerprints, at: Places, size: Places, limit: int
) -> tuple[int, Fingerprints | None]:
    """How many leading bytes every string has in common, and each string's 8 bytes from
    there when they were read on the way (ids that differ in their first byte: no second
    read), else None."""
    shortest, skip = int(size.min()), 0
    while skip < shortest:
        step = min(shortest - skip, 8)
        word = _word_at(words, at + skip, limit)
        read = word & _BYTES[step]
        differ = int(np.bitwise_or.reduce(read ^ read[0]))
        if differ:  # the lowest set byte is the first that differs (little-endian)
            shared = skip + ((differ & -differ).bit_length() - 1) // 8
            return shared, word if shared == skip else None
        skip += step
    return skip, None


def with_rows(keys: Fingerprints, rows: npt.NDArray[np.integer]) -> Fingerprints:
    """Fingerprints of (row, string) pairs, from the strings' ``keys`` and their rows."""
    return _mixed(keys ^ (rows.astype(np.uint64) * np.uint64(_MIX[2])), _MIX[0])


def _mixed(values: Fingerprints, factor: int) -> Fingerprints:
    """Every bit of each value spread over the high bits, and back down."""
    values = values * np.uint64(factor)
    values ^= values >> np.uint64(31)
    return values


def _word_at(words: Fingerprints, at: Places, limit: int) -> Fingerprints:
    """The 8 bytes from each of ``at``, zero past the end: a place nearer the end than a
    word reads the last word, shifted down."""
    safe = np.minimum(at, limit)
    return words[safe] >> ((at - safe) * 8).astype(np.uint64)  # type: ignore[no-any-return]
