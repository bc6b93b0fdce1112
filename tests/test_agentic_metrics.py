"""The agentic family (docs/metrics.md, "Agentic family"): every value derived by hand in
the docstring of its test, NA rules, and the per-hop diagnosis counted per sample and
over the run."""

from __future__ import annotations

import math

import pytest

import engine

ENGINE = engine.Engine()

# Deep labels (five pieces of evidence and a judged non-relevant document), a pool, a
# selection that differs from the ranking, a final context that drops a prompted piece,
# a redundant hop, an empty hop, a plain output, a failed sample and one with no evidence.
SAMPLES = [
    {
        "id": "merger-2021",
        "expected_output": {
            "10k#4": 2,
            "pr#1": 1,
            "wiki#0": 1,
            "memo#3": 1,
            "mail#8": 1,
            "blog#2": 0,
        },
    },
    {"id": "hq-city", "expected_output": ["offices#2"]},
    {"id": "ceo-2019", "expected_output": {"news#7": 3}},
    {"id": "revenue", "expected_output": ["10k#12"]},
    {"id": "no-evidence", "expected_output": {"faq#1": 0}},
]
OUTPUTS = {
    "merger-2021": {
        "retrieved": ["10k#4", "blog#2"],
        "hops": [
            {
                "query": "acme merger",
                "retrieved": ["blog#2", "10k#4"],
                "pool": ["blog#2", "10k#4", "memo#3", "mail#8"],
                "selected": ["10k#4", "blog#2", "mail#8"],
            },
            {
                "query": "acme merger 2021 filing",
                "retrieved": ["pr#1", "x#5", "10k#4"],
                "selected": ["x#5"],
            },
            {"query": "acme merger press", "retrieved": ["pr#1", "10k#4"]},
        ],
    },
    "hq-city": ["offices#9", "offices#2"],
    "ceo-2019": {
        "hops": [
            {"query": "acme ceo", "retrieved": ["board#1"]},
            {"query": "acme ceo 2019", "retrieved": []},
            {"query": "acme chief executive 2019", "retrieved": ["news#7", "board#1"]},
        ]
    },
    "no-evidence": ["faq#1"],
}
METRICS = [
    "agentic-evidence-recall",
    "agentic-first-hop",
    "agentic-redundant-hops",
    "agentic-unprompted-evidence",
    "agentic-diagnosis",
]


@pytest.fixture(scope="module")
def results():
    dataset = ENGINE.dataset(samples=SAMPLES)
    return dataset.with_metrics(METRICS).evaluate(OUTPUTS, missing="error")


def value(results, metric, sample):
    return results.values(metric)[results.sample_ids.index(sample)]


def test_evidence_recall(results):
    """merger-2021: evidence 10k#4, pr#1, wiki#0, memo#3, mail#8 (blog#2 is 0); hops
    retrieved 10k#4 and pr#1 (memo#3 and mail#8 only reached a pool): 2/5. hq-city:
    1/1. ceo-2019: hop 3 retrieved news#7: 1/1. no-evidence: NA. revenue failed: NA."""
    metric = "agentic-evidence-recall"
    assert value(results, metric, "merger-2021") == pytest.approx(2 / 5)
    assert value(results, metric, "hq-city") == 1.0
    assert value(results, metric, "ceo-2019") == 1.0
    assert math.isnan(value(results, metric, "no-evidence"))
    assert math.isnan(value(results, metric, "revenue"))
    assert results.aggregates[metric] == pytest.approx((2 / 5 + 1 + 1) / 3)


def test_first_hop(results):
    """merger-2021: 10k#4 first retrieved at hop 1, pr#1 at hop 2: (1 + 2) / 2 = 1.5;
    hq-city: its one hop, 1; ceo-2019: news#7 at hop 3, 3."""
    metric = "agentic-first-hop"
    assert value(results, metric, "merger-2021") == 1.5
    assert value(results, metric, "hq-city") == 1.0
    assert value(results, metric, "ceo-2019") == 3.0
    assert results.details[metric][results.sample_ids.index("merger-2021")] == {
        "first_hop": {"10k#4": 1, "pr#1": 2, "wiki#0": None, "memo#3": None, "mail#8": None}
    }


def test_redundant_hops(results):
    """merger-2021: hop 2 brings pr#1 and x#5, hop 3 (pr#1, 10k#4) nothing new: 1/2.
    ceo-2019: hop 2 is empty (redundant), hop 3 brings news#7: 1/2. One-hop samples: NA;
    no labels needed."""
    metric = "agentic-redundant-hops"
    assert value(results, metric, "merger-2021") == 0.5
    assert value(results, metric, "ceo-2019") == 0.5
    assert math.isnan(value(results, metric, "hq-city"))
    assert math.isnan(value(results, metric, "no-evidence"))


def test_unprompted_evidence(results):
    """merger-2021: reached 10k#4, pr#1 (retrieved), memo#3, mail#8 (pooled); prompted:
    10k#4, mail#8 (hop 1's selection), x#5 (hop 2's), pr#1 (hop 3 selects nothing: its
    ranking). memo#3 never prompted: 1/4. ceo-2019: news#7 prompted by hop 3: 0."""
    metric = "agentic-unprompted-evidence"
    assert value(results, metric, "merger-2021") == pytest.approx(1 / 4)
    assert value(results, metric, "ceo-2019") == 0.0
    assert value(results, metric, "hq-city") == 0.0


def test_diagnosis_per_sample(results):
    """merger-2021's final context (10k#4, blog#2) holds 10k#4: 1/5. Missed: wiki#0 no
    hop reached (retrieval); memo#3 reached by hop 1's pool, never prompted (selection,
    hop 1); pr#1 retrieved by hop 2, prompted by hop 3, dropped (context, hop 3); mail#8
    prompted by hop 1, dropped (context, hop 1). ceo-2019: no final context given, so it
    is what the hops prompted: board#1, news#7: found."""
    metric = "agentic-diagnosis"
    assert value(results, metric, "merger-2021") == pytest.approx(1 / 5)
    assert value(results, metric, "ceo-2019") == 1.0
    detail = results.details[metric][results.sample_ids.index("merger-2021")]
    assert detail["found"] == 1
    assert (detail["retrieval"], detail["selection"], detail["context"]) == (1, 1, 2)
    assert sorted(detail["missed"], key=lambda m: m["id"]) == [
        {"id": "mail#8", "class": "context", "hop": 1},
        {"id": "memo#3", "class": "selection", "hop": 1},
        {"id": "pr#1", "class": "context", "hop": 3},
        {"id": "wiki#0", "class": "retrieval", "hop": None},
    ]


def test_diagnosis_summary(results):
    """Over the run: found 10k#4, offices#2, news#7 (3); retrieval 1, selection 1,
    context 2 (all merger-2021's); per hop: hop 1 selection 1 and context 1, hop 3
    context 1."""
    summary = results.reports["agentic-diagnosis"]
    assert summary["counts"] == {"found": 3, "retrieval": 1, "selection": 1, "context": 2}
    assert summary["per_hop"] == {
        "1": {"selection": 1, "context": 1},
        "3": {"selection": 0, "context": 1},
    }
    assert summary["worst"]["context"] == [{"id": "merger-2021", "missed": 2}]
    # revenue failed (no output): no details, not counted
    assert results.details["agentic-diagnosis"][results.sample_ids.index("revenue")] is None


def test_threshold():
    """At relevance_threshold=2 merger-2021's only evidence is 10k#4, retrieved at hop 1
    and in the final context."""
    dataset = ENGINE.dataset(samples=SAMPLES[:1])
    found = dataset.with_metrics(
        [
            "agentic-diagnosis(relevance_threshold=2)",
            "agentic-evidence-recall(relevance_threshold=2)",
        ]
    ).evaluate({"merger-2021": OUTPUTS["merger-2021"]})
    assert found.values("agentic-diagnosis(relevance_threshold=2)").tolist() == [1.0]
    assert found.values("agentic-evidence-recall(relevance_threshold=2)").tolist() == [1.0]


def test_explain_drills_down_per_hop(results):
    """explain names, per hop of merger-2021, what it ranked, prompted, first found and
    lost (as test_diagnosis_per_sample derives); a plain output has no hops."""
    from engine.analysis.explain import Hop, explain_sample
    from engine.cli.explain import explanation_lines

    dataset = ENGINE.dataset(samples=SAMPLES)
    view = explain_sample(results, "merger-2021", dataset=dataset, outputs=OUTPUTS).systems[0]
    assert view.hops == (
        Hop(
            1,
            "acme merger",
            ("blog#2", "10k#4"),
            4,
            ("10k#4", "blog#2", "mail#8"),
            ("10k#4",),
            (("memo#3", "selection"), ("mail#8", "context")),
        ),
        Hop(2, "acme merger 2021 filing", ("pr#1", "x#5", "10k#4"), None, ("x#5",), ("pr#1",), ()),
        Hop(
            3,
            "acme merger press",
            ("pr#1", "10k#4"),
            None,
            ("pr#1", "10k#4"),
            (),
            (("pr#1", "context"),),
        ),
    )
    lines = explanation_lines(
        explain_sample(results, "merger-2021", dataset=dataset, outputs=OUTPUTS)
    )
    assert (
        '  hop 3 "acme merger press": ranked pr#1, 10k#4; prompted pr#1, 10k#4; first found none; lost here pr#1 (context)'
        in lines
    )
    plain = explain_sample(results, "hq-city", dataset=dataset, outputs=OUTPUTS).systems[0]
    assert plain.hops == ()


def test_report_shows_each_hop(results):
    """The HTML report embeds the same hop lines for merger-2021's explanation, shown
    under the system by the page's script."""
    import json
    import re

    from engine.analysis.explain import explain
    from engine.analysis.report import build_report

    dataset = ENGINE.dataset(samples=SAMPLES)
    explanations = explain([results], dataset=dataset, outputs=[OUTPUTS])
    page = build_report([results], names=["agent"], explanations=explanations)
    data = json.loads(
        re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page)[1]
    )
    view = data["explain"]["views"][0][data["ids"].index("merger-2021")]
    assert view[8] == [hop.line() for hop in explanations[0].systems[0].hops]
    assert view[8][2].endswith("lost here pr#1 (context)")
    assert 'node("p", "hop", line)' in page
