"""Every source of the same data gives the same numbers, bit for bit: pytrec_eval-shaped
dicts, TREC files, JSONL, JSON, Parquet, Arrow, CSV, pandas and polars frames; plain,
with a byte-order mark, or compressed. And every way of running gives the same results
document: in memory, in chunks, streamed."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine
from engine.io import frames

METRICS = ["retrieval-ndcg-at-k@5", "retrieval-map", "retrieval-mrr", "retrieval-err-at-k@3"]
SETTINGS = settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

collections = st.dictionaries(
    st.from_regex(r"q[0-9]{1,3}", fullmatch=True),
    st.tuples(
        st.dictionaries(
            st.sampled_from([f"d{i}" for i in range(12)]),
            st.integers(-1, 3),
            min_size=1,
            max_size=6,
        ),
        st.dictionaries(
            st.sampled_from([f"d{i}" for i in range(12)]),
            st.sampled_from([0.5, 1.0, 2.0, 3.5]),
            max_size=8,
        ),
    ),
    min_size=1,
    max_size=12,
).filter(lambda c: any(scored for _, scored in c.values()))  # an empty run is refused


def _trec_order(scored: dict[str, float]) -> list[str]:
    """trec_eval's order, written out here: score descending, then doc id descending."""
    return [
        doc for doc, _ in sorted(scored.items(), key=lambda pair: (pair[1], pair[0]), reverse=True)
    ]


def _files(
    folder: Path, qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]
) -> dict[str, tuple[Any, Any]]:
    """The same collection in every file format, as (dataset, outputs) sources."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "q.qrels").write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, labels in qrels.items() for d, g in labels.items())
    )
    (folder / "r.run").write_text(
        "".join(
            f"{q} Q0 {d} {i} {s} t\n"
            for q, scored in run.items()
            for i, (d, s) in enumerate(scored.items(), 1)
        )
    )
    samples = [{"id": q, "expected_output": labels} for q, labels in qrels.items()]
    ranked = {q: _trec_order(scored) for q, scored in run.items()}
    (folder / "d.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    (folder / "o.jsonl").write_text(
        "".join(json.dumps({"id": q, "actual_output": r}) + "\n" for q, r in ranked.items())
    )
    (folder / "d.json").write_text(json.dumps({"samples": samples}))
    (folder / "o.json").write_text(json.dumps(ranked))
    labels = pa.table(
        {
            "query_id": [q for q, m in qrels.items() for _ in m],
            "doc_id": [d for m in qrels.values() for d in m],
            "relevance": [g for m in qrels.values() for g in m.values()],
        }
    )
    scores = pa.table(
        {
            "query_id": [q for q, m in run.items() for _ in m],
            "doc_id": [d for m in run.values() for d in m],
            "score": [s for m in run.values() for s in m.values()],
        }
    )
    for suffix in (".parquet", ".arrow"):
        frames.write_table(labels, folder / f"labels{suffix}")
        frames.write_table(scores, folder / f"scores{suffix}")
    for name, table in (("labels", labels), ("scores", scores)):
        with (folder / f"{name}.csv").open("w") as handle:
            handle.write(",".join(table.column_names) + "\n")
            for row in zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True):
                handle.write(",".join(map(str, row)) + "\n")
    return {
        "trec": (folder / "q.qrels", folder / "r.run"),
        "jsonl": (folder / "d.jsonl", folder / "o.jsonl"),
        "json": (folder / "d.json", folder / "o.json"),
        "parquet": (folder / "labels.parquet", folder / "scores.parquet"),
        "arrow": (folder / "labels.arrow", folder / "scores.arrow"),
        "csv": (folder / "labels.csv", folder / "scores.csv"),
    }


def _evaluate(eng: engine.Engine, source: tuple[Any, Any], trec: bool = False) -> engine.Results:
    if trec:
        return eng.evaluate_trec(*source, METRICS)
    evaluation = eng.dataset(source[0]).with_metrics(METRICS)
    return evaluation.evaluate(source[1], missing="empty")  # queries the run lacks, as TREC


def _same(a: engine.Results, b: engine.Results) -> None:
    assert a.sample_ids == b.sample_ids
    for label in a.labels:
        np.testing.assert_array_equal(
            a.values(label).view(np.int64), b.values(label).view(np.int64), err_msg=label
        )
    assert a.summary() == b.summary()
    assert a.dataset_hash == b.dataset_hash
    assert a.per_sample() == b.per_sample()


class TestEverySource:
    @pytest.mark.slow
    @SETTINGS
    @given(collection=collections)
    def test_same_values_summaries_and_hash(
        self, tmp_path_factory: pytest.TempPathFactory, collection: dict
    ) -> None:  # type: ignore[type-arg]
        """Dicts, TREC, JSONL, JSON, Parquet, Arrow, CSV and pandas/polars frames of one
        collection: identical per-sample values, summaries (with CIs) and dataset hash."""
        pd = pytest.importorskip("pandas")
        polars = pytest.importorskip("polars")
        qrels = {q: labels for q, (labels, _) in collection.items()}
        run = {q: scored for q, (_, scored) in collection.items() if scored}
        eng = engine.Engine(config={})
        reference = eng.evaluate_trec(qrels, run, METRICS)
        for name, source in _files(tmp_path_factory.mktemp("sources"), qrels, run).items():
            _same(_evaluate(eng, source, trec=name == "trec"), reference)
        labels = pd.DataFrame(
            [(q, d, g) for q, m in qrels.items() for d, g in m.items()],
            columns=["query_id", "doc_id", "relevance"],
        )
        scores = pd.DataFrame(
            [(q, d, s) for q, m in run.items() for d, s in m.items()],
            columns=["query_id", "doc_id", "score"],
        )
        for make in (lambda f: f, polars.from_pandas):
            _same(eng.dataset(make(labels)).with_metrics(METRICS).evaluate(make(scores)), reference)


class TestEveryRun:
    @SETTINGS
    @given(collection=collections, chunk=st.sampled_from([1, 64, 128]))
    def test_memory_chunks_and_stream_agree(
        self, tmp_path_factory: pytest.TempPathFactory, collection: dict, chunk: int
    ) -> None:  # type: ignore[type-arg]
        """In memory, in chunks and streamed from files: the same results document
        (per-sample rows, summary with CIs, diagnostics), byte for byte but provenance."""
        qrels = {q: labels for q, (labels, _) in collection.items()}
        run = {q: scored for q, (_, scored) in collection.items() if scored}
        folder = tmp_path_factory.mktemp("runs")
        files = _files(folder, qrels, run)
        eng = engine.Engine(config={})
        evaluation = eng.dataset(files["jsonl"][0]).with_metrics(METRICS)
        whole = evaluation.evaluate(files["jsonl"][1]).to_dict()
        chunked = evaluation.evaluate(files["jsonl"][1], chunk_size=chunk).to_dict()
        eng.evaluate_stream(
            METRICS,
            dataset=files["jsonl"][0],
            outputs=files["jsonl"][1],
            chunk_size=chunk,
            scores=folder / "s.json",
        )
        streamed = json.loads((folder / "s.json").read_text())
        for document in (chunked, streamed):
            assert list(document) == list(whole)
            for key in whole:
                if key != "provenance":
                    assert document[key] == whole[key], key


def _write_compressed(path: Path, data: bytes, codec: str) -> Path:
    target = path.with_name(
        path.name + {"gzip": ".gz", "bz2": ".bz2", "xz": ".xz", "zstd": ".zst"}[codec]
    )
    if codec == "zstd":
        with pa.CompressedOutputStream(str(target), "zstd") as handle:
            handle.write(data)
    else:
        opener = {"gzip": gzip.open, "bz2": bz2.open, "xz": lzma.open}[codec]
        with opener(target, "wb") as handle:
            handle.write(data)
    return target


class TestInputsAsTheyArrive:
    QRELS = "q1 0 d1 2\nq1 0 d2 0\nq2 0 d3 1\n"
    RUN = "q1 Q0 d2 1 3.0 t\nq1 Q0 d1 2 2.0 t\nq2 Q0 d3 1 1.0 t\n"

    def _reference(self, tmp_path: Path) -> engine.Results:
        (tmp_path / "plain.qrels").write_text(self.QRELS)
        (tmp_path / "plain.run").write_text(self.RUN)
        return engine.Engine(config={}).evaluate_trec(
            tmp_path / "plain.qrels", tmp_path / "plain.run", METRICS
        )

    @pytest.mark.parametrize("codec", ["gzip", "bz2", "xz", "zstd"])
    def test_compressed_files(self, tmp_path: Path, codec: str) -> None:
        """A compressed TREC, JSONL, JSON, YAML or CSV file gives the plain file's numbers,
        in memory and streamed (the suffix names the codec)."""
        reference = self._reference(tmp_path)
        eng = engine.Engine(config={})
        qrels = _write_compressed(tmp_path / "c.qrels", self.QRELS.encode(), codec)
        run = _write_compressed(tmp_path / "c.run", self.RUN.encode(), codec)
        _same(eng.evaluate_trec(qrels, run, METRICS), reference)
        streamed = eng.evaluate_stream(METRICS, qrels=qrels, run=run)
        assert streamed.summary() == reference.summary()
        samples = "".join(
            json.dumps({"id": q, "expected_output": m}) + "\n"
            for q, m in {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}}.items()
        )
        dataset = _write_compressed(tmp_path / "d.jsonl", samples.encode(), codec)
        outputs = _write_compressed(
            tmp_path / "o.json", json.dumps({"q1": ["d2", "d1"], "q2": ["d3"]}).encode(), codec
        )
        _same(eng.dataset(dataset).with_metrics(METRICS).evaluate(outputs), reference)
        yaml_text = "samples:\n  - {id: q1, expected_output: {d1: 2, d2: 0}}\n  - {id: q2, expected_output: {d3: 1}}\n"
        document = _write_compressed(tmp_path / "d.yaml", yaml_text.encode(), codec)
        _same(eng.dataset(document).with_metrics(METRICS).evaluate(outputs), reference)
        table = _write_compressed(
            tmp_path / "l.csv", b"query_id,doc_id,relevance\nq1,d1,2\nq1,d2,0\nq2,d3,1\n", codec
        )
        _same(eng.dataset(table).with_metrics(METRICS).evaluate(outputs), reference)

    def test_byte_order_marks(self, tmp_path: Path) -> None:
        """A UTF-8 byte-order mark at the start of any input file is ignored: the first
        query id does not carry it, and every number equals the plain file's."""
        reference = self._reference(tmp_path)
        eng = engine.Engine(config={})
        bom = "\ufeff"
        (tmp_path / "b.qrels").write_text(bom + self.QRELS, encoding="utf-8")
        (tmp_path / "b.run").write_text(bom + self.RUN, encoding="utf-8")
        results = eng.evaluate_trec(tmp_path / "b.qrels", tmp_path / "b.run", METRICS)
        assert results.sample_ids == ["q1", "q2"] and not results.diagnostics.missing_outputs
        _same(results, reference)
        (tmp_path / "b2.qrels").write_text(
            bom + self.QRELS.replace(" 0 d2 ", "  0 d2 "), encoding="utf-8"
        )  # line reader
        _same(eng.evaluate_trec(tmp_path / "b2.qrels", tmp_path / "b.run", METRICS), reference)
        streamed = eng.evaluate_stream(METRICS, qrels=tmp_path / "b.qrels", run=tmp_path / "b.run")
        assert streamed.summary() == reference.summary()
        documents = {
            "d.jsonl": "".join(
                json.dumps({"id": q, "expected_output": m}) + "\n"
                for q, m in {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}}.items()
            ),
            "d.yaml": "samples:\n  - {id: q1, expected_output: {d1: 2, d2: 0}}\n  - {id: q2, expected_output: {d3: 1}}\n",
            "d.json": json.dumps(
                {
                    "samples": [
                        {"id": "q1", "expected_output": {"d1": 2, "d2": 0}},
                        {"id": "q2", "expected_output": {"d3": 1}},
                    ]
                }
            ),
            "l.csv": "query_id,doc_id,relevance\nq1,d1,2\nq1,d2,0\nq2,d3,1\n",
        }
        (tmp_path / "o.json").write_text(
            bom + json.dumps({"q1": ["d2", "d1"], "q2": ["d3"]}), encoding="utf-8"
        )
        for name, text in documents.items():
            (tmp_path / name).write_text(bom + text, encoding="utf-8")
            _same(
                eng.dataset(tmp_path / name).with_metrics(METRICS).evaluate(tmp_path / "o.json"),
                reference,
            )

    def test_csv_ids_stay_text(self, tmp_path: Path) -> None:
        """CSV ids that look like numbers keep their text ("007" is not 7)."""
        (tmp_path / "l.csv").write_text("query_id,doc_id,relevance\n007,01,1\n")
        dataset = engine.Engine(config={}).dataset(tmp_path / "l.csv")
        assert dataset.ids == ["007"] and dataset.samples[0].relevance == {"01": 1.0}
