"""Peers' metric names wherever a slotwise spec is accepted: ir_measures' (``nDCG@10``),
trec_eval's (``ndcg_cut_10``) and ranx's (``ndcg@10``), with or without a dialect prefix
(``ranx:ndcg@10``, ``trec_eval:P_5``, ``ir_measures:AP``).

Without a prefix a name is read as ir_measures', then trec_eval's, then ranx's: the first
that knows it. Where two dialects spell the same name (``map``, ``ndcg``, ``dcg``,
``bpref``; ``Rprec`` in ir_measures and trec_eval) they mean the same per-query number and
give the same spec, so the order decides nothing but the error a misspelling gets.
``recall`` alone is ranx's (set recall): trec_eval's ``-m recall`` is nine cutoffs, each
a name of its own here (``recall_10``). ``rbp`` alone is trec_eval's (p = 0.9); ranx
writes ``rbp.95``. docs/metrics.md ("Dialects") lists every name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from engine.errors import MetricParameterError
from engine.evaluation import ir_measures_names, ranx_names, trec_names

__all__ = ["DIALECTS", "PREFIXES", "translate"]

#: Each dialect's translation: a spec, None for a name it does not know, or an error.
DIALECTS: Mapping[str, Callable[[str], str | None]] = {
    "ir_measures": ir_measures_names.translate,
    "trec_eval": trec_names.translate,
    "ranx": ranx_names.translate,
}

#: Prefix -> dialect (``trec:`` is short for ``trec_eval:``).
PREFIXES: Mapping[str, str] = {**{d: d for d in DIALECTS}, "trec": "trec_eval"}


def translate(text: str) -> str | None:
    """The slotwise spec for a peer's name ``text`` (prefixed by its dialect or not), or
    None when no dialect knows it (it may be a slotwise spec)."""
    prefix, colon, rest = text.strip().partition(":")
    if colon and prefix in PREFIXES:
        dialect = PREFIXES[prefix]
        spec = DIALECTS[dialect](rest)
        if spec is None:
            raise MetricParameterError(
                f"{text}: no {dialect} name {rest.strip()!r} (slotwise metrics --dialect "
                f"{dialect} lists them)"
            )
        return spec
    for translated in DIALECTS.values():
        spec = translated(text)
        if spec is not None:
            return spec
    return None
