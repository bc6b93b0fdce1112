"""Per-sample error analysis: ``explain`` (the data), ``Results.explain``, ``worst`` and
``slotwise explain``, checked against the quickstart's dataset and outputs files."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

import engine
from engine.analysis.explain import SNIPPET_CHARS, explain, labels_at, worst
from engine.cli import main
from engine.errors import InputError

QUICKSTART = Path(__file__).resolve().parent.parent / "examples" / "quickstart"
SYSTEMS = ("bm25", "hybrid-rerank")


def _outputs(system: str) -> dict[str, Any]:
    return json.loads((QUICKSTART / "outputs" / f"{system}.json").read_text())


def _expected() -> dict[str, dict[str, Any]]:
    """The quickstart's samples by id, as dataset.yaml writes them."""
    document = yaml.safe_load((QUICKSTART / "dataset.yaml").read_text())
    return {s["id"]: s for s in document["samples"]}


def _snippet(text: str) -> str:
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1].rstrip() + "…"


@pytest.fixture(scope="module")
def quickstart() -> engine.Dataset:
    return engine.Engine(config=QUICKSTART / "slotwise.yaml").dataset("quickstart")


@pytest.fixture(scope="module")
def scored(quickstart) -> list[engine.Results]:
    """Both systems on the declared metrics (classic and set-based, K = 5)."""
    return [quickstart.evaluate(QUICKSTART / "outputs" / f"{s}.json") for s in SYSTEMS]


@pytest.fixture(scope="module")
def explained(quickstart, scored) -> dict[str, Any]:
    """Every quickstart sample explained for both systems, by id."""
    found = explain(
        scored,
        names=SYSTEMS,
        dataset=quickstart,
        outputs=[QUICKSTART / "outputs" / f"{s}.json" for s in SYSTEMS],
    )
    return {e.sample_id: e for e in found}


@pytest.fixture
def results_files(scored, tmp_path, monkeypatch) -> list[str]:
    """bm25.json and hybrid-rerank.json in a temporary directory; the working directory is
    the quickstart's, so its slotwise.yaml declares the dataset."""
    paths = []
    for system, results in zip(SYSTEMS, scored, strict=True):
        paths.append(str(tmp_path / f"{system}.json"))
        results.to_json(paths[-1])
    monkeypatch.chdir(QUICKSTART)
    return paths


class TestData:
    def test_slots_follow_the_outputs_and_labels(self, explained):
        """Every slot is the output's document at that rank, with the sample's relevance
        label and grade, its rank in the output's pool and the start of its text."""
        samples = _expected()
        for system_index, system in enumerate(SYSTEMS):
            outputs = _outputs(system)
            for sample_id, explanation in explained.items():
                view = explanation.systems[system_index]
                expected = samples[sample_id]["expected_output"]
                output = outputs[sample_id]
                k = samples[sample_id].get("metadata", {}).get("k", 5)
                assert view.k == k and len(view.slots) == k and view.pool == len(output["pool"])
                for slot, item in zip(view.slots, output["retrieved"], strict=False):
                    assert slot.id == item["id"]
                    assert slot.snippet == _snippet(item["text"]) and slot.text == item["text"]
                    assert slot.pool_rank == output["pool"].index(item["id"]) + 1
                    assert slot.in_pool
                    relevance = expected["relevance"]
                    if isinstance(relevance, list):
                        relevance = dict.fromkeys(relevance, 1)
                    assert slot.relevance == relevance.get(item["id"])
                    assert slot.grade == expected.get("grades", {}).get(item["id"])

    def test_missed_are_the_relevant_documents_outside_the_top_k(self, explained):
        """Missed: relevance >= 1 or grade >= 3, not in the top K, most relevant first,
        with their pool rank (None outside the pool)."""
        samples = _expected()
        for system_index, system in enumerate(SYSTEMS):
            outputs = _outputs(system)
            for sample_id, explanation in explained.items():
                view = explanation.systems[system_index]
                grades = samples[sample_id]["expected_output"].get("grades", {})
                top = {slot.id for slot in view.slots}
                assert {m.id for m in view.missed} == {d for d, g in grades.items() if g >= 3} - top
                pool = outputs[sample_id]["pool"]
                for missed in view.missed:
                    where = pool.index(missed.id) + 1 if missed.id in pool else None
                    assert missed.pool_rank == where
                assert [m.grade for m in view.missed] == sorted(
                    (m.grade for m in view.missed), reverse=True
                )

    def test_diagnosis_gains_agree_with_the_scores(self, explained, scored):
        """G_obs / G_oracle is RA-nWG and G_pool / G_oracle is PROC; the verdict is the
        diagnosis' class, for every sample and system."""
        for index, results in enumerate(scored):
            classes = [d and d["class"] for d in results.details["diagnosis-at-k"]]
            for row, sample_id in enumerate(results.sample_ids):
                d = explained[sample_id].systems[index].diagnosis
                assert d is not None and d.verdict == classes[row]
                ra_nwg, proc = (results.values(x)[row] for x in ("ra-nwg-at-k", "proc-at-k"))
                if d.g_oracle == 0:
                    assert math.isnan(ra_nwg) and d.verdict is None
                    continue
                assert d.g_obs / d.g_oracle == pytest.approx(ra_nwg, abs=1e-6)
                assert d.g_pool / d.g_oracle == pytest.approx(proc, abs=1e-6)

    def test_q21_by_hand(self, explained):
        """q-21 grades doc-040 5, doc-050 3, doc-041 2: w5 = 1, w3 = min(0.1 * 1/1, 0.25)
        = 0.1, w2 = 0, so G_oracle = 1.1. bm25 puts doc-040 and doc-050 in its top 5 (G_obs
        1.1); the reranker pushes doc-050 to rank 6 for the unlabeled doc-071 (G_obs 1)."""
        bm25, hybrid = explained["q-21"].systems
        assert (bm25.diagnosis.g_obs, bm25.diagnosis.g_pool, bm25.diagnosis.g_oracle) == (
            pytest.approx(1.1),
            pytest.approx(1.1),
            pytest.approx(1.1),
        )
        assert hybrid.diagnosis.g_obs == pytest.approx(1.0)
        assert bm25.missed == () and [m.id for m in hybrid.missed] == ["doc-050"]
        assert explained["q-21"].moved(1) == (["doc-071"], ["doc-050"])
        assert hybrid.scores["retrieval-recall-at-k"] == 0.5
        assert bm25.scores["retrieval-recall-at-k"] == 1.0

    def test_to_dict_is_plain_json(self, explained):
        """to_dict has the question, every field, and moved_in/out after the first system."""
        document = json.loads(json.dumps(explained["q-21"].to_dict()))
        assert document["question"] == "How much does the Plus plan cost per year?"
        second = document["systems"][1]
        assert second["moved_in"] == ["doc-071"] and second["moved_out"] == ["doc-050"]
        assert "moved_in" not in document["systems"][0]
        assert second["slots"][4] == {
            "rank": 5,
            "id": "doc-071",
            "relevance": None,
            "grade": None,
            "utility": None,
            "in_pool": True,
            "pool_rank": 6,
            "snippet": "Archived (2023): The developer API allows 100 requests per minute per key on al…",
            "source": None,  # the quickstart records no label sources
            "text": "Archived (2023): The developer API allows 100 requests per minute per key "
            "on all plans.",
        }
        assert second["diagnosis"]["verdict"] == "fine"

    def test_results_explain_with_kept_outputs(self, quickstart, monkeypatch):
        """Results of .run(system) keep their outputs: explain needs nothing else; the
        dataset is found under its declared name."""
        by_question = {
            json.dumps(s.input, sort_keys=True): _outputs("bm25")[s.id] for s in quickstart.samples
        }
        results = quickstart.with_metrics(["retrieval-mrr"]).run(
            lambda question: by_question[json.dumps(question, sort_keys=True)]
        )
        monkeypatch.chdir(QUICKSTART)
        explanation = engine.explain(results, "q-05")
        (view,) = explanation.systems
        assert [s.id for s in view.slots] == [
            i["id"] for i in _outputs("bm25")["q-05"]["retrieved"][:5]
        ]
        pool = _outputs("bm25")["q-05"]["pool"]
        assert [(m.id, m.pool_rank) for m in view.missed] == [
            ("doc-005", pool.index("doc-005") + 1)
        ]
        assert view.diagnosis is None and set(view.scores) == {"retrieval-mrr"}

    def test_no_pool_and_no_output(self, eng):
        """At K = 2: without actual_output.pool the ranking is the pool; a sample without
        output has no slots and misses every relevant document."""
        dataset = eng.dataset(
            samples=[
                {"id": "a", "expected_output": {"d1": 2, "d2": 1, "d3": 0}},
                {"id": "b", "expected_output": ["d1"]},
            ]
        )
        results = dataset.with_metrics(["retrieval-recall-at-k@2"]).evaluate(
            {"a": ["d3", "d9", "d2"]}, missing="empty"
        )
        a, b = explain([results], dataset=dataset, outputs=[{"a": ["d3", "d9", "d2"]}], k=2)
        view = a.systems[0]
        assert view.pool is None and [s.pool_rank for s in view.slots] == [1, 2]
        assert [(m.id, m.pool_rank) for m in view.missed] == [("d1", None), ("d2", 3)]
        assert not b.systems[0].has_output and b.systems[0].slots == ()
        assert [m.id for m in b.systems[0].missed] == ["d1"]
        assert b.systems[0].scores == {"retrieval-recall-at-k@2": 0.0}

    def test_cutoff_and_curves(self, quickstart):
        """With metrics at K = 1 and 3 the labels shown are those at the chosen K (and every
        metric scored at one K only); the diagnosis is the one at K."""
        specs = ["retrieval-recall-at-k@1", "retrieval-recall-at-k@3", "retrieval-ndcg-at-k@10"]
        specs += ["diagnosis-at-k@1", "diagnosis-at-k@3"]
        results = quickstart.with_metrics(specs).evaluate(QUICKSTART / "outputs" / "bm25.json")
        assert labels_at(results.metrics, 3) == [
            "retrieval-recall-at-k@3",
            "retrieval-ndcg-at-k@10",
            "diagnosis-at-k@3",
        ]
        (found,) = explain([results], ["q-01"], dataset=quickstart, outputs=[_outputs("bm25")], k=3)
        view = found.systems[0]
        assert len(view.slots) == 3 and view.diagnosis.label == "diagnosis-at-k@3"
        assert set(view.scores) == set(labels_at(results.metrics, 3))


class TestWorst:
    def test_lowest_of_one_results(self, scored):
        """One results: the lowest values, NA left out, ties by id."""
        values = scored[0].values("retrieval-mrr")
        ranked = sorted(
            (v, i)
            for i, v in zip(scored[0].sample_ids, values.tolist(), strict=True)
            if not math.isnan(v)
        )
        assert worst(scored[:1], "retrieval-mrr", 4) == [(i, v) for v, i in ranked[:4]]

    def test_largest_drops_of_two(self, scored):
        """Two results: only samples that got worse, the largest drop first."""
        assert worst(scored, "retrieval-recall-at-k", 5) == [("q-21", -0.5), ("q-01", -0.25)]

    def test_lower_is_better(self, scored):
        """For harm (lower is better) a drop is a rise: q-06 went from 0 to 0.2."""
        assert worst(scored, "harm-at-k", 5) == [("q-06", pytest.approx(0.2))]
        assert worst(scored[:1], "harm-at-k", 1)[0][1] == max(scored[0].values("harm-at-k"))

    def test_unknown_label(self, scored):
        with pytest.raises(InputError, match=r"did you mean: retrieval-mrr"):
            worst(scored, "retrieval-mr", 3)


class TestErrors:
    def test_no_outputs_says_how_to_fix(self, scored, quickstart):
        with pytest.raises(InputError, match=r"bm25 kept no outputs: pass the outputs file"):
            explain(scored, ["q-01"], names=SYSTEMS, dataset=quickstart)

    def test_dataset_found_from_its_recorded_source(self, scored, eng):
        """The results record where their dataset was read from (an absolute path), so it
        is found from any working directory, with no config declaring it."""
        assert scored[0].provenance["dataset_source"] == str(QUICKSTART / "dataset.yaml")
        (found,) = explain(scored[:1], ["q-01"], outputs=[_outputs("bm25")], engine=eng)
        assert found.sample_id == "q-01" and found.systems[0].has_output

    def test_dataset_not_found(self, tmp_path, eng):
        """The recorded dataset file is gone and no config declares its name: the error
        says where it was read from and how to pass it."""
        copy = tmp_path / "copy.yaml"
        shutil.copy(QUICKSTART / "dataset.yaml", copy)
        results = eng.dataset(copy).with_metrics(["retrieval-mrr"]).evaluate(_outputs("bm25"))
        copy.unlink()
        message = (
            rf"read from {re.escape(str(copy))}, which no longer exists.*--dataset PATH or NAME"
        )
        with pytest.raises(InputError, match=message):
            explain([results], ["q-01"], outputs=[_outputs("bm25")], engine=eng)

    def test_different_dataset(self, scored, eng):
        other = eng.dataset(samples=[{"id": "q-01", "expected_output": ["doc-001"]}])
        with pytest.raises(InputError, match=r"system 1 was scored on quickstart"):
            explain(scored[:1], ["q-01"], dataset=other, outputs=[_outputs("bm25")])

    def test_unknown_sample(self, scored, quickstart):
        with pytest.raises(InputError, match=r"did you mean: q-21"):
            explain(scored[:1], ["q-210"], dataset=quickstart, outputs=[_outputs("bm25")])

    def test_outputs_count(self, scored, quickstart):
        with pytest.raises(InputError, match=r"1 outputs for 2 results"):
            explain(scored, ["q-01"], dataset=quickstart, outputs=[_outputs("bm25")])


Q21 = """\
q-21: How much does the Plus plan cost per year?
  stratum=factoid topic=billing

bm25: top 5 of 10 retrieved, pool of 30
  rank  id       rel  grade  pool  text
     1  doc-060    -      -     1  The Fernway developer API is rate limited to 600 requests per minute per API ke…
     2  doc-121    -      -     2  Device history is kept for 10 days on the free plan, 30 days on Plus and 1 year…
     3  doc-041    0      2     3  Fernway Cloud Pro costs $9.99 per month and includes everything in Plus, plus m…
     4  doc-040    3      5     4  Fernway Cloud Plus costs $4.99 per month or $49 per year and adds 30 days of hi…
     5  doc-050    1      3     5  Students get 50% off Fernway Cloud Plus with a valid .edu email address, verifi…
  missed: none
  diagnosis-at-k: fine (G_obs 1.1, G_pool 1.1, G_oracle 1.1)

hybrid-rerank: top 5 of 10 retrieved, pool of 30
  rank  id       rel  grade  pool  text
     1  doc-040    3      5     4  Fernway Cloud Plus costs $4.99 per month or $49 per year and adds 30 days of hi…
     2  doc-041    0      2     3  Fernway Cloud Pro costs $9.99 per month and includes everything in Plus, plus m…
     3  doc-060    -      -     1  The Fernway developer API is rate limited to 600 requests per minute per API ke…
     4  doc-121    -      -     2  Device history is kept for 10 days on the free plan, 30 days on Plus and 1 year…
     5  doc-071    -      -     6  Archived (2023): The developer API allows 100 requests per minute per key on al…
  missed: doc-050 (rel 1, grade 3) at pool rank 5
  vs bm25: moved in doc-071; moved out doc-050
  diagnosis-at-k: fine (G_obs 1, G_pool 1.1, G_oracle 1.1)

scores                     bm25  hybrid-rerank        Δ
retrieval-hit-at-k       1.0000         1.0000  +0.0000
retrieval-recall-at-k    1.0000         0.5000  -0.5000
retrieval-mrr            0.2500         1.0000  +0.7500
retrieval-ndcg-at-k@10   0.4624         0.9243  +0.4620
retrieval-map            0.3250         0.6667  +0.3417
context-precision-at-k   0.3250         1.0000  +0.6750
coverage-recall-at-k         NA             NA       NA
answer-containment-at-k  1.0000         1.0000  +0.0000
ra-nwg-at-k              1.0000         0.9091  -0.0909
proc-at-k                1.0000         1.0000  +0.0000
pct-proc-at-k            1.0000         0.9091  -0.0909
harm-at-k                0.2000         0.2000  +0.0000
diagnosis-at-k           1.0000         1.0000  +0.0000
"""


class TestCommand:
    def test_q21_text_is_pinned(self, results_files, capsys):
        """`slotwise explain bm25.json hybrid-rerank.json --sample q-21` on the quickstart,
        character for character."""
        outputs = [f"--outputs=outputs/{s}.json" for s in SYSTEMS]
        assert main(["explain", *results_files, *outputs, "--sample", "q-21"]) == 0
        assert capsys.readouterr().out == Q21

    def test_pinned_text_matches_the_files(self, scored):
        """Each slot row of the pinned text is what the outputs file put at that rank, with
        dataset.yaml's labels and the pool rank; each score row is the results' value."""
        expected = _expected()["q-21"]["expected_output"]
        blocks = Q21.split("\n\n")
        for system, block in zip(SYSTEMS, blocks[1:3], strict=True):
            output = _outputs(system)["q-21"]
            rows = [line.split(None, 5) for line in block.splitlines()[2:7]]
            for rank, (shown, item) in enumerate(zip(rows, output["retrieved"], strict=False), 1):
                doc = item["id"]
                relevance = expected["relevance"].get(doc)
                grade = expected["grades"].get(doc)
                assert shown == [
                    str(rank),
                    doc,
                    "-" if relevance is None else str(relevance),
                    "-" if grade is None else str(grade),
                    str(output["pool"].index(doc) + 1),
                    _snippet(item["text"]),
                ]
        for line in blocks[3].splitlines()[1:]:
            label, *cells = line.split()
            row = scored[0].sample_ids.index("q-21")
            values = [r.values(label)[row] for r in scored]
            assert cells[:2] == ["NA" if math.isnan(v) else f"{v:.4f}" for v in values]

    def test_worst_drops(self, results_files, capsys):
        """--worst N --metric M with two files: the largest drops, then each sample."""
        outputs = [f"--outputs=outputs/{s}.json" for s in SYSTEMS]
        code = main(
            [
                "explain",
                *results_files,
                *outputs,
                "--worst",
                "3",
                "--metric",
                "retrieval-recall-at-k",
            ]
        )
        out = capsys.readouterr().out
        assert code == 0
        assert out.startswith(
            "largest drops in retrieval-recall-at-k (hybrid-rerank - bm25): "
            "q-21 -0.5000, q-01 -0.2500\n\nq-21: How much"
        )
        assert "\nq-01: How many days" in out

    def test_run_keep_outputs(self, tmp_path, monkeypatch, capsys):
        """`slotwise run --keep-outputs` writes results that explain alone (the same text as
        with --outputs) and re-score to the same values."""
        monkeypatch.chdir(QUICKSTART)
        paths = []
        for system in SYSTEMS:
            paths.append(str(tmp_path / f"{system}.json"))
            arguments = ["run", "quickstart", "--outputs", f"outputs/{system}.json"]
            arguments += ["--format", "json", "--output", paths[-1], "--keep-outputs"]
            assert main(arguments) == 0
        capsys.readouterr()
        assert main(["explain", *paths, "--sample", "q-21"]) == 0
        assert capsys.readouterr().out == Q21
        kept = engine.read_results(paths[0])
        assert set(kept.outputs or {}) == set(_outputs("bm25"))
        again = engine.Engine(config="slotwise.yaml").dataset("quickstart").evaluate(kept)
        assert again.aggregates == kept.aggregates

    @pytest.mark.slow
    def test_report_of_kept_outputs(self, tmp_path, monkeypatch, capsys):
        """`slotwise report` of results that kept their outputs embeds the sample view
        from any working directory (the results record their dataset's path), and when it
        cannot find the dataset still writes the report, with a warning on stderr that
        says to pass --dataset; without kept outputs, a warning says to keep them."""
        monkeypatch.chdir(QUICKSTART)
        paths = []
        for system in SYSTEMS:
            paths.append(str(tmp_path / f"{system}.json"))
            arguments = ["run", "quickstart", "--outputs", f"outputs/{system}.json"]
            assert (
                main([*arguments, "--format", "json", "--output", paths[-1], "--keep-outputs"]) == 0
            )
        monkeypatch.chdir(tmp_path)
        report = tmp_path / "report.html"
        assert main(["report", *paths, "--output", str(report)]) == 0
        assert '"explain":{' in report.read_text()
        assert "warning" not in capsys.readouterr().err
        for path in paths:  # results that do not say where their dataset came from
            document = json.loads(Path(path).read_text())
            del document["provenance"]["dataset_source"]
            Path(path).write_text(json.dumps(document))
        assert main(["report", *paths, "--output", str(report)]) == 0
        assert '"explain":null' in report.read_text()
        err = capsys.readouterr().err
        assert "slotwise: warning: the report has no per-sample drill-down: cannot find " in err
        assert "--dataset PATH or NAME" in err
        scored = [str(tmp_path / "plain.json")]
        assert (
            main(
                [
                    "run",
                    f"{QUICKSTART}/dataset.yaml",
                    "--outputs",
                    f"{QUICKSTART}/outputs/bm25.json",
                    "--metrics",
                    "retrieval-mrr",
                    "--format",
                    "json",
                    "--output",
                    scored[0],
                ]
            )
            == 0
        )
        capsys.readouterr()
        assert main(["report", *scored, "--output", str(report)]) == 0
        assert (
            "the results kept no outputs: score with `slotwise run ... --keep-outputs`"
            in capsys.readouterr().err
        )

    def test_keep_outputs_is_refused_with_stream(self, capsys):
        """--stream writes rows as it scores: it cannot keep the outputs."""
        arguments = ["run", "--qrels", "q", "--run", "r", "--stream", "--keep-outputs"]
        assert main(arguments) == 2
        assert "--keep-outputs needs every sample in memory" in capsys.readouterr().err

    def test_worst_of_one(self, results_files, scored, capsys):
        """--worst N --metric M with one file: the lowest values."""
        outputs = ["--outputs=outputs/bm25.json", "--worst", "2", "--metric", "retrieval-mrr"]
        assert main(["explain", results_files[0], *outputs]) == 0
        lowest = worst(scored[:1], "retrieval-mrr", 2)
        first = capsys.readouterr().out.splitlines()[0]
        assert first == "lowest retrieval-mrr: " + ", ".join(f"{i} {v:.4f}" for i, v in lowest)

    def test_worst_follows_the_direction(self, results_files, scored, capsys):
        """For harm-at-k lower is better: --worst lists the highest values, highest first,
        headed so; with two files, the largest rises."""
        outputs = ["--outputs=outputs/bm25.json", "--worst", "3", "--metric", "harm-at-k"]
        assert main(["explain", results_files[0], *outputs]) == 0
        values = dict(zip(scored[0].sample_ids, scored[0].values("harm-at-k"), strict=True))
        highest = sorted(values.items(), key=lambda item: (-item[1], item[0]))[:3]
        assert highest[0][1] > 0
        first = capsys.readouterr().out.splitlines()[0]
        assert first == "highest harm-at-k: " + ", ".join(f"{i} {v:.4f}" for i, v in highest)
        both = [f"--outputs=outputs/{s}.json" for s in SYSTEMS]
        assert (
            main(["explain", *results_files, *both, "--worst", "1", "--metric", "harm-at-k"]) == 0
        )
        first = capsys.readouterr().out.splitlines()[0]
        assert first == (
            "largest rises (lower is better) in harm-at-k (hybrid-rerank - bm25): q-06 +0.2000"
        )

    def test_json(self, results_files, capsys):
        outputs = [f"--outputs=outputs/{s}.json" for s in SYSTEMS]
        assert (
            main(["explain", *results_files, *outputs, "--sample", "q-05", "--format", "json"]) == 0
        )
        (document,) = json.loads(capsys.readouterr().out)
        assert document["sample_id"] == "q-05"
        bm25, hybrid = document["systems"]
        assert (
            bm25["diagnosis"]["verdict"] == "selection" and hybrid["diagnosis"]["verdict"] == "fine"
        )
        assert "doc-005" in hybrid["moved_in"] and "doc-005" not in bm25["slots"]

    @pytest.mark.parametrize(
        ("arguments", "message"),
        [
            ([], "bm25 kept no outputs: pass the outputs file it scored (--outputs FILE"),
            (["--outputs", "outputs/bm25.json"], "1 outputs for 2 results"),
            (["--worst", "3"], "--worst needs --metric"),
            (
                ["--sample", "q-99", "--outputs=outputs/bm25.json", "--outputs=outputs/bm25.json"],
                "no such sample",
            ),
            (["--sample", "q-01", "--dataset", "nope"], "no dataset named 'nope'"),
        ],
    )
    def test_errors_exit_2(self, results_files, capsys, arguments, message):
        """Usage and input errors: exit 2 with a message, never a traceback."""
        if "--worst" not in arguments and "--sample" not in arguments:
            arguments = [*arguments, "--sample", "q-01"]
        assert main(["explain", *results_files, *arguments]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err

    def test_dataset_not_declared(self, results_files, tmp_path, monkeypatch, capsys):
        """Outside the quickstart no slotwise.yaml declares its dataset, but the results
        say where it was read from; results that do not: say to pass it."""
        monkeypatch.chdir(tmp_path)
        outputs = [f"--outputs={QUICKSTART}/outputs/{s}.json" for s in SYSTEMS]
        assert main(["explain", *results_files, *outputs, "--sample", "q-01"]) == 0
        capsys.readouterr()
        for path in results_files:
            document = json.loads(Path(path).read_text())
            del document["provenance"]["dataset_source"]
            Path(path).write_text(json.dumps(document))
        assert main(["explain", *results_files, *outputs, "--sample", "q-01"]) == 2
        assert (
            "pass the dataset they were scored on (--dataset PATH or NAME"
            in capsys.readouterr().err
        )
        dataset = f"--dataset={QUICKSTART}/dataset.yaml"
        assert main(["explain", *results_files, *outputs, dataset, "--sample", "q-01"]) == 0

    def test_utility_column_and_no_pool(self, tmp_path, monkeypatch, capsys):
        """A sample with utility labels gets a utility column; without a pool given, the
        ranking is the pool; an unlabeled output shows '-'."""
        (tmp_path / "data.yaml").write_text(
            "samples:\n"
            "  - id: u-1\n"
            '    input: {question: "Which passage helps?"}\n'
            "    expected_output: {relevance: {p1: 1, p2: 0}, utility: {p1: 0.8, p2: -0.25}}\n"
        )
        (tmp_path / "outputs.json").write_text(json.dumps({"u-1": ["p2", "p3", "p1"]}))
        monkeypatch.chdir(tmp_path)
        run = ["run", "data.yaml", "--outputs", "outputs.json", "--metrics", "retrieval-mrr"]
        assert main([*run, "--format", "json", "--output", "r.json"]) == 0
        explaining = ["explain", "r.json", "--outputs", "outputs.json", "--dataset", "data.yaml"]
        assert main([*explaining, "--sample", "u-1", "--k", "2"]) == 0
        assert capsys.readouterr().out == (
            "u-1: Which passage helps?\n"
            "\n"
            "r: top 2 of 3 retrieved, the ranking is the pool\n"
            "  rank  id  rel  utility  pool  text\n"
            "     1  p2    0    -0.25     1  -\n"
            "     2  p3    -        -     2  -\n"
            "  missed: p1 (rel 1) at pool rank 3\n"
            "\n"
            "scores              r\n"
            "retrieval-mrr  0.3333\n"
        )
