"""ir_measures measure names (``nDCG@10``, ``P(rel=2)@5``, ``AP``) wherever a metric spec
is accepted: the translation table, end-to-end equality with the slotwise specs, and the
errors for misspellings and parameters slotwise lacks."""

from __future__ import annotations

import json
from math import log2
from pathlib import Path

import attrs
import pytest

import engine
from engine.cli import main
from engine.cli.common import split_specs
from engine.evaluation.ir_measures_names import ALIASES, MEASURES, suggest, translate
from engine.evaluation.metric import metric_label, parse_spec
from engine.evaluation.registry import Registry

SAMPLES = [
    {"id": "q1", "expected_output": {"d1": 2, "d2": 1, "d3": 0, "d4": 1}},
    {"id": "q2", "expected_output": {"d5": 1, "d6": 2}},
    {"id": "q3", "expected_output": {"d8": 3}},
]
OUTPUTS = {"q1": ["d3", "d1", "d9", "d2", "d4"], "q2": ["d7", "d6"], "q3": ["d0"]}

#: The ir_measures names of the brief and the slotwise specs they stand for.
EQUIVALENT = {
    "nDCG@10": "retrieval-ndcg-at-k@10",
    "P(rel=2)@5": "retrieval-precision-at-k@5(relevance_threshold=2)",
    "AP": "retrieval-map",
    "RR@10": "retrieval-mrr@10(ties=doc_id_ascending)",
    "Success@1": "retrieval-hit-at-k@1",
    "Judged@10": "retrieval-judged-at-k@10(denominator=retrieved, ties=doc_id_ascending)",
    "R@100": "retrieval-recall-at-k@100",
    "Rprec": "retrieval-r-precision",
    "nDCG(dcg='exp-log2')@10": "retrieval-ndcg-at-k@10(gain=exponential)",
}


class TestTranslate:
    @pytest.mark.parametrize(
        ("name", "spec"),
        [
            *EQUIVALENT.items(),
            ("nDCG", "retrieval-ndcg-at-k@1000000000"),  # uncut: the whole ranking
            ("nDCG(dcg='log2')@10", "retrieval-ndcg-at-k@10(gain=linear)"),
            (
                "nDCG(gains={0: 0, 1: 1, 2: 3})@10",
                "retrieval-ndcg-at-k@10(gains={0: 0, 1: 1, 2: 3})",
            ),
            ("nDCG(cutoff=5)", "retrieval-ndcg-at-k@5"),
            ("NDCG@10", "retrieval-ndcg-at-k@10"),
            ("P@5", "retrieval-precision-at-k@5"),
            ("P@5(rel=2)", "retrieval-precision-at-k@5(relevance_threshold=2)"),
            (" P ( rel=2 ) @5 ", "retrieval-precision-at-k@5(relevance_threshold=2)"),
            ("AP@10", "retrieval-map@10"),
            ("AP(rel=2)", "retrieval-map(relevance_threshold=2)"),
            (
                "alpha_nDCG@20",
                "diversity-alpha-ndcg-at-k@20(ties=doc_id_ascending, subtopic_order=listed)",
            ),
            (
                "\N{GREEK SMALL LETTER ALPHA}_nDCG@20",
                "diversity-alpha-ndcg-at-k@20(ties=doc_id_ascending, subtopic_order=listed)",
            ),
            (
                "alpha_DCG(alpha=0.3)@5",
                "diversity-alpha-dcg-at-k@5(ties=doc_id_ascending, subtopic_order=listed, alpha=0.3)",
            ),
            ("ERR_IA@1", "diversity-err-ia-at-k@1(ties=doc_id_ascending, subtopic_order=listed)"),
            (
                "nERR_IA(judged_only=True)@10",
                "diversity-nerr-ia-at-k@10(ties=doc_id_ascending, subtopic_order=listed, judged_only=True)",
            ),
            (
                "NRBP(alpha=0.3, beta=0.8)",
                "diversity-nrbp(ties=doc_id_ascending, subtopic_order=listed, alpha=0.3, beta=0.8)",
            ),
            (
                "nNRBP",
                "diversity-nnrbp(ties=doc_id_ascending, subtopic_order=listed, zero_without_output=True)",
            ),
            ("AP_IA", "diversity-map-ia(ties=doc_id_ascending, subtopic_order=listed)"),
            ("MAP_IA", "diversity-map-ia(ties=doc_id_ascending, subtopic_order=listed)"),
            (
                "P_IA@5",
                "diversity-precision-ia-at-k@5(ties=doc_id_ascending, subtopic_order=listed)",
            ),
            (
                "StRecall@20",
                "diversity-subtopic-recall-at-k@20(ties=doc_id_ascending, subtopic_order=listed)",
            ),
            ("AP(rel=2)@10", "retrieval-map@10(relevance_threshold=2)"),
            ("RR", "retrieval-mrr"),
            ("RR(rel=2)@10", "retrieval-mrr@10(ties=doc_id_ascending, relevance_threshold=2)"),
            ("MRR", "retrieval-mrr"),
            ("MAP@10", "retrieval-map@10"),
            ("Success(rel=2)@5", "retrieval-hit-at-k@5(relevance_threshold=2)"),
            ("Rprec(rel=2)", "retrieval-r-precision(relevance_threshold=2)"),
            ("ERR@20", "retrieval-err-at-k@20(max_grade=4)"),
            ("Bpref", "retrieval-bpref"),
            ("Bpref(rel=2)", "retrieval-bpref(relevance_threshold=2)"),
            ("infAP", "retrieval-infap"),
            ("NumRet", "retrieval-num-ret"),
            ("NumRel", "retrieval-num-rel(zero_without_output=True)"),
            ("NumRet(rel=2)", "retrieval-num-rel-ret(relevance_threshold=2)"),
            ("NumQ", "retrieval-num-q"),
            ("SetP(relative=True)", "retrieval-set-relative-precision"),
            ("SetP(relative=False)", "retrieval-set-precision"),
            ("P(judged_only=True)@5", "retrieval-precision-at-k@5(judged_only=True)"),
            ("RR(judged_only=True)", "retrieval-mrr(judged_only=True)"),
            ("nDCG(judged_only=True)", "retrieval-ndcg-at-k@1000000000(judged_only=True)"),
            (
                "Judged",
                "retrieval-judged-at-k@1000000000(denominator=retrieved, ties=doc_id_ascending)",
            ),
            ("Compat", "retrieval-compat(ideal_order=scores, ties=doc_id_ascending)"),
            (
                "Compat(p=0.8, normalize=False)",
                "retrieval-compat(ideal_order=scores, ties=doc_id_ascending, p=0.8, normalize=False)",
            ),
            ("Accuracy@5", "retrieval-accuracy@5(ties=run_order)"),
            ("RBP(rel=2, p=0.9)", "cwl-rbp(ties=run_order, relevance_threshold=2, p=0.9)"),
            ("SDCG(max_rel=3, dcg='log2')@10", "cwl-sdcg-at-k@10(ties=run_order, max_rel=3)"),
            ("NERR8(max_rel=3)@5", "cwl-nerr8-at-k@5(ties=run_order, max_rel=3)"),
            (
                "NERR9(min_rel=1, max_rel=3)@5",
                "cwl-nerr9-at-k@5(ties=run_order, min_rel=1, max_rel=3)",
            ),
            ("NERR10(p=0.7, max_rel=3)", "cwl-nerr10(ties=run_order, p=0.7, max_rel=3)"),
            ("NERR11(T=2.0, max_rel=3)", "cwl-nerr11(ties=run_order, T=2.0, max_rel=3)"),
            ("INST(max_rel=3)", "cwl-inst(ties=run_order, max_rel=3)"),
            ("INSQ(T=3.0, max_rel=3)", "cwl-insq(ties=run_order, T=3.0, max_rel=3)"),
            ("BPM(T=2.0, max_rel=3)@10", "cwl-bpm-at-k@10(ties=run_order, T=2.0, max_rel=3)"),
            ("NumRelRet", "retrieval-num-rel-ret"),
            ("NumRelRet(rel=2)", "retrieval-num-rel-ret(relevance_threshold=2)"),
            ("SetP", "retrieval-set-precision"),
            ("SetR", "retrieval-set-recall"),
            ("SetF", "retrieval-set-f"),
            ("SetF(beta=0.5)", "retrieval-set-f(beta=0.5)"),
            ("SetAP", "retrieval-set-map"),
            ("SetRelP(rel=2)", "retrieval-set-relative-precision(relevance_threshold=2)"),
            ("IPrec@0.1", "retrieval-iprec-at-recall(recall=0.1)"),
            ("IPrec(rel=2)@0.5", "retrieval-iprec-at-recall(recall=0.5, relevance_threshold=2)"),
            ("IPrec(recall=0.5)", "retrieval-iprec-at-recall(recall=0.5)"),
        ],
    )
    def test_names_become_slotwise_specs(self, name, spec):
        """Each ir_measures name maps to the documented slotwise spec."""
        assert translate(name) == spec

    @pytest.mark.parametrize(
        "text",
        ["retrieval-ndcg-at-k@10", "retrieval-map", "udcg", "nDGC@10", "ndcg@10", ""],
    )
    def test_other_text_is_not_translated(self, text):
        """Slotwise specs, unknown names and wrong case are left to the slotwise parser."""
        assert translate(text) is None

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("RR(judged_only=True)@10", "no ir_measures provider takes RR with both"),
            ("nDCG(dcg='exp-log2')", "uncut with ranx"),
            ("nDCG(dcg='exp-log2', judged_only=True)@5", "with gains or judged_only"),
            ("nDCG(rel=2)@10", "nDCG has no parameter 'rel'"),
            ("Judged(rel=2)@10", "Judged has no parameter 'rel'"),
            ("NumRel(rel=2)", "NumRel with rel other than 1"),
            ("RBP", "only with rel"),
            ("RBP(rel=1)@10", "takes no cutoff"),
            ("SDCG@10", "SDCG needs max_rel"),
            ("SDCG(max_rel=3, dcg='exp-log2')@10", "dcg must be one of log2"),
            ("INST(max_rel=3)@10", "INST takes no cutoff"),
            ("StRecall(judged_only=True)@5", "StRecall has no parameter 'judged_only'"),
            ("nDCG(dcg='exp')@10", "dcg must be one of log2, exp-log2"),
            ("P", "P needs a cutoff"),
            ("Success", "Success needs a cutoff"),
            ("ERR", "ERR needs a cutoff"),
            ("Rprec@5", "Rprec takes no cutoff"),
            ("P(cutoff=5)@5", "cutoff is given twice"),
            ("IPrec", "IPrec needs a recall, e.g. IPrec@0.1"),
            ("IPrec(recall=0.1)@0.2", "recall is given twice"),
            ("P@0", "cutoff must be a positive integer, got 0"),
            ("P@x", "cutoff must be a positive integer, got 'x'"),
            ("P(rel=2", None),  # falls to the slotwise parser: "cannot parse"
            ("P(2)@5", "name=value"),
            ("P(rel=x)@5", "not a literal"),
        ],
    )
    def test_parameters_slotwise_lacks_are_errors(self, text, message):
        """A parameter or cutoff slotwise cannot honour is a MetricParameterError naming it."""
        with pytest.raises(engine.MetricParameterError, match=message or "cannot parse"):
            parse_spec(text)

    def test_slotwise_specs_accept_the_ir_measures_order(self):
        """`alias(params)@K` parses like `alias@K(params)`; k given twice is an error."""
        spec = parse_spec("retrieval-ndcg-at-k(gain=exponential)@10")
        assert (spec.alias, dict(spec.params)) == (
            "retrieval-ndcg-at-k",
            {"gain": "exponential", "k": 10},
        )
        with pytest.raises(engine.MetricParameterError, match="k twice"):
            parse_spec("retrieval-ndcg-at-k@5(gain=linear)@6")

    def test_errors_through_the_engine_name_the_spec(self):
        """Engine.metric reports the spec as the user wrote it."""
        with pytest.raises(engine.MetricParameterError) as info:
            engine.Engine(config={}).metric("RR(judged_only=True)@10")
        assert str(info.value).startswith("RR(judged_only=True)@10: ")

    def test_slotwise_aliases_cannot_collide(self):
        """Slotwise aliases are lowercase; every ir_measures name has an uppercase letter,
        so no installed alias is a table name and none is translated."""
        names = [*MEASURES, *ALIASES]
        assert all(name != name.lower() for name in names)
        aliases = Registry().aliases()
        assert all(alias == alias.lower() for alias in aliases)
        assert not set(aliases) & set(names)
        assert all(translate(alias) is None for alias in aliases)
        assert all(translate(f"{alias}@10") is None for alias in aliases)

    def test_table_parameters_exist_on_installed_metrics(self):
        """Every slotwise parameter the table writes is a field of its metric (checked for
        the aliases installed now)."""
        registry = Registry()
        installed = set(registry.aliases())
        for measure in MEASURES.values():
            if measure.alias not in installed:
                continue
            base = {k: v for k, v in measure.params.items() if k not in measure.variants}
            for alias, params in [
                (measure.alias, base),
                *((alias, measure.params) for alias in measure.variants.values()),
            ]:
                fields = {f.name for f in attrs.fields(registry.get(alias))}
                wanted = {*params.values(), *measure.fixed} - {None}
                if measure.cutoff != "none":
                    wanted.add(measure.at[1])
                assert wanted <= fields, alias

    def test_suggestions(self):
        """Close ir_measures names (ignoring case) come with their slotwise alias."""
        available = ["retrieval-ndcg-at-k", "retrieval-mrr", "retrieval-hit-at-k"]
        assert suggest("nDGC", available) == ["nDCG", "retrieval-ndcg-at-k"]
        assert suggest("ndcg", available) == ["nDCG", "retrieval-ndcg-at-k"]
        assert suggest("mrr", available) == ["RR", "retrieval-mrr"]
        assert suggest("Bpref", available) == []  # its alias is not available


class TestEndToEnd:
    def test_names_score_as_their_slotwise_specs(self):
        """with_metrics of ir_measures names equals with_metrics of the slotwise specs:
        same labels (the slotwise labels), same per-sample values."""
        eng = engine.Engine(config={})
        dataset = eng.dataset(samples=SAMPLES)
        named = dataset.with_metrics(list(EQUIVALENT)).evaluate(OUTPUTS)
        native = dataset.with_metrics(list(EQUIVALENT.values())).evaluate(OUTPUTS)
        assert named.labels == native.labels
        assert named.labels == [metric_label(eng.metric(s)) for s in EQUIVALENT.values()]
        for label in named.labels:
            assert named.values(label).tolist() == native.values(label).tolist(), label
        assert named.summary() == native.summary()

    def test_values_by_hand(self):
        """Pinned by hand. q1 ranks d3 (0), d1 (2), d9 (unjudged), d2 (1), d4 (1);
        q2 ranks d7 (unjudged), d6 (2); q3 ranks d0 (unjudged), its only relevant is d8."""
        results = (
            engine.Engine(config={})
            .dataset(samples=SAMPLES)
            .with_metrics(["nDCG@10", "nDCG(dcg='exp-log2')@10", "P(rel=2)@5", "AP", "RR@10"])
            .evaluate(OUTPUTS)
        )
        ndcg = results.values("retrieval-ndcg-at-k@10").tolist()
        # DCG = 2/log2(3) + 1/log2(5) + 1/log2(6); ideal 2, 1, 1 at ranks 1-3.
        assert ndcg[0] == pytest.approx(
            (2 / log2(3) + 1 / log2(5) + 1 / log2(6)) / (2 / log2(2) + 1 / log2(3) + 1 / log2(4))
        )
        # q2: d6 (2) at rank 2; ideal d6 then d5.
        assert ndcg[1] == pytest.approx((2 / log2(3)) / (2 + 1 / log2(3)))
        assert ndcg[2] == 0.0
        # Exponential gain 2^g - 1: d1 -> 3, d2 and d4 -> 1.
        exp = results.values("retrieval-ndcg-at-k@10(gain=exponential)").tolist()
        assert exp[0] == pytest.approx(
            (3 / log2(3) + 1 / log2(5) + 1 / log2(6)) / (3 / log2(2) + 1 / log2(3) + 1 / log2(4))
        )
        # rel=2: one such document in each top 5 of q1 and q2, none in q3; divided by 5.
        assert results.values("retrieval-precision-at-k@5(relevance_threshold=2)").tolist() == [
            pytest.approx(1 / 5),
            pytest.approx(1 / 5),
            0.0,
        ]
        # AP, uncut: q1 relevant (>= 1) at ranks 2, 4, 5 of R = 3; q2 one of R = 2 at rank 2.
        assert results.values("retrieval-map").tolist() == pytest.approx(
            [(1 / 2 + 2 / 4 + 3 / 5) / 3, (1 / 2) / 2, 0.0]
        )
        assert results.values("retrieval-mrr@10(ties=doc_id_ascending)").tolist() == pytest.approx(
            [1 / 2, 1 / 2, 0.0]
        )
        assert results.summary()["retrieval-mrr@10(ties=doc_id_ascending)"][
            "mean"
        ] == pytest.approx(1 / 3)

    @pytest.mark.parametrize(
        ("name", "trec_name", "level"),
        [
            ("nDCG", "ndcg", 1),  # uncut
            ("nDCG@3", "ndcg_cut_3", 1),
            ("P(rel=2)@5", "P_5", 2),
            ("R@100", "recall_100", 1),
            ("AP", "map", 1),
            ("AP(rel=2)@10", "map_cut_10", 2),
            ("RR", "recip_rank", 1),
            ("Success@1", "success_1", 1),
            ("Rprec(rel=2)", "Rprec", 2),
        ],
    )
    def test_values_agree_with_pytrec_eval(self, name, trec_name, level):
        """ir_measures computes these names with pytrec_eval; the mapped metrics agree."""
        pytrec_eval = pytest.importorskip("pytrec_eval")
        qrels = {s["id"]: dict(s["expected_output"]) for s in SAMPLES}
        run = {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in OUTPUTS.items()}
        measure = ".".join(trec_name.rsplit("_", 1)) if trec_name[-1].isdigit() else trec_name
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, {measure}, relevance_level=level)
        theirs = evaluator.evaluate(run)
        eng = engine.Engine(config={})
        results = eng.dataset(samples=SAMPLES).with_metrics([name]).evaluate(OUTPUTS)
        ours = results.values(results.labels[0]).tolist()
        assert ours == pytest.approx([theirs[q][trec_name] for q in OUTPUTS], abs=1e-12)

    def test_label_is_the_slotwise_label(self):
        """A mapped metric's label is the slotwise label of its spec."""
        eng = engine.Engine(config={})
        assert metric_label(eng.metric("nDCG@10")) == "retrieval-ndcg-at-k@10"
        assert metric_label(eng.metric("P(rel=2)@5")) == (
            "retrieval-precision-at-k@5(relevance_threshold=2)"
        )
        assert metric_label(eng.metric("ERR@20")) == "retrieval-err-at-k@20(max_grade=4)"
        assert eng.metric("nDCG") == eng.metric("retrieval-ndcg-at-k@1000000000")

    def test_name_and_its_spec_are_one_metric(self):
        """An ir_measures name and the slotwise spec it stands for are the same metric,
        so giving both is the usual "more than once" error."""
        dataset = engine.Engine(config={}).dataset(samples=SAMPLES)
        with pytest.raises(engine.MetricParameterError, match="more than once"):
            dataset.with_metrics(["nDCG@10", "retrieval-ndcg-at-k@10"])

    def test_config_params_of_the_alias_apply(self):
        """metrics.params.<slotwise alias> fills what the name leaves out, as for any spec."""
        eng = engine.Engine(config={"metrics": {"params": {"retrieval-map": {"k": 3}}}})
        assert eng.metric("AP") == eng.metric("retrieval-map@3")
        assert eng.metric("AP@10").k == 10

    def test_misspelling_suggests_the_name_and_alias(self):
        """An unknown ir_measures-looking name suggests the ir_measures name and the slotwise alias."""
        eng = engine.Engine(config={})
        for text in ("nDGC@10", "nDGC(dcg='exp-log2')@10", "NDGC@10"):  # ndcg@10: ranx's
            with pytest.raises(engine.UnknownMetricError) as info:
                eng.metric(text)
            assert info.value.suggestions[:2] == ("nDCG", "retrieval-ndcg-at-k"), text
            assert "Did you mean: nDCG, retrieval-ndcg-at-k" in str(info.value)
        with pytest.raises(engine.UnknownMetricError, match="Did you mean: Success"):
            eng.dataset(samples=SAMPLES).with_metrics(["Succes@1"])

    def test_slotwise_misspellings_keep_their_suggestions(self):
        """A misspelt slotwise alias still gets the registry's suggestions."""
        with pytest.raises(engine.UnknownMetricError, match="Did you mean: retrieval-mrr"):
            engine.Engine(config={}).metric("retrieval-mmr")

    def test_config_declared_metrics(self, tmp_path):
        """Names declared for a dataset in slotwise.yaml work too."""
        (tmp_path / "data.json").write_text(json.dumps({"name": "tiny", "samples": SAMPLES}))
        (tmp_path / "slotwise.yaml").write_text(
            "datasets:\n  tiny:\n    path: data.json\n    metrics: ['nDCG@10', 'P(rel=2)@5']\n"
        )
        eng = engine.Engine(config=tmp_path / "slotwise.yaml")
        results = eng.dataset("tiny").evaluate(OUTPUTS)
        assert results.labels == [
            "retrieval-ndcg-at-k@10",
            "retrieval-precision-at-k@5(relevance_threshold=2)",
        ]


class TestCli:
    @pytest.fixture
    def project(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        (tmp_path / "data.json").write_text(json.dumps({"name": "tiny", "samples": SAMPLES}))
        (tmp_path / "outputs.json").write_text(json.dumps(OUTPUTS))
        monkeypatch.chdir(tmp_path)
        return tmp_path

    def run(self, capsys, *metrics: str) -> dict:
        argv = ["run", "data.json", "--outputs", "outputs.json", "--format", "json"]
        assert main([*argv, "--metrics", *metrics]) == 0
        return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]

    def test_metrics_option(self, project, capsys):
        """`slotwise run --metrics nDCG@10,P@5` scores the mapped metrics."""
        document = self.run(capsys, "nDCG@10,P@5")
        assert [m["label"] for m in document["metrics"]] == [
            "retrieval-ndcg-at-k@10",
            "retrieval-precision-at-k@5",
        ]
        # P@5: q1 holds d1, d2, d4 (>= 1) in its top 5, q2 holds d6, q3 nothing.
        assert document["summary"]["retrieval-precision-at-k@5"]["mean"] == pytest.approx(
            (3 / 5 + 1 / 5 + 0) / 3
        )

    def test_parameters_and_k_option(self, project, capsys):
        """Parenthesised parameters survive the comma split; --k fills AP's cutoff."""
        argv = ["run", "data.json", "--outputs", "outputs.json", "--format", "json"]
        assert main([*argv, "--metrics", "nDCG(dcg='exp-log2')@10,AP", "--k", "3"]) == 0
        labels = [m["label"] for m in json.loads(capsys.readouterr().out)["metrics"]]
        assert labels == ["retrieval-ndcg-at-k@10(gain=exponential)", "retrieval-map@3"]

    def test_unsupported_parameter_is_a_usage_error(self, project, capsys):
        """A parameter slotwise lacks exits 2 naming it."""
        argv = ["run", "data.json", "--outputs", "outputs.json"]
        assert main([*argv, "--metrics", "P(rel=2, relative=True)@5"]) == 2
        assert "P has no parameter 'relative'" in capsys.readouterr().err

    def test_split_specs_respects_parentheses(self):
        """Commas inside ir_measures parameters do not split the spec."""
        assert split_specs(["P(rel=2,judged_only=True)@5,nDCG@10"]) == [
            "P(rel=2,judged_only=True)@5",
            "nDCG@10",
        ]


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("alpha_nDCG(rel=2)@10", "binary groups"),
        ("NRBP(rel=2)", "binary groups"),
        ("alpha_nDCG@21", "up to 20"),
        ("P_IA", "needs a cutoff"),
        ("NRBP@5", "takes no cutoff"),
        ("SetP@5", "takes no cutoff"),
        ("SetR@5", "takes no cutoff"),
    ],
)
def test_unsupported_ir_measures_names_say_why(name: str, reason: str) -> None:
    """Each ir_measures name slotwise cannot compute is refused with the reason (that
    ir_measures' providers bear out: tests/test_ir_measures_providers.py)."""
    with pytest.raises(engine.MetricParameterError) as caught:
        translate(name)
    assert reason in str(caught.value)


def test_judged_divides_by_what_was_retrieved() -> None:
    """Issue 23's case: one judged document retrieved alone. ir_measures' Judged@10 is
    1/min(10, 1) = 1.0; slotwise's retrieval-judged-at-k@10 keeps its k: 1/10."""
    eng = engine.Engine(config={})
    dataset = eng.dataset(samples=[{"id": "q", "expected_output": {"d1": 0, "d2": 1}}])
    results = dataset.with_metrics(["Judged@10", "retrieval-judged-at-k@10"]).evaluate(
        {"q": ["d1"]}
    )
    assert [results.values(label)[0] for label in results.labels] == [1.0, 0.1]


def test_ties_by_doc_id_ascending_by_hand() -> None:
    """Scores a 1, b 2, c 2, d 2; a and c relevant. trec_eval's order: d, c, b (ties by doc
    id descending), then a; the msmarco/judged providers': b, c, d, then a. RR: c at rank 2
    either way. Judged@2 (b and c judged, d not): 1/2 in trec_eval's order, 2/2 in theirs."""
    qrels = {"q": {"a": 1, "b": 0, "c": 1}}
    run = {"q": {"a": 1.0, "b": 2.0, "c": 2.0, "d": 2.0}}
    specs = [
        "RR@3",
        "retrieval-mrr@3",
        "Judged@2",
        "retrieval-judged-at-k@2(denominator=retrieved)",
    ]
    results = engine.Engine(config={}).evaluate_trec(qrels, run, specs)
    assert [results.values(label)[0] for label in results.labels] == [0.5, 0.5, 1.0, 0.5]
    run["q"]["a"] = 3.0  # a first, then the three ties: nothing moves a relevant one
    results = engine.Engine(config={}).evaluate_trec(qrels, run, specs)
    assert [results.values(label)[0] for label in results.labels] == [1.0, 1.0, 1.0, 0.5]
