"""Hostile inputs (issue 60, "one grammar for what comes in"): every reader reads ids as
written, labels and scores by one ASCII grammar, refuses duplicate keys and ambiguous
ranks, and reads under named limits (docs/file-formats.md, "What comes in"). Each case
is a named error, exit 2, no traceback, naming the file (and the line where there is
one); the properties check the readers against each other and against trec_eval 10."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import re
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import qrels_of, run_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import main
from engine.errors import InputError
from engine.io import sources


def refused(args: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    """``slotwise ARGS`` exits 2 with a message holding each needle, and no traceback."""
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    for needle in needles:
        assert needle in err
    return err


def score(tmp_path: Path, dataset: str, outputs: str, name: str = "data.yaml") -> float:
    """MAP of the outputs against the dataset, both written as given."""
    (tmp_path / name).write_text(dataset)
    (tmp_path / "outputs.json").write_text(outputs)
    results = tmp_path / "results.json"
    args = ["run", str(tmp_path / name), "--outputs", str(tmp_path / "outputs.json")]
    assert (
        main([*args, "--metrics", "retrieval-map", "--format", "json", "--output", str(results)])
        == 0
    )
    return float(json.loads(results.read_text())["summary"]["retrieval-map"]["mean"])


# -- 2. YAML ids as written --------------------------------------------------------------


def test_yaml_ids_are_the_text_written(tmp_path: Path) -> None:
    """``[010, 007, 0x1F, 1_000, 1:20]`` are five ids as written, not 8, 7, 31, 1000, 80;
    ``id: 012`` is "012"."""
    dataset = "samples:\n  - id: 012\n    expected_output: [010, 007, 0x1F, 1_000, 1:20, 1e3]\n"
    (tmp_path / "data.yaml").write_text(dataset)
    _, samples = sources.read_dataset(tmp_path / "data.yaml")
    assert qrels_of(samples) == {
        "012": dict.fromkeys(["010", "007", "0x1F", "1_000", "1:20", "1e3"], 1.0)
    }
    outputs = json.dumps({"012": ["010", "007", "0x1F", "1_000", "1:20", "1e3"]})
    assert score(tmp_path, dataset, outputs) == 1.0


def test_json_number_ids_keep_their_digits(tmp_path: Path) -> None:
    """A JSON integer where an id goes is read as its text (``-0`` stays ``-0``); a float
    there is refused, naming it (its text would not be one id)."""
    (tmp_path / "data.json").write_text('{"samples": [{"id": -0, "expected_output": [7]}]}')
    _, samples = sources.read_dataset(tmp_path / "data.json")
    assert qrels_of(samples) == {"-0": {"7": 1.0}}
    (tmp_path / "data.json").write_text('{"samples": [{"id": "q", "expected_output": [1e3]}]}')
    assert qrels_of(sources.read_dataset(tmp_path / "data.json")[1]) == {"q": {"1e3": 1.0}}
    (tmp_path / "data.json").write_text('{"samples": [{"id": "q", "expected_output": [1.5]}]}')
    with pytest.raises(InputError, match=r"expected_output/0: 1\.5 is not of type"):
        sources.read_dataset(tmp_path / "data.json")


# -- 3. numbers by one ASCII grammar -------------------------------------------------------


@pytest.mark.parametrize("label", ["1_0", "\uff12", "0x1F", "1:20"])
def test_labels_outside_the_grammar_are_refused(
    label: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """TREC, YAML and CSV labels with underscores, non-ASCII digits, hexadecimal or
    sexagesimal are not numbers (Python read them as 10, 2, 31, 80)."""
    (tmp_path / "qrels").write_text(f"q1 0 d0 1\nq1 0 d1 {label}\n", encoding="utf-8")
    (tmp_path / "run").write_text("q1 Q0 d1 1 1 t\n")
    refused(
        [
            "run",
            "--qrels",
            str(tmp_path / "qrels"),
            "--run",
            str(tmp_path / "run"),
            "--metrics",
            "retrieval-mrr",
        ],
        capsys,
        f"{tmp_path / 'qrels'}:2",
        "not a finite number",
    )
    (tmp_path / "data.yaml").write_text(
        f"samples:\n  - id: q1\n    expected_output: {{d1: {label}}}\n"
    )
    with pytest.raises(InputError):
        sources.read_dataset(tmp_path / "data.yaml")
    (tmp_path / "labels.csv").write_text(
        f"query_id,doc_id,relevance\nq1,d1,{label}\n", encoding="utf-8"
    )
    with pytest.raises(InputError, match="not a number"):
        sources.read_dataset(tmp_path / "labels.csv")


@pytest.mark.parametrize(("value", "atof"), [("1_000", "1"), ("\u0661\u0662", "0")])
def test_scores_outside_the_grammar(
    value: str, atof: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Scores ``1_000`` and Arabic-Indic ``١٢``: refused by ``run``, naming the line;
    ``trec-eval`` reads them as trec_eval does (C's atof: 1 and 0), printing what it
    prints for those numbers (tests/test_trec_eval_binary.py checks it against the
    binary)."""
    (tmp_path / "qrels").write_text("q1 0 d1 1\n")
    (tmp_path / "run").write_text(f"q1 Q0 d2 1 5 t\nq1 Q0 d1 2 {value} t\n", encoding="utf-8")
    (tmp_path / "read").write_text(f"q1 Q0 d2 1 5 t\nq1 Q0 d1 2 {atof} t\n")
    qrels, run = str(tmp_path / "qrels"), str(tmp_path / "run")
    refused(
        ["run", "--qrels", qrels, "--run", run, "--metrics", "retrieval-mrr"], capsys, f"{run}:2"
    )
    assert main(["trec-eval", "-q", qrels, run]) == 0
    written = capsys.readouterr().out
    assert main(["trec-eval", "-q", qrels, str(tmp_path / "read")]) == 0
    assert written == capsys.readouterr().out.replace(str(tmp_path / "read"), run)


@pytest.mark.parametrize(("label", "atol"), [("1_0", 1), ("1e3", 1), ("\uff12", 0), ("1.7", 1)])
def test_trec_eval_labels_as_atol_reads_them(
    label: str, atol: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """trec_eval reads these labels with atol as 1, 1, 0, 1, and so does ``trec-eval``
    (before: 10, 1000 and 2 for the first three, and a numpy repr refusing 1.7)."""
    (tmp_path / "qrels").write_text(f"q1 0 d0 1\nq1 0 d1 {label}\n", encoding="utf-8")
    (tmp_path / "read").write_text(f"q1 0 d0 1\nq1 0 d1 {atol}\n")
    (tmp_path / "run").write_text("q1 Q0 d1 1 1 t\n")
    run = str(tmp_path / "run")
    assert main(["trec-eval", "-q", "-m", "all_trec", str(tmp_path / "qrels"), run]) == 0
    written = capsys.readouterr().out
    assert main(["trec-eval", "-q", "-m", "all_trec", str(tmp_path / "read"), run]) == 0
    assert written == capsys.readouterr().out


# -- 4. duplicate keys ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("data.json", '{"samples": [{"id": "q1", "expected_output": {"7": 1, "7": 0}}]}'),
        ("data.yaml", "samples:\n  - id: q1\n    expected_output: {'7': 1, '7': 0}\n"),
        ("data.yaml", "samples:\n  - id: q1\n    id: q2\n    expected_output: [d1]\n"),
        ("data.jsonl", '{"id": "q1", "expected_output": {"7": 1, "7": 0}}\n'),
    ],
)
def test_duplicate_keys_in_datasets(name: str, text: str, tmp_path: Path, capsys) -> None:
    (tmp_path / name).write_text(text)
    (tmp_path / "outputs.json").write_text('{"q1": ["7"]}')
    args = ["run", str(tmp_path / name), "--outputs", str(tmp_path / "outputs.json")]
    refused([*args, "--metrics", "retrieval-mrr"], capsys, str(tmp_path / name), "appears twice")


def test_duplicate_keys_in_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "data.json").write_text('{"samples": [{"id": "q1", "expected_output": ["d1"]}]}')
    (tmp_path / "outputs.json").write_text('{"q1": ["d1"], "q1": ["d2"]}')
    args = ["run", str(tmp_path / "data.json"), "--outputs", str(tmp_path / "outputs.json")]
    refused([*args, "--metrics", "retrieval-mrr"], capsys, "outputs.json", "'q1' appears twice")


# -- 5. rank columns ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("q1,d1,1\nq1,d2,1\n", "given twice"),  # MRR 1.0 or 0.5 by row order
        ("q1,d1,5\nq1,d2,100\n", "no gap"),  # 5 and 100 were places 1 and 2
        ("q1,d2,0\n", "positive integer"),
    ],
)
def test_ambiguous_ranks_are_refused(rows: str, message: str, tmp_path: Path) -> None:
    (tmp_path / "run.csv").write_text("query_id,doc_id,rank\n" + rows)
    with pytest.raises(InputError, match=message):
        sources.read_outputs(tmp_path / "run.csv")


def test_rank_against_score(tmp_path: Path) -> None:
    """Both columns: read when they agree with trec_eval's order by score, else refused."""
    (tmp_path / "agree.csv").write_text("query_id,doc_id,rank,score\nq1,d1,1,5\nq1,d2,2,1\n")
    assert run_of(sources.read_outputs(tmp_path / "agree.csv")) == {"q1": ["d1", "d2"]}
    (tmp_path / "against.csv").write_text("query_id,doc_id,rank,score\nq1,d1,1,1\nq1,d2,2,5\n")
    with pytest.raises(InputError, match="order the documents differently"):
        sources.read_outputs(tmp_path / "against.csv")


# -- ids in tables --------------------------------------------------------------------------


def test_csv_ids_na_null_nan_are_text_and_empty_is_refused(tmp_path: Path) -> None:
    (tmp_path / "run.csv").write_text("query_id,doc_id,score\nq1,NA,3\nq1,null,2\nq1,nan,1\n")
    assert run_of(sources.read_outputs(tmp_path / "run.csv")) == {"q1": ["NA", "null", "nan"]}
    (tmp_path / "empty.csv").write_text("query_id,doc_id,score\nq1,d1,3\nq1,,2\n")
    with pytest.raises(InputError, match="row 1: empty doc_id"):
        sources.read_outputs(tmp_path / "empty.csv")


def test_parquet_null_and_list_ids_and_huge_labels(tmp_path: Path) -> None:
    pq.write_table(
        pa.table({"query_id": ["q1", None], "doc_id": ["d1", "d2"], "score": [1.0, 2.0]}),
        tmp_path / "null.parquet",
    )
    with pytest.raises(InputError, match="empty query_id"):
        sources.read_outputs(tmp_path / "null.parquet")
    pq.write_table(
        pa.table({"query_id": [["q1"]], "doc_id": ["d1"], "score": [1.0]}),
        tmp_path / "list.parquet",
    )
    with pytest.raises(InputError, match="query_id is a column of list"):
        sources.read_outputs(tmp_path / "list.parquet")
    labels = pa.table(
        {"query_id": ["q1"], "doc_id": ["d1"], "relevance": pa.array([2**63], pa.uint64())}
    )
    pq.write_table(labels, tmp_path / "huge.parquet")
    with pytest.raises(InputError, match=r"beyond 2\*\*53"):
        sources.read_dataset(tmp_path / "huge.parquet")


# -- limits ---------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
def test_truncated_compressed_files_are_named(suffix: str, tmp_path: Path, capsys) -> None:
    compress = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}[suffix]
    data = compress(b"".join(b"q%d 0 d%d 1\n" % (i, i) for i in range(5000)))
    (tmp_path / f"qrels{suffix}").write_bytes(data[: len(data) // 2])
    (tmp_path / "run").write_text("q1 Q0 d1 1 1 t\n")
    args = ["run", "--qrels", str(tmp_path / f"qrels{suffix}"), "--run", str(tmp_path / "run")]
    refused([*args, "--metrics", "retrieval-mrr"], capsys, f"qrels{suffix}", "truncated or corrupt")


def test_a_gzip_bomb_stops_at_the_ratio(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("SLOTWISE_MAX_DECOMPRESSION_RATIO", "10")
    (tmp_path / "run.gz").write_bytes(gzip.compress(b"q1 Q0 d1 1 1 t\n" + b"\n" * (40 << 20)))
    (tmp_path / "qrels").write_text("q1 0 d1 1\n")
    args = ["run", "--qrels", str(tmp_path / "qrels"), "--run", str(tmp_path / "run.gz")]
    refused(
        [*args, "--metrics", "retrieval-mrr"], capsys, "run.gz", "SLOTWISE_MAX_DECOMPRESSION_RATIO"
    )


@pytest.mark.parametrize("name", ["run", "outputs.jsonl"])
def test_a_line_over_the_limit_is_named(name: str, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("SLOTWISE_MAX_LINE_BYTES", "1000")
    (tmp_path / "qrels").write_text("q1 0 d1 1\n")
    long = "d" * 5000
    if name == "run":
        (tmp_path / name).write_text(f"q1 Q0 d1 1 2 t\nq1 Q0 {long} 2 1 t\n")
        args = ["run", "--qrels", str(tmp_path / "qrels"), "--run", str(tmp_path / name)]
    else:
        (tmp_path / name).write_text(
            '{"id": "q1", "actual_output": ["d1"]}\n'
            + json.dumps({"id": "q1", "actual_output": [long]})
            + "\n"
        )
        args = ["run", "--qrels", str(tmp_path / "qrels"), "--outputs", str(tmp_path / name)]
    refused([*args, "--metrics", "retrieval-mrr"], capsys, f"{name}:2", "SLOTWISE_MAX_LINE_BYTES")


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("data.json", '{"samples": [{"id": "q1", "input": ' + "[" * 5000 + "]" * 5000 + "}]}"),
        ("data.yaml", "samples:\n  - id: q1\n    input: " + "[" * 5000 + "]" * 5000 + "\n"),
    ],
)
def test_deep_nesting_is_named(name: str, text: str, tmp_path: Path, capsys) -> None:
    (tmp_path / name).write_text(text)
    (tmp_path / "outputs.json").write_text('{"q1": ["d1"]}')
    args = ["run", str(tmp_path / name), "--outputs", str(tmp_path / "outputs.json")]
    refused([*args, "--metrics", "retrieval-mrr"], capsys, name, "SLOTWISE_MAX_DEPTH")


def test_a_yaml_alias_bomb_is_named(tmp_path: Path, capsys) -> None:
    """A "billion laughs" of nested aliases (437 bytes that grew to 7.8 GB)."""
    levels = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    text = "\n".join(levels) + "\nsamples:\n  - id: q1\n    input: *a8\n    expected_output: [d1]\n"
    (tmp_path / "data.yaml").write_text(text)
    (tmp_path / "outputs.json").write_text('{"q1": ["d1"]}')
    args = ["run", str(tmp_path / "data.yaml"), "--outputs", str(tmp_path / "outputs.json")]
    refused(
        [*args, "--metrics", "retrieval-mrr"], capsys, "data.yaml:", "SLOTWISE_MAX_YAML_ALIAS_NODES"
    )


# -- properties: every reader reads the same data the same, and as trec_eval does -----------

TRICKY = [
    "010",
    "007",
    "0x1F",
    "1_000",
    "1:20",
    "1e3",
    "\uff12",
    "\u0661\u0662",
    "-0",
    "1.50",
    "yes",
    "NA",
]
ids = st.one_of(
    st.sampled_from(TRICKY),
    st.text(
        st.characters(
            blacklist_categories=("Cs", "Cc", "Cn", "Co", "Zs", "Zl", "Zp"),
            blacklist_characters='#,"',
        ),
        min_size=1,
        max_size=6,
    ),
)
PLAIN = re.compile(r"[0-9A-Za-z_.:+-]+")


def yaml_scalar(text: str) -> str:
    """``text`` as a plain YAML scalar where it can be one (so 010 is written bare), else
    as a JSON string (a YAML double-quoted scalar)."""
    bare = PLAIN.fullmatch(text) and text.lower() not in ("true", "false", "null")
    return (
        text if bare and not text.startswith(("-", ":")) else json.dumps(text, ensure_ascii=False)
    )


collections = st.fixed_dictionaries(
    {
        "labels": st.dictionaries(
            st.sampled_from(["q1", "010", "1e3"]),
            st.dictionaries(ids, st.integers(0, 3), min_size=1, max_size=5),
            min_size=1,
            max_size=3,
        ),
        "extra": st.lists(ids, max_size=3),
    }
)


def write_all(
    directory: Path, labels: dict[str, dict[str, int]], extra: list[str]
) -> dict[str, dict[str, list[str]]]:
    """The labels as YAML, JSON, JSONL, TREC qrels, CSV and Parquet; runs ranking each
    query's documents (and ``extra`` ones) as TREC, CSV, Parquet and JSON; the rankings."""
    rankings = {
        q: list(dict.fromkeys([*reversed(list(docs)), *extra])) for q, docs in labels.items()
    }
    samples = [{"id": q, "expected_output": docs} for q, docs in labels.items()]
    yaml_lines = ["samples:"]
    for q, docs in labels.items():
        pairs = ", ".join(f"{yaml_scalar(d)}: {v}" for d, v in docs.items())
        yaml_lines.append(f"  - id: {yaml_scalar(q)}\n    expected_output: {{{pairs}}}")
    (directory / "data.yaml").write_text("\n".join(yaml_lines) + "\n", encoding="utf-8")
    (directory / "data.json").write_text(json.dumps({"samples": samples}), encoding="utf-8")
    (directory / "data.jsonl").write_text(
        "".join(json.dumps(s) + "\n" for s in samples), encoding="utf-8"
    )
    long = [(q, d, v) for q, docs in labels.items() for d, v in docs.items()]
    (directory / "qrels").write_text(
        "".join(f"{q} 0 {d} {v}\n" for q, d, v in long), encoding="utf-8"
    )
    table = pa.table(
        {
            "query_id": [r[0] for r in long],
            "doc_id": [r[1] for r in long],
            "relevance": [r[2] for r in long],
        }
    )
    pq.write_table(table, directory / "labels.parquet")
    (directory / "labels.csv").write_text(
        "query_id,doc_id,relevance\n" + "".join(f"{q},{d},{v}\n" for q, d, v in long),
        encoding="utf-8",
    )
    ranked = [
        (q, d, i + 1, f"{len(docs) - i}.0")
        for q, docs in rankings.items()
        for i, d in enumerate(docs)
    ]
    (directory / "run").write_text(
        "".join(f"{q} Q0 {d} {r} {s} t\n" for q, d, r, s in ranked), encoding="utf-8"
    )
    (directory / "run.csv").write_text(
        "query_id,doc_id,score\n" + "".join(f"{q},{d},{s}\n" for q, d, _, s in ranked),
        encoding="utf-8",
    )
    run = pa.table(
        {
            "query_id": [r[0] for r in ranked],
            "doc_id": [r[1] for r in ranked],
            "rank": [r[2] for r in ranked],
        }
    )
    pq.write_table(run, directory / "run.parquet")
    (directory / "outputs.json").write_text(json.dumps(rankings), encoding="utf-8")
    return rankings


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(collection=collections)
def test_every_reader_reads_the_same(
    collection: dict, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The same labels and rankings through YAML, JSON, JSONL, TREC, CSV and Parquet: the
    same ids, as written, and the same numbers."""
    directory = tmp_path_factory.mktemp("same")
    labels = collection["labels"]
    rankings = write_all(directory, labels, collection["extra"])
    expected = {q: {d: float(v) for d, v in docs.items()} for q, docs in labels.items()}
    for name in ("data.yaml", "data.json", "data.jsonl", "labels.parquet", "labels.csv"):
        assert qrels_of(sources.read_dataset(directory / name)[1]) == expected, name
    assert qrels_of(sources.read_qrels(directory / "qrels")) == expected
    assert run_of(sources.read_run(directory / "run")) == rankings
    for name in ("run.csv", "run.parquet", "outputs.json"):
        assert run_of(sources.read_outputs(directory / name)) == rankings, name


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(collection=collections)
def test_trec_files_as_trec_eval_reads_them(
    collection: dict, trec_eval_binary: Path, tmp_path_factory: pytest.TempPathFactory, capsysbinary
) -> None:
    """The same TREC files through ``slotwise trec-eval`` and trec_eval 10: the same bytes."""
    directory = tmp_path_factory.mktemp("binary")
    write_all(directory, collection["labels"], collection["extra"])
    args = ["-q", "-m", "all_trec", str(directory / "qrels"), str(directory / "run")]
    done = subprocess.run([str(trec_eval_binary), *args], capture_output=True, check=False)
    capsysbinary.readouterr()
    status = main(["trec-eval", *args])
    assert (status, capsysbinary.readouterr().out) == (done.returncode, done.stdout)
