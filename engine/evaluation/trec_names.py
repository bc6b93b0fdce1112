"""trec_eval's measure names as slotwise metric specs: the names trec_eval prints
(``P_5``, ``ndcg_cut_10``, ``map_cut_100``, ``iprec_at_recall_0.10``, ``recip_rank``,
``Rprec``) and ``-m``'s spelling of one parameter (``P.5``, ``ndcg_cut.10``).

Each gives trec_eval's per-query value (``trec_eval -q``), tied scores in trec_eval's
order; the mean over the dataset is trec_eval's ``all`` line with ``-c`` (a query of the
qrels the run lacks scores as an empty ranking). A measure whose ``all`` line is not a
mean (the counts, which it sums; ``gm_map``, a geometric mean) or that needs more than one
query's ranking is refused with what computes it. The same measures, for
``slotwise trec-eval``, are engine/analysis/trec_eval_measures.py; a test checks that the
two agree (tests/test_dialects.py)."""

from __future__ import annotations

import re

from engine.errors import MetricParameterError

__all__ = ["CUT", "LEVELS", "REFUSED", "SINGLE", "translate"]

UNCUT = 10**9  # a cutoff beyond any ranking: trec_eval's uncut ndcg

#: Measures without a parameter -> spec (trec_eval's default parameters where it has some).
SINGLE: dict[str, str] = {
    "map": "retrieval-map",
    "Rprec": "retrieval-r-precision",
    "bpref": "retrieval-bpref",
    "recip_rank": "retrieval-mrr",
    "infAP": "retrieval-infap",
    "binG": "retrieval-bing",
    "G": "retrieval-g",
    "dcg": f"retrieval-dcg-at-k@{UNCUT}",
    "ndcg": f"retrieval-ndcg-at-k@{UNCUT}",
    "ndcg_rel": "retrieval-ndcg-rel",
    "Rndcg": "retrieval-rndcg",
    "set_P": "retrieval-set-precision",
    "set_relative_P": "retrieval-set-relative-precision",
    "set_recall": "retrieval-set-recall",
    "set_map": "retrieval-set-map",
    "set_F": "retrieval-set-f",
    "rbp": "retrieval-rbp",
    "rbp_resid": "retrieval-rbp-resid",
    "yaap": "retrieval-map",
}

#: Measures with integer cutoffs (``P_5``, ``P.5``) -> spec of cutoff ``{k}``.
CUT: dict[str, str] = {
    "P": "retrieval-precision-at-k@{k}",
    "recall": "retrieval-recall-at-k@{k}",
    "ndcg_cut": "retrieval-ndcg-at-k@{k}",
    "map_cut": "retrieval-map@{k}",
    "relative_P": "retrieval-relative-precision-at-k@{k}",
    "success": "retrieval-hit-at-k@{k}",
    "unj": "retrieval-unjudged-at-k@{k}",
}

#: Measures of a level in [0, 1] or a multiplier (``iprec_at_recall_0.10``) -> spec.
LEVELS: dict[str, str] = {
    "iprec_at_recall": "retrieval-iprec-at-recall(recall={v}, rounding=trec_eval10)",
    "Rprec_mult": "retrieval-rprec-mult(multiplier={v})",
}

_SUMMED = "trec_eval's all line sums it, where slotwise averages"
#: trec_eval names that are no per-query mean, and why.
REFUSED: dict[str, str] = {
    **{
        name: f"{_SUMMED}: write {alias} for the mean, or use slotwise trec-eval"
        for name, alias in (
            ("num_ret", "retrieval-num-ret"),
            ("num_rel", "retrieval-num-rel"),
            ("num_rel_ret", "retrieval-num-rel-ret"),
            ("num_nonrel_judged_ret", "retrieval-num-nonrel-judged-ret"),
            ("num_q", "retrieval-num-q"),
        )
    },
    "gm_map": "its all line is a geometric mean: use slotwise trec-eval -m gm_map",
    "gm_bpref": "its all line is a geometric mean: use slotwise trec-eval -m gm_bpref",
    "runid": "it is the run's name, not a score",
    "relstring": "it is a string of labels, not a score",
    "ideal_dcg": "use slotwise trec-eval -m ideal_dcg",
    "utility": "use retrieval-utility (its coefficients as parameters) or slotwise trec-eval",
    "11pt_avg": "use slotwise trec-eval -m 11pt_avg",
}

_CUT = re.compile(r"^(?P<name>[A-Za-z_]+?)[_.](?P<k>\d+)$")
_LEVEL = re.compile(r"^(?P<name>iprec_at_recall|Rprec_mult)[_.](?P<v>\d*\.?\d+)$")


def translate(text: str) -> str | None:
    """The slotwise spec for the trec_eval name ``text``, or None when ``text`` is none.
    A measure that is no per-query mean (:data:`REFUSED`), or a prefs or judgment-group
    measure, is a :class:`~engine.errors.MetricParameterError` saying what computes it."""
    name = text.strip()
    if name in SINGLE:
        return SINGLE[name]
    base = name.split(".", 1)[0]
    if base in REFUSED:
        raise MetricParameterError(f"{text}: {REFUSED[base]}")
    if base.startswith("prefs_") or "_avgjg" in base:
        raise MetricParameterError(
            f"{text}: a preference or judgment-group measure: use slotwise trec-eval -R"
        )
    level = _LEVEL.match(name)
    if level is not None:
        value = float(level["v"])
        if level["name"] == "iprec_at_recall" and not 0.0 <= value <= 1.0:
            raise MetricParameterError(f"{text}: a recall level must lie in [0, 1]")
        return LEVELS[level["name"]].format(v=value)
    cut = _CUT.match(name)
    if cut is None or cut["name"] not in CUT:
        return None
    k = int(cut["k"])
    if k <= 0:
        raise MetricParameterError(f"{text}: a cutoff must be positive")
    return CUT[cut["name"]].format(k=k)
