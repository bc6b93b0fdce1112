"""64-bit fingerprints of strings, and of (row, string) pairs, computed with numpy from an
Arrow string array's bytes in place: how ids are compared without a vocabulary.

Equal strings always have equal fingerprints; different strings almost never do (every
byte and the length are mixed in, so ids that differ only in their middle, as URLs and
ClueWeb's do, are told apart), and a caller compares the strings exactly wherever two
fingerprints meet: a meeting of different strings costs time, never a wrong answer.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = ["fingerprints", "with_rows"]

Fingerprints = npt.NDArray[np.uint64]
Places = npt.NDArray[np.int64]

_MIX = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9)
_BYTES = np.array([(1 << (8 * n)) - 1 for n in range(9)], dtype=np.uint64)  # n low bytes
_SLICE = 1 << 16  # strings fingerprinted at a time: the temporaries stay in cache


def fingerprints(ids: pa.Array) -> Fingerprints:
    """A 64-bit fingerprint of each string of ``ids``, from its length and every one of its
    8-byte words, read in place a slice of strings at a time."""
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
    limit = data.size - 8  # the last place a whole word starts
    words = np.ndarray((limit + 1,), dtype="<u8", buffer=data, strides=(1,))  # unaligned
    out = np.empty(len(ids), dtype=np.uint64)
    for start in range(0, len(ids), _SLICE):
        bounds = offsets[start : start + _SLICE + 1].astype(np.int64)
        at, size = bounds[:-1], np.diff(bounds)
        mixed = size.astype(np.uint64) * np.uint64(_MIX[2])
        for word in range(0, int(size.max(initial=0)), 8):
            live = slice(None) if size.min() > word else np.flatnonzero(size > word)
            read = _word_at(words, at[live] + word, limit)
            read &= _BYTES[np.minimum(size[live] - word, 8)]  # the string's bytes only
            mixed[live] = _mixed(mixed[live] ^ read, _MIX[0])
        out[start : start + size.size] = _mixed(mixed, _MIX[1])
    return out


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
