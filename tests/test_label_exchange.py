"""Handing a drawn sample to people and reading their grades back (``slotwise labels
export`` / ``import``, engine.io.label_exchange): the handout checked against Label
Studio's own SDK (its config parser and task/annotation validation), the pairs against a
pool derived here from the outputs files by hand, every bad answer named, and the
settling of annotators who disagree against numpy and statistics."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from label_studio_sdk.converter import Converter
from label_studio_sdk.label_interface import LabelInterface

import engine
from engine.analysis.sampling import draw, write_sample
from engine.cli import main
from engine.io.label_exchange import SCALES, Answer, read_answers, resolve

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"
QUESTIONS = QUICKSTART / "questions.yaml"
RUNS = [QUICKSTART / "outputs" / "bm25.json", QUICKSTART / "outputs" / "hybrid-rerank.json"]
SCALE = SCALES["umbrela"]


def _ids() -> list[str]:
    return [s["id"] for s in yaml.safe_load(QUESTIONS.read_text())["samples"]]


def _pooled(queries: list[str], depth: int) -> list[tuple[str, str]]:
    """The pairs the runs' top ``depth`` pool for ``queries``, read from the outputs
    files with json alone (not the engine's pool)."""
    pairs = set()
    for run in RUNS:
        outputs = json.loads(run.read_text())
        for query in queries:
            pairs |= {(query, item["id"]) for item in outputs[query]["retrieved"][:depth]}
    return sorted(pairs)


def _texts() -> dict[str, str]:
    found: dict[str, str] = {}
    for run in RUNS:
        for output in json.loads(run.read_text()).values():
            found |= {item["id"]: item["text"] for item in output["retrieved"]}
    return found


@pytest.fixture
def sampled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """8 of the quickstart's 46 questions drawn uniformly (seed 7), as `slotwise sample` writes."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "SAMPLE.jsonl"
    write_sample(draw(_ids(), 8, seed=7, dataset=str(QUESTIONS)), path)
    return path


def _args(sample: Path, *rest: str, depth: int = 5) -> list[str]:
    runs = [str(r) for r in RUNS]
    return [str(QUESTIONS), "--sample", str(sample), "--runs", *runs, "--depth", str(depth), *rest]


def _queries(sample: Path) -> list[str]:
    return [json.loads(line)["query_id"] for line in sample.read_text().splitlines()]


def _export(sample: Path, fmt: str, output: Path, *extra: str) -> None:
    assert (
        main(["labels", "export", *_args(sample, "--format", fmt, "--output", str(output), *extra)])
        == 0
    )


def _import(sample: Path, output: Path, *answers: Path, extra: tuple[str, ...] = ()) -> int:
    return main(
        ["labels", "import", *_args(sample, "--output", str(output), *extra), *map(str, answers)]
    )


class TestLabelStudio:
    def test_the_sdk_accepts_the_config_and_every_task(self, sampled: Path, tmp_path: Path) -> None:
        """The labelling config parses and validates in label_studio_sdk; each task has
        the data every object tag names; an annotation choosing any grade validates and
        one off the scale does not, as our reader refuses it."""
        _export(sampled, "label-studio", tmp_path / "tasks.json")
        tasks = json.loads((tmp_path / "tasks.json").read_text())
        interface = LabelInterface((tmp_path / "tasks.label-config.xml").read_text())
        interface.validate()
        assert interface.get_control("grade").labels == SCALE.choices
        assert all(interface.validate_task(task) for task in tasks)
        pairs = [(t["data"]["query_id"], t["data"]["doc_id"]) for t in tasks]
        assert sorted(pairs) == _pooled(_queries(sampled), 5)
        texts = _texts()
        assert all(t["data"]["passage"] == texts[t["data"]["doc_id"]] for t in tasks)

        def annotation(choice: str) -> dict[str, Any]:
            value = {"choices": [choice]}
            return {
                "result": [
                    {"from_name": "grade", "to_name": "passage", "type": "choices", "value": value}
                ]
            }

        assert all(interface.validate_annotation(annotation(c)) for c in SCALE.choices)
        assert not interface.validate_annotation(annotation("4 = perfect"))
        assert SCALE.grade_of("4 = perfect") is None

    def test_the_sdks_own_annotation_reads_back(self, sampled: Path, tmp_path: Path) -> None:
        """The annotation the SDK generates for the config (its shape, its completed_by)
        is read as that choice's grade, by that user."""
        _export(sampled, "label-studio", tmp_path / "tasks.json")
        interface = LabelInterface((tmp_path / "tasks.label-config.xml").read_text())
        made = interface.generate_sample_annotation()
        assert made is not None
        (task, *_) = json.loads((tmp_path / "tasks.json").read_text())
        (tmp_path / "export.json").write_text(
            json.dumps([{**task, "id": 1, "annotations": [made]}])
        )
        (answer,), problems = read_answers(tmp_path / "export.json", SCALE)
        choice = made["result"][0]["value"]["choices"][0]
        assert problems == [] and answer.grade == int(choice.split(" = ")[0])
        assert answer.annotator == str(made["completed_by"])

    def test_the_sdks_converter_exports_read_alike(self, sampled: Path, tmp_path: Path) -> None:
        """Label Studio's JSON export of the handout, graded by a user object and a bare
        user id, converted by the SDK's own Converter to its JSON-MIN and CSV exports:
        the three read as the same grades by the same annotators."""
        _export(sampled, "label-studio", tmp_path / "tasks.json")
        config = (tmp_path / "tasks.label-config.xml").read_text()
        rng = np.random.default_rng(5)
        tasks = json.loads((tmp_path / "tasks.json").read_text())
        for number, task in enumerate(tasks, start=1):
            task["id"] = number
            task["annotations"] = [
                {
                    "id": number * 10 + i,
                    "completed_by": who,
                    "result": [
                        {
                            "from_name": "grade",
                            "to_name": "passage",
                            "type": "choices",
                            "value": {"choices": [SCALE.choice(int(rng.integers(0, 4)))]},
                        }
                    ],
                }
                for i, who in enumerate(({"id": 7, "email": "ana@example.org"}, 8))
            ]
        (tmp_path / "export.json").write_text(json.dumps(tasks))
        converter = Converter(config, project_dir=str(tmp_path), download_resources=False)
        converter.convert_to_json_min(
            str(tmp_path / "export.json"), str(tmp_path / "min"), is_dir=False
        )
        converter.convert_to_csv(
            str(tmp_path / "export.json"), str(tmp_path / "csv"), is_dir=False, sep=",", header=True
        )
        read = {}
        for path in (
            tmp_path / "export.json",
            tmp_path / "min" / "result.json",
            tmp_path / "csv" / "result.csv",
        ):
            answers, problems = read_answers(path, SCALE)
            assert problems == []
            read[path.name] = sorted((a.query_id, a.doc_id, a.annotator, a.grade) for a in answers)
        expected = sorted(
            (
                t["data"]["query_id"],
                t["data"]["doc_id"],
                name,
                int(a["result"][0]["value"]["choices"][0][0]),
            )
            for t in tasks
            for a, name in zip(t["annotations"], ("ana@example.org", "8"), strict=True)
        )
        assert read == {"export.json": expected, "result.json": expected, "result.csv": expected}

    def test_export_shapes_users_and_skips(self, tmp_path: Path) -> None:
        """completed_by as an id, as a user object (its email) or absent (the file's
        name); a cancelled annotation is a skip, not a grade; two choices are a problem."""
        data = {"query_id": "q-01", "doc_id": "doc-001"}
        grade = {"from_name": "grade", "to_name": "passage", "type": "choices"}
        tasks = [
            {
                "id": 11,
                "data": data,
                "annotations": [
                    {
                        "completed_by": 3,
                        "result": [{**grade, "value": {"choices": [SCALE.choice(2)]}}],
                    },
                    {
                        "completed_by": {"id": 4, "email": "ana@example.org"},
                        "result": [{**grade, "value": {"choices": ["1"]}}],
                    },
                    {"result": [{**grade, "value": {"choices": [SCALE.choice(0)]}}]},
                    {"completed_by": 5, "was_cancelled": True, "result": []},
                    {
                        "completed_by": 6,
                        "result": [
                            {**grade, "value": {"choices": [SCALE.choice(0), SCALE.choice(3)]}}
                        ],
                    },
                ],
            }
        ]
        path = tmp_path / "project-3-at-2026.json"
        path.write_text(json.dumps(tasks))
        answers, problems = read_answers(path, SCALE)
        assert [(a.annotator, a.grade, a.skipped) for a in answers] == [
            ("3", 2, False),
            ("ana@example.org", 1, False),
            ("project-3-at-2026", 0, False),
            ("5", None, True),
        ]
        (problem,) = problems
        assert problem.pointer == "/0/annotations/4/result" and problem.message.startswith(
            "doc-001 (task 11): 2 grades chosen"
        )

    def test_an_export_on_one_line_past_the_line_limit(self, tmp_path: Path) -> None:
        """Label Studio writes its JSON export on one line: 2,000 tasks with their
        passages (over the 1 MiB a line other inputs are held to) are all read."""
        grade = {"from_name": "grade", "to_name": "passage", "type": "choices"}
        tasks = [
            {
                "id": n,
                "data": {"query_id": f"q{n // 10}", "doc_id": f"d{n}", "passage": "x" * 600},
                "annotations": [
                    {
                        "completed_by": 1,
                        "result": [{**grade, "value": {"choices": [SCALE.choice(n % 4)]}}],
                    }
                ],
            }
            for n in range(2000)
        ]
        (tmp_path / "export.json").write_text(json.dumps(tasks))
        assert (tmp_path / "export.json").stat().st_size > 2**20
        answers, problems = read_answers(tmp_path / "export.json", SCALE)
        assert problems == [] and [a.grade for a in answers] == [n % 4 for n in range(2000)]

    def test_answers_on_another_scale_are_named(self, tmp_path: Path) -> None:
        """A binary handout read as umbrela: every task and row is named, none read."""
        binary = SCALES["binary"]
        (tmp_path / "ls.json").write_text(
            json.dumps(
                [
                    {
                        "data": {"query_id": "q-01", "doc_id": "doc-001", "scale": "binary"},
                        "annotations": [],
                    }
                ]
            )
        )
        (tmp_path / "rows.csv").write_text("query_id,doc_id,scale,grade\nq-01,doc-001,binary,1\n")
        for name, where in (("ls.json", ("/0/data/scale", None)), ("rows.csv", ("", 2))):
            answers, (problem,) = read_answers(tmp_path / name, SCALE)
            assert answers == [] and (problem.pointer, problem.line) == where
            assert problem.message == "doc-001: graded on the 'binary' scale, not 'umbrela'"
            assert read_answers(tmp_path / name, binary)[1] == []


class TestCsvAndJsonl:
    def test_a_filled_in_csv_as_excel_saves_it(
        self, sampled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The handout's CSV, filled in and saved with a byte-order mark and CRLF, one
        grade given as its choice text: each pair's label is the grade written, its
        source human, its provenance the annotator, the line and the design's SHA-256."""
        _export(sampled, "csv", tmp_path / "handout.csv")
        text = (tmp_path / "handout.csv").read_text(encoding="utf-8")
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
        assert rows[0]["scale_guide"] == SCALE.guide and rows[0]["scale"] == "umbrela"
        assert sorted((r["query_id"], r["doc_id"]) for r in rows) == _pooled(_queries(sampled), 5)
        wanted = {}
        for number, row in enumerate(rows):
            grade = number % 4
            wanted[(row["query_id"], row["doc_id"])] = grade
            row["grade"] = SCALE.choice(grade) if number == 3 else str(grade)
            row["annotator"] = "maria"
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\r\n")
        writer.writeheader()
        writer.writerows(rows)
        (tmp_path / "maria.csv").write_bytes(b"\xef\xbb\xbf" + out.getvalue().encode("utf-8"))
        assert _import(sampled, tmp_path / "human.yaml", tmp_path / "maria.csv") == 0
        human = yaml.safe_load((tmp_path / "human.yaml").read_text())["samples"]
        assert [s["id"] for s in human] == _queries(sampled)
        got = {(s["id"], d): g for s in human for d, g in s["expected_output"]["relevance"].items()}
        assert got == wanted
        design = (tmp_path / "SAMPLE.design.json").read_bytes()
        units = {json.loads(u)["query_id"]: json.loads(u) for u in sampled.read_text().splitlines()}
        first = human[0]
        doc = next(iter(first["expected_output"]["relevance"]))
        assert first["metadata"]["label_sources"][doc] == "human"
        assert first["metadata"]["sample"]["design_sha256"] == hashlib.sha256(design).hexdigest()
        assert (
            first["metadata"]["sample"]["probability"]
            == units[first["id"]]["probability"]
            == 8 / 46
        )
        line = 2 + rows.index(
            next(r for r in rows if (r["query_id"], r["doc_id"]) == (first["id"], doc))
        )
        assert first["metadata"]["human_labels"][doc] == {
            "grades": {"maria": wanted[(first["id"], doc)]},
            "read_from": {"maria": f"{tmp_path / 'maria.csv'}:{line}"},
            "settled": "single",
        }
        assert first["input"] == {"question": yaml.safe_load(QUESTIONS.read_text())["samples"][
            _ids().index(first["id"])]["input"]["question"]}  # fmt: skip
        # the dataset reads back, its labelled samples the drawn ones
        data = engine.Engine(config={}).dataset(tmp_path / "human.yaml")
        assert sorted(data.ids) == sorted(_queries(sampled))
        assert "human labels (" in capsys.readouterr().err

    def test_jsonl_answers_and_multi_line_passages(self, tmp_path: Path) -> None:
        """A JSONL answers file and a CSV whose passage spans lines: each row is located by
        the line it starts on."""
        (tmp_path / "a.jsonl").write_text(
            '{"query_id": "q-01", "doc_id": "doc-001", "grade": 3, "annotator": "li"}\n\n'
            '{"query_id": "q-01", "doc_id": "doc-002", "grade": null}\n'
            '{"query_id": "q-01", "doc_id": "doc-003", "grade": 7}\n'
        )
        answers, problems = read_answers(tmp_path / "a.jsonl", SCALE)
        assert [(a.doc_id, a.grade, a.annotator, a.line) for a in answers] == [
            ("doc-001", 3, "li", 1),
            ("doc-002", None, "a", 3),
        ]
        (problem,) = problems
        assert (problem.line, problem.sample_id) == (4, "q-01")
        assert "grade 7 is not on the umbrela scale (0, 1, 2, 3)" in problem.message
        (tmp_path / "b.csv").write_text(
            'query_id,doc_id,passage,grade\r\nq-01,doc-001,"two\r\nlines",2\r\nq-01,doc-002,one,x\r\n'
        )
        answers, problems = read_answers(tmp_path / "b.csv", SCALE)
        assert [(a.doc_id, a.line) for a in answers] == [("doc-001", 2)]
        assert (
            problems[0].line == 4 and "grade 'x' is not on the umbrela scale" in problems[0].message
        )


class TestEveryProblemNamed:
    def test_bad_rows_exit_2_each_named_nothing_written(
        self, sampled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Unknown query, a query not drawn, a document outside the pool, a grade off the
        scale, an annotator twice, two annotators disagreeing, and every pooled pair left
        ungraded: each listed with file, line and reason; exit 2 and no dataset."""
        drawn = _queries(sampled)
        pooled = _pooled(drawn, 5)
        not_drawn = next(q for q in _ids() if q not in drawn)
        (q, d), (q2, d2) = pooled[0], pooled[1]
        lines = [
            "query_id,doc_id,grade,annotator",
            "q-999,doc-001,2,ana",  # 2
            f"{not_drawn},doc-001,2,ana",  # 3
            f"{q},doc-999,1,ana",  # 4
            f"{q},{d},4,ana",  # 5
            f"{q2},{d2},3,ana",  # 6
            f"{q2},{d2},2,ana",  # 7
            f"{q},{d},1,ben",  # 8
            f"{q},{d},2,cy",  # 9
        ]
        (tmp_path / "answers.csv").write_text("\n".join(lines) + "\n")
        capsys.readouterr()
        assert _import(sampled, tmp_path / "human.yaml", tmp_path / "answers.csv") == 2
        err = capsys.readouterr().err
        where = str(tmp_path / "answers.csv")
        expected = [
            f"{where}:2 sample 'q-999': doc-001: unknown query id 'q-999' (not in the dataset)",
            f"{where}:3 sample '{not_drawn}': doc-001: the query is not in the sample",
            f"{where}:4 sample '{q}': doc-999: unknown document id 'doc-999': not among the query's pooled pairs",
            f"{where}:5 sample '{q}': {d}: grade '4' is not on the umbrela scale (0, 1, 2, 3)",
            f"{where}:7 sample '{q2}': {d2}: ana graded it twice: 3 ({where}:6) and 2 ({where}:7)",
            f"sample '{q}': {d}: annotators disagree: ben 1 ({where}:8), cy 2 ({where}:9) (choose --resolve)",
        ]
        for line in expected:
            assert f"  {line}\n" in err
        ungraded = [p for p in pooled if p not in ((q, d), (q2, d2))]
        for query, doc in ungraded:
            assert f"  sample '{query}': {doc}: not graded\n" in err
        count = len(expected) + len(ungraded)
        assert (
            f"cannot read the human labels: {count} problem(s), listed above; nothing written"
            in err
        )
        assert not (tmp_path / "human.yaml").exists()


class TestSettling:
    def _answers(self, grades: dict[str, list[int]]) -> list[Answer]:
        return [
            Answer("q", doc, f"a{i}", g, "f.csv", line=2 + i)
            for doc, given in grades.items()
            for i, g in enumerate(given)
        ]

    def test_each_rule_against_numpy_and_statistics(self) -> None:
        rng = np.random.default_rng(3)
        grades = {
            f"d{i}": rng.integers(0, 4, size=int(rng.integers(1, 6))).tolist() for i in range(200)
        }
        answers = self._answers(grades)
        expected = [("q", doc) for doc in grades]
        rules: dict[str, Any] = {"mean": np.mean, "median": np.median, "min": np.min, "max": np.max}
        for how, rule in rules.items():
            found = resolve(answers, expected, queries=["q"], sampled=["q"], how=how)
            assert found.labels == {
                ("q", d): pytest.approx(float(rule(g))) for d, g in grades.items()
            }
        untied = {d: g for d, g in grades.items() if len(statistics.multimode(g)) == 1}
        found = resolve(
            self._answers(untied),
            [("q", d) for d in untied],
            queries=["q"],
            sampled=["q"],
            how="majority",
        )
        assert found.labels == {("q", d): float(statistics.mode(g)) for d, g in untied.items()}
        assert found.grades[("q", next(iter(untied)))] == {
            f"a{i}": g for i, g in enumerate(next(iter(untied.values())))
        }

    def test_a_tie_and_no_rule_are_named(self) -> None:
        answers = self._answers({"d1": [0, 3], "d2": [2, 2, 1]})
        expected = [("q", "d1"), ("q", "d2")]
        with pytest.raises(engine.InputError) as tie:
            resolve(answers, expected, queries=["q"], sampled=["q"], how="majority")
        (problem,) = tie.value.problems
        assert (
            problem.message
            == "d1: annotators disagree: a0 0 (f.csv:2), a1 3 (f.csv:3) (a tie, no majority)"
        )
        with pytest.raises(engine.InputError) as none:
            resolve(answers, expected, queries=["q"], sampled=["q"])
        assert len(none.value.problems) == 2


def test_pair_units_grade_the_drawn_pairs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pair sample: the handout is the drawn pairs (texts from the runs or --corpus), a
    pooled pair that was not drawn is outside the sample, and each pair's label carries
    its own stratum and probability."""
    monkeypatch.chdir(tmp_path)
    pooled = _pooled(_ids(), 10)
    queries, docs = zip(*pooled, strict=True)
    sample = tmp_path / "PAIRS.jsonl"
    write_sample(draw(list(queries), 12, doc_ids=list(docs), seed=1), sample)
    units = [json.loads(u) for u in sample.read_text().splitlines()]
    _export(sample, "jsonl", tmp_path / "pairs.jsonl", "--corpus", str(QUICKSTART / "corpus.jsonl"))
    rows = [json.loads(line) for line in (tmp_path / "pairs.jsonl").read_text().splitlines()]
    assert [(r["query_id"], r["doc_id"]) for r in rows] == [
        (u["query_id"], u["doc_id"]) for u in units
    ]
    assert rows[0]["scale_guide"] == {str(g): w for g, w in SCALE.grades}
    for row in rows:
        row["grade"] = 1
    drawn = {(u["query_id"], u["doc_id"]) for u in units}
    outside = next(p for p in pooled if p not in drawn and p[0] == units[0]["query_id"])
    extra = {"query_id": outside[0], "doc_id": outside[1], "grade": 0}
    (tmp_path / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*rows, extra]))
    assert _import(sample, tmp_path / "human.json", tmp_path / "answers.jsonl", extra=()) == 2
    (tmp_path / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _import(sample, tmp_path / "human.json", tmp_path / "answers.jsonl") == 0
    human = json.loads((tmp_path / "human.json").read_text())["samples"]
    labelled = {(s["id"], d) for s in human for d in s["expected_output"]["relevance"]}
    assert labelled == drawn
    first = units[0]
    (mine,) = [s for s in human if s["id"] == first["query_id"]]
    assert (
        mine["metadata"]["sample"]["pairs"][first["doc_id"]]["probability"] == first["probability"]
    )


def test_a_drawn_query_no_run_retrieved_for(
    sampled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A drawn query the runs have no output for has nothing to grade: both commands name
    it, and the import writes it without labels (PPI then counts it unlabelled)."""
    gone = _queries(sampled)[0]
    runs = []
    for run in RUNS:
        outputs = json.loads(run.read_text())
        del outputs[gone]
        runs.append(tmp_path / run.name)
        runs[-1].write_text(json.dumps(outputs))
    common = [str(QUESTIONS), "--sample", str(sampled), "--runs", *map(str, runs), "--depth", "3"]
    capsys.readouterr()
    assert (
        main(
            [
                "labels",
                "export",
                *common,
                "--output",
                str(tmp_path / "h.jsonl"),
                "--format",
                "jsonl",
            ]
        )
        == 0
    )
    named = f"1 query drawn with no pooled pair, nothing to grade (no task): {gone}"
    assert named in capsys.readouterr().err
    rows = [json.loads(line) for line in (tmp_path / "h.jsonl").read_text().splitlines()]
    assert gone not in {r["query_id"] for r in rows}
    answers = "".join(json.dumps({**r, "grade": 2, "annotator": "li"}) + "\n" for r in rows)
    (tmp_path / "a.jsonl").write_text(answers)
    assert (
        main(
            [
                "labels",
                "import",
                *common,
                "--output",
                str(tmp_path / "human.jsonl"),
                str(tmp_path / "a.jsonl"),
            ]
        )
        == 0
    )
    assert named.replace("(no task)", "(written without labels)") in capsys.readouterr().err
    human = {
        s["id"]: s for s in map(json.loads, (tmp_path / "human.jsonl").read_text().splitlines())
    }
    assert "expected_output" not in human[gone] and len(human) == 8


def test_the_format_by_the_outputs_suffix(
    sampled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --format: .json is Label Studio's (with its config), .jsonl and .csv
    theirs; another suffix is a usage error naming --format."""
    for name in ("t.json", "t.jsonl", "t.csv"):
        assert main(["labels", "export", *_args(sampled, "--output", str(tmp_path / name))]) == 0
    assert isinstance(json.loads((tmp_path / "t.json").read_text()), list)
    assert (tmp_path / "t.label-config.xml").is_file()
    assert (tmp_path / "t.csv").read_text().startswith("task,query_id,doc_id,")
    capsys.readouterr()
    assert main(["labels", "export", *_args(sampled, "--output", str(tmp_path / "t.txt"))]) == 2
    assert "name the format with --format" in capsys.readouterr().err


def test_the_panels_own_agreement(
    sampled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three annotators, one of whom skipped a third of the tasks: the import prints their
    Krippendorff's alpha (as the krippendorff package computes it, a skipped task
    missing data) and each two's quadratic kappa on the pairs both graded (as
    scikit-learn's cohen_kappa_score)."""
    import krippendorff
    from sklearn.metrics import cohen_kappa_score

    _export(sampled, "label-studio", tmp_path / "tasks.json")
    tasks = json.loads((tmp_path / "tasks.json").read_text())
    rng = np.random.default_rng(11)
    truth = rng.integers(0, 4, size=len(tasks))
    names = ["ana", "ben", "cy"]
    grades = np.full((3, len(tasks)), np.nan)
    for number, task in enumerate(tasks):
        task["id"] = number + 1
        task["annotations"] = []
        for who, name in enumerate(names):
            if who == 2 and number % 3 == 0:
                task["annotations"].append(
                    {"completed_by": {"email": name}, "was_cancelled": True, "result": []}
                )
                continue
            grade = int(np.clip(truth[number] + rng.choice([-1, 0, 0, 0, 1]), 0, 3))
            grades[who, number] = grade
            value = {"choices": [SCALE.choice(grade)]}
            result = [
                {"from_name": "grade", "to_name": "passage", "type": "choices", "value": value}
            ]
            task["annotations"].append({"completed_by": {"email": name}, "result": result})
    (tmp_path / "export.json").write_text(json.dumps(tasks))
    capsys.readouterr()
    assert (
        _import(
            sampled, tmp_path / "human.yaml", tmp_path / "export.json", extra=("--resolve", "mean")
        )
        == 0
    )
    err = capsys.readouterr().err
    alpha = {
        level: krippendorff.alpha(reliability_data=grades, level_of_measurement=level)
        for level in ("nominal", "ordinal", "interval")
    }
    assert (
        f"agreement among the 3 annotators on the {len(tasks):,} pairs graded by two or more: "
        f"Krippendorff's alpha  nominal {alpha['nominal']:.4f}  ordinal {alpha['ordinal']:.4f}  "
        f"interval {alpha['interval']:.4f}"
    ) in err
    for first, second in ((0, 1), (0, 2), (1, 2)):
        both = ~np.isnan(grades[first]) & ~np.isnan(grades[second])
        kappa = cohen_kappa_score(grades[first, both], grades[second, both], weights="quadratic")
        line = f"  {names[first]} ~ {names[second]}: quadratic kappa {kappa:.4f} on {int(both.sum()):,} pairs"
        assert line in err.splitlines()
    skipped = sum(1 for n in range(len(tasks)) if n % 3 == 0)
    assert (
        f"and {skipped} task(s) skipped by an annotator whose pair another annotator graded" in err
    )
