"""The built-in metrics pass the plugin conformance suite (engine.testing).

To cover another built-in metric, add ``case(cls, **params)`` to CASES (``bounded=False``
for a metric whose values may leave [0, 1]).
"""

from __future__ import annotations

from typing import Any

from engine.testing import OUTPUTS, SAMPLES, MetricConformance
from metrics_plugins import agentic, agreement, cwl, rag, retrieval, setbased, utility


def case(metric_class: type[Any], *, bounded: bool = True, **params: Any) -> dict[str, Any]:
    """The class attributes of one MetricConformance subclass."""
    return {"metric_class": metric_class, "params": params, "bounded": bounded}


#: Set-based metrics take grades 1..5 only: samples with such grades (none at grade 5 in
#: ``no-five``, no labels in ``empty-slice``, ``metadata.k = 2`` in ``cutoff``) and
#: outputs whose pools contain their top k (``no-output`` has none).
GRADED_SAMPLES: tuple[dict[str, Any], ...] = (
    {
        "id": "seed",
        "expected_output": {"a": 5, "b": 4, "c": 4, "d": 3, "e": 3, "f": 3, "g": 2, "h": 1},
    },
    {"id": "no-five", "expected_output": {"relevance": {"p": 4, "q": 3, "r": 1}, "answers": ["x"]}},
    {"id": "empty-slice", "expected_output": []},
    {"id": "cutoff", "expected_output": {"k1": 5, "k2": 2, "k3": 4}, "metadata": {"k": 2}},
    {"id": "junk", "expected_output": {"j1": 1, "j2": 2}},
    {"id": "no-output", "expected_output": {"m1": 5}},
)
GRADED_OUTPUTS: dict[str, Any] = {
    "seed": {"retrieved": ["b", "z", "d", "e", "f", "a"], "pool": list("abcdefghz")},
    "no-five": ["q", "p", "r", "p"],
    "empty-slice": {"retrieved": ["u1", "u2"], "pool": ["u1", "u2", "u3"]},
    "cutoff": {"retrieved": ["k2", "k1", "k3"], "pool": ["k1", "k2"]},
    "junk": {"retrieved": [], "pool": []},
}


def graded(metric_class: type[Any], **params: Any) -> dict[str, Any]:
    """A case on the graded fixture, for the set-based family."""
    return {**case(metric_class, **params), "samples": GRADED_SAMPLES, "outputs": GRADED_OUTPUTS}


def _with_claims(sample: dict[str, Any]) -> dict[str, Any]:
    """The sample with a claim named like each of its groups, plus an unsupported one;
    ``cutoff``'s claims are named like none (their support was never judged: NA)."""
    names = [*sample["expected_output"]["groups"], "extra"]
    if sample["id"] == "cutoff":
        names = [f"{name}-unjudged" for name in names]
    claims = [{"id": name, "text": name} for name in names]
    return {**sample, "expected_output": {**sample["expected_output"], "claims": claims}}


#: The kit's samples with claims (``deep`` has none: NA).
CLAIMED_SAMPLES = tuple(s if s["id"] == "deep" else _with_claims(s) for s in SAMPLES)


def claimed(metric_class: type[Any], **params: Any) -> dict[str, Any]:
    """A case on the kit's fixture with claims, for context recall and claim precision."""
    return {**case(metric_class, **params), "samples": CLAIMED_SAMPLES, "outputs": OUTPUTS}


CASES: list[dict[str, Any]] = [
    case(retrieval.HitAtK),
    case(retrieval.HitRateAtK),
    case(retrieval.PrecisionAtK),
    case(retrieval.RecallAtK),
    case(retrieval.RPrecision),
    case(retrieval.MRR),
    case(retrieval.AveragePrecision),
    case(retrieval.AveragePrecision, k=3),
    case(retrieval.DCGAtK, bounded=False),
    case(retrieval.NDCGAtK),
    case(retrieval.NDCGAtK, gain="exponential"),
    case(retrieval.ERRAtK),
    case(retrieval.ERRAtK, mapping="linear", max_grade=3),
    case(retrieval.AUCPR),
    case(retrieval.JudgedAtK),
    case(retrieval.PrecisionAtK, judged_only=True),
    case(retrieval.MRR, ties="doc_id_ascending", judged_only=True),
    case(retrieval.NDCGAtK, judged_only=True),
    case(retrieval.IPrecAtRecall, judged_only=True),
    case(agreement.Compat),
    case(agreement.Compat, p=0.5, normalize=False),
    case(agreement.Compat, ideal_order="scores", ties="doc_id_ascending"),
    case(agreement.Accuracy),
    case(agreement.Accuracy, k=3, ties="run_order"),
    case(cwl.RBP),
    case(cwl.RBP, p=0.99, relevance_threshold=None, max_rel=3, ties="run_order"),
    case(cwl.SDCG, max_rel=3),
    case(cwl.NERR8, max_rel=3),
    case(cwl.NERR9, k=3, min_rel=1, max_rel=3),
    case(cwl.NERR10, max_rel=3),
    case(cwl.NERR11, T=2.0, max_rel=3),
    case(cwl.INST, max_rel=3),
    case(cwl.INSQ, T=3.0, max_rel=3),
    case(cwl.BPM, T=2.0, max_rel=3),
    case(rag.AnswerContainmentAtK),
    case(rag.ContextPrecisionAtK),
    case(rag.CoverageRecallAtK),
    case(rag.NuggetRecallAtK),
    case(rag.ChunkAttributionRate),
    claimed(rag.ContextRecallAtK),
    claimed(rag.ContextRecallAtK, k=2),
    claimed(rag.ClaimPrecisionAtK),
    graded(setbased.RANWGAtK),
    graded(setbased.RANWGAtK, alpha=0.5, cap3=0.1),
    graded(setbased.PROCAtK),
    graded(setbased.PctPROCAtK),
    graded(setbased.NRecall4PlusAtK),
    graded(setbased.NRecall5AtK),
    graded(setbased.Precision4PlusAtK),
    graded(setbased.HarmAtK),
    graded(setbased.HarmAtK, harm_grade=1),
    graded(setbased.DiagnosisAtK),
    case(utility.UDCG),
    case(utility.UDCG, k=3, gamma=0.0),
    # udcg-theta needs a parameter file: its conformance class is in tests/test_utility.py.
    case(agentic.EvidenceRecallAnyHop),
    case(agentic.FirstHop, bounded=False),
    case(agentic.RedundantHops),
    case(agentic.UnpromptedEvidence),
    case(agentic.AgenticDiagnosis, relevance_threshold=2.0),
]


def _conformance_class(attributes: dict[str, Any]) -> type:
    suffix = "".join(f"_{name}_{value}" for name, value in attributes["params"].items())
    return type(
        f"Test{attributes['metric_class'].__name__}{suffix}", (MetricConformance,), dict(attributes)
    )


for _attributes in CASES:
    _cls = _conformance_class(_attributes)
    globals()[_cls.__name__] = _cls
