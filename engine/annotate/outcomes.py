"""How an annotation item ends when it gets no answer: a :class:`Failure` (its calls
failed for good), and the count of failed batches in a row that stops a run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from engine.annotate.base import AnnotationError

__all__ = ["FAILED_IN_A_ROW", "FailedStreak", "Failure"]

#: Failed batches in a row (none finishing between them) after which a run stops: the
#: endpoint is down, not one request refused.
FAILED_IN_A_ROW = 10


@attrs.frozen
class Failure:
    """An item whose call failed for good (its retries spent, or its request refused):
    never cached, asked again on the next run; ``reason`` says why."""

    reason: str


class FailedStreak:
    """Counts failed batches in a row; stops the run (:class:`AnnotationError`) at
    :data:`FAILED_IN_A_ROW` of them."""

    def __init__(self, task: str) -> None:
        self.task = task
        self.count = 0

    def add(self, entries: Sequence[Any]) -> None:
        failure = next((e.value for e in entries if isinstance(e.value, Failure)), None)
        if failure is None:
            self.count = 0
            return
        self.count += 1
        if self.count >= FAILED_IN_A_ROW:
            raise AnnotationError(
                f"{self.task}: stopped after {self.count} failed batches in a row (the "
                f"endpoint keeps failing); the last: {failure.reason}"
            )
