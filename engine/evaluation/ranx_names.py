"""ranx's metric names (``ndcg@10``, ``map``, ``precision@5-l2``, ``rbp.95``) as slotwise
metric specs.

ranx 0.3 reads a name as ``NAME``, ``NAME@K`` or ``rbp.P`` (``rbp@P``), each optionally
followed by ``-lN``, its relevance level (``ranx.meta.evaluate.extract_metric_and_params``):
``K`` is an integer and 0 means the whole ranking, ``P`` the digits after ``0.``
(``rbp.95`` is p = 0.95), and a document is relevant when its label is >= N (1 by
default). :func:`translate` gives the spec that computes ranx's number per query;
:data:`NAMES` is the table docs/metrics.md ("Dialects") shows. Tied scores are ordered as
trec_eval orders them (score descending, doc id descending), where ranx leaves them as
numba's quicksort does: that difference is documented and tested (tests/test_ranx_names.py).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from engine.errors import MetricParameterError

__all__ = ["NAMES", "WHOLE_RANKING", "RanxName", "translate"]

#: A cutoff beyond any ranking: ranx's k = 0 (the whole ranking) for the @k metrics.
WHOLE_RANKING = 1_000_000_000


class RanxName(NamedTuple):
    """One ranx metric: the slotwise spec of ``NAME@K`` (``{k}`` the cutoff; None: ranx
    ignores a cutoff, which slotwise refuses) and of ``NAME`` alone, uncut; ``graded``:
    the label is the gain (so ``-lN`` zeroes the labels below N rather than setting a
    relevance threshold)."""

    cut: str | None
    uncut: str
    graded: bool = False


_WHOLE = str(WHOLE_RANKING)

#: ranx name -> how it becomes a slotwise spec.
NAMES: dict[str, RanxName] = {
    "hits": RanxName("retrieval-hits-at-k@{k}", "retrieval-num-rel-ret"),
    "hit_rate": RanxName("retrieval-hit-at-k@{k}", f"retrieval-hit-at-k@{_WHOLE}"),
    "precision": RanxName("retrieval-precision-at-k@{k}", "retrieval-set-precision"),
    "recall": RanxName("retrieval-recall-at-k@{k}", "retrieval-set-recall"),
    "f1": RanxName("retrieval-f1-at-k@{k}", "retrieval-set-f"),
    "r-precision": RanxName(None, "retrieval-r-precision"),
    "mrr": RanxName("retrieval-mrr@{k}", "retrieval-mrr"),
    "map": RanxName("retrieval-map@{k}", "retrieval-map"),
    "dcg": RanxName("retrieval-dcg-at-k@{k}", f"retrieval-dcg-at-k@{_WHOLE}", graded=True),
    "dcg_burges": RanxName(
        "retrieval-dcg-at-k@{k}(gain=exponential)",
        f"retrieval-dcg-at-k@{_WHOLE}(gain=exponential)",
        graded=True,
    ),
    "ndcg": RanxName("retrieval-ndcg-at-k@{k}", f"retrieval-ndcg-at-k@{_WHOLE}", graded=True),
    "ndcg_burges": RanxName(
        "retrieval-ndcg-at-k@{k}(gain=exponential)",
        f"retrieval-ndcg-at-k@{_WHOLE}(gain=exponential)",
        graded=True,
    ),
    "bpref": RanxName(None, "retrieval-bpref"),
    "rbp": RanxName(None, "retrieval-rbp-label-gain(p={p})"),
}

_NAME = re.compile(
    r"^(?P<name>r-precision|[a-z_1]+)(?:(?P<sep>[@.])(?P<param>[^@.]*?))?(?:-l(?P<level>-?\d+))?$"
)


def translate(text: str) -> str | None:
    """The slotwise spec for the ranx name ``text``, or None when ``text`` is no ranx
    name. A spelling ranx refuses, or a cutoff ranx ignores, is a
    :class:`~engine.errors.MetricParameterError` saying so."""
    match = _NAME.match(text.strip())
    if match is None or match["name"] not in NAMES:
        return None
    name, sep, param = match["name"], match["sep"], match["param"]
    entry = NAMES[name]
    level = int(match["level"]) if match["level"] is not None else 1
    if name == "rbp":
        if sep is None or not param or not param.isdigit():
            raise MetricParameterError(
                f"{text}: ranx's rbp needs its persistence as digits after a dot, "
                "e.g. rbp.95 (p = 0.95)"
            )
        spec = entry.uncut.format(p=float(f"0.{param}"))
    elif sep is None:
        spec = entry.uncut
    elif sep != "@" or not param.isascii() or not param.isdigit():
        raise MetricParameterError(
            f"{text}: ranx writes a cutoff as {name}@K with K a whole number, e.g. {name}@10"
        )
    elif int(param) == 0:  # ranx's k = 0: the whole ranking
        spec = entry.uncut
    elif entry.cut is None:
        raise MetricParameterError(
            f"{text}: ranx ignores the cutoff of {name} (its {name}@{param} is {name}); "
            f"write {name}"
        )
    else:
        spec = entry.cut.format(k=int(param))
    return _with_level(spec, level, entry.graded)


def _with_level(spec: str, level: int, graded: bool) -> str:
    """``spec`` with ranx's relevance level: a relevance threshold, or for a graded
    metric (the label is its gain) a gain of 0 for the labels 1 .. level - 1."""
    if level == 1:
        return spec
    if graded:
        if level < 0:
            raise MetricParameterError(
                f"ranx's -l{level} gives the labels {level} .. -1 negative gains, "
                "which slotwise's DCG does not: use a level of 0 or more"
            )
        if level == 0:  # a label of 0 gains nothing anyway
            return spec
        extra = "gains={" + ", ".join(f"{label}: 0" for label in range(1, level)) + "}"
    else:
        extra = f"relevance_threshold={level}"
    if spec.endswith(")"):
        return f"{spec[:-1]}, {extra})"
    return f"{spec}({extra})"
