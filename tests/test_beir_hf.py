"""BEIR folders and Hugging Face ``datasets`` folders as datasets (issue 64): ``beir:PATH``,
``hf:PATH``, ``#SPLIT``, or found by their layout wherever a dataset is named.

The folders are made here in exactly the layouts BEIR's ``GenericDataLoader`` reads
(``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv`` with the header ``query-id
corpus-id score``) and the real ``datasets`` package writes (``save_to_disk`` of a
``DatasetDict``, of one folder per config as BEIR's Hub copies have them, and the Hub's
``<config>/<split>-00000-of-00001.parquet`` files), no network. The labels are trec_eval's
test collection's, so each split scored with its run gives pytrec_eval's per-query values
on the same qrels as TREC text.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pytest
import pytrec_eval

import engine
from engine.cli import main
from engine.errors import InputError

DATA = Path(__file__).parent / "data" / "trec_eval"
METRICS = ["AP", "nDCG@10", "P@10"]
PYTREC = {
    "retrieval-map": "map",
    "retrieval-ndcg-at-k@10": "ndcg_cut_10",
    "retrieval-precision-at-k@10": "P_10",
}


@pytest.fixture(scope="module")
def splits() -> dict[str, pd.DataFrame]:
    """trec_eval's qrels as BEIR's columns, cut into a test split (the even queries) and a
    dev split (the odd ones)."""
    qrels = pd.read_csv(
        DATA / "qrels.test",
        sep=r"\s+",
        header=None,
        names=["query-id", "iter", "corpus-id", "score"],
        dtype={"query-id": str, "corpus-id": str, "score": int},
    )[["query-id", "corpus-id", "score"]]
    even = qrels["query-id"].astype(int) % 2 == 0
    return {"test": qrels[even].reset_index(drop=True), "dev": qrels[~even].reset_index(drop=True)}


def _queries(splits: dict[str, pd.DataFrame]) -> pd.DataFrame:
    ids = sorted(set().union(*(set(f["query-id"]) for f in splits.values())))
    return pd.DataFrame({"_id": ids, "text": [f"what does topic {i} ask?" for i in ids]})


def _corpus(splits: dict[str, pd.DataFrame]) -> pd.DataFrame:
    ids = sorted(set().union(*(set(f["corpus-id"]) for f in splits.values())))
    return pd.DataFrame({"_id": ids, "title": "", "text": [f"document {i}" for i in ids]})


def _expected(split: pd.DataFrame) -> dict[str, dict[str, float]]:
    """pytrec_eval's per-query values of trec_eval's run against the split's qrels."""
    qrels: dict[str, dict[str, int]] = {}
    for row in split.itertuples(index=False):
        qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    with (DATA / "results.test").open() as handle:
        run = pytrec_eval.parse_run(handle)
    return pytrec_eval.RelevanceEvaluator(qrels, set(PYTREC.values())).evaluate(run)


def _assert_scores(dataset: engine.Dataset, split: pd.DataFrame) -> None:
    run = engine.run(DATA / "results.test")
    results = dataset.with_metrics(METRICS).evaluate(run, missing="empty")
    table = results.to_arrow()
    ids = table.column(0).to_pylist()
    expected = _expected(split)
    assert sorted(ids) == sorted(expected)
    for label, name in PYTREC.items():
        got = dict(zip(ids, table.column(label).to_pylist(), strict=True))
        want = {qid: values[name] for qid, values in expected.items()}
        assert np.allclose([got[q] for q in want], list(want.values()), rtol=0, atol=1e-12)


def _inputs(dataset: engine.Dataset) -> dict[str, str]:
    table = dataset.columns.table
    ids = dataset.columns.ids.to_pylist()
    return dict(zip(ids, (json.loads(t) for t in table.column("input").to_pylist()), strict=True))


# -- BEIR --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def beir_folder(splits, tmp_path_factory) -> Path:
    """BEIR's layout, as ``beir.util.download_and_unzip`` leaves a dataset."""
    folder = tmp_path_factory.mktemp("beir") / "scifact-like"
    (folder / "qrels").mkdir(parents=True)
    _corpus(splits).to_json(folder / "corpus.jsonl", orient="records", lines=True)
    queries = _queries(splits).assign(metadata=[{} for _ in range(len(_queries(splits)))])
    queries.to_json(folder / "queries.jsonl", orient="records", lines=True)
    for name, frame in splits.items():
        frame.to_csv(folder / "qrels" / f"{name}.tsv", sep="\t", index=False)
    return folder


def test_a_beir_folder_is_found_by_its_layout(beir_folder, splits):
    dataset = engine.dataset(str(beir_folder))
    assert dataset.name == "scifact-like"
    _assert_scores(dataset, splits["test"])
    assert _inputs(dataset)["302"] == "what does topic 302 ask?"


def test_beir_scheme_and_split(beir_folder, splits):
    _assert_scores(engine.dataset(f"beir:{beir_folder}"), splits["test"])
    dev = engine.dataset(f"beir:{beir_folder}#dev")
    assert dev.name == "scifact-like-dev"
    _assert_scores(dev, splits["dev"])


def test_beir_folder_on_the_command_line(beir_folder, splits, tmp_path, capsys):
    out = tmp_path / "scores.parquet"
    for dataset, split in ((str(beir_folder), "test"), (f"beir:{beir_folder}#dev", "dev")):
        run = ["--run", str(DATA / "results.test"), "--metrics", ",".join(METRICS)]
        code = main(["run", dataset, *run, "--format", "parquet", "--output", str(out)])
        assert code == 0, capsys.readouterr().err
        table = pd.read_parquet(out)
        expected = _expected(splits[split])
        got = dict(zip(table.iloc[:, 0], table["retrieval-map"], strict=True))
        assert got.keys() == expected.keys()
        assert np.allclose([got[q] for q in expected], [v["map"] for v in expected.values()])


def test_a_missing_split_is_named_with_those_there(beir_folder):
    with pytest.raises(InputError) as caught:
        engine.dataset(f"beir:{beir_folder}#train")
    (problem,) = caught.value.problems
    assert problem.source == str(beir_folder)
    assert "qrels/train.tsv" in problem.message and "dev, test" in problem.message


def test_a_bad_beir_qrels_line_is_named(tmp_path):
    folder = tmp_path / "broken"
    (folder / "qrels").mkdir(parents=True)
    (folder / "queries.jsonl").write_text('{"_id": "1", "text": "q"}\n')
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\tD1\t1\n1\tD2\tyes\n")
    with pytest.raises(InputError) as caught:
        engine.dataset(str(folder))
    (problem,) = caught.value.problems
    assert (problem.source, problem.line) == (str(folder / "qrels" / "test.tsv"), 3)


# -- Hugging Face datasets ---------------------------------------------------------------------


def _hf(frame: pd.DataFrame) -> datasets.Dataset:
    return datasets.Dataset.from_pandas(frame, preserve_index=False)


@pytest.fixture(scope="module")
def saved_dict(splits, tmp_path_factory) -> Path:
    """A DatasetDict of qrels splits, ``save_to_disk``."""
    folder = tmp_path_factory.mktemp("hf") / "qrels-dict"
    datasets.DatasetDict({name: _hf(frame) for name, frame in splits.items()}).save_to_disk(folder)
    return folder


@pytest.fixture(scope="module")
def saved_configs(splits, tmp_path_factory) -> Path:
    """BEIR on the Hub as ``load_dataset(...).save_to_disk`` leaves it per config:
    ``corpus`` and ``queries`` (one split each, named so) and the qrels' splits."""
    folder = tmp_path_factory.mktemp("hf") / "beir-configs"
    datasets.DatasetDict({"corpus": _hf(_corpus(splits))}).save_to_disk(folder / "corpus")
    datasets.DatasetDict({"queries": _hf(_queries(splits))}).save_to_disk(folder / "queries")
    qrels = datasets.DatasetDict({name: _hf(frame) for name, frame in splits.items()})
    qrels.save_to_disk(folder / "qrels")
    return folder


@pytest.fixture(scope="module")
def hub_parquet(splits, tmp_path_factory) -> Path:
    """The Hub's Parquet layout of a BEIR dataset (mteb's): ``corpus/``, ``queries/`` and
    the qrels in ``default/<split>-00000-of-00001.parquet``."""
    folder = tmp_path_factory.mktemp("hf") / "hub-parquet"
    for config, split, frame in (
        ("corpus", "corpus", _corpus(splits)),
        ("queries", "queries", _queries(splits)),
        ("default", "test", splits["test"]),
        ("default", "dev", splits["dev"]),
    ):
        (folder / config).mkdir(parents=True, exist_ok=True)
        _hf(frame).to_parquet(str(folder / config / f"{split}-00000-of-00001.parquet"))
    (folder / "README.md").write_text("---\nconfigs: []\n---\n")
    return folder


@pytest.mark.parametrize("layout", ["saved_dict", "saved_configs", "hub_parquet"])
def test_hf_folders_by_layout_and_scheme(layout, splits, request):
    folder = request.getfixturevalue(layout)
    _assert_scores(engine.dataset(str(folder)), splits["test"])
    _assert_scores(engine.dataset(f"hf:{folder}"), splits["test"])
    _assert_scores(engine.dataset(f"hf:{folder}#dev"), splits["dev"])
    if layout != "saved_dict":  # with a queries config, each sample has its text
        assert _inputs(engine.dataset(f"hf:{folder}"))["302"] == "what does topic 302 ask?"


def test_one_saved_dataset_needs_no_split(splits, tmp_path, capsys):
    folder = tmp_path / "one"
    _hf(splits["dev"]).save_to_disk(folder)
    _assert_scores(engine.dataset(f"hf:{folder}"), splits["dev"])
    code = main(["run", f"hf:{folder}", "--run", str(DATA / "results.test"), "--metrics", "AP"])
    assert code == 0, capsys.readouterr().err


def test_hf_without_the_split_names_the_parts(hub_parquet):
    with pytest.raises(InputError) as caught:
        engine.dataset(f"hf:{hub_parquet}#train")
    (problem,) = caught.value.problems
    assert "'train'" in problem.message
    for part in ("corpus/corpus", "queries/queries", "default/test", "default/dev"):
        assert part in problem.message


def test_hf_bad_label_names_the_part_and_row(tmp_path):
    folder = tmp_path / "bad"
    frame = pd.DataFrame({"query-id": ["1", "1"], "corpus-id": ["a", "b"], "score": [1.0, np.nan]})
    frame["score"] = frame["score"].astype(object).where(frame["score"].notna(), "high")
    datasets.DatasetDict({"test": _hf(frame.astype({"score": str}))}).save_to_disk(folder)
    with pytest.raises(InputError) as caught:
        engine.dataset(str(folder))
    (problem,) = caught.value.problems
    assert problem.source == f"{folder}:test"
    assert problem.message.startswith("row 1:") and "not a number" in problem.message


def test_a_saved_folder_without_datasets_names_the_extra(saved_dict, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(engine.MissingDependencyError, match=r"slotwise\[hf\]"):
        engine.dataset(str(saved_dict))


def test_split_option_on_the_command_line(beir_folder, hub_parquet, splits, tmp_path, capsys):
    """``--split NAME`` with a folder as DATASET (its path or its reference), streamed or
    not; with anything else it is an error (exit 2)."""
    out = tmp_path / "scores.parquet"
    run = ["--run", str(DATA / "results.test"), "--metrics", "AP", "--format", "parquet"]
    for dataset, stream in ((str(beir_folder), []), (f"hf:{hub_parquet}", ["--stream"])):
        code = main(["run", dataset, "--split", "dev", *stream, *run, "--output", str(out)])
        assert code == 0, capsys.readouterr().err
        table = pd.read_parquet(out)
        got = dict(zip(table.iloc[:, 0], table["retrieval-map"], strict=True))
        expected = _expected(splits["dev"])
        assert got.keys() == expected.keys()
        assert np.allclose([got[q] for q in expected], [v["map"] for v in expected.values()])
    code = main(["run", str(DATA / "qrels.test"), "--split", "dev", *run, "--output", str(out)])
    assert code == 2
    assert "a split is one of a BEIR or Hugging Face folder's" in capsys.readouterr().err
