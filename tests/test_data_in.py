"""Qrels and runs in the peers' formats and column names (issue 64, "their data in").

trec_eval's own test collection (tests/data/trec_eval: 3,681 TREC qrels lines, 1,500 run
lines with tied scores) is written by pandas, pyarrow, polars and ranx, never by
slotwise, as Parquet, Arrow, CSV, TSV, JSONL and ranx's own JSON (``Qrels.save``), each
in one peer's column names (ranx's ``q_id``, ir_measures' ``query_id``/``relevance``/
``iteration``, BEIR's ``query-id``/``corpus-id``, trec_eval's ``qid``/``docno``/``sim``/
``run_id``), compressed with and without a suffix, and sharded across formats. Each must give what the TREC text gives, which is pinned:

- ``slotwise trec-eval -q -m all_trec`` against ``out.test.aq``, the binary's own output
  for the text, line for line;
- ``slotwise run`` and ``Engine.evaluate_trec``'s per-query values against pytrec_eval
  on the TREC text (parsed by pytrec_eval itself).

Bad rows are named by file and line (text) or row (Parquet), with the reason.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import pytrec_eval
import ranx

import engine
from engine.cli import main
from engine.errors import InputError
from engine.io import sources, tables_in

METRICS = ["AP", "nDCG@10", "P@10", "RR", "R@100"]
#: pytrec_eval's name of each metric's value, by slotwise's label.
PYTREC = {
    "retrieval-map": "map",
    "retrieval-ndcg-at-k@10": "ndcg_cut_10",
    "retrieval-precision-at-k@10": "P_10",
    "retrieval-mrr": "recip_rank",
    "retrieval-recall-at-k@100": "recall_100",
}


@pytest.fixture(scope="module")
def text() -> tuple[Path, Path, list[str]]:
    base = Path(__file__).parent / "data" / "trec_eval"
    expected = (base / "out.test.aq").read_text().splitlines()
    return base / "qrels.test", base / "results.test", expected


@pytest.fixture(scope="module")
def peer_frames(text: tuple[Path, Path, list[str]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The qrels and run as pandas reads their whitespace-separated text (ids as text)."""
    qrels_path, run_path, _ = text
    qrels = pd.read_csv(
        qrels_path, sep=r"\s+", header=None, names=["qid", "iter", "docno", "rel"], dtype=str
    )
    run = pd.read_csv(
        run_path,
        sep=r"\s+",
        header=None,
        names=["qid", "Q0", "docno", "rank", "sim", "tag"],
        dtype=str,
    )
    qrels["rel"] = qrels["rel"].astype(int)
    run["sim"] = run["sim"].astype(float)
    run["rank"] = run["rank"].astype(int)
    return qrels, run


def _ranx(q: pd.DataFrame, r: pd.DataFrame, folder: Path) -> tuple[Path, Path]:
    """Parquet in ranx's names (q_id, doc_id, score), as ``Qrels.to_parquet`` writes them."""
    qrels = q.rename(columns={"qid": "q_id", "docno": "doc_id", "rel": "score"})
    run = r.rename(columns={"qid": "q_id", "docno": "doc_id", "sim": "score"})
    qrels[["q_id", "doc_id", "score"]].to_parquet(folder / "qrels.parquet", index=False)
    run[["q_id", "doc_id", "score", "tag"]].to_parquet(folder / "run.parquet", index=False)
    return folder / "qrels.parquet", folder / "run.parquet"


def _ir_measures(q: pd.DataFrame, r: pd.DataFrame, folder: Path) -> tuple[Path, Path]:
    """CSV in ir_measures' names (query_id, doc_id, relevance, iteration; score)."""
    qrels = q.rename(
        columns={"qid": "query_id", "docno": "doc_id", "rel": "relevance", "iter": "iteration"}
    )
    run = r.rename(columns={"qid": "query_id", "docno": "doc_id", "sim": "score"})
    qrels.to_csv(folder / "qrels.csv", index=False)
    run[["query_id", "doc_id", "score", "tag"]].to_csv(folder / "run.csv", index=False)
    return folder / "qrels.csv", folder / "run.csv"


def _beir_and_trec_names(q: pd.DataFrame, r: pd.DataFrame, folder: Path) -> tuple[Path, Path]:
    """TSV: the qrels in BEIR's header (query-id corpus-id score), the run in trec_eval's
    words (qid Q0 docno rank sim run_id)."""
    qrels = q.rename(columns={"qid": "query-id", "docno": "corpus-id", "rel": "score"})
    qrels[["query-id", "corpus-id", "score"]].to_csv(folder / "qrels.tsv", sep="\t", index=False)
    r.rename(columns={"tag": "run_id"}).to_csv(folder / "run.tsv", sep="\t", index=False)
    return folder / "qrels.tsv", folder / "run.tsv"


def _jsonl(q: pd.DataFrame, r: pd.DataFrame, folder: Path) -> tuple[Path, Path]:
    """JSONL (pandas' records, one per line) in ranx's names."""
    qrels = q.rename(columns={"qid": "q_id", "docno": "doc_id", "rel": "score"})
    run = r.rename(columns={"qid": "q_id", "docno": "doc_id", "sim": "score"})
    qrels[["q_id", "doc_id", "score"]].to_json(folder / "qrels.jsonl", orient="records", lines=True)
    run[["q_id", "doc_id", "score", "tag"]].to_json(
        folder / "run.jsonl", orient="records", lines=True
    )
    return folder / "qrels.jsonl", folder / "run.jsonl"


def _arrow_from_polars(q: pd.DataFrame, r: pd.DataFrame, folder: Path) -> tuple[Path, Path]:
    """Arrow IPC files written by polars, in slotwise's names, without a suffix."""
    qrels = pl.from_pandas(q).rename({"qid": "query_id", "docno": "doc_id", "rel": "relevance"})
    run = pl.from_pandas(r).rename({"qid": "query_id", "docno": "doc_id", "sim": "score"})
    qrels.write_ipc(folder / "qrels")
    run.select("query_id", "doc_id", "score", "tag").write_ipc(folder / "run")
    return folder / "qrels", folder / "run"


def _gzip_without_suffix(q: pd.DataFrame, r: pd.DataFrame, folder: Path) -> tuple[Path, Path]:
    """gzip'd CSV named ``.dat``: the content, not the name, says what it is."""
    csv_q, csv_r = _ir_measures(q, r, folder)
    for path in (csv_q, csv_r):
        (folder / f"{path.stem}.dat").write_bytes(gzip.compress(path.read_bytes()))
        path.unlink()
    return folder / "qrels.dat", folder / "run.dat"


def _ranx_save(q: pd.DataFrame, r: pd.DataFrame, folder: Path) -> tuple[Path, Path]:
    """ranx's own ``Qrels.save`` and ``Run.save`` as JSON (``{q_id: {doc_id: score}}``);
    the run named after its tag, which JSON does not hold."""
    qrels = {
        qid: dict(zip(g["docno"], g["rel"].tolist(), strict=True)) for qid, g in q.groupby("qid")
    }
    run = {
        qid: dict(zip(g["docno"], g["sim"].tolist(), strict=True)) for qid, g in r.groupby("qid")
    }
    ranx.Qrels.from_dict(qrels).save(str(folder / "qrels.json"))
    ranx.Run.from_dict(run).save(str(folder / "STANDARD.json"))
    return folder / "qrels.json", folder / "STANDARD.json"


WRITERS: dict[str, Callable[[pd.DataFrame, pd.DataFrame, Path], tuple[Path, Path]]] = {
    "json-ranx-save": _ranx_save,
    "parquet-ranx": _ranx,
    "csv-ir_measures": _ir_measures,
    "tsv-beir-trec": _beir_and_trec_names,
    "jsonl-ranx": _jsonl,
    "arrow-polars": _arrow_from_polars,
    "csv-gzip-unnamed": _gzip_without_suffix,
}


@pytest.fixture(scope="module", params=sorted(WRITERS))
def written(request, peer_frames, tmp_path_factory) -> tuple[Path, Path]:
    qrels, run = peer_frames
    return WRITERS[request.param](qrels, run, tmp_path_factory.mktemp(request.param))


def test_trec_eval_gives_the_binarys_bytes_for_every_format(written, text, capsys):
    """``slotwise trec-eval`` of each format prints out.test.aq, the binary's output for
    the TREC text, line for line (each run carries the text's tag, STANDARD)."""
    qrels, run = written
    *_, expected = text
    assert main(["trec-eval", "-q", "-m", "all_trec", str(qrels), str(run)]) == 0
    assert capsys.readouterr().out.splitlines() == expected


def _pytrec(text: tuple[Path, Path, list[str]]) -> dict[str, dict[str, float]]:
    qrels_path, run_path, _ = text
    with qrels_path.open() as q, run_path.open() as r:
        qrels, run = pytrec_eval.parse_qrel(q), pytrec_eval.parse_run(r)
    return pytrec_eval.RelevanceEvaluator(qrels, set(PYTREC.values())).evaluate(run)


def _per_query(results: engine.Results) -> dict[str, dict[str, float]]:
    table = results.to_arrow()
    ids = table.column(0).to_pylist()
    return {label: dict(zip(ids, table.column(label).to_pylist(), strict=True)) for label in PYTREC}


def _assert_pytrec(found: dict[str, dict[str, float]], text) -> None:
    expected = _pytrec(text)
    for label, name in PYTREC.items():
        want = {qid: values[name] for qid, values in expected.items()}
        assert found[label].keys() == want.keys()
        got = np.array([found[label][qid] for qid in want])
        assert np.allclose(got, list(want.values()), rtol=0, atol=1e-12), label


def test_evaluate_trec_per_query_matches_pytrec_eval_for_every_format(written, text):
    qrels, run = written
    _assert_pytrec(_per_query(engine.Engine().evaluate_trec(qrels, run, METRICS)), text)


def test_slotwise_run_reads_every_format(written, text, tmp_path, capsys):
    qrels, run = written
    out = tmp_path / "results.parquet"
    code = main(
        [
            "run",
            "--qrels",
            str(qrels),
            "--run",
            str(run),
            "--metrics",
            ",".join(METRICS),
            "--format",
            "parquet",
            "--output",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr().err
    table = pq.read_table(out)
    ids = table.column(0).to_pylist()
    found = {
        label: dict(zip(ids, table.column(label).to_pylist(), strict=True)) for label in PYTREC
    }
    _assert_pytrec(found, text)


def test_each_format_reads_to_the_columns_of_the_text(written, text):
    """Same queries in the same order, the same documents ranked in the same order, the
    same labels: the columns of the TREC text."""
    qrels_path, run_path, _ = text
    for read, path, kind in (
        (sources.read_qrels, written[0], "relevance"),
        (sources.read_run, written[1], "retrieved"),
    ):
        want = read(qrels_path if kind == "relevance" else run_path)
        got = read(path)
        assert got.ids.to_pylist() == want.ids.to_pylist()
        assert _docs(got, kind) == _docs(want, kind)


def _docs(columns: engine.Columns, kind: str) -> list:
    rows = columns.column(kind).to_pylist()
    if kind == "retrieved":
        return [columns.docs.take(row).to_pylist() for row in rows]
    return [sorted((columns.docs[e["doc"]].as_py(), e["label"]) for e in row or []) for row in rows]


def test_shards_mix_formats(peer_frames, text, tmp_path):
    """One qrels cut into a TREC text shard, a Parquet shard and a TSV shard, and the run
    into JSONL and TREC text: a directory of them reads as the text does, and a run made
    only of tables ranks by its ranks as well as its scores."""
    qrels, run = peer_frames
    folder = tmp_path / "qrels"
    folder.mkdir()
    first, second, third = np.array_split(np.arange(len(qrels)), 3)
    with (folder / "a.txt").open("w") as handle:
        for row in qrels.iloc[first].itertuples():
            handle.write(f"{row.qid} {row.iter} {row.docno} {row.rel}\n")
    qrels.iloc[second].rename(columns={"qid": "q_id", "docno": "doc_id", "rel": "score"})[
        ["q_id", "doc_id", "score"]
    ].to_parquet(folder / "b.parquet", index=False)
    qrels.iloc[third].rename(columns={"qid": "query-id", "docno": "corpus-id", "rel": "score"})[
        ["query-id", "corpus-id", "score"]
    ].to_csv(folder / "c.tsv", sep="\t", index=False)
    runs = tmp_path / "run"
    runs.mkdir()
    head, tail = np.array_split(np.arange(len(run)), 2)
    run.iloc[head].rename(columns={"qid": "query_id", "docno": "doc_id", "sim": "score"})[
        ["query_id", "doc_id", "score"]
    ].to_json(runs / "a.jsonl", orient="records", lines=True)
    with (runs / "b.run").open("w") as handle:
        for row in run.iloc[tail].itertuples():
            handle.write(f"{row.qid} Q0 {row.docno} {row.rank} {row.sim!r} {row.tag}\n")
    qrels_text, run_text, _ = text
    assert _docs(sources.read_qrels(folder), "relevance") == _docs(
        sources.read_qrels(qrels_text), "relevance"
    )
    assert _docs(sources.read_run(runs), "retrieved") == _docs(
        sources.read_run(run_text), "retrieved"
    )
    _assert_pytrec(_per_query(engine.Engine().evaluate_trec(folder, runs, METRICS)), text)


def test_frames_and_dicts_as_ranx_takes_them(peer_frames, text):
    """pandas and polars frames in ranx's names or with ranx's ``*_col`` arguments,
    ranx's own ``Qrels``/``Run`` from dicts, and the dicts themselves."""
    q, r = peer_frames
    ranx_q = q.rename(columns={"qid": "q_id", "docno": "doc_id", "rel": "score"})
    ranx_r = r.rename(columns={"qid": "q_id", "docno": "doc_id", "sim": "score"})
    qrels_dict = {
        qid: dict(zip(g["doc_id"], g["score"].tolist(), strict=True))
        for qid, g in ranx_q.groupby("q_id", sort=False)
    }
    run_dict = {
        qid: dict(zip(g["doc_id"], g["score"].tolist(), strict=True))
        for qid, g in ranx_r.groupby("q_id", sort=False)
    }
    made = [
        (engine.qrels(ranx_q), engine.run(pl.from_pandas(ranx_r))),
        (
            engine.qrels(q, q_id_col="qid", doc_id_col="docno", score_col="rel"),
            engine.run(
                r[["qid", "docno", "sim"]], q_id_col="qid", doc_id_col="docno", score_col="sim"
            ),
        ),
        (engine.qrels(ranx.Qrels.from_dict(qrels_dict)), engine.run(ranx.Run.from_dict(run_dict))),
        (engine.qrels(qrels_dict), engine.run(run_dict)),
        (engine.qrels(pa.Table.from_pandas(ranx_q)), engine.run(pa.Table.from_pandas(ranx_r))),
    ]
    for qrels, run in made:
        _assert_pytrec(_per_query(engine.Engine().evaluate_trec(qrels, run, METRICS)), text)
    dataset = engine.dataset(made[0][0]).with_metrics(METRICS)
    _assert_pytrec(_per_query(dataset.evaluate(made[0][1])), text)


def test_column_names_for_a_dict_are_refused(peer_frames):
    with pytest.raises(TypeError, match="q_id_col"):
        engine.qrels({"q1": {"d1": 1}}, q_id_col="qid")


def test_two_columns_for_the_query_id_are_refused(tmp_path):
    pd.DataFrame({"qid": ["1"], "query_id": ["1"], "doc_id": ["d"], "score": [1.0]}).to_parquet(
        tmp_path / "run.parquet"
    )
    with pytest.raises(InputError) as caught:
        sources.read_run(tmp_path / "run.parquet")
    problem = caught.value.problems[0]
    assert "'query_id' and 'qid'" in problem.message
    assert problem.source == str(tmp_path / "run.parquet")


# -- bad rows, named ---------------------------------------------------------------------------


def test_a_bad_label_in_a_tsv_names_its_line(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("query-id\tcorpus-id\tscore\nq-1\tMED-10\t1\n\nq-1\tMED-11\thigh\n")
    with pytest.raises(InputError) as caught:
        sources.read_qrels(path)
    (problem,) = caught.value.problems
    assert (problem.source, problem.line) == (str(path), 4)  # after the blank line 3
    assert "relevance is not a number" in problem.message
    assert problem.sample_id == "q-1"


def test_a_run_line_with_too_many_fields_names_its_line(tmp_path):
    path = tmp_path / "run.csv"
    path.write_text("q_id,doc_id,score\n1,d1,0.5\n1,d2,0.4,extra\n")
    with pytest.raises(InputError) as caught:
        sources.read_run(path)
    (problem,) = caught.value.problems
    assert (problem.source, problem.line) == (str(path), 3)


def test_a_bad_jsonl_line_is_named(tmp_path):
    path = tmp_path / "run.jsonl"
    lines = [
        {"q_id": "q1", "doc_id": "d1", "score": 2.5},
        {"q_id": "q1", "doc_id": "d2", "score": "n/a"},
    ]
    path.write_text("\n".join(map(json.dumps, lines)) + "\n{not json\n")
    with pytest.raises(InputError) as caught:
        sources.read_run(path)
    (problem,) = caught.value.problems
    assert (problem.source, problem.line) == (str(path), 3)
    assert "malformed JSON" in problem.message
    path.write_text("\n".join(map(json.dumps, lines)) + "\n")
    with pytest.raises(InputError) as caught:
        sources.read_run(path)
    (problem,) = caught.value.problems
    assert (problem.line, problem.sample_id) == (2, "q1")
    assert "score is not a number" in problem.message


def test_a_parquet_run_names_its_row_and_a_repeat(tmp_path):
    path = tmp_path / "run.parquet"
    pd.DataFrame(
        {"q_id": ["q1", "q1", "q2"], "doc_id": ["d1", "d1", "d9"], "score": [1.0, 0.5, np.inf]}
    ).to_parquet(path)
    with pytest.raises(InputError) as caught:
        sources.read_run(path)
    (problem,) = caught.value.problems
    assert problem.source == str(path) and problem.message.startswith("row 2:")
    assert "not a finite number" in problem.message
    pd.DataFrame({"q_id": ["q1", "q1"], "doc_id": ["d1", "d1"], "score": [1.0, 0.5]}).to_parquet(
        path
    )
    with pytest.raises(InputError) as caught:
        engine.Engine().evaluate_trec({"q1": {"d1": 1}}, path, ["P@1"])
    (problem,) = caught.value.problems  # as trec_eval refuses the TREC text of it
    assert problem.message.startswith("row 1: document 'd1' is retrieved twice")
    assert "row 0" in problem.message and problem.source == str(path)


def test_a_bad_shard_is_named_among_mixed_formats(tmp_path):
    (tmp_path / "a.txt").write_text("q1 0 d1 1\n")
    pd.DataFrame({"q_id": ["q2"], "doc_id": ["d2"], "score": ["x"]}).to_parquet(
        tmp_path / "b.parquet"
    )
    with pytest.raises(InputError) as caught:
        sources.read_qrels(tmp_path)
    (problem,) = caught.value.problems
    assert problem.source == str(tmp_path / "b.parquet")
    assert "relevance is not a number" in problem.message


def test_the_cli_names_a_bad_parquet_run_and_exits_2(tmp_path, capsys):
    (tmp_path / "qrels").write_text("q1 0 d1 1\n")
    pd.DataFrame({"q_id": ["q1"], "doc": ["d1"], "score": [1.0]}).to_parquet(tmp_path / "run.pq")
    code = main(
        [
            "run",
            "--qrels",
            str(tmp_path / "qrels"),
            "--run",
            str(tmp_path / "run.pq"),
            "--metrics",
            "P@1",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert str(tmp_path / "run.pq") in err and "doc_id" in err
    assert "Traceback" not in err


def test_a_parquet_file_is_not_utf8_text_no_more(tmp_path):
    """The issue's report: a Parquet run was refused as "not UTF-8 text"."""
    pd.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "score": [1.0]}).to_parquet(tmp_path / "r")
    assert tables_in.format_of(tmp_path / "r") == "parquet"
    assert len(sources.read_run(tmp_path / "r")) == 1


def test_a_frame_run_is_ranked_by_score_and_refuses_a_repeat():
    """As its TREC text: ranked by score (ties by doc id descending), its rank column
    left out; a document twice for a query refused, naming both rows."""
    frame = pd.DataFrame(
        {
            "q_id": ["q1"] * 3,
            "doc_id": ["d1", "d2", "d3"],
            "score": [0.2, 0.9, 0.2],
            "rank": [1, 2, 3],
        }
    )
    ranked = engine.run(frame)
    assert ranked.docs.take(ranked.column("retrieved")[0].values).to_pylist() == ["d2", "d3", "d1"]
    with pytest.raises(InputError) as caught:
        engine.run(pl.from_pandas(frame.assign(doc_id=["d1", "d2", "d1"])))
    (problem,) = caught.value.problems
    assert problem.message.startswith("row 2: document 'd1' is retrieved twice")


def test_streamed_and_dataset_frames_read_the_peers_too(peer_frames, text, tmp_path, capsys):
    """``--stream`` takes table qrels and runs (read whole), and ``engine.dataset`` takes a
    frame in ranx's names as ``engine.qrels`` does."""
    q, r = peer_frames
    qrels, run = _ranx(q, r, tmp_path)
    out = tmp_path / "rows.parquet"
    args = ["--qrels", str(qrels), "--run", str(run), "--metrics", ",".join(METRICS)]
    code = main(["run", "--stream", *args, "--format", "parquet", "--output", str(out)])
    assert code == 0, capsys.readouterr().err
    table = pq.read_table(out)
    ids = table.column(0).to_pylist()
    _assert_pytrec(
        {label: dict(zip(ids, table.column(label).to_pylist(), strict=True)) for label in PYTREC},
        text,
    )
    ranx_q = q.rename(columns={"qid": "q_id", "docno": "doc_id", "rel": "score"})
    dataset = engine.dataset(ranx_q[["q_id", "doc_id", "score"]]).with_metrics(METRICS)
    _assert_pytrec(_per_query(dataset.evaluate(engine.run(run))), text)


def test_validate_and_trec_import_read_tables(peer_frames, tmp_path, capsys):
    """``validate --kind qrels|run`` and ``trec import`` read a table as ``--qrels`` and
    ``--run`` do: as many queries as the TREC text has."""
    q, r = peer_frames
    qrels, run = _beir_and_trec_names(q, r, tmp_path)
    assert main(["validate", "--kind", "qrels", str(qrels)]) == 0
    assert main(["validate", "--kind", "run", str(run)]) == 0
    out = capsys.readouterr().out
    assert f"{qrels}: valid qrels ({q['qid'].nunique()} queries)" in out
    assert f"{run}: valid run ({r['qid'].nunique()} queries)" in out
    dataset, outputs = tmp_path / "data.jsonl", tmp_path / "outputs.json"
    args = ["trec", "import", str(qrels), str(run), "--dataset-out", str(dataset)]
    assert main([*args, "--outputs-out", str(outputs)]) == 0
    assert len(dataset.read_text().splitlines()) == q["qid"].nunique()
    assert len(json.loads(outputs.read_text())) == r["qid"].nunique()


def _mixed_shards(q: pd.DataFrame, r: pd.DataFrame, folder: Path) -> tuple[Path, Path]:
    """The qrels as TREC text and a gzip'd TSV without a suffix; the run as a Parquet
    file named ``.trec`` and TREC text: each larger than the byte ranges below."""
    half_q, half_r = len(q) // 2, len(r) // 2
    (folder / "qrels").mkdir()
    (folder / "run").mkdir()
    with (folder / "qrels" / "a.txt").open("w") as handle:
        for row in q.iloc[:half_q].itertuples():
            handle.write(f"{row.qid} {row.iter} {row.docno} {row.rel}\n")
    tsv = q.iloc[half_q:].rename(columns={"qid": "query-id", "docno": "corpus-id", "rel": "score"})
    text = tsv[["query-id", "corpus-id", "score"]].to_csv(sep="\t", index=False).encode()
    (folder / "qrels" / "b.qrels").write_bytes(gzip.compress(text))
    r.iloc[:half_r].rename(columns={"qid": "q_id", "docno": "doc_id", "sim": "score"})[
        ["q_id", "doc_id", "score"]
    ].to_parquet(folder / "run" / "a.trec", index=False)
    with (folder / "run" / "b.trec").open("w") as handle:
        for row in r.iloc[half_r:].itertuples():
            handle.write(f"{row.qid} Q0 {row.docno} {row.rank} {row.sim!r} {row.tag}\n")
    return folder / "qrels", folder / "run"


def test_byte_ranges_of_tables_and_unnamed_gzip_are_read_whole(peer_frames, text, tmp_path):
    """What a cluster's workers read: the inputs cut into byte ranges of 2 KiB without
    reading a byte (the driver lists), each range read as a worker reads it. A Parquet
    file (named .trec) and a gzip'd TSV (no .gz) are read whole by their first range,
    their other ranges empty; the TREC text's ranges read their lines."""
    from engine.io import sharded

    qrels_dir, run_dir = _mixed_shards(*peer_frames, tmp_path)
    for spec, kind in ((qrels_dir, "qrels"), (run_dir, "run")):
        whole = sharded.Long.of(spec, kind, trec=True)
        ranged = whole.ranged(2048)
        assert len(ranged.shards) > 2 * len(whole.shards)
        pieces = [sharded.rows(ranged, index) for index in range(len(ranged.shards))]
        got = sharded.columns(ranged, pieces)
        want = sharded.read(whole)
        value = "relevance" if kind == "qrels" else "retrieved"
        assert _docs(got, value) == _docs(want, value)
        assert got.ids.to_pylist() == want.ids.to_pylist()
    qrels_text, run_text, _ = text
    assert _docs(sources.read_qrels(qrels_dir), "relevance") == _docs(
        sources.read_qrels(qrels_text), "relevance"
    )
    assert _docs(sources.read_run(run_dir), "retrieved") == _docs(
        sources.read_run(run_text), "retrieved"
    )


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_mixed_formats_on_ray_workers(peer_frames, text, tmp_path):
    """Ray's workers read the mixed shards (a Parquet file named .trec, a gzip'd TSV
    without a suffix): pytrec_eval's values of the TREC text."""
    qrels_dir, run_dir = _mixed_shards(*peer_frames, tmp_path)
    results = engine.Engine(config={}, executor="ray").evaluate_trec(qrels_dir, run_dir, METRICS)
    _assert_pytrec(_per_query(results), text)


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("run.csv", b"", "Empty CSV file"),
        ("run.csv", b"q_id,doc_id,score\n", "no run row"),
        ("run.jsonl", b"\n\n", "missing query_id, doc_id, score"),
        ("run.csv", b"q_id,doc_id,rank\nq1,d1,1\n", "missing score"),
        ("run.csv", b"q_id,doc_id,score,score\nq1,d1,1,2\n", "'score' is named twice"),
        ("run.csv", b"query_id,query_id,doc_id,score\nq1,q1,d1,1\n", "'query_id' is named twice"),
    ],
)
def test_empty_and_scoreless_runs_are_named(tmp_path, capsys, name, content, reason):
    (tmp_path / "qrels").write_text("q1 0 d1 1\n")
    (tmp_path / name).write_bytes(content)
    args = ["--qrels", str(tmp_path / "qrels"), "--run", str(tmp_path / name), "--metrics", "P@1"]
    assert main(["run", *args]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / name) in err and reason in err and "Traceback" not in err
