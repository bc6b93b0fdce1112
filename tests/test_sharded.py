"""Sharded inputs (a directory, a glob, a list of files; local or remote) give the numbers
of one file holding the same lines, bit for bit: read here, streamed here, and read by the
workers of a Ray cluster of two nodes (issue 53)."""

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

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import connected_cluster

import engine
from engine.errors import InputError
from engine.evaluation.results import Results
from engine.io import shards
from engine.io.shards import Shard

METRICS = [
    "retrieval-ndcg-at-k@10",
    "retrieval-map",
    "retrieval-mrr",
    "retrieval-err-at-k",
    "retrieval-recall-at-k@20",
    "retrieval-judged-at-k@10",
    "cwl-rbp",
]


def _trec(count: int, seed: int = 0, *, ordered: bool = False) -> tuple[list[str], list[str]]:
    """Qrels and run lines: graded labels (some queries with no relevant document), runs
    of 1-40 documents with tied scores, a query the run lacks every 11th, a run query
    the qrels lack. Unless ``ordered``, the qrels list queries in random order, each
    query's lines apart, and the run's lines are shuffled whole."""
    rng = random.Random(seed)
    queries = [f"q{i:04d}" for i in range(count)]
    qrels, run = [], []
    for i, query in enumerate(queries):
        top = 0 if i % 17 == 0 else 3
        for doc in rng.sample(range(60), rng.randint(1, 9)):
            qrels.append(f"{query} 0 d{doc} {rng.randint(0, top)}")
        if i % 11:
            for rank, doc in enumerate(rng.sample(range(60), rng.randint(1, 40))):
                run.append(f"{query} Q0 d{doc} {rank + 1} {rng.randint(0, 9) / 4} tag")
    run.append("unknown Q0 d1 1 1.0 tag")
    if not ordered:
        rng.shuffle(qrels)
        rng.shuffle(run)
    return qrels, run


def _write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _cut(folder: Path, lines: list[str], parts: int, seed: int = 0, suffix: str = ".trec") -> Path:
    """``lines`` cut at random lines into ``parts`` files of ``folder``."""
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(lines)), parts - 1))
    for part, (start, end) in enumerate(zip([0, *cuts], [*cuts, len(lines)], strict=True)):
        _write(folder / f"part-{part:03d}{suffix}", lines[start:end])
    return folder


def _same(got: Results, expected: Results) -> None:
    """Identical numbers, bit for bit: per-sample values (when kept), means, n, na,
    errors, CIs, the dataset hash and the diagnostics."""
    if expected.scores is not None and got.scores is not None:
        assert got.ids.equals(expected.ids)
        for label in expected.labels:
            assert got.scores[label].view(np.int64).tolist() == (
                expected.scores[label].view(np.int64).tolist()
            )
    assert got.summary() == expected.summary()
    assert got.dataset_hash == expected.dataset_hash
    assert got.samples == expected.samples
    assert got.diagnostics == expected.diagnostics


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One qrels file and one run file, and the same lines in shards: cut anywhere (a
    query's lines in several files), or in query order (for streams)."""
    root = tmp_path_factory.mktemp("sharded")
    qrels, run = _trec(600)
    ordered_qrels, ordered_run = _trec(600, seed=1, ordered=True)
    return {
        "qrels": _write(root / "qrels.txt", qrels),
        "run": _write(root / "run.txt", run),
        "qrels_dir": _cut(root / "qrels", qrels, 3),
        "run_dir": _cut(root / "run", run, 7, seed=1),
        "ordered_qrels": _write(root / "oq.txt", ordered_qrels),
        "ordered_run": _write(root / "or.txt", ordered_run),
        "ordered_qrels_dir": _cut(root / "oq", ordered_qrels, 4, seed=2),
        "ordered_run_dir": _cut(root / "or", ordered_run, 5, seed=3),
        "root": root,
    }


def _local(qrels: Any, run: Any) -> Results:
    return engine.Engine(config={}, executor="local").evaluate_trec(qrels, run, METRICS)


class TestShards:
    def test_directory_sorted_skipping_hidden(self, tmp_path: Path) -> None:
        """A directory's files, every level below it, sorted by path; names starting with
        '.' or '_' skipped (as _SUCCESS and .crc files)."""
        for name in ("b.trec", "a/z.trec", "a/b.trec", "_SUCCESS", ".part.crc", "_tmp/x.trec"):
            _write(tmp_path / name, ["q 0 d 1"])
        found = [Path(shard.path).relative_to(tmp_path) for shard in shards.resolve(tmp_path)]
        assert found == [Path("a/b.trec"), Path("a/z.trec"), Path("b.trec")]

    def test_glob_and_list(self, tmp_path: Path) -> None:
        """A glob's matches sorted (``*`` within one level); a list in the order given."""
        for name in ("r2.trec", "r10.trec", "x.txt", "sub/r3.trec"):
            _write(tmp_path / name, ["q 0 d 1"])
        names = [Path(s.path).name for s in shards.resolve(str(tmp_path / "r*.trec"))]
        assert names == ["r10.trec", "r2.trec"]
        given = [tmp_path / "r2.trec", tmp_path / "r10.trec"]
        assert [Path(s.path).name for s in shards.resolve(given)] == ["r2.trec", "r10.trec"]

    @pytest.mark.parametrize("spec", ["missing-dir", "missing-*.trec"])
    def test_nothing_found(self, tmp_path: Path, spec: str) -> None:
        """A path or glob that names no file is an input error naming it."""
        with pytest.raises(InputError, match=spec.replace("*", r"\*")):
            shards.resolve(str(tmp_path / spec))

    @pytest.mark.parametrize("size", [1, 7, 64, 1000])
    def test_ranges_hold_every_line_once(self, tmp_path: Path, size: int) -> None:
        """A file cut into byte ranges: each range reads the whole lines that start in it,
        so the ranges together read every line once, and each range knows the lines before
        it (to number a problem's line)."""
        lines = [f"q{i} 0 d{'x' * (i % 13)} {i % 3}" for i in range(200)]
        path = _write(tmp_path / "q.trec", lines)
        found = shards.split(shards.resolve(path), size)
        assert len(found) > 1 or size >= path.stat().st_size
        text = b"".join(shards.read_lines(shard) for shard in found)
        assert text == path.read_bytes()
        before = 0
        for shard in found:
            assert shards.lines_before(shard) == before
            before += shards.read_lines(shard).count(b"\n")

    def test_remote_filesystem(self, files: dict[str, Any]) -> None:
        """Shards on a filesystem fsspec reaches (here its in-memory one) read as local ones."""
        fsspec = pytest.importorskip("fsspec")
        memory = fsspec.filesystem("memory")
        for kind in ("qrels_dir", "run_dir"):
            for path in sorted(files[kind].iterdir()):
                memory.pipe(f"/issue53/{kind}/{path.name}", path.read_bytes())
        got = _local("memory://issue53/qrels_dir", "memory://issue53/run_dir/*.trec")
        _same(got, _local(files["qrels"], files["run"]))


class TestInProcess:
    def test_trec_shards_equal_one_file(self, files: dict[str, Any], tmp_path: Path) -> None:
        """Qrels and a run cut into files anywhere (a query's lines in several; a file
        compressed, a file empty) give the numbers of the one file, bit for bit, on every
        in-process executor."""
        expected = _local(files["qrels"], files["run"])
        run = sorted(files["run_dir"].iterdir())
        packed = tmp_path / f"{run[2].name}.gz"
        packed.write_bytes(gzip.compress(run[2].read_bytes()))
        empty = _write(tmp_path / "empty.trec", [])
        for executor in ("local", "threads"):
            eng = engine.Engine(config={}, executor=executor)
            got = eng.evaluate_trec(
                files["qrels_dir"], [*run[:2], packed, empty, *run[3:]], METRICS
            )
            _same(got, expected)

    def test_stream_of_shards(self, files: dict[str, Any], tmp_path: Path) -> None:
        """Streamed shards (a query's lines may go on into the next file) write the rows and
        summary of the one file in memory."""
        expected = _local(files["ordered_qrels"], files["ordered_run"])
        got = engine.Engine(config={}).evaluate_stream(
            METRICS,
            qrels=files["ordered_qrels_dir"],
            run=files["ordered_run_dir"],
            chunk_size=64,
            scores=tmp_path / "rows.jsonl",
        )
        _same(got, expected)
        rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
        assert [row["id"] for row in rows] == expected.ids.to_pylist()

    def test_parquet_shards(self, files: dict[str, Any], tmp_path: Path) -> None:
        """Labels and run tables in several Parquet files give the one table's numbers."""
        _tables(files, tmp_path, 700)
        eng = engine.Engine(config={})
        expected = eng.dataset(tmp_path / "labels.parquet").with_metrics(METRICS)
        got = eng.dataset(tmp_path / "labels").with_metrics(METRICS)
        _same(got.evaluate(tmp_path / "run"), expected.evaluate(tmp_path / "run.parquet"))

    def test_jsonl_shards(self, tmp_path: Path) -> None:
        """A JSONL dataset and outputs in several files: the one file's numbers; a sample
        in two files is refused, naming the file."""
        samples = [{"id": f"s{i}", "expected_output": {f"d{i % 5}": 1}} for i in range(50)]
        outputs = [{"id": f"s{i}", "actual_output": [f"d{i % 7}", "d0"]} for i in range(50)]
        lines = {"data": [json.dumps(s) for s in samples], "out": [json.dumps(o) for o in outputs]}
        for name, found in lines.items():
            _write(tmp_path / f"{name}.jsonl", found)
            _cut(tmp_path / name, found, 3, suffix=".jsonl")
        eng = engine.Engine(config={})
        expected = eng.dataset(tmp_path / "data.jsonl").with_metrics(METRICS[:3])
        got = eng.dataset(tmp_path / "data").with_metrics(METRICS[:3])
        _same(got.evaluate(tmp_path / "out"), expected.evaluate(tmp_path / "out.jsonl"))
        _write(tmp_path / "data" / "part-009.jsonl", lines["data"][:1])
        with pytest.raises(InputError, match=r"part-009\.jsonl.*more than once"):
            eng.dataset(tmp_path / "data")


def _tables(files: dict[str, Any], folder: Path, rows: int) -> None:
    """The qrels and the run as ``labels.parquet`` and ``run.parquet`` in ``folder``, and cut
    into Parquet files of ``rows`` rows in ``labels/`` and ``run/``."""
    for name, path, fields, value in (
        ("labels", files["qrels"], (0, 2, 3), "relevance"),
        ("run", files["run"], (0, 2, 4), "score"),
    ):
        lines = [line.split() for line in path.read_text().splitlines()]
        query, doc, number = ([line[field] for line in lines] for field in fields)
        table = pa.table({"query_id": query, "doc_id": doc, value: [float(n) for n in number]})
        pq.write_table(table, folder / f"{name}.parquet")
        (folder / name).mkdir()
        for part, start in enumerate(range(0, table.num_rows, rows)):
            pq.write_table(table.slice(start, rows), folder / name / f"{part:03d}.parquet")


class TestPlan:
    @pytest.mark.parametrize("size", [1 << 12, 1 << 30])
    def test_the_plan_is_what_one_process_finds(
        self, files: dict[str, Any], tmp_path: Path, size: int
    ) -> None:
        """What the workers' plan finds from the shards' runs alone (no rows): the padding
        shape, the samples, the outputs for unknown samples and the chunks' starts, as one
        process finds them in the joined columns of the one file (TREC files, and label
        tables of two kinds), whatever the run's ranges."""
        from engine.evaluation.batch import Shape
        from engine.evaluation.distributed import plan_chunks, read_shard
        from engine.evaluation.pipeline import aligned
        from engine.io import sharded, sources

        grades = tmp_path / "grades"
        lines = [line.split() for line in files["qrels"].read_text().splitlines()]
        table = pa.table(
            {
                "query_id": [line[0] for line in lines],
                "doc_id": [line[2] for line in lines],
                "relevance": [float(line[3]) if i % 3 else None for i, line in enumerate(lines)],
                "grades": [
                    float(line[3]) + 1 if i % 3 != 1 else None for i, line in enumerate(lines)
                ],
            }
        )
        grades.mkdir()
        for part, start in enumerate(range(0, table.num_rows, 1000)):
            pq.write_table(table.slice(start, 1000), grades / f"{part}.parquet")
        for samples in (
            sharded.Long.of(files["qrels_dir"], "qrels", trec=True),
            sharded.Long.of(grades, "labels", trec=False),
        ):
            outputs = sharded.Long.of(files["run_dir"], "run", trec=True).ranged(size)
            runs = [
                read_shard(long, index)[1]
                for long in (samples, outputs)
                for index in range(len(long.shards))
            ]
            planned = plan_chunks(len(samples.shards), 64, *runs)[0]
            joined, unknown = aligned(sharded.read(samples), sources.read_run(files["run"]))
            assert planned.shape == Shape.of(joined)
            assert (planned.samples, planned.unknown) == (len(joined), tuple(unknown))
            assert planned.positions == (*range(0, len(joined), 64), len(joined))


class TestProblems:
    def test_a_bad_line_names_its_file_and_line(self, tmp_path: Path) -> None:
        """A malformed line in one shard is named by that file and its own line number,
        also when the file is read in byte ranges."""
        _write(tmp_path / "q" / "a.trec", ["q1 0 d1 1", "q2 0 d2 1"])
        lines = [f"q{i % 3} Q0 d{i} {i} {i} t" for i in range(100)]
        lines[61] = "q1 Q0 d61 61 not-a-number t"
        _write(tmp_path / "r" / "b.trec", lines)
        for spec in (tmp_path / "r", [tmp_path / "r" / "b.trec"]):
            with pytest.raises(InputError) as error:
                _local(tmp_path / "q", spec)
            (problem,) = error.value.problems
            assert (problem.source, problem.line) == (str(tmp_path / "r" / "b.trec"), 62)

    def test_a_repeat_across_shards_names_both(self, tmp_path: Path) -> None:
        """A document judged twice for a query, in two different files, is refused naming
        both files and lines."""
        _write(tmp_path / "q" / "a.trec", ["q1 0 d1 1", "q1 0 d2 1"])
        _write(tmp_path / "q" / "b.trec", ["q2 0 d1 1", "q1 0 d2 0"])
        _write(tmp_path / "run.trec", ["q1 Q0 d1 1 1 t"])
        with pytest.raises(InputError) as error:
            _local(tmp_path / "q", tmp_path / "run.trec")
        (problem,) = error.value.problems
        assert problem.source == str(tmp_path / "q" / "b.trec") and problem.line == 2
        assert f"{tmp_path / 'q' / 'a.trec'} line 2" in problem.message

    def test_cli_exit_2_no_traceback(self, tmp_path: Path) -> None:
        """The command line words a shard's problem (file:line) and exits 2."""
        _write(tmp_path / "q" / "a.trec", ["q1 0 d1 1"])
        _write(tmp_path / "q" / "b.trec", ["q1 0 d1"])
        _write(tmp_path / "run.trec", ["q1 Q0 d1 1 1 t"])
        done = _cli("run", "--qrels", str(tmp_path / "q"), "--run", str(tmp_path / "run.trec"))
        assert done.returncode == 2
        assert f"{tmp_path / 'q' / 'b.trec'}:1" in done.stderr
        assert "Traceback" not in done.stderr


def _cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "engine.cli", *argv, "--metrics", ",".join(METRICS)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


# -- on a Ray cluster of two nodes -----------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """Two worker nodes of one CPU each, this module's driver connected to them."""
    with connected_cluster(2) as address:
        yield address


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many byte ranges, buckets and chunks, even for a small input."""
    from engine.evaluation import distributed
    from engine.io import sharded

    monkeypatch.setattr(sharded, "RANGE_BYTES", 1 << 15)
    monkeypatch.setattr(distributed, "LEAST_RANGE", 1 << 12)


@pytest.fixture
def driver_reads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver may list the shards but not read them: the workers do."""

    def refuse(shard: Shard) -> Any:
        raise AssertionError(f"the driver read {shard.name}")

    for name in ("read_lines", "open_stream", "open_file"):
        monkeypatch.setattr(shards, name, refuse)


@pytest.mark.slow
@pytest.mark.usefixtures("small_parts")
class TestRay:
    @pytest.mark.usefixtures("driver_reads_nothing")
    def test_workers_read_identical_numbers(self, cluster: str, files: dict[str, Any]) -> None:
        """Shards read, joined and scored by the workers of two nodes (the driver reads no
        file): per-sample values, summaries, CIs, hash and diagnostics of one process
        reading the one file, whatever the chunk size."""
        expected = _local(files["qrels"], files["run"])
        eng = engine.Engine(config={}, executor="ray")
        for chunk_size in (64, 1000):
            got = eng.evaluate_trec(
                files["qrels_dir"], files["run_dir"], METRICS, chunk_size=chunk_size
            )
            _same(got, expected)
            assert got.provenance["executor"] == "ray"

    def test_stream_rows_identical(
        self, cluster: str, files: dict[str, Any], tmp_path: Path
    ) -> None:
        """evaluate_stream on Ray writes the bytes the local stream of the same lines
        writes: rows and summary."""
        written = {}
        for executor in ("local", "ray"):
            engine.Engine(config={}, executor=executor).evaluate_stream(
                METRICS,
                qrels=files["ordered_qrels_dir"],
                run=files["ordered_run_dir"],
                chunk_size=64,
                scores=tmp_path / f"{executor}.json",
            )
            document = json.loads((tmp_path / f"{executor}.json").read_text())
            document["provenance"].pop("created")
            document["provenance"].pop("executor")
            written[executor] = document
        assert written["ray"] == written["local"]

    def test_tables_on_workers(self, cluster: str, files: dict[str, Any], tmp_path: Path) -> None:
        """Labels and run tables in Parquet shards, streamed on Ray: the one table's numbers."""
        _tables(files, tmp_path, 900)
        expected = _local(files["qrels"], files["run"])
        got = engine.Engine(config={}, executor="ray").evaluate_stream(
            METRICS, dataset=tmp_path / "labels", outputs=tmp_path / "run"
        )
        _same(got, expected)

    def test_problems_named_from_workers(
        self, cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A bad line read by a worker (in a byte range of a file) and a repeat across
        shards found by another are named by file and line, as in one process."""
        from engine.io import sharded

        monkeypatch.setattr(sharded, "RANGE_BYTES", 2048)  # the run in 5 ranges
        lines = [f"q{i % 3} Q0 d{i} {i} {i} t" for i in range(400)]
        lines[301] = "q1 Q0 d301 301 nan t"
        _write(tmp_path / "r" / "b.trec", lines)
        _write(tmp_path / "q" / "a.trec", ["q1 0 d1 1", "q2 0 d2 1"])
        eng = engine.Engine(config={}, executor="ray")
        with pytest.raises(InputError) as error:
            eng.evaluate_trec(tmp_path / "q", tmp_path / "r", METRICS)
        (problem,) = error.value.problems
        assert (problem.source, problem.line) == (str(tmp_path / "r" / "b.trec"), 302)
        _write(tmp_path / "q" / "c.trec", ["q3 0 d1 1", "q1 0 d1 0"])
        lines[301] = "q1 Q0 d301 301 3 t"
        _write(tmp_path / "r" / "b.trec", lines)
        with pytest.raises(InputError) as error:
            eng.evaluate_trec(tmp_path / "q", tmp_path / "r", METRICS)
        (problem,) = error.value.problems
        assert (problem.source, problem.line) == (str(tmp_path / "q" / "c.trec"), 2)
        assert f"{tmp_path / 'q' / 'a.trec'} line 1" in problem.message

    def test_a_run_of_another_dataset_is_refused(self, cluster: str, tmp_path: Path) -> None:
        """A run none of whose queries is in the qrels is the error it is in one process,
        not a summary of empty rankings."""
        _write(tmp_path / "q" / "a.trec", ["q1 0 d1 1", "q2 0 d2 1"])
        _write(tmp_path / "r" / "b.trec", ["x1 Q0 d1 1 3 t", "x2 Q0 d2 1 3 t"])
        messages = []
        for executor in ("local", "ray"):
            with pytest.raises(InputError, match="outputs do not match the dataset") as error:
                engine.Engine(config={}, executor=executor).evaluate_trec(
                    tmp_path / "q", tmp_path / "r", METRICS
                )
            messages.append([problem.message for problem in error.value.problems])
        assert messages[0] == messages[1]

    def test_cli(self, cluster: str, files: dict[str, Any], tmp_path: Path) -> None:
        """``slotwise run --qrels DIR --run GLOB --executor ray`` on the cluster
        (RAY_ADDRESS) writes the document the local executor writes for the one file."""
        env = {**os.environ, "RAY_ADDRESS": cluster}
        out = {}
        for name, qrels, run, extra in (
            ("local", files["qrels"], files["run"], []),
            ("ray", files["qrels_dir"], f"{files['run_dir']}/*.trec", ["--executor", "ray"]),
        ):
            done = _cli(
                "run", "--qrels", str(qrels), "--run", str(run), *extra,
                "--format", "json", "--output", str(tmp_path / f"{name}.json"), env=env,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            document = json.loads((tmp_path / f"{name}.json").read_text())
            for key in ("created", "executor", "chunk_size"):
                document["provenance"].pop(key, None)
            out[name] = document
        assert out["ray"] == out["local"]
