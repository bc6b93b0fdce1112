"""trec_eval 10's measures: each name's slotwise spec, how trec_eval reads its parameters,
its defaults and how its ``all`` line is made; the measure sets (``-m all_trec``); and
:class:`Stop`, trec_eval's way out. Apart from what scores them
(:mod:`engine.analysis.trec_eval`), so that ``slotwise trec-eval --help`` lists them
without importing numpy."""

from __future__ import annotations

from typing import NamedTuple

from engine.errors import InputError, Problem

__all__ = [
    "CUTOFFS",
    "GROUP_SEPARATOR",
    "IPREC",
    "MEASURES",
    "MEASURE_SETS",
    "PREFERENCES",
    "PREFS_MEASURES",
    "UNCUT",
    "Measure",
    "Stop",
]

UNCUT = 10**9  # a cutoff beyond any ranking: trec_eval's uncut ndcg
CUTOFFS = ("5", "10", "15", "20", "30", "100", "200", "500", "1000")


class Measure(NamedTuple):
    """One trec_eval measure: the slotwise spec of each parameter (``{p}`` the parameter,
    ``{l}`` the relevance level of ``-l``), how trec_eval reads its parameters
    (``kind``), its default parameters, how its ``all`` line is made (``mean``; ``sum``;
    ``gm``, the geometric mean, with no per-query lines; ``none``, per-query lines only;
    ``special``) and whether it prints as an integer.

    Kinds, as trec_eval's ``te_init_meas_*``: ``single`` (no parameters: any given are
    refused, where trec_eval ignores them), ``cut_long`` (``P.5,10``: integer cutoffs,
    sorted, each printed ``P_5``), ``cut_double`` (``iprec_at_recall..1,.5``: numbers,
    sorted, printed ``%3.2f``), ``numbers`` (``utility.2,-1,0,0``: numbers in order, the
    name printed with the parameters as given) and ``pairs`` (``ndcg.1=3,2=9``,
    ``rbp.p=0.8``: ``name=value`` pairs, printed as given)."""

    spec: str | None
    kind: str = "single"
    defaults: tuple[str, ...] = ()
    summary: str = "mean"
    integer: bool = False


IPREC = "retrieval-iprec-at-recall(recall={p}, relevance_threshold={l}, rounding=trec_eval10)"

#: The preference measures (-R prefs), in trec_eval's table order; the first three are
#: counts (summed).
PREFS_MEASURES = (
    "prefs_num_prefs_poss",
    "prefs_num_prefs_ful",
    "prefs_num_prefs_ful_ret",
    "prefs_simp",
    "prefs_pair",
    "prefs_avgjg",
    "prefs_avgjg_Rnonrel",
    "prefs_simp_ret",
    "prefs_pair_ret",
    "prefs_avgjg_ret",
    "prefs_avgjg_Rnonrel_ret",
    "prefs_simp_imp",
    "prefs_pair_imp",
    "prefs_avgjg_imp",
)

MEASURES: dict[str, Measure] = {
    "runid": Measure(None, summary="special"),
    "num_q": Measure(None, summary="special", integer=True),
    "num_ret": Measure("retrieval-num-ret", summary="sum", integer=True),
    "num_rel": Measure("retrieval-num-rel(relevance_threshold={l})", summary="sum", integer=True),
    "num_rel_ret": Measure(
        "retrieval-num-rel-ret(relevance_threshold={l})", summary="sum", integer=True
    ),
    "map": Measure("retrieval-map(relevance_threshold={l})"),
    "gm_map": Measure("retrieval-map(relevance_threshold={l})", summary="gm"),
    "Rprec": Measure("retrieval-r-precision(relevance_threshold={l})"),
    "bpref": Measure("retrieval-bpref(relevance_threshold={l})"),
    "recip_rank": Measure("retrieval-mrr(relevance_threshold={l})"),
    "iprec_at_recall": Measure(
        IPREC,
        "cut_double",
        tuple(f"{level / 10:.2f}" for level in range(11)),
    ),
    "P": Measure("retrieval-precision-at-k(k={p}, relevance_threshold={l})", "cut_long", CUTOFFS),
    "relstring": Measure(None, "numbers", ("10",), summary="none"),
    "recall": Measure("retrieval-recall-at-k(k={p}, relevance_threshold={l})", "cut_long", CUTOFFS),
    "infAP": Measure("retrieval-infap(relevance_threshold={l})"),
    "gm_bpref": Measure("retrieval-bpref(relevance_threshold={l})", summary="gm"),
    "Rprec_mult": Measure(
        "retrieval-rprec-mult(multiplier={p}, relevance_threshold={l})",
        "cut_double",
        tuple(f"{m / 10:.2f}" for m in range(2, 21, 2)),
    ),
    "utility": Measure(None, "numbers", ("1", "-1", "0", "0")),
    "11pt_avg": Measure(
        None,
        "numbers",
        tuple(f"{level / 10:.1f}" for level in range(11)),
    ),
    "binG": Measure("retrieval-bing(relevance_threshold={l})"),
    "G": Measure("retrieval-g({gains})", "pairs"),
    "dcg": Measure(f"retrieval-dcg-at-k(k={UNCUT}, {{gains}})", "pairs"),  # not in all_trec
    "ideal_dcg": Measure(None, "pairs"),  # computed here: not in all_trec
    "ndcg": Measure(f"retrieval-ndcg-at-k(k={UNCUT}, {{gains}})", "pairs"),
    "ndcg_rel": Measure("retrieval-ndcg-rel({gains})", "pairs"),
    "Rndcg": Measure("retrieval-rndcg(relevance_threshold={l}, {gains})", "pairs"),
    "ndcg_cut": Measure("retrieval-ndcg-at-k(k={p})", "cut_long", CUTOFFS),
    "map_cut": Measure("retrieval-map(k={p}, relevance_threshold={l})", "cut_long", CUTOFFS),
    "relative_P": Measure(
        "retrieval-relative-precision-at-k(k={p}, relevance_threshold={l})", "cut_long", CUTOFFS
    ),
    "success": Measure(
        "retrieval-hit-at-k(k={p}, relevance_threshold={l})", "cut_long", ("1", "5", "10")
    ),
    "set_P": Measure("retrieval-set-precision(relevance_threshold={l})"),
    "set_relative_P": Measure("retrieval-set-relative-precision(relevance_threshold={l})"),
    "set_recall": Measure("retrieval-set-recall(relevance_threshold={l})"),
    "set_map": Measure("retrieval-set-map(relevance_threshold={l})"),
    "set_F": Measure("retrieval-set-f(beta={p}, relevance_threshold={l})", "numbers", ("1",)),
    "num_nonrel_judged_ret": Measure(
        "retrieval-num-nonrel-judged-ret(relevance_threshold={l})", summary="sum", integer=True
    ),
    # -R prefs, -R qrels_prefs: preferences (engine/analysis/trec_eval_prefs.py)
    **{name: Measure(None, summary="sum", integer=True) for name in PREFS_MEASURES[:3]},
    **{name: Measure(None) for name in PREFS_MEASURES[3:]},
    # -R qrels_jg: each averages the measure over the query's judgment groups
    "map_avgjg": Measure("retrieval-map(relevance_threshold={l})"),
    "P_avgjg": Measure(
        "retrieval-precision-at-k(k={p}, relevance_threshold={l})", "cut_long", CUTOFFS
    ),
    "Rprec_mult_avgjg": Measure(
        "retrieval-rprec-mult(multiplier={p}, relevance_threshold={l})",
        "cut_double",
        tuple(f"{m / 10:.2f}" for m in range(2, 21, 2)),
    ),
    "yaap": Measure("retrieval-map(relevance_threshold={l})"),  # not in all_trec
    "rbp": Measure("retrieval-rbp({p})", "pairs"),
    "rbp_resid": Measure("retrieval-rbp-resid({p})", "pairs"),
    "unj": Measure("retrieval-unjudged-at-k(k={p})", "cut_long", ("5", "10", "20")),
}

_OFFICIAL = [
    "runid",
    "num_q",
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "map",
    "gm_map",
    "Rprec",
    "bpref",
    "recip_rank",
    "iprec_at_recall",
    "P",
]
_JUDGMENT_GROUPS = ("map_avgjg", "P_avgjg", "Rprec_mult_avgjg")
_EXTRA = ("dcg", "ideal_dcg", "yaap")  # in no set

PREFERENCES = tuple(name for name in MEASURES if name.startswith("prefs_"))


MEASURE_SETS: dict[str, tuple[str, ...]] = {
    "official": tuple(_OFFICIAL),
    "all_trec": tuple(
        name
        for name in MEASURES
        if name not in _JUDGMENT_GROUPS and name not in PREFERENCES and name not in _EXTRA
    ),
    "all_prefs": ("runid", "num_q", *PREFERENCES),
    "prefs": ("runid", "num_q", *PREFERENCES[:6]),
    "qrels_jg": ("runid", "num_q", *_JUDGMENT_GROUPS),
    "set": tuple(
        [
            "runid",
            "num_q",
            "num_ret",
            "num_rel",
            "num_rel_ret",
            "utility",
            "set_P",
            "set_recall",
            "set_relative_P",
            "set_map",
            "set_F",
        ]
    ),
}


#: Joins a query id and a judgment group in the id of a ``-R qrels_jg`` sample: it sorts
#: before any character of an id, so samples sort by query, then judgment group.
GROUP_SEPARATOR = "\x1f"


class Stop(InputError):
    """trec_eval would stop here, with exit ``status``: 1 a bad command line, 2 a bad
    file or measure parameter, 4 a query it cannot evaluate."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__([Problem(message)], summary="trec_eval stops")
        self.message, self.status = message, status
