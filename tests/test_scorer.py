"""One output at a time: ``evaluation.scorer()``. Each sample's scores as it arrives equal
its row when every output is scored at once, and ``results()`` equals ``run()``."""

from __future__ import annotations

import json
import math
import random
import threading

import numpy as np
import pytest

import engine
from engine.errors import InputError, MetricRequirementError

GRADED = [0, 1, 2, 3, -1]


def _random_dataset(seed: int, count: int = 200) -> tuple[list[dict], dict[str, dict]]:
    """Samples with graded relevance, set-based grades, utility labels and pools, and
    outputs of very different lengths (padding widths differ from sample to sample)."""
    rng = random.Random(seed)
    samples, outputs = [], {}
    for q in range(count):
        docs = [f"d{i}" for i in range(rng.randint(1, 40))]
        judged = rng.sample(docs, rng.randint(1, len(docs)))
        samples.append(
            {
                "id": f"q{q}",
                "input": f"q{q}",
                "expected_output": {
                    "relevance": {d: rng.choice(GRADED) for d in judged},
                    "grades": {d: rng.randint(1, 5) for d in judged},
                    "utility": {d: round(rng.uniform(-1, 1), 3) for d in judged},
                },
            }
        )
        ranking = list(dict.fromkeys(f"d{rng.randint(0, 60)}" for _ in range(rng.randint(0, 70))))
        pool = list(dict.fromkeys(ranking + rng.sample(docs, rng.randint(0, len(docs)))))
        outputs[f"q{q}"] = {"retrieved": ranking, "pool": pool}
    return samples, outputs


def _applicable(eng: engine.Engine, dataset: engine.Dataset, outputs: dict) -> list[str]:
    """Every installed metric these samples have the labels for."""
    usable = []
    for info in eng.metrics():
        if info.error:
            continue
        try:
            dataset.with_metrics([info.alias]).evaluate(outputs)
        except (MetricRequirementError, engine.MetricParameterError):
            continue
        usable.append(info.alias)
    return usable


def _timeless(results: engine.Results) -> dict:
    """The results document without the time it was created."""
    document = json.loads(results.to_json())
    del document["provenance"]["created"]
    return document


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _differing(scores: dict[str, float], results: engine.Results, row: int) -> list[str]:
    """The labels whose score is not, bit for bit, the results' value at ``row``."""
    return [
        label
        for label in results.labels
        if not _same(scores[label], float(results.values(label)[row]))
    ]


class TestOneAtATime:
    @pytest.mark.slow
    def test_each_sample_scores_as_it_does_among_all_others(self, eng):
        """Bit for bit, for every built-in metric these labels allow, although each sample
        alone is padded to its own ranking's length (sums run left to right)."""
        samples, outputs = _random_dataset(seed=7)
        dataset = eng.dataset(samples=samples)
        metrics = _applicable(eng, dataset, outputs)
        assert {"retrieval-ndcg-at-k", "retrieval-map", "ra-nwg-at-k", "udcg"} <= set(metrics)
        evaluation = dataset.with_metrics(metrics)
        whole = evaluation.evaluate(outputs)
        scorer = evaluation.scorer()
        for row, (sample_id, output) in enumerate(outputs.items()):
            scores = scorer.add(sample_id, output)
            assert _differing(scores, whole, row) == [], sample_id

    @pytest.mark.slow
    def test_every_label_kind_of_the_kit_fixture(self, eng):
        """The conformance kit's samples (graded and binary labels, both utility forms,
        answers, groups, texts, pools, citations, metadata.k, repeated ids, an empty and
        a missing output) score through ``add`` as in the whole batch, for every built-in
        metric they allow: each sample is joined with its own documents only."""
        from engine.testing import OUTPUTS, SAMPLES

        dataset = eng.dataset(samples=list(SAMPLES))
        metrics = _applicable(eng, dataset, OUTPUTS)
        assert {"udcg", "retrieval-err-at-k", "answer-containment-at-k"} <= set(metrics)
        evaluation = dataset.with_metrics(metrics)
        whole = evaluation.evaluate(OUTPUTS)
        scorer = evaluation.scorer()
        for row, sample_id in enumerate(whole.sample_ids):
            if sample_id not in OUTPUTS:
                continue
            scores = scorer.add(sample_id, OUTPUTS[sample_id])
            assert _differing(scores, whole, row) == [], sample_id

    def test_trec_eval_collection_against_its_reference(self, eng, trec_collection):
        """trec_eval's test collection, one query at a time: each value equals trec_eval's
        own (out.test.aq, 4 decimals) and the whole batch's, bit for bit."""
        qrels, run, reference = trec_collection
        evaluation = eng.dataset(qrels).with_metrics(["retrieval-map", "retrieval-ndcg-at-k@10"])
        whole = evaluation.evaluate(run)
        scorer = evaluation.scorer()
        for row, qid in enumerate(whole.sample_ids):
            scores = scorer.add(qid, run.get(qid, []))
            for label, measure in (
                ("retrieval-map", "map"),
                ("retrieval-ndcg-at-k@10", "ndcg_cut_10"),
            ):
                assert _same(scores[label], float(whole.values(label)[row])), (qid, label)
                if qid in reference[measure]:
                    assert round(scores[label], 4) == reference[measure][qid], (qid, measure)

    def test_results_equal_run_bit_for_bit(self, eng):
        """Added in a shuffled order from eight threads, the results are those of
        ``run``: values, summaries with CIs, diagnostics, provenance, kept outputs."""
        samples, outputs = _random_dataset(seed=11)
        evaluation = eng.dataset(samples=samples, name="random").with_metrics(
            ["retrieval-ndcg-at-k@10", "retrieval-map", "retrieval-err-at-k", "ra-nwg-at-k@5"]
        )
        del outputs["q5"]  # the system fails on it: an error row in both
        ran = evaluation.run(lambda question: outputs[question], progress=False)

        scorer = evaluation.scorer()
        order = list(outputs)
        random.Random(3).shuffle(order)
        per_thread = [order[i::8] for i in range(8)]
        threads = [
            threading.Thread(target=lambda ids: [scorer.add(i, outputs[i]) for i in ids], args=(p,))
            for p in per_thread
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        scorer.add_error("q5", KeyError("q5"))
        assert len(scorer) == len(samples)
        scored = scorer.results()
        assert _timeless(scored) == _timeless(ran)
        assert scored.summary(resamples=500) == ran.summary(resamples=500)
        assert scored.diagnostics.errors == {"q5": "KeyError: 'q5'"}

    def test_err_uses_the_datasets_largest_grade(self, eng):
        """ERR's max_grade defaults to the dataset's largest label (3 here), also for a
        sample whose own labels stop at 1: relevant at rank 1 with grade 1 is
        (2^1 - 1) / 2^3 = 1/8, not (2^1 - 1) / 2^1 = 1/2."""
        samples = [
            {"id": "low", "expected_output": {"relevance": {"a": 1}}},
            {"id": "high", "expected_output": {"relevance": {"b": 3}}},
        ]
        scorer = eng.dataset(samples=samples).with_metrics(["retrieval-err-at-k"]).scorer()
        assert scorer.add("low", ["a"]) == {"retrieval-err-at-k": 1 / 8}

    def test_failures_are_error_rows(self, eng):
        samples, outputs = _random_dataset(seed=5, count=4)
        evaluation = eng.dataset(samples=samples).with_metrics(["retrieval-mrr"])
        scorer = evaluation.scorer()
        scorer.add("q0", outputs["q0"])
        scorer.add_error("q1", TimeoutError("upstream timed out"))
        scorer.add_error("q2", "no answer")
        with pytest.raises(InputError, match=r"1 of 4 samples not added yet \('q3'\)"):
            scorer.results()  # q3 is never silently scored as an empty ranking
        results = scorer.results(partial=True)
        assert results.diagnostics.errors == {
            "q1": "TimeoutError: upstream timed out",
            "q2": "no answer",
        }
        assert results.sample_ids == ["q0", "q1", "q2"]
        assert results.diagnostics.missing_outputs == ()
        assert results.provenance["partial"] == {"samples_scored": 3, "samples_in_dataset": 4}
        assert "PARTIAL: 3 of 4 samples" in results._title()
        mrr = results.values("retrieval-mrr")
        assert np.isnan(mrr[1:3]).all()  # failed: NA
        assert results.summary()["retrieval-mrr"]["n"] == 1


class TestRefusals:
    """What add refuses raises InputError naming the sample, and records nothing."""

    @pytest.fixture
    def scorer(self, eng):
        samples = [{"id": "q-1", "expected_output": ["a"]}, {"id": "q-2", "expected_output": []}]
        return eng.dataset(samples=samples).with_metrics(["retrieval-mrr"]).scorer(strict=True)

    def test_invalid_output_names_the_pointer(self, scorer):
        with pytest.raises(InputError) as raised:
            scorer.add("q-1", {"retrieved": "a"})
        problem = raised.value.problems[0]
        assert (problem.sample_id, problem.pointer) == ("q-1", "/actual_output/retrieved")
        with pytest.raises(InputError) as raised:  # a list, but not of ids: the schema's word
            scorer.add("q-1", ["a", ""])
        assert raised.value.problems[0].pointer == "/actual_output/1"
        assert len(scorer) == 0
        assert scorer.add("q-1", ["b", "a"]) == {"retrieval-mrr": 0.5}

    def test_unknown_and_repeated_ids(self, scorer):
        with pytest.raises(InputError, match="unknown sample"):
            scorer.add("q-9", ["a"])
        scorer.add("q-1", ["a"])
        with pytest.raises(InputError, match="added twice"):
            scorer.add("q-1", ["a"])
        with pytest.raises(InputError, match="added twice"):
            scorer.add_error("q-1", "late failure")

    def test_strict_refuses_a_repeated_document(self, scorer):
        with pytest.raises(InputError, match="duplicate ids") as raised:
            scorer.add("q-2", ["a", "a"])
        assert raised.value.problems[0].pointer == "/actual_output/retrieved"
        assert len(scorer) == 0

    def test_results_document_validates(self, scorer):
        scorer.add("q-1", ["a"])
        scorer.add("q-2", [])
        document = json.loads(scorer.results().to_json())
        assert document["diagnostics"]["missing_outputs"] == []


CORPUS = 5_000_000
CLASSIC = [
    "retrieval-ndcg-at-k@10",
    "retrieval-map",
    "retrieval-mrr",
    "retrieval-recall-at-k@100",
    "retrieval-precision-at-k@10",
]


def _realistic(seed: int, count: int = 150) -> tuple[list[dict], dict[str, dict[str, float]]]:
    """Samples as a real corpus gives them: about 10 judged documents each (graded 0-3,
    some -1; some samples with nothing relevant; some with ``metadata.k``), and per
    sample a run of up to 100 scored ids drawn from millions, about half of its judged
    documents among mostly unjudged ones, scores coarse enough to tie often."""
    rng = random.Random(seed)
    samples, scored = [], {}
    for q in range(count):
        judged = [f"doc{i}" for i in rng.sample(range(CORPUS), rng.randint(1, 12))]
        grades = [-1, 0] if q % 10 == 0 else [-1, 0, 0, 1, 2, 3]
        sample = {"id": f"q{q}", "input": f"q{q}"}
        sample["expected_output"] = {"relevance": {d: rng.choice(grades) for d in judged}}
        if q % 7 == 0:
            sample["metadata"] = {"k": rng.choice([1, 3, 20])}
        samples.append(sample)
        picked = rng.sample(judged, len(judged) // 2)
        others = [f"doc{i}" for i in rng.sample(range(CORPUS), rng.randint(0, 100 - len(picked)))]
        scored[f"q{q}"] = {d: rng.randint(0, 12) / 4 for d in picked + others}
    return samples, scored


def _trec_order(scores: dict[str, float]) -> list[str]:
    """Ids ranked as trec_eval ranks them: score descending, ties by id descending."""
    return sorted(scores, key=lambda d: (scores[d], d), reverse=True)


class TestRealisticData:
    @pytest.mark.slow
    def test_one_at_a_time_equals_evaluate_at_once(self, eng):
        """Realistic samples (ids from a corpus of millions, mostly unjudged, ties in the
        scores, empty outputs, rankings that repeat an id, metadata.k) added one at a
        time give, bit for bit, the row ``evaluate`` gives them all at once, for every
        built-in metric these labels allow; the scored run evaluated as it is (trec_eval's
        tie order) gives the same rows as its rankings."""
        samples, scored = _realistic(seed=22)
        outputs: dict[str, list[str]] = {i: _trec_order(s) for i, s in scored.items()}
        for sample_id in ("q3", "q40", "q91"):
            outputs[sample_id] = []
        for sample_id in ("q5", "q60", "q117"):  # an id ranked twice
            ranking = outputs[sample_id]
            outputs[sample_id] = ranking[:4] + ranking[1:2] + ranking[4:] + ranking[:1]
        dataset = eng.dataset(samples=samples)
        applicable = _applicable(eng, dataset, outputs)
        assert {"retrieval-ndcg-at-k", "retrieval-map", "retrieval-mrr"} <= set(applicable)
        evaluation = dataset.with_metrics([*CLASSIC, *sorted(set(applicable) - set(CLASSIC))])
        whole = evaluation.evaluate(outputs)
        repeats = sum(len(r) - len(set(r)) for r in outputs.values())
        assert whole.diagnostics.duplicate_ids_dropped == repeats > 0
        tied = [i for i, s in scored.items() if len(set(s.values())) < len(s)]
        assert len(tied) > len(scored) // 2
        plain = {i: s for i, s in scored.items() if outputs[i] == _trec_order(s)}
        assert len(plain) >= len(scored) - 6
        as_scored = evaluation.evaluate(plain)
        scorer = evaluation.scorer()
        for row, (sample_id, output) in enumerate(outputs.items()):
            scores = scorer.add(sample_id, output)
            assert _differing(scores, whole, row) == [], sample_id
            if sample_id in plain:
                assert _differing(scores, as_scored, row) == [], sample_id

    def test_failed_and_invalid_outputs_are_error_rows_as_in_run(self, eng):
        """A call that raises and one that returns an invalid output are error rows of
        ``run``; through the scorer the first is ``add_error``, the second refused by
        ``add`` (InputError, nothing recorded) and then added as an error with the reason
        ``run`` gave: the results equal ``run``'s, values, summaries and diagnostics."""
        samples, scored = _realistic(seed=23, count=60)
        outputs = {i: _trec_order(s) for i, s in scored.items()}
        outputs["q8"] = []
        failing, invalid = {"q2", "q30"}, {"q4": None, "q41": {"retrieved": "doc1"}}

        def system(question: str) -> object:
            if question in failing:
                raise TimeoutError(f"{question} timed out")
            return invalid[question] if question in invalid else outputs[question]

        evaluation = eng.dataset(samples=samples).with_metrics(CLASSIC)
        ran = evaluation.run(system, progress=False)
        assert set(ran.diagnostics.errors) == failing | set(invalid)
        scorer = evaluation.scorer()
        for sample_id in outputs:
            if sample_id in failing:
                scorer.add_error(sample_id, TimeoutError(f"{sample_id} timed out"))
            elif sample_id in invalid:
                with pytest.raises(InputError, match="invalid outputs"):
                    scorer.add(sample_id, invalid[sample_id])
                scorer.add_error(sample_id, ran.diagnostics.errors[sample_id])
            else:
                scorer.add(sample_id, outputs[sample_id])
        scored_results = scorer.results()
        assert _timeless(scored_results) == _timeless(ran)
        assert scored_results.summary(resamples=200) == ran.summary(resamples=200)


class TestOneOutputsCodes:
    """How one output is coded beside its sample (documents.output_codes): the sample's
    labelled ids keep their codes, every other id takes the code of its first place."""

    def test_each_code_names_its_id(self):
        import pyarrow as pa

        from engine.io import documents

        labelled = ["x", "z"]
        codes = {doc: code for code, doc in enumerate(labelled)}
        output = {"retrieved": ["a", "x", "a", 7], "pool": ["z", "b", "a"], "cited": ["b"]}
        coded = documents.output_codes(output, codes)
        columns, placed = coded.columns(), coded.placed
        vocabulary = pa.array(labelled + placed, pa.string())

        def ids(name):
            return vocabulary.take(columns[name].values).to_pylist()

        assert ids("retrieved") == ["a", "x", "a", "7"]  # an int id as its string
        assert ids("pool") == ["z", "b", "a"]
        assert ids("cited") == ["b"]
        # written out: labelled x=0, z=1; then places 2.. over retrieved, pool, cited
        assert columns["retrieved"].values.to_pylist() == [2, 0, 2, 5]
        assert columns["pool"].values.to_pylist() == [1, 7, 2]
        assert columns["cited"].values.to_pylist() == [7]

    def test_items_give_their_ids_and_texts(self):
        """A list of items is coded by its ids; their texts are kept (None for an item
        without one), and a list whose items have none keeps no texts."""
        from engine.io import documents

        items = [{"id": "a", "text": "A"}, {"id": "x", "score": 1.0}]
        coded = documents.output_codes({"retrieved": items}, {"x": 0})
        assert coded.lists["retrieved"].tolist() == [1, 0] and coded.placed == ["a", "x"]
        assert coded.texts == ["A", None]
        mixed = documents.output_codes(["a", {"id": 7, "text": "B"}], {})
        assert mixed.placed == ["a", "7"] and mixed.texts == [None, "B"]
        assert documents.output_codes([{"id": "a"}], {}).texts is None

    def test_a_bare_list_codes_as_its_output(self):
        """ranked_codes (the scorer's path for a list of string ids, checked once by
        bare_ids) codes a list as output_codes does, repeats included."""
        from engine.io import documents

        ranking = ["a", "x", "a", "b"]
        assert documents.bare_ids(ranking)
        assert not documents.bare_ids(["a", ""]) and not documents.bare_ids(["a", 7])
        assert not documents.bare_ids(("a", "b"))  # made plain first, then validated
        bare = documents.ranked_codes(ranking, {"x": 0, "z": 1})
        general = documents.output_codes(ranking, {"x": 0, "z": 1})
        assert bare.lists["retrieved"].tolist() == [2, 0, 2, 5]
        assert general.lists["retrieved"].tolist() == [2, 0, 2, 5]
        assert bare.placed == general.placed == ranking and bare.texts is None
