"""``slotwise run --qrels Q --runs RUN…`` and ``slotwise compare DIR``: many runs given as
files, a directory or a glob. Each run's row holds the means the trec_eval binary's
``-c`` summary gives for that run (map, ndcg_cut_10, P_5), on trec_eval's own test runs
and seeded random ones; a directory and a glob are their files in sorted order; compare
on a directory pairs its results files as when they are named one by one."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from test_trec_eval_binary import run_binary, write_collection
from test_trec_eval_many import _variants

from engine.cli import main

TEST_FILES = Path(__file__).parent / "data" / "trec_eval-10" / "test"
#: slotwise's metric and the trec_eval measure that gives its number with -c.
PEERS = {
    "retrieval-map": "map",
    "retrieval-ndcg-at-k@10": "ndcg_cut_10",
    "retrieval-precision-at-k@5": "P_5",
}


def _binary_all(binary: Path, qrels: Path, run: Path) -> dict[str, str]:
    """The binary's -c 'all' value of each peer measure, as printed (%.4f)."""
    flags = ["-c", "-m", "map", "-m", "ndcg_cut.10", "-m", "P.5"]
    status, out = run_binary(binary, [*flags, str(qrels), str(run)], qrels.parent)
    assert status == 0
    lines = [line.split("\t") for line in out.decode().splitlines()]
    return {name.strip(): value for name, _, value in lines}


def _rows(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[dict[str, str]]:
    capsys.readouterr()
    assert main([*argv, "--metrics", ",".join(PEERS), "--format", "csv"]) == 0
    return list(csv.DictReader(io.StringIO(capsys.readouterr().out)))


def test_each_runs_row_is_the_binarys_summary(
    trec_eval_binary: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    collection = write_collection(tmp_path, 21, queries=30, negative=False)
    runs = [*_variants(collection.run, 21)]
    for qrels, given in (
        (TEST_FILES / "qrels.test", [TEST_FILES / "results.test", TEST_FILES / "results.trunc"]),
        (collection.qrels, runs),
    ):
        rows = _rows(["run", "--qrels", str(qrels), "--runs", *map(str, given)], capsys)
        assert [row["run"] for row in rows] == [str(run) for run in given]
        for row, run in zip(rows, given, strict=True):
            expected = _binary_all(trec_eval_binary, qrels, run)
            assert {metric: row[metric] for metric in PEERS} == {
                metric: expected[measure] for metric, measure in PEERS.items()
            }, run


def test_directory_and_glob(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    collection = write_collection(tmp_path, 22, queries=15, negative=False)
    folder = tmp_path / "runs"
    folder.mkdir()
    for run in _variants(collection.run, 22):
        shutil.move(run, folder / run.name)
    named = sorted(folder.iterdir())
    qrels = ["run", "--qrels", str(collection.qrels), "--runs"]
    listed = _rows([*qrels, *map(str, named)], capsys)
    assert [row["run"] for row in listed] == [str(path) for path in named]
    assert _rows([*qrels, str(folder)], capsys) == listed
    assert _rows([*qrels, str(folder / "*")], capsys) == listed
    assert main([*qrels, str(folder / "none-*"), "--metrics", "retrieval-map"]) == 2
    assert "no file matches" in capsys.readouterr().err
    assert main([*qrels, str(folder), "--metrics", "retrieval-map", "--format", "jsonl"]) == 2
    assert "--runs writes table, csv, json" in capsys.readouterr().err


def test_json_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = [str(TEST_FILES / "results.test"), str(TEST_FILES / "results.trunc")]
    argv = [
        "run",
        "--qrels",
        str(TEST_FILES / "qrels.test"),
        "--runs",
        *runs,
        "--metrics",
        "retrieval-map",
    ]
    capsys.readouterr()
    assert main([*argv, "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [entry["run"] for entry in document["runs"]] == runs
    assert all(entry["summary"]["retrieval-map"]["n"] == 3 for entry in document["runs"])
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "2 runs" in out and "results.trunc: 1 sample(s) had no output" in out


def test_compare_takes_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    qrels = str(TEST_FILES / "qrels.test")
    for name in ("results.test", "results.trunc"):
        argv = [
            "run",
            "--qrels",
            qrels,
            "--run",
            str(TEST_FILES / name),
            "--metrics",
            "retrieval-map",
        ]
        assert main([*argv, "--format", "json", "--output", str(folder / f"{name}.json")]) == 0
    files = sorted(str(path) for path in folder.iterdir())
    capsys.readouterr()
    assert main(["compare", *files, "--format", "json"]) == 0
    one_by_one = capsys.readouterr().out
    assert main(["compare", str(folder), "--format", "json"]) == 0
    assert capsys.readouterr().out == one_by_one
    assert main(["compare", str(folder / "*.json"), "--format", "json"]) == 0
    assert capsys.readouterr().out == one_by_one
