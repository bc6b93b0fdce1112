"""ir_measures measure names (``nDCG@10``, ``P(rel=2)@5``, ``AP``) as slotwise metric specs.

:func:`translate` turns an ir_measures name into the slotwise spec it stands for, through
the table :data:`MEASURES`; :func:`~engine.evaluation.metric.parse_spec` applies it first,
so the names work wherever a spec is accepted. Every name in the table has an uppercase
letter and no ``-``, while slotwise's aliases are lowercase, so neither shadows the other.
The table is documented in docs/metrics.md ("ir_measures names").
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal

import attrs

from engine.errors import MetricParameterError
from engine.evaluation.keywords import parse_keywords

__all__ = [
    "ALIASES",
    "MEASURES",
    "WHOLE_RANKING",
    "Measure",
    "suggest",
    "translate",
]

#: The k that stands for "the whole ranking": with it nDCG is trec_eval's uncut ``ndcg``.
WHOLE_RANKING = 1_000_000_000

#: Why a combination of parameters is refused: given the ir_measures parameters (cutoff
#: under ``cutoff``), the reason, or None when slotwise computes it.
Refusal = Callable[[Mapping[str, Any]], str | None]


@attrs.frozen
class Measure:
    """How one ir_measures measure becomes a slotwise spec.

    ``cutoff``: ``required`` (``P@K``; ``P`` alone is an error, as in ir_measures),
    ``optional`` (no cutoff is the slotwise metric uncut), ``whole`` (no cutoff is
    k = :data:`WHOLE_RANKING`) or ``none`` (``@K`` is an error). ``at`` is the
    ir_measures parameter ``@`` sets and the slotwise one it becomes. ``params`` renames
    ir_measures parameters to slotwise ones (None: checked, then dropped), ``values``
    translates their values; ``required`` are parameters ir_measures requires;
    ``unsupported`` names ir_measures parameters slotwise lacks, with a hint; ``variants``
    switch to another slotwise alias when a parameter is given (and not False); ``fixed``
    are slotwise parameters always set to match ir_measures' provider, ``fixed_when_cut``
    those set when a cutoff is given (ir_measures then picks another provider);
    ``max_cutoff`` is the deepest cutoff ir_measures' provider accepts; ``refuse`` gives
    the reason for a combination ir_measures computes with no provider that slotwise can
    match (or none at all).
    """

    alias: str
    cutoff: Literal["required", "optional", "whole", "none"] = "none"
    params: Mapping[str, str | None] = attrs.field(factory=dict)
    values: Mapping[str, Mapping[str, str]] = attrs.field(factory=dict)
    required: tuple[str, ...] = ()
    unsupported: Mapping[str, str] = attrs.field(factory=dict)
    variants: Mapping[str, str] = attrs.field(factory=dict)
    fixed: Mapping[str, Any] = attrs.field(factory=dict)
    fixed_when_cut: Mapping[str, Any] = attrs.field(factory=dict)
    at: tuple[str, str] = ("cutoff", "k")
    max_cutoff: int | None = None
    refuse: Refusal | None = None


_REL = {"rel": "relevance_threshold"}
_JUDGED = {"judged_only": "judged_only"}
_ASCENDING = {"ties": "doc_id_ascending"}
_RUN_ORDER = {"ties": "run_order"}  # cwl_eval's, the accuracy provider's

_BINARY = {
    "rel": "slotwise's subtopic judgements are binary groups: read diversity qrels with "
    "engine.io.trec.read_subtopic_qrels(path, threshold=N) for rel=N"
}
_NDEVAL_DEPTH = 20  # pyndeval refuses a deeper cutoff
#: pyndeval's: tied scores by doc id ascending, subtopics in the order of the qrels file.
_PYNDEVAL = {**_ASCENDING, "subtopic_order": "listed"}


def _diversity(
    alias: str,
    cutoff: Literal["required", "none"],
    *params: str,
    judged_only: bool = True,
    fixed: Mapping[str, Any] | None = None,
) -> Measure:
    """A measure of ir_measures' pyndeval provider: ``cutoff`` required (up to 20) or
    none; ``params`` (and ``judged_only``) pass as they are."""
    return Measure(
        alias,
        cutoff,
        {p: p for p in (*params, *(["judged_only"] if judged_only else []))},
        unsupported=_BINARY,
        fixed={**_PYNDEVAL, **(fixed or {})},
        max_cutoff=_NDEVAL_DEPTH if cutoff == "required" else None,
    )


def _cwl(alias: str, cutoff: Literal["required", "none"], *params: str) -> Measure:
    """A measure of ir_measures' cwl_eval provider: gains scaled from ``min_rel`` (0) to
    ``max_rel`` (required), tied scores in the run's order."""
    names = ("min_rel", "max_rel", *params)
    return Measure(alias, cutoff, {p: p for p in names}, required=("max_rel",), fixed=_RUN_ORDER)


def _ndcg_provider(params: Mapping[str, Any]) -> str | None:
    """nDCG(dcg='exp-log2') is gdeval's with a cutoff; ranx, the only other provider of
    it, computes it uncut."""
    if params.get("dcg") != "exp-log2":
        return None
    if "gains" in params or params.get("judged_only"):
        return "no ir_measures provider takes dcg='exp-log2' with gains or judged_only"
    if "cutoff" not in params:
        return (
            "ir_measures computes it uncut with ranx, which orders tied scores as numba's "
            "unstable quicksort leaves them (and whose provider fails under pandas 3); "
            "give a cutoff (gdeval's), or write retrieval-ndcg-at-k@1000000000(gain=exponential)"
        )
    return None


def _rr_provider(params: Mapping[str, Any]) -> str | None:
    """RR@k is msmarco's, which has no judged_only."""
    if "cutoff" in params and params.get("judged_only"):
        return "no ir_measures provider takes RR with both a cutoff and judged_only"
    return None


def _rbp_provider(params: Mapping[str, Any]) -> str | None:
    """RBP is cwl_eval's, binary (rel required)."""
    if "rel" not in params:
        return (
            "ir_measures computes RBP only with rel (cwl_eval's binary gain); for "
            "trec_eval's graded RBP write retrieval-rbp(p=P)"
        )
    return None


def _num_rel_provider(params: Mapping[str, Any]) -> str | None:
    """NumRel is pytrec_eval's, for rel=1 only."""
    if params.get("rel", 1) != 1:
        return (
            "no ir_measures provider takes NumRel with rel other than 1; write "
            "retrieval-num-rel(relevance_threshold=N)"
        )
    return None


#: ir_measures name -> slotwise alias and parameters.
MEASURES: Mapping[str, Measure] = {
    "nDCG": Measure(
        "retrieval-ndcg-at-k",
        "whole",
        {"dcg": "gain", "gains": "gains", **_JUDGED},
        values={"dcg": {"log2": "linear", "exp-log2": "exponential"}},
        refuse=_ndcg_provider,
    ),
    "P": Measure("retrieval-precision-at-k", "required", {**_REL, **_JUDGED}),
    "R": Measure("retrieval-recall-at-k", "required", {**_REL, **_JUDGED}),
    "AP": Measure("retrieval-map", "optional", {**_REL, **_JUDGED}),
    "RR": Measure(  # RR@k: msmarco's provider, which orders tied scores by doc id ascending
        "retrieval-mrr",
        "optional",
        {**_REL, **_JUDGED},
        fixed_when_cut=_ASCENDING,
        refuse=_rr_provider,
    ),
    "Success": Measure("retrieval-hit-at-k", "required", {**_REL, **_JUDGED}),
    "Judged": Measure(  # the judged provider: tied scores by doc id ascending
        "retrieval-judged-at-k", "whole", fixed={"denominator": "retrieved", **_ASCENDING}
    ),
    "Rprec": Measure("retrieval-r-precision", "none", {**_REL, **_JUDGED}),
    "ERR": Measure("retrieval-err-at-k", "required", fixed={"max_grade": 4}),
    "IPrec": Measure(
        "retrieval-iprec-at-recall", "required", {**_REL, **_JUDGED}, at=("recall", "recall")
    ),
    "Bpref": Measure("retrieval-bpref", "none", _REL),
    "infAP": Measure("retrieval-infap", "none", _REL),
    "NumQ": Measure("retrieval-num-q"),
    "NumRet": Measure(
        "retrieval-num-ret", "none", _REL, variants={"rel": "retrieval-num-rel-ret"}
    ),  # NumRet(rel=N) is pytrec_eval's num_rel_ret
    "NumRel": Measure(  # pytrec_eval reports queries of the run; ir_measures fills 0
        "retrieval-num-rel",
        "none",
        _REL,
        fixed={"zero_without_output": True},
        refuse=_num_rel_provider,
    ),
    "NumRelRet": Measure("retrieval-num-rel-ret", "none", _REL),
    "SetP": Measure(
        "retrieval-set-precision",
        "none",
        {**_REL, **_JUDGED, "relative": None},
        variants={"relative": "retrieval-set-relative-precision"},
    ),  # SetP@k and SetR@k: ir_measures itself refuses a cutoff for them
    "SetRelP": Measure("retrieval-set-relative-precision", "none", {**_REL, **_JUDGED}),
    "SetR": Measure("retrieval-set-recall", "none", _REL),
    "SetF": Measure("retrieval-set-f", "none", {**_REL, **_JUDGED, "beta": "beta"}),
    "SetAP": Measure("retrieval-set-map", "none", {**_REL, **_JUDGED}),
    "Compat": Measure(
        "retrieval-compat",
        "none",
        {"p": "p", "normalize": "normalize"},
        fixed={"ideal_order": "scores", **_ASCENDING},
    ),
    "Accuracy": Measure("retrieval-accuracy", "optional", _REL, fixed=_RUN_ORDER),
    "RBP": Measure("cwl-rbp", "none", {"p": "p", **_REL}, fixed=_RUN_ORDER, refuse=_rbp_provider),
    "SDCG": Measure(  # its dcg has one value, log2, which is slotwise's
        "cwl-sdcg-at-k",
        "required",
        {"min_rel": "min_rel", "max_rel": "max_rel", "dcg": None},
        values={"dcg": {"log2": "log2"}},
        required=("max_rel",),
        fixed=_RUN_ORDER,
    ),
    "NERR8": _cwl("cwl-nerr8-at-k", "required"),
    "NERR9": _cwl("cwl-nerr9-at-k", "required"),
    "NERR10": _cwl("cwl-nerr10", "none", "p"),
    "NERR11": _cwl("cwl-nerr11", "none", "T"),
    "INST": _cwl("cwl-inst", "none", "T"),
    "INSQ": _cwl("cwl-insq", "none", "T"),
    "BPM": _cwl("cwl-bpm-at-k", "required", "T"),
    "alpha_nDCG": _diversity("diversity-alpha-ndcg-at-k", "required", "alpha"),
    "alpha_DCG": _diversity("diversity-alpha-dcg-at-k", "required", "alpha"),
    "ERR_IA": _diversity("diversity-err-ia-at-k", "required"),
    "nERR_IA": _diversity("diversity-nerr-ia-at-k", "required"),
    "NRBP": _diversity("diversity-nrbp", "none", "alpha", "beta", judged_only=False),
    "nNRBP": _diversity(  # ir_measures fills 0 for a query the run lacks, even for 0/0
        "diversity-nnrbp",
        "none",
        "alpha",
        "beta",
        judged_only=False,
        fixed={"zero_without_output": True},
    ),
    "AP_IA": _diversity("diversity-map-ia", "none"),
    "P_IA": _diversity("diversity-precision-ia-at-k", "required"),
    "StRecall": _diversity("diversity-subtopic-recall-at-k", "required", judged_only=False),
}

#: Other names ir_measures registers for the same measures.
ALIASES: Mapping[str, str] = {
    "NDCG": "nDCG",
    "Precision": "P",
    "Recall": "R",
    "MAP": "AP",
    "MRR": "RR",
    "RPrec": "Rprec",
    "BPref": "Bpref",
    "MAP_IA": "AP_IA",
    "\N{GREEK SMALL LETTER ALPHA}_nDCG": "alpha_nDCG",
    "\N{GREEK SMALL LETTER ALPHA}_DCG": "alpha_DCG",
}

_NAME = re.compile(
    r"^\s*(?P<name>[^\W\d]\w*)(?:@(?P<k>[^()\s]*))?\s*(?:\((?P<params>.*)\))?"
    r"\s*(?:@(?P<k_after>[^()\s]*))?\s*$"
)


def translate(text: str) -> str | None:
    """The slotwise spec for the ir_measures name ``text`` (``Name``, ``Name@K``,
    ``Name(param=value, ...)@K``), or None when ``text`` is no name of :data:`MEASURES`
    or :data:`ALIASES`. A parameter or cutoff slotwise cannot honour is a
    :class:`~engine.errors.MetricParameterError` naming it."""
    match = _NAME.match(text)
    if match is None:
        return None
    name = ALIASES.get(match["name"], match["name"])
    measure = MEASURES.get(name)
    if measure is None:
        return None
    params = (
        parse_keywords(text, match["params"], bare_words=False)
        if (match["params"] or "").strip()
        else {}
    )
    at, target = measure.at
    given = [c for c in (params.pop(at, None), match["k"], match["k_after"]) if c is not None]
    if len(given) > 1:
        raise MetricParameterError(f"{text}: the {at} is given twice")
    cutoff = _at(text, at, given[0]) if given else None
    _check(text, name, measure, params, cutoff)
    if cutoff is None and measure.cutoff == "whole":
        cutoff = WHOLE_RANKING
    alias = next(
        (
            measure.variants[key]
            for key in params
            if key in measure.variants and params[key] is not False
        ),
        measure.alias,
    )
    mapped = dict(measure.fixed)
    if cutoff is not None:
        mapped.update(measure.fixed_when_cut)
    if target != "k" and cutoff is not None:
        mapped[target], cutoff = cutoff, None
    for key, value in params.items():
        choices = measure.values.get(key)
        if choices is not None:
            if not isinstance(value, str) or value not in choices:
                raise MetricParameterError(
                    f"{text}: {key} must be one of {', '.join(choices)}; got {value!r}"
                )
            value = choices[value]
        renamed = measure.params[key]
        if renamed is not None:
            mapped[renamed] = value
    spec = alias if cutoff is None else f"{alias}@{cutoff}"
    if mapped:
        spec += "(" + ", ".join(f"{k}={_value(v)}" for k, v in mapped.items()) + ")"
    return spec


def _check(text: str, name: str, measure: Measure, params: Mapping[str, Any], cutoff: Any) -> None:
    """A :class:`~engine.errors.MetricParameterError` for a cutoff or parameter the name
    cannot take, or a combination refused (:attr:`Measure.refuse`)."""
    at = measure.at[0]
    if cutoff is None and measure.cutoff == "required":
        raise MetricParameterError(f"{text}: {name} needs a {at}, e.g. {name}@{_EXAMPLES[at]}")
    if cutoff is not None and measure.cutoff == "none":
        raise MetricParameterError(
            f"{text}: {name} takes no cutoff (nor does its ir_measures provider)"
        )
    if cutoff is not None and measure.max_cutoff is not None and cutoff > measure.max_cutoff:
        raise MetricParameterError(
            f"{text}: {name} takes a cutoff up to {measure.max_cutoff} (as ir_measures' provider)"
        )
    for key in params:
        if key in measure.unsupported:
            raise MetricParameterError(
                f"{text}: ir_measures parameter {key!r} of {name} is not supported "
                f"by slotwise ({measure.unsupported[key]})"
            )
        if key not in measure.params:
            known = [*([at] if measure.cutoff != "none" else []), *measure.params]
            known += measure.unsupported
            raise MetricParameterError(
                f"{text}: {name} has no parameter {key!r} "
                f"(its ir_measures parameters: {', '.join(known) or 'none'})"
            )
    missing = [key for key in measure.required if key not in params]
    if missing:
        raise MetricParameterError(f"{text}: {name} needs {', '.join(missing)} (as ir_measures)")
    reason = (
        measure.refuse({**params, **({at: cutoff} if cutoff is not None else {})})
        if measure.refuse
        else None
    )
    if reason is not None:
        raise MetricParameterError(f"{text}: {reason}")


def suggest(name: str, available: Collection[str]) -> list[str]:
    """ir_measures names close to ``name`` (ignoring case), each followed by its slotwise
    alias; only names whose alias is in ``available``."""
    names = {n.lower(): n for n in MEASURES if MEASURES[n].alias in available}
    names.update({a.lower(): m for a, m in ALIASES.items() if m in names.values()})
    close = difflib.get_close_matches(name.lower(), names, n=3, cutoff=0.6)
    return list(dict.fromkeys(s for c in close for s in (names[c], MEASURES[names[c]].alias)))


_EXAMPLES = {"cutoff": "10", "recall": "0.1"}


def _at(text: str, at: str, value: Any) -> Any:
    """A cutoff as a positive int; another ``@`` value (IPrec's recall) as a number, left
    to the slotwise metric to validate."""
    if at != "cutoff":
        try:
            return float(value) if isinstance(value, str) else value
        except ValueError:
            return value
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise MetricParameterError(f"{text}: the cutoff must be a positive integer, got {value!r}")
    return value


def _value(value: Any) -> str:
    """A value as parse_spec reads it back: bare identifiers stay bare."""
    bare = (
        isinstance(value, str) and value.isidentifier() and value not in ("True", "False", "None")
    )
    return value if bare else repr(value)
