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


#: How a name is read when dialects share it (``slotwise metrics --dialect`` prints it).
RULE = (
    "A name without a prefix is read as ir_measures', then trec_eval's, then ranx's: the "
    "first that knows it. Names two dialects share (map, ndcg, dcg, bpref, Rprec) give "
    "the same spec in both; recall alone is ranx's (trec_eval's are recall_K), rbp alone "
    "trec_eval's (ranx's are rbp.P). A prefix picks one: ranx:ndcg@10, trec_eval:P_5 "
    "(or trec:P_5), ir_measures:nDCG@10."
)


def names(dialect: str) -> list[tuple[str, str]]:
    """Each name of ``dialect`` (K a cutoff, P a persistence's digits, V a level) with
    the slotwise spec it gives, or why it is refused."""
    if dialect == "ranx":
        return _ranx_names()
    if dialect == "trec_eval":
        return _trec_names()
    if dialect == "ir_measures":
        return _ir_measures_names()
    raise ValueError(f"no dialect {dialect!r}: one of {', '.join(DIALECTS)}")


def _ranx_names() -> list[tuple[str, str]]:
    rows = []
    for name, entry in ranx_names.NAMES.items():
        if name == "rbp":
            rows.append(("rbp.P", entry.uncut.replace("{p}", "0.P")))
            continue
        rows.append((name, entry.uncut))
        if entry.cut is not None:
            rows.append((f"{name}@K", entry.cut.replace("{k}", "K")))
    rows.append(("NAME-lN", "labels >= N relevant (dcg, ndcg: labels below N gain 0)"))
    return rows


def _trec_names() -> list[tuple[str, str]]:
    rows = list(trec_names.SINGLE.items())
    rows += [(f"{name}_K", spec.replace("{k}", "K")) for name, spec in trec_names.CUT.items()]
    rows += [(f"{name}_V", spec.replace("{v}", "V")) for name, spec in trec_names.LEVELS.items()]
    rows += [(name, f"refused: {why}") for name, why in trec_names.REFUSED.items()]
    return rows


def _ir_measures_names() -> list[tuple[str, str]]:
    rows = []
    for name, measure in ir_measures_names.MEASURES.items():
        at, example = measure.at[0], _EXAMPLE[measure.at[0]]
        forms = {"required": [True], "none": [False]}.get(measure.cutoff, [False, True])
        for cut in forms:
            try:
                spec = ir_measures_names.translate(f"{name}@{example}" if cut else name)
            except MetricParameterError:
                needs = ", ".join(f"{p}=..." for p in measure.required) or "parameters"
                spec = f"{measure.alias} (needs {needs})"
            placeholder = "V" if at == "recall" else "K"
            spec = spec or measure.alias
            if cut:
                spec = spec.replace(f"@{example}", f"@{placeholder}")
                spec = spec.replace(f"recall={float(example)}", f"recall={placeholder}")
            rows.append((f"{name}@{placeholder}" if cut else name, spec))
    return rows


_EXAMPLE = {"cutoff": "10", "recall": "0.25"}
