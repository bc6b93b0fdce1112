"""``slotwise trec-eval QRELS RUN…``: many runs in one call print, for each run in order,
the bytes the trec_eval 10 binary (built from tests/data/trec_eval-10, as
tests/test_trec_eval_binary.py builds it) prints for that run alone; the exit status is
the worst run's. Checked on trec_eval's own test files and on seeded random collections
(test_trec_eval_binary.write_collection) with runs made from one another the ways
systems differ: rescored, cut short, a qrels query left out (the binary stops with
status 4 after printing the queries before it), CRLF line ends, another tag.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from test_trec_eval_binary import (
    Files,
    run_binary,
    run_slotwise,
    write_collection,
    write_judgment_groups,
    write_prefs,
)

if TYPE_CHECKING:
    from engine.io.columns import Columns

TEST_FILES = Path(__file__).parent / "data" / "trec_eval-10" / "test"

OPTIONS: tuple[tuple[str, ...], ...] = (
    (),
    ("-q",),
    ("-q", "-m", "all_trec"),
    ("-q", "-c", "-m", "all_trec"),
    ("-n", "-q", "-m", "official"),
    ("-q", "-J", "-M", "5", "-m", "all_trec"),
    ("-q", "-l", "2", "-m", "official"),
    ("-q", "-m", "P.5,7,3", "-m", "ndcg_cut.10,20", "-m", "relstring.5"),
    ("-m", "bogus"),  # status 1 before any run is read: no output
)


def _variants(run: Path, seed: int) -> list[Path]:
    """Runs of other "systems" from ``run``: the run itself, rescored (ties among them),
    cut to half its lines under another tag, without the ranking of one judged query,
    and in CRLF with tabs."""
    rng = random.Random(seed)
    lines = run.read_bytes().decode().splitlines()
    fields = [line.split() for line in lines]
    judged = sorted({f[0] for f in fields if not f[0].startswith("only")})
    rescored = [
        [*f[:4], rng.choice(["1.5", "0.5", repr(rng.uniform(-1, 2))]), *f[5:]] for f in fields
    ]
    halved = [[*f[:5], "half", *f[6:]] for f in fields[: len(fields) // 2]] + [fields[-1]]
    dropped = [f for f in fields if f[0] != judged[len(judged) // 2]]
    made = {
        "a-run": lines,
        "b-rescored": [" ".join(f) for f in rescored],
        "c-halved": [" ".join(f) for f in halved],
        "d-dropped": [" ".join(f) for f in dropped],
    }
    paths = []
    for name, text in made.items():
        path = run.with_name(name)
        path.write_text("\n".join(text) + "\n", encoding="utf-8")
        paths.append(path)
    crlf = run.with_name("e-crlf")
    crlf.write_bytes(("\r\n".join("\t".join(line.split()) for line in lines) + "\r\n").encode())
    return [*paths, crlf]


def _binary_each(
    binary: Path, args: Sequence[str], runs: Sequence[Path], cwd: Path
) -> tuple[int, bytes]:
    """The binary once per run: its outputs one after the other, the worst status."""
    done = [run_binary(binary, [*args, str(run)], cwd) for run in runs]
    return max(status for status, _ in done), b"".join(out for _, out in done)


def _check(
    binary: Path,
    options: Sequence[Sequence[str]],
    qrels: Path,
    runs: Sequence[Path],
    capsysbinary: pytest.CaptureFixture[bytes],
) -> list[str]:
    found = []
    for option in options:
        expected = _binary_each(binary, [*option, str(qrels)], runs, qrels.parent)
        got = run_slotwise([*option, str(qrels), *map(str, runs)], capsysbinary)
        if got != expected:
            found.append(
                f"{option}: status {got[0]}, binary {expected[0]}; same bytes: {got[1] == expected[1]}"
            )
    return found


@pytest.mark.parametrize("seed", [11, 12])
def test_random_runs_in_one_call_byte_for_byte(
    seed: int, trec_eval_binary: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    files = write_collection(tmp_path, seed, queries=30)
    runs = _variants(files.run, seed)
    statuses = {
        run.name: run_binary(trec_eval_binary, [str(files.qrels), str(run)], tmp_path)[0]
        for run in runs
    }
    assert statuses["d-dropped"] == 4 and statuses["a-run"] == 0  # the data has both cases
    assert _check(trec_eval_binary, OPTIONS, files.qrels, runs, capsysbinary) == []


def test_directory_and_glob_are_their_files_in_order(
    trec_eval_binary: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    files = write_collection(tmp_path, 13, queries=20)
    folder = tmp_path / "runs"
    folder.mkdir()
    runs = []
    for run in _variants(files.run, 13):
        runs.append(folder / run.name)
        shutil.move(run, runs[-1])
    (folder / ".hidden").write_text("not a run\n")  # skipped, as a sharded input skips it
    expected = _binary_each(trec_eval_binary, ["-q", str(files.qrels)], sorted(runs), tmp_path)
    for given in (
        [str(folder)],
        [str(folder / "*-*")],
        [str(folder / "a-run"), str(folder / "[b-e]*")],
    ):
        assert run_slotwise(["-q", str(files.qrels), *given], capsysbinary) == expected, given


def test_trec_evals_own_test_runs(
    trec_eval_binary: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """trec_eval's test runs against its qrels (results.trunc and results-302.test lack
    qrels queries: status 4, their -q lines up to the missing query), with -Z too."""
    runs = [
        TEST_FILES / name
        for name in ("results.test", "results.trunc", "results.test", "results-302.test")
    ]
    qrels = TEST_FILES / "qrels.test"
    options = [
        ("-q",),
        ("-c", "-q", "-m", "all_trec"),
        ("-q", "-Z", str(TEST_FILES / "zscores_file")),
    ]
    assert _check(trec_eval_binary, options, qrels, runs, capsysbinary) == []


def test_judgment_groups_and_preferences_many_runs(
    trec_eval_binary: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    files = write_collection(tmp_path, 14, queries=20, negative=False)
    runs = _variants(files.run, 14)
    grouped = write_judgment_groups(files, 14)
    prefs = write_prefs(Files(files.qrels, files.run, True), 14)
    options = [
        ("-q", "-R", "qrels_jg", "-m", "qrels_jg"),
        ("-q", "-c", "-R", "qrels_jg", "-m", "qrels_jg"),
    ]
    assert _check(trec_eval_binary, options, grouped, runs, capsysbinary) == []
    options = [("-q", "-R", "prefs", "-m", "all_prefs"), ("-c", "-R", "prefs", "-m", "prefs")]
    assert _check(trec_eval_binary, options, prefs, runs, capsysbinary) == []
    options = [("-q", "-R", "qrels_prefs", "-m", "all_prefs")]
    assert _check(trec_eval_binary, options, files.qrels, runs, capsysbinary) == []


def test_a_bad_run_among_many_is_named_and_the_others_go_on(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """An empty run (which slotwise refuses, status 2) and a missing file between two good
    runs: each named on standard error, the good runs' output as for each alone."""
    from engine.cli import main

    files = write_collection(tmp_path, 15, queries=10)
    empty, missing = tmp_path / "empty", tmp_path / "missing"
    empty.write_bytes(b"")
    capsysbinary.readouterr()
    alone = main(["trec-eval", str(files.qrels), str(files.run)]), capsysbinary.readouterr().out
    assert alone[0] == 0
    status = main(
        ["trec-eval", str(files.qrels), str(files.run), str(empty), str(missing), str(files.run)]
    )
    out, err = capsysbinary.readouterr()
    assert status == 2
    assert out == alone[1] * 2
    assert f"{empty}: cannot read results file '{empty}': it is empty".encode() in err
    assert str(missing).encode() in err and b"Traceback" not in err
    assert main(["trec-eval", str(files.qrels), str(tmp_path / "nothing-*")]) == 2
    assert b"no file matches" in capsysbinary.readouterr().err


def test_a_batch_reports_each_run_as_the_binary_prints_it(
    trec_eval_binary: Path, tmp_path: Path
) -> None:
    """trec_eval_many.reports and printed, called directly (the command falls back to one
    run at a time where a batch fails, so its output alone would not show a failing
    batch): each run's report renders as the binary's output for that run, with -q and
    with -c, and so do the per-query and 'all' lines formatted for the whole batch."""
    from engine.analysis import trec_eval_files as files
    from engine.analysis.trec_eval import Options, parse_measures
    from engine.analysis.trec_eval_many import printed, read_runs, reports, whole_runs
    from engine.evaluation.api import Engine

    collection = write_collection(tmp_path, 16, queries=25)
    qrels = files.read_qrels(collection.qrels)
    for complete in (False, True):
        flags = ["-q", "-m", "all_trec", *(["-c"] if complete else [])]
        outputs = {
            run: run_binary(trec_eval_binary, [*flags, str(collection.qrels), str(run)], tmp_path)
            for run in _variants(collection.run, 16)
        }
        runs = [run for run, (status, _) in outputs.items() if status == 0]  # whole runs
        assert len(runs) >= (5 if complete else 3)
        positions = range(len(runs))
        read, tags = read_runs([str(run) for run in runs], positions, files.read_run)
        assert read is not None
        whole = whole_runs(qrels, read, positions, complete)
        assert whole == list(positions)
        options = Options(complete=complete)
        measures = parse_measures(["all_trec"])
        engine = Engine(config={})
        made = reports(engine, qrels, read, tags, whole, measures, options)
        lines = printed(engine, qrels, read, tags, whole, measures, options)
        for number, run in enumerate(runs):
            report, (per_query, summary) = made[number], lines[number]
            assert report.render(per_query=True) == outputs[run][1], (run.name, complete)
            assert per_query + summary == outputs[run][1], (run.name, complete)


def _plain_runs(run: Path, seed: int) -> list[Path]:
    """Runs of six fields a line between single spaces (what trec_eval_many.read_together
    reads as one file), made from ``run``: rescored (ties, zeros, negatives), under other
    tags, one in tabs, one without its last newline, one without a judged query (the
    binary stops there: status 4)."""
    rng = random.Random(seed)
    fields = [line.split()[:6] for line in run.read_text(encoding="utf-8").splitlines()]
    judged = sorted({f[0] for f in fields if not f[0].startswith("only")})
    made = []
    for n in range(6):
        score = lambda: rng.choice(["1.5", "0", "-0.5", repr(round(rng.uniform(-1, 2), 3))])  # noqa: E731
        lines = [[*f[:4], score(), f"tag{n}"] for f in fields]
        if n == 4:
            lines = [f for f in lines if f[0] != judged[len(judged) // 2]]
        separator = "\t" if n == 2 else " "
        text = "\n".join(separator.join(f) for f in lines) + ("" if n == 3 else "\n")
        made.append(run.with_name(f"plain{n}"))
        made[-1].write_text(text, encoding="utf-8")
    return made


def _rankings(columns: Columns) -> dict[str, list[str]]:
    """Each query's ranked document ids."""
    docs = columns.docs.cast(pa.string()) if hasattr(columns.docs, "cast") else columns.docs
    return {
        qid: [docs[code].as_py() for code in codes]
        for qid, codes in zip(
            columns.ids.to_pylist(), columns.column("retrieved").to_pylist(), strict=True
        )
    }


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_plain_runs_read_together_as_each_alone(seed: int, tmp_path: Path) -> None:
    """read_together (the runs as one file) gives each plain run the rankings and tag
    that reading it alone gives (engine.io.trec, the normal path); a run in CRLF, and one
    in tabs after runs in spaces, go alone (runs in tabs alone go together), and a run
    that ranks a document twice, or whose score is not finite, makes every run go alone
    (its reader then names the line)."""
    from engine.analysis import trec_eval_files as files
    from engine.analysis.trec_eval_many import RUN_SEPARATOR, read_together
    from engine.io import trec

    collection = write_collection(tmp_path, seed, queries=15)
    runs = _plain_runs(collection.run, seed)
    crlf = tmp_path / "crlf"
    crlf.write_bytes(runs[0].read_bytes().replace(b"\n", b"\r\n"))
    tabs = tmp_path / "tabs"
    tabs.write_bytes(runs[1].read_bytes().replace(b" ", b"\t"))
    for names, plain in (
        ([str(run) for run in [*runs[:3], crlf, *runs[3:]]], [0, 1, 4, 5, 6]),
        ([str(runs[2]), str(tabs), str(runs[0])], [0, 1]),
    ):
        found = read_together(names, range(len(names)))
        assert found is not None
        together, tags = found
        assert sorted(tags) == plain
        rankings = _rankings(together)
        for number in plain:
            alone = {
                f"{number:09d}{RUN_SEPARATOR}{qid}": docs
                for qid, docs in _rankings(files.read_run(names[number])[0]).items()
            }
            assert {q: d for q, d in rankings.items() if q in alone} == alone
            assert sum(q.startswith(f"{number:09d}") for q in rankings) == len(alone)
            assert tags[number] == trec.run_tag(names[number])
    spaced = [str(run) for run in runs if run != runs[2]]
    assert read_together(spaced, range(len(spaced))) is not None
    twice = tmp_path / "twice"
    twice.write_text(runs[0].read_text() + runs[0].read_text().splitlines()[0] + "\n")
    assert read_together([*spaced, str(twice)], range(len(spaced) + 1)) is None
    infinite = tmp_path / "infinite"
    infinite.write_text(runs[0].read_text().replace("1.5", "1e400"))
    assert "1e400" in infinite.read_text()
    assert read_together([*spaced, str(infinite)], range(len(spaced) + 1)) is None


@pytest.mark.parametrize("seed", [24, 25])
def test_plain_runs_in_one_call_byte_for_byte(
    seed: int, trec_eval_binary: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """Runs read as one file print what the binary prints for each (with one that
    stops, status 4, and one in CRLF read alone)."""
    from engine.analysis.trec_eval_many import read_together

    collection = write_collection(tmp_path, seed, queries=20)
    runs = _plain_runs(collection.run, seed)
    crlf = tmp_path / "crlf"
    crlf.write_bytes(runs[1].read_bytes().replace(b"\n", b"\r\n"))
    assert read_together([str(run) for run in runs], range(len(runs))) is not None
    options = [
        ("-q",),
        ("-q", "-m", "all_trec"),
        ("-q", "-c", "-m", "all_trec"),
        ("-q", "-J", "-M", "5", "-m", "all_trec"),
        ("-n", "-q", "-l", "2", "-m", "official"),
        ("-q", "-m", "relstring.5", "-m", "P.5,7,3"),
    ]
    assert _check(trec_eval_binary, options, collection.qrels, [*runs, crlf], capsysbinary) == []


def test_runs_read_and_scored_in_several_batches(
    trec_eval_binary: Path,
    tmp_path: Path,
    capsysbinary: pytest.CaptureFixture[bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Batches of reading smaller than a run or two, and of scoring of two runs: the
    output is still the binary's for each run, in order."""
    from engine.analysis import trec_eval_many

    collection = write_collection(tmp_path, 26, queries=12)
    runs = _plain_runs(collection.run, 26)
    size = runs[0].stat().st_size
    monkeypatch.setattr(trec_eval_many, "TOGETHER_BYTES", int(size * 2.5))
    monkeypatch.setattr(trec_eval_many, "BATCH_ROWS", 2 * 12)
    reads = trec_eval_many.read_batches([str(run) for run in runs])
    assert len(reads) >= 3 and max(len(read) for read in reads) >= 2
    options = [("-q",), ("-q", "-c", "-m", "all_trec")]
    assert _check(trec_eval_binary, options, collection.qrels, runs, capsysbinary) == []


def _beside_rows(joined: Columns) -> list[object]:
    """Each row of a joined table as its id, its ranked documents' ids each with its label
    in the row (None: unlabelled), or None for no ranking, and its other output columns."""
    docs = joined.docs.cast(pa.string())
    found = []
    for row in joined.table.to_pylist():
        labels = {entry["doc"]: entry["label"] for entry in row["relevance"] or []}
        ranked = row["retrieved"]
        named = None if ranked is None else [(docs[c].as_py(), labels.get(c)) for c in ranked]
        rest = {k: v for k, v in row.items() if k not in ("relevance", "retrieved")}
        found.append((named, rest))
    return found


@pytest.mark.parametrize("seed", [27, 28])
def test_a_batch_joined_at_once_as_aligned_joins_it(seed: int, tmp_path: Path) -> None:
    """trec_eval_many's one lookup for a batch puts each run's rankings beside the qrels
    as the engine's join (pipeline.aligned) does: the same rows, each ranked document
    with the same label (or none), the same other columns; runs lacking a qrels query
    (a row of nulls) and ranking queries the qrels lack (left out) among them."""
    from engine.analysis import trec_eval_files as files
    from engine.analysis import trec_eval_many as many
    from engine.evaluation.pipeline import aligned

    collection = write_collection(tmp_path, seed, queries=20)
    runs = [str(run) for run in _plain_runs(collection.run, seed)]
    qrels = files.read_qrels(collection.qrels)
    read, _ = many.read_runs(runs, range(len(runs)), files.read_run)
    assert read is not None
    samples = many._repeated(qrels, range(len(runs)))
    joined = many._beside(qrels, samples, read)
    assert joined is not None
    expected, unknown = aligned(samples, read)
    assert unknown  # the runs rank queries the qrels lack
    assert joined.ids.equals(expected.ids)
    assert joined.table.column_names == expected.table.column_names
    assert _beside_rows(joined) == _beside_rows(expected)
    assert sum(row[0] is None for row in _beside_rows(joined)) > 0  # a run lacks a query


def test_standard_input_among_plain_runs(
    trec_eval_binary: Path,
    tmp_path: Path,
    capsysbinary: pytest.CaptureFixture[bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``-`` among runs read as one file is standard input, as for trec_eval, even with a
    file named ``-`` in the working folder."""
    import io

    collection = write_collection(tmp_path, 29, queries=10)
    runs = _plain_runs(collection.run, 29)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-").write_bytes(runs[5].read_bytes())  # (spaces, as runs[1])
    stdin = io.TextIOWrapper(io.BytesIO(runs[0].read_bytes()))
    monkeypatch.setattr("sys.stdin", stdin)
    expected = _binary_each(trec_eval_binary, ["-q", str(collection.qrels)], runs[:2], tmp_path)
    got = run_slotwise(["-q", str(collection.qrels), "-", str(runs[1])], capsysbinary)
    assert got == expected
