"""Datasets and outputs given as documents (JSONL, JSON, YAML) read by the workers of a Ray
cluster of two nodes (issue 65): the numbers of one process reading the same documents,
bit for bit, whatever the files and byte ranges; every problem named as one process names
it; the driver reads no document."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import connected_cluster

import engine
from engine.errors import InputError
from engine.evaluation.results import Results
from engine.io import files, shards, sources

METRICS = [
    "retrieval-ndcg-at-k@10",
    "retrieval-map",
    "retrieval-mrr",
    "retrieval-recall-at-k@20",
    "retrieval-judged-at-k@10",
]


def _data(count: int, seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Samples with 1-12 graded labels, an input and metadata; outputs of 1-30 ids
    (repeats included), some with a pool; every 13th sample has no output, and one
    output is for no sample."""
    rng = random.Random(seed)
    samples, outputs = [], {}
    for i in range(count):
        judged = rng.sample(range(40), rng.randint(1, 12))
        samples.append(
            {
                "id": f"q{i:04d}",
                "input": f"question {i}",
                "expected_output": {f"d{j}": rng.randint(0, 3) for j in judged},
                "metadata": {"topic": f"t{i % 5}"},
            }
        )
        if i % 13:
            ranked = [f"d{j}" for j in rng.choices(range(40), k=rng.randint(1, 30))]
            pool = sorted(set(ranked) | {f"d{j}" for j in rng.sample(range(40), 5)})
            outputs[f"q{i:04d}"] = {"retrieved": ranked, "pool": pool} if i % 3 else ranked
    outputs["not-a-sample"] = ["d1"]
    return samples, outputs


def _jsonl(path: Path, records: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def _output_lines(outputs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"id": key, "actual_output": value} for key, value in outputs.items()]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One dataset file and one outputs file, and the same documents in shards of mixed
    formats: the dataset as a JSON document, a JSONL file and a YAML document, the
    outputs as a JSON object, a JSONL file and a gzipped one."""
    root = tmp_path_factory.mktemp("documents")
    samples, outputs = _data(420)
    lines = _output_lines(outputs)
    _jsonl(root / "mixed" / "b.jsonl", samples[100:300])
    (root / "mixed" / "a.json").write_text(json.dumps({"samples": samples[:100]}))
    (root / "mixed" / "c.yaml").write_text(yaml.safe_dump({"samples": samples[300:]}))
    keys = list(outputs)
    (root / "outs" / "1.json").parent.mkdir()
    (root / "outs" / "1.json").write_text(json.dumps({k: outputs[k] for k in keys[250:]}))
    _jsonl(root / "outs" / "2.jsonl", lines[:120])
    _jsonl(root / "outs" / "3.jsonl", lines[120:250])
    (root / "outs" / "4.jsonl.gz").write_bytes(
        gzip.compress((root / "outs" / "3.jsonl").read_bytes())
    )
    (root / "outs" / "3.jsonl").unlink()  # (a compressed file: read whole)
    dataset = _jsonl(root / "dataset.jsonl", samples)
    outputs_file = _jsonl(root / "outputs.jsonl", lines)
    local = engine.Engine(config={}, executor="local")
    return {
        "dataset": dataset,
        "outputs": outputs_file,
        "expected": local.dataset(dataset).with_metrics(METRICS).evaluate(outputs_file),
        "mixed": root / "mixed",
        "outs": root / "outs",
        "root": root,
    }


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """Two worker nodes of one CPU each, this module's driver connected to them."""
    with connected_cluster(2) as address:
        yield address


@pytest.fixture
def small_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    """JSONL files cut into ranges of about 4 KiB (the dataset's into some 20)."""
    from engine.evaluation import distributed
    from engine.io import sharded

    monkeypatch.setattr(sharded, "RANGE_BYTES", 1 << 12)
    monkeypatch.setattr(distributed, "LEAST_RANGE", 1 << 10)


@pytest.fixture
def driver_reads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver may list the files but not open one: the workers read them."""

    def refuse(where: Any, *_: Any, **__: Any) -> Any:
        raise AssertionError(f"the driver read {where}")

    for name in ("read_lines", "open_stream", "open_file"):
        monkeypatch.setattr(shards, name, refuse)
    monkeypatch.setattr(files, "open_binary", refuse)


def _ray(**inputs: Any) -> Results:
    return engine.Engine(config={}, executor="ray").evaluate_stream(METRICS, **inputs)


def _same(got: Results, expected: Results) -> None:
    """The same summaries (means, n, na, errors, CIs), hash, samples and diagnostics."""
    assert got.summary() == expected.summary()
    assert got.dataset_hash == expected.dataset_hash
    assert got.samples == expected.samples
    assert got.diagnostics == expected.diagnostics


def _written(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text())
    for key in ("created", "executor", "chunk_size", "dataset_source"):
        document["provenance"].pop(key, None)
    return document


@pytest.mark.slow
@pytest.mark.usefixtures("small_ranges")
class TestOnWorkers:
    @pytest.mark.usefixtures("driver_reads_nothing")
    def test_one_jsonl_file_in_ranges(self, cluster: str, data: dict[str, Any]) -> None:
        """One JSONL dataset and one JSONL outputs file, each read in byte ranges by the
        workers (the driver opens neither): one process's numbers reading them in memory,
        a sample with no output an error row, the unknown output named."""
        expected = data["expected"]
        assert expected.diagnostics.unknown_output_ids == ("not-a-sample",)
        assert len(expected.diagnostics.errors) == 33  # the samples 0, 13, ..., 416
        for chunk_size in (50, 1000):
            got = _ray(dataset=data["dataset"], outputs=data["outputs"], chunk_size=chunk_size)
            _same(got, expected)
            assert got.provenance["executor"] == "ray"

    def test_rows_written_as_one_process_writes_them(
        self, cluster: str, data: dict[str, Any], tmp_path: Path
    ) -> None:
        """The per-sample rows written from the workers' mixed shards (JSON, JSONL and
        YAML samples; JSON and JSONL outputs) are the bytes one process writes for the one
        JSONL file of each (but the dataset's name, given, and the source it was read
        from); with ``missing="empty"`` too."""
        for missing in ("error", "empty"):
            engine.Engine(config={}, executor="local").evaluate_stream(
                METRICS,
                dataset=data["dataset"],
                outputs=data["outputs"],
                chunk_size=64,
                missing=missing,
                scores=tmp_path / "local.json",
            )
            got = _ray(
                dataset=data["mixed"],
                outputs=data["outs"],
                chunk_size=64,
                missing=missing,
                scores=tmp_path / "ray.json",
                name="dataset",
            )
            written = _written(tmp_path / "ray.json")
            assert written == _written(tmp_path / "local.json")
            assert len(written["samples"]) == 420
            assert got.provenance["missing_outputs"] == missing

    def test_mixed_shards_as_one_process_reads_them(
        self, cluster: str, data: dict[str, Any]
    ) -> None:
        """The mixed shards give one process's numbers for the same shards read here, and
        named by URIs (``file://``: pyarrow's filesystem, as for a remote store) too."""
        local = engine.Engine(config={}, executor="local")
        expected = local.dataset(data["mixed"]).with_metrics(METRICS).evaluate(data["outs"])
        _same(_ray(dataset=data["mixed"], outputs=data["outs"], chunk_size=70), expected)
        outs = sorted(f"file://{path}" for path in data["outs"].iterdir())
        got = _ray(dataset=f"file://{data['mixed']}", outputs=outs, chunk_size=70)
        _same(got, expected)

    def test_compressed_without_a_suffix(
        self, cluster: str, data: dict[str, Any], tmp_path: Path
    ) -> None:
        """A JSONL file gzipped under a plain ``.jsonl`` name, listed in byte ranges: read
        whole by its first range's worker (its content tells), the numbers unchanged."""
        hidden = tmp_path / "outputs.jsonl"
        hidden.write_bytes(gzip.compress(data["outputs"].read_bytes()))
        assert hidden.stat().st_size > 4 << 10  # (cut into ranges when listed)
        _same(_ray(dataset=data["dataset"], outputs=hidden), data["expected"])

    def test_a_results_file_as_outputs(
        self, cluster: str, data: dict[str, Any], tmp_path: Path
    ) -> None:
        """Earlier results that kept their outputs, re-scored: the samples they failed on
        (here: no output) stay error rows, read on a worker, as one process keeps them."""
        local = engine.Engine(config={}, executor="local")
        evaluation = local.dataset(data["dataset"]).with_metrics(METRICS)
        earlier = evaluation.evaluate(data["outputs"], keep_outputs=True)
        document = json.loads(earlier.write("json"))
        for row in document["diagnostics"]["errors"]:  # (not what a missing output says)
            row["error"] = "the system timed out"
        (tmp_path / "results.json").write_text(json.dumps(document))
        expected = local.evaluate_stream(
            METRICS, dataset=data["dataset"], outputs=tmp_path / "results.json"
        )
        reasons = set(dict(expected.diagnostics.errors).values())
        assert (len(expected.diagnostics.errors), reasons) == (33, {"the system timed out"})
        _same(_ray(dataset=data["dataset"], outputs=tmp_path / "results.json"), expected)

    def test_every_problem_as_one_process_names_it(
        self, cluster: str, data: dict[str, Any], tmp_path: Path
    ) -> None:
        """Invalid samples in two ranges of a JSONL file and in a JSON document: every
        problem, with its file, line or JSON pointer and sample id, as one process reports
        each file's."""
        samples, _ = _data(200, seed=3)
        bad = [dict(sample) for sample in samples]
        bad[2]["expected_output"] = {"d1": "high"}
        bad[170]["extra"] = 1
        del bad[171]["id"]
        _jsonl(tmp_path / "ds" / "a.jsonl", bad[:180])
        bad[185]["metadata"] = [1]
        (tmp_path / "ds" / "b.json").write_text(json.dumps({"samples": bad[180:]}))
        expected = []
        for name in ("a.jsonl", "b.json"):
            with pytest.raises(InputError) as one:
                sources.read_dataset(tmp_path / "ds" / name)
            expected += one.value.problems
        a, b = (str(tmp_path / "ds" / name) for name in ("a.jsonl", "b.json"))
        assert [(p.source, p.line, p.sample_id, p.pointer) for p in expected] == [
            (a, 3, "q0002", "/expected_output/d1"),
            (a, 171, "q0170", "/"),
            (a, 172, None, "/"),
            (b, None, "q0185", "/samples/5/metadata"),
        ]
        with pytest.raises(InputError) as error:
            _ray(dataset=tmp_path / "ds", outputs=data["outputs"])
        assert list(error.value.problems) == expected  # (one process stops at a.jsonl)

    def test_one_bad_file_is_one_process_error(self, cluster: str, tmp_path: Path) -> None:
        """A JSONL outputs file with a bad line in a later range: the error one process
        raises, summary and problems."""
        samples, outputs = _data(150, seed=4)
        lines = _output_lines(outputs)
        lines[120]["actual_output"] = {"retrieved": "d1"}
        _jsonl(tmp_path / "ds.jsonl", samples)
        _jsonl(tmp_path / "out.jsonl", lines)
        with pytest.raises(InputError) as one:
            sources.read_outputs(tmp_path / "out.jsonl")
        assert one.value.problems[0].line == 121
        with pytest.raises(InputError) as error:
            _ray(dataset=tmp_path / "ds.jsonl", outputs=tmp_path / "out.jsonl")
        assert list(error.value.problems) == list(one.value.problems)
        assert error.value.summary == one.value.summary

    def test_repeated_ids(self, cluster: str, data: dict[str, Any], tmp_path: Path) -> None:
        """An id twice in one JSONL file (in two of its ranges), and an id in two files:
        the problems one process reports, naming both places."""
        samples, _ = _data(150, seed=5)
        _jsonl(tmp_path / "one" / "a.jsonl", [*samples, samples[3]])
        with pytest.raises(InputError) as one:
            sources.read_dataset(tmp_path / "one" / "a.jsonl")
        (problem,) = one.value.problems
        assert (problem.line, problem.sample_id) == (151, "q0003")
        assert "first at item 3" in problem.message
        with pytest.raises(InputError) as error:
            _ray(dataset=tmp_path / "one", outputs=data["outputs"])
        assert list(error.value.problems) == list(one.value.problems)
        _jsonl(tmp_path / "two" / "a.jsonl", samples[:100])
        _jsonl(tmp_path / "two" / "b.jsonl", samples[90:])
        with pytest.raises(InputError) as one:
            sources.read_dataset(tmp_path / "two")
        assert len(one.value.problems) == 10
        assert f"first in {tmp_path / 'two' / 'a.jsonl'}" in one.value.problems[0].message
        assert one.value.problems[0].source == str(tmp_path / "two" / "b.jsonl")
        with pytest.raises(InputError) as error:
            _ray(dataset=tmp_path / "two", outputs=data["outputs"])
        assert list(error.value.problems) == list(one.value.problems)
        assert error.value.summary == one.value.summary

    def test_outputs_of_another_dataset(
        self, cluster: str, data: dict[str, Any], tmp_path: Path
    ) -> None:
        """Outputs none of whose ids is a sample's: the error of one process."""
        _jsonl(tmp_path / "out.jsonl", [{"id": "x1", "actual_output": ["d1"]}])
        messages = []
        for executor in ("local", "ray"):
            with pytest.raises(InputError, match="outputs do not match the dataset") as error:
                engine.Engine(config={}, executor=executor).evaluate_stream(
                    METRICS, dataset=data["dataset"], outputs=tmp_path / "out.jsonl"
                )
            messages.append(list(error.value.problems))
        assert messages[0] == messages[1]

    def test_a_dataset_file_named_as_one_process_names_it(
        self, cluster: str, data: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """One YAML dataset file that names itself keeps its name (the worker that reads it
        says it), a folder of shards is the folder's name, a name given wins; a metric's
        run-level report cannot be made from samples scored where they were read: the
        results have none, and a warning says so."""
        samples, outputs = _data(40, seed=3)
        for sample in samples:  # grades 1..5, as the set-based diagnosis needs
            sample["expected_output"] = {d: g + 1 for d, g in sample["expected_output"].items()}
        (tmp_path / "help.yaml").write_text(
            yaml.safe_dump({"name": "help-center", "samples": samples})
        )
        (tmp_path / "outputs.json").write_text(json.dumps(outputs))
        inputs = {"dataset": tmp_path / "help.yaml", "outputs": tmp_path / "outputs.json"}
        local = engine.Engine(config={}, executor="local")
        metrics = [*METRICS, "diagnosis-at-k@5"]
        expected = (
            local.dataset(inputs["dataset"]).with_metrics(metrics).evaluate(inputs["outputs"])
        )
        assert expected.dataset_name == "help-center" and expected.reports["diagnosis-at-k@5"]
        on_ray = engine.Engine(config={}, executor="ray")
        got = on_ray.evaluate_stream(metrics, **inputs)
        assert got.dataset_name == "help-center" and got.reports == {}
        assert "evaluation.reports_omitted" in caplog.text
        assert got.summary() == expected.summary()
        assert _ray(dataset=data["mixed"], outputs=data["outs"]).dataset_name == "mixed"
        assert _ray(**inputs, name="given").dataset_name == "given"

    def test_cli(self, cluster: str, data: dict[str, Any], tmp_path: Path) -> None:
        """``slotwise run DIR --outputs DIR --executor ray`` writes the document one
        process writes for the one file of each; a bad sample exits 2 naming it."""
        env = {**os.environ, "RAY_ADDRESS": cluster}
        out = {}
        for name, dataset, outputs, extra in (
            ("local", data["dataset"], data["outputs"], []),
            ("ray", data["mixed"], data["outs"], ["--executor", "ray"]),
        ):
            done = _cli(
                "run", str(dataset), "--outputs", str(outputs), *extra, "--missing", "empty",
                "--format", "json", "--output", str(tmp_path / f"{name}.json"), env=env,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            out[name] = _written(tmp_path / f"{name}.json")
            out[name]["dataset"].pop("name")  # (the file's, the folder's)
        assert out["ray"] == out["local"]
        assert len(out["ray"]["samples"]) == 420
        config = tmp_path / "slotwise.yaml"  # a dataset declared by name: its files, its name
        config.write_text(
            yaml.safe_dump(
                {
                    "datasets": {
                        "docs": {"path": str(data["dataset"]), "outputs": str(data["outputs"])}
                    }
                }
            )
        )
        declared = _cli(
            "-v", "--config", str(config), "run", "docs", "--executor", "ray", "--missing",
            "empty", "--format", "json", env=env,
        )  # fmt: skip
        assert declared.returncode == 0, declared.stderr
        assert "evaluation.documents" in declared.stderr  # the workers read the files
        document = json.loads(declared.stdout)
        assert document["dataset"]["name"] == "docs"
        assert document["summary"] == out["local"]["summary"]
        samples, _ = _data(20, seed=6)
        samples[4]["expected_output"] = {"d1": "high"}
        _jsonl(tmp_path / "bad.jsonl", samples)
        done = _cli(
            "run",
            str(tmp_path / "bad.jsonl"),
            "--outputs",
            str(data["outputs"]),
            "--executor",
            "ray",
            env=env,
        )
        assert done.returncode == 2
        assert f"{tmp_path / 'bad.jsonl'}:5 sample 'q0004'" in done.stderr
        assert "Traceback" not in done.stderr


def _cli(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "engine.cli", *argv, "--metrics", ",".join(METRICS)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
