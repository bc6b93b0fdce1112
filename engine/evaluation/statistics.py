"""Summaries of per-sample values that do not depend on how the values were chunked: the
exact mean (a correctly rounded sum, mergeable in any order) and the percentile Poisson
bootstrap interval of the mean (online, O(resamples) memory per metric).

The bootstrap gives sample ``i`` of resample ``r`` a Poisson(1) weight drawn from a
generator seeded by ``(seed, i // BLOCK)``, and adds each block's weighted sums to the
totals in dataset order: the same values give the same interval, bit for bit, in one
batch, in chunks, streamed, or on a cluster.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import attrs
import numpy as np
import numpy.typing as npt

from engine.cores import on_cores, one_blas_thread

__all__ = [
    "BLOCK",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "Bootstrap",
    "Resampled",
    "Tally",
    "exact_parts",
    "poisson_ci",
]

FloatArray = npt.NDArray[np.float64]

DEFAULT_SEED = 0
DEFAULT_RESAMPLES = 1000
BLOCK = 1024  # samples whose weights come from one generator

#: Poisson(1) from one random byte: P(w) = (94, 94, 47, 16, 4, 1) / 256 for w = 0..5, the
#: Poisson probabilities rounded to 1/256 (mean 257/256, variance 1.004). A byte's weight
#: is how many of these bounds (the cumulative counts) it reaches.
_BOUNDS = (94, 188, 235, 251, 255)


def exact_parts(values: Sequence[float]) -> list[float]:
    """Floats whose exact (real-number) sum equals the exact sum of ``values``: the
    correctly rounded sum, then the correctly rounded remainder, and so on until the
    remainder is zero (usually two or three floats). Every step is one ``math.fsum``."""
    parts: list[float] = []
    total = math.fsum(values)
    while total != 0.0:
        parts.append(total)
        if not math.isfinite(total):
            break
        total = math.fsum(itertools.chain(values, [-p for p in parts]))
    return parts


@attrs.define
class Tally:
    """A metric's running count of values, NAs and exact sum, mergeable in any order."""

    n: int = 0
    na: int = 0
    parts: list[float] = attrs.field(factory=list)

    def add(self, values: FloatArray) -> None:
        present = values[~np.isnan(values)]
        self.n += int(present.size)
        self.na += int(values.size - present.size)
        self.parts += exact_parts(present.tolist())
        if len(self.parts) > 256:
            self.parts = exact_parts(self.parts)

    def merge(self, other: Tally) -> None:
        self.n, self.na = self.n + other.n, self.na + other.na
        self.parts = exact_parts(self.parts + other.parts)

    @property
    def mean(self) -> float:
        """Equal, bit for bit, to ``MetricBase.aggregate`` of all values added."""
        return math.fsum(self.parts) / self.n if self.n else math.nan


@attrs.frozen
class Resampled:
    """What the bootstrap takes from consecutive rows that start at dataset position
    ``position``: the rows before the first block boundary (``head``), the weighted sums
    of each whole block after them (``sums``, one ``(resamples, 2 * columns)`` table per
    block), the rows after the last whole block (``tail``) and the values that are not
    NA per column. Computed wherever the rows are (:meth:`Bootstrap.part`), merged in
    dataset order (:meth:`Bootstrap.merge`)."""

    position: int
    head: FloatArray
    sums: FloatArray
    tail: FloatArray
    present: npt.NDArray[np.int64]


class Bootstrap:
    """Online percentile Poisson bootstrap of the means of several columns of values
    (NaN = NA, left out). Feed rows in dataset order with :meth:`add` (or their
    :meth:`part`, computed anywhere, with :meth:`merge`); read the intervals with
    :meth:`intervals`."""

    def __init__(
        self, columns: int, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
    ) -> None:
        if resamples < 1:
            raise ValueError(f"resamples must be at least 1, got {resamples}")
        self.columns, self.resamples, self.seed = columns, resamples, seed
        self._sums = np.zeros((resamples, 2 * columns))  # weighted sums, weighted counts
        self._pending = np.zeros((0, columns))
        self._block = 0
        self._present = np.zeros(columns, dtype=np.int64)

    def add(self, values: npt.ArrayLike) -> None:
        """Rows of values (shape ``(n, columns)``), after every row added before."""
        self.merge(self.part(values, self._block * BLOCK + self._pending.shape[0]))

    def part(self, values: npt.ArrayLike, position: int) -> Resampled:
        """What rows of values that start at dataset position ``position`` add: the
        weighted sums of their whole blocks, computed here on a thread per core."""
        rows = np.asarray(values, dtype=np.float64).reshape(-1, self.columns)
        head = min(-position % BLOCK, rows.shape[0])
        whole = (rows.shape[0] - head) // BLOCK
        first = (position + head) // BLOCK
        blocks = [
            (rows[head + i * BLOCK : head + (i + 1) * BLOCK], first + i) for i in range(whole)
        ]
        sums = list(on_cores(lambda block: self._block_sums(*block), blocks, "slotwise-bootstrap"))
        return Resampled(
            position,
            rows[:head],
            np.stack(sums) if sums else np.zeros((0, self.resamples, 2 * self.columns)),
            rows[head + whole * BLOCK :],
            (~np.isnan(rows)).sum(axis=0),
        )

    def merge(self, part: Resampled) -> None:
        """Add what :meth:`part` found, in dataset order: ``part`` starts where the rows
        added so far end."""
        if part.position != self._block * BLOCK + self._pending.shape[0]:
            raise ValueError(f"rows from position {part.position} merged out of order")
        self._present += part.present
        pending = np.concatenate([self._pending, part.head]) if part.head.size else self._pending
        if pending.shape[0] == BLOCK:
            with one_blas_thread():
                self._sums += self._block_sums(pending, self._block)
            self._block += 1
            pending = pending[BLOCK:]
        for sums in part.sums:  # in dataset order
            self._sums += sums
        self._block += part.sums.shape[0]
        self._pending = np.concatenate([pending, part.tail]) if part.tail.size else pending

    def _block_sums(self, rows: FloatArray, block: int) -> FloatArray:
        """Per resample, the weighted sums of one block's values and of their count."""
        draws = _random_bytes(
            np.random.SeedSequence([self.seed, block]), self.resamples, rows.shape[0]
        )
        present = ~np.isnan(rows)
        both = np.concatenate([np.where(present, rows, 0.0), present.astype(np.float64)], axis=1)
        sums: FloatArray = _weights(draws) @ both
        return sums

    def intervals(self, level: float = 0.95) -> list[tuple[float, float] | None]:
        """Per column, the percentile interval of the resampled means; None when fewer
        than two values are not NA."""
        if not 0 < level < 1:
            raise ValueError(f"level must be between 0 and 1, got {level}")
        sums = self._sums
        if self._pending.shape[0]:  # the last, partial block, rounded as the others
            with one_blas_thread():
                sums = sums + self._block_sums(self._pending, self._block)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = sums[:, : self.columns] / sums[:, self.columns :]
        tail = (1 - level) / 2 * 100
        found: list[tuple[float, float] | None] = []
        for column in range(self.columns):
            resampled = means[:, column]
            resampled = resampled[~np.isnan(resampled)]
            if self._present[column] < 2 or not resampled.size:
                found.append(None)
                continue
            low, high = np.percentile(resampled, [tail, 100 - tail])
            found.append((float(low), float(high)))
        return found


def _random_bytes(seed: np.random.SeedSequence, rows: int, columns: int) -> npt.NDArray[np.uint8]:
    """A table of random bytes from SFC64 seeded by ``seed``: the bytes of its 64-bit
    outputs, least significant first. They are the bytes ``Generator(SFC64(seed))
    .integers(0, 256, (rows, columns), dtype=np.uint8)`` draws (it cuts each output into
    two 32-bit halves, low first, and each half into bytes, low first), at 2.5 times its
    speed."""
    count = rows * columns
    words = np.random.SFC64(seed).random_raw(-(-count // 8)).astype("<u8", copy=False)
    return words.view(np.uint8)[:count].reshape(rows, columns)


def _weights(draws: npt.NDArray[np.uint8]) -> FloatArray:
    """The Poisson weight of each random byte (comparisons: faster than a table lookup)."""
    weights = (draws >= _BOUNDS[0]).view(np.uint8)
    for bound in _BOUNDS[1:]:
        weights += draws >= bound
    return weights.astype(np.float64)


def poisson_ci(
    values: npt.ArrayLike,
    *,
    level: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float] | None:
    """The percentile Poisson bootstrap interval of the mean of the non-NA values; None
    when fewer than two are not NA."""
    bootstrap = Bootstrap(1, resamples=resamples, seed=seed)
    bootstrap.add(np.asarray(values, dtype=np.float64).reshape(-1, 1))
    return bootstrap.intervals(level)[0]
