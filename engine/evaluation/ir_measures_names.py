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
from collections.abc import Collection, Mapping
from typing import Any, Literal

import attrs

from engine.errors import MetricParameterError
from engine.evaluation.keywords import parse_keywords

__all__ = [
    "ALIASES",
    "MEASURES",
    "UNSUPPORTED",
    "WHOLE_RANKING",
    "Measure",
    "suggest",
    "translate",
]

#: The k that stands for "the whole ranking": with it nDCG is trec_eval's uncut ``ndcg``.
WHOLE_RANKING = 1_000_000_000


@attrs.frozen
class Measure:
    """How one ir_measures measure becomes a slotwise spec.

    ``cutoff``: ``required`` (``P@K``; ``P`` alone is an error, as in ir_measures),
    ``optional`` (no cutoff is the slotwise metric uncut), ``whole`` (no cutoff is
    k = :data:`WHOLE_RANKING`) or ``none`` (``@K`` is an error). ``at`` is the
    ir_measures parameter ``@`` sets and the slotwise one it becomes. ``params`` renames
    ir_measures parameters to slotwise ones, ``values`` translates their values;
    ``unsupported`` names ir_measures parameters slotwise lacks, with a hint; ``fixed``
    are slotwise parameters always set to match ir_measures, ``fixed_when_cut`` those set
    when a cutoff is given (ir_measures then picks another provider); ``max_cutoff`` is
    the deepest cutoff ir_measures' provider accepts.
    """

    alias: str
    cutoff: Literal["required", "optional", "whole", "none"] = "none"
    params: Mapping[str, str] = attrs.field(factory=dict)
    values: Mapping[str, Mapping[str, str]] = attrs.field(factory=dict)
    unsupported: Mapping[str, str] = attrs.field(factory=dict)
    fixed: Mapping[str, Any] = attrs.field(factory=dict)
    fixed_when_cut: Mapping[str, Any] = attrs.field(factory=dict)
    at: tuple[str, str] = ("cutoff", "k")
    max_cutoff: int | None = None


_REL = {"rel": "relevance_threshold"}
_ASCENDING = {"ties": "doc_id_ascending"}
_JUDGED_ONLY = {
    "judged_only": "slotwise keeps unjudged documents in the ranking (slotwise trec-eval -J "
    "removes them, as trec_eval does)"
}

_BINARY = {
    "rel": "slotwise's subtopic judgements are binary groups: read diversity qrels with "
    "engine.io.trec.read_subtopic_qrels(path, threshold=N) for rel=N"
}
_NDEVAL_DEPTH = 20  # pyndeval refuses a deeper cutoff


def _diversity(
    alias: str, cutoff: Literal["required", "none"], *params: str, judged_only: bool = True
) -> Measure:
    """A measure of ir_measures' pyndeval provider (which orders tied scores by doc id
    ascending): ``cutoff`` required (up to 20) or none; ``params`` pass as they are."""
    return Measure(
        alias,
        cutoff,
        {p: p for p in params},
        unsupported={**_BINARY, **(_JUDGED_ONLY if judged_only else {})},
        fixed=_ASCENDING,
        max_cutoff=_NDEVAL_DEPTH if cutoff == "required" else None,
    )


#: ir_measures name -> slotwise alias and parameters.
MEASURES: Mapping[str, Measure] = {
    "nDCG": Measure(
        "retrieval-ndcg-at-k",
        "whole",
        {"dcg": "gain", "gains": "gains"},
        values={"dcg": {"log2": "linear", "exp-log2": "exponential"}},
        unsupported=_JUDGED_ONLY,
    ),
    "P": Measure("retrieval-precision-at-k", "required", _REL),
    "R": Measure("retrieval-recall-at-k", "required", _REL),
    "AP": Measure("retrieval-map", "optional", _REL),
    "RR": Measure(  # RR@k: msmarco's provider, which orders tied scores by doc id ascending
        "retrieval-mrr",
        "optional",
        _REL,
        unsupported=_JUDGED_ONLY,
        fixed_when_cut=_ASCENDING,
    ),
    "Success": Measure("retrieval-hit-at-k", "required", _REL, unsupported=_JUDGED_ONLY),
    "Judged": Measure(  # the judged provider: tied scores by doc id ascending
        "retrieval-judged-at-k", "required", fixed={"denominator": "retrieved", **_ASCENDING}
    ),
    "Rprec": Measure("retrieval-r-precision", "none", _REL, unsupported=_JUDGED_ONLY),
    "ERR": Measure("retrieval-err-at-k", "required", fixed={"max_grade": 4}),
    "IPrec": Measure("retrieval-iprec-at-recall", "required", _REL, at=("recall", "recall")),
    "Bpref": Measure("retrieval-bpref", "none", _REL),
    "infAP": Measure("retrieval-infap", "none", _REL),
    "NumRet": Measure(
        "retrieval-num-ret", "none", unsupported={"rel": "write NumRelRet(rel=N) for NumRet(rel=N)"}
    ),
    "NumRel": Measure("retrieval-num-rel", "none", _REL),
    "NumRelRet": Measure("retrieval-num-rel-ret", "none", _REL),
    "SetP": Measure(
        "retrieval-set-precision", "none", _REL, unsupported={"relative": "write SetRelP"}
    ),  # SetP@k and SetR@k: ir_measures itself refuses a cutoff for them
    "SetRelP": Measure("retrieval-set-relative-precision", "none", _REL),
    "SetR": Measure("retrieval-set-recall", "none", _REL),
    "SetF": Measure("retrieval-set-f", "none", {**_REL, "beta": "beta"}),
    "SetAP": Measure("retrieval-set-map", "none", _REL),
    "alpha_nDCG": _diversity("diversity-alpha-ndcg-at-k", "required", "alpha"),
    "alpha_DCG": _diversity("diversity-alpha-dcg-at-k", "required", "alpha"),
    "ERR_IA": _diversity("diversity-err-ia-at-k", "required"),
    "nERR_IA": _diversity("diversity-nerr-ia-at-k", "required"),
    "NRBP": _diversity("diversity-nrbp", "none", "alpha", "beta", judged_only=False),
    "nNRBP": _diversity("diversity-nnrbp", "none", "alpha", "beta", judged_only=False),
    "AP_IA": _diversity("diversity-map-ia", "none"),
    "P_IA": _diversity("diversity-precision-ia-at-k", "required"),
    "StRecall": _diversity("diversity-subtopic-recall-at-k", "required", judged_only=False),
}

#: ir_measures names slotwise refuses, with the reason (docs/metrics.md, "Not mapped").
UNSUPPORTED: Mapping[str, str] = {
    "SDCG": "scaled DCG (cwl_eval's) has no slotwise counterpart",
    **{
        f"NERR{n}": "cwl_eval's normalised ERR variants have no slotwise counterpart"
        for n in (8, 9, 10, 11)
    },
    "RBP": (
        "ir_measures computes it with cwl_eval, which ranks tied scores in the run file's "
        "order, where slotwise ranks them as trec_eval does, so the numbers differ on tied "
        "runs; without ties RBP(rel=N, p=P) is retrieval-rbp(p=P, relevance_threshold=N)"
    ),
    "Compat": "the compatibility measure has no slotwise counterpart",
    "INST": "cwl_eval's INST has no slotwise counterpart",
    "INSQ": "cwl_eval's INSQ has no slotwise counterpart",
    "BPM": "the bejeweled player model has no slotwise counterpart",
    "Accuracy": "ir_measures' Accuracy scores pairs of runs, not one ranking per query",
    "NumQ": "a count of queries, not a per-query score: it is the n of slotwise's results",
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
}

_NAME = re.compile(
    r"^\s*(?P<name>[A-Za-z]\w*)(?:@(?P<k>[^()\s]*))?\s*(?:\((?P<params>.*)\))?"
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
    if name in UNSUPPORTED:
        raise MetricParameterError(
            f"{text}: ir_measures' {name} is not supported by slotwise ({UNSUPPORTED[name]})"
        )
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
    if cutoff is None and measure.cutoff == "required":
        raise MetricParameterError(f"{text}: {name} needs a {at}, e.g. {name}@{_EXAMPLES[at]}")
    if cutoff is not None and measure.cutoff == "none":
        raise MetricParameterError(f"{text}: {name} takes no cutoff (nor does ir_measures')")
    if cutoff is not None and measure.max_cutoff is not None and cutoff > measure.max_cutoff:
        raise MetricParameterError(
            f"{text}: {name} takes a cutoff up to {measure.max_cutoff} (as ir_measures' provider)"
        )
    if cutoff is None and measure.cutoff == "whole":
        cutoff = WHOLE_RANKING
    mapped = dict(measure.fixed)
    if cutoff is not None:
        mapped.update(measure.fixed_when_cut)
    if target != "k" and cutoff is not None:
        mapped[target], cutoff = cutoff, None
    for key, value in params.items():
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
        choices = measure.values.get(key)
        if choices is not None:
            if not isinstance(value, str) or value not in choices:
                raise MetricParameterError(
                    f"{text}: {key} must be one of {', '.join(choices)}; got {value!r}"
                )
            value = choices[value]
        mapped[measure.params[key]] = value
    spec = measure.alias if cutoff is None else f"{measure.alias}@{cutoff}"
    if mapped:
        spec += "(" + ", ".join(f"{k}={_value(v)}" for k, v in mapped.items()) + ")"
    return spec


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
