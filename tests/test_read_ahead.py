"""A fresh command line: the TREC files it names are parsed while slotwise is imported,
it imports what its command needs, and nothing it prints or writes changes for it."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import engine
from engine.cli import commands, main
from engine.cli.ahead import files_to_read
from engine.cli.common import Parser
from engine.io import trec, trec_csv

QRELS = "q1 0 d1 1\nq1 0 d2 0\nq1 0 d3 2\nq2 0 d4 1\n"
RUN = "q1 Q0 d3 1 3.0 sys\nq1 Q0 d9 2 2.0 sys\nq1 Q0 d1 3 1.0 sys\nq2 Q0 d5 1 1.0 sys\n"


def _program() -> list[str]:
    return [shutil.which("slotwise") or str(Path(sys.executable).parent / "slotwise")]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "q.qrels").write_text(QRELS)
    (tmp_path / "r.run").write_text(RUN)
    return tmp_path / "q.qrels", tmp_path / "r.run"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["run", "--qrels", "q", "--run", "r", "--metrics", "retrieval-mrr"], [("q", "qrels"), ("r", "run")]),
        (["-v", "--config", "c.yaml", "run", "--run=r", "--qrels=q"], [("r", "run"), ("q", "qrels")]),
        (["--log-format", "json", "run", "--qrels", "q"], [("q", "qrels")]),
        (["run", "--qrels", "q", "--run", "r", "--stream"], []),
        (["run", "--qrels", "q", "--run", "r", "--subtopics"], []),
        (["run", "--qrels", "q", "--run", "r", "--help"], []),
        (["run", "--qrels"], []),
        (["trec-eval", "-q", "-m", "all_trec", "q", "r"], [("q", "qrels"), ("r", "run")]),
        (["trec-eval", "q", "r"], [("q", "qrels"), ("r", "run")]),
        (["trec-eval", "-R", "qrels_jg", "q", "r"], []),
        (["trec-eval", "q", "-"], []),
        (["trec-eval", "q", "r", "-q"], []),
        (["compare", "a.json", "b.json"], []),
        ([], []),
    ],
)  # fmt: skip
def test_the_files_a_command_line_reads_whole(argv, expected):
    """run's --qrels and --run (not streamed, no --subtopics), trec-eval's last two
    arguments (no -R, no standard input), nothing for --help or another command."""
    assert files_to_read(argv) == expected


def _columns(path: Path, kind: str) -> dict:
    read = trec.read_qrels if kind == "qrels" else trec.read_run
    return read(path).table.to_pydict()


@pytest.mark.parametrize("kind", ["qrels", "run"])
def test_a_file_read_ahead_reads_as_one_read_when_asked(files, kind):
    """What the reader gives from the table parsed ahead is what it gives reading the file
    then; the table is taken once."""
    path = files[0] if kind == "qrels" else files[1]
    expected = _columns(path, kind)
    trec_csv.read_ahead(str(path), kind)
    assert trec_csv._key(path, kind) in trec_csv._AHEAD
    assert _columns(path, kind) == expected
    assert trec_csv._key(path, kind) not in trec_csv._AHEAD


def test_a_file_changed_since_it_was_read_ahead_is_read_again(files):
    qrels, _ = files
    trec_csv.read_ahead(str(qrels), "qrels")
    trec_csv._AHEAD[trec_csv._key(qrels, "qrels")][1].result()  # parsed
    qrels.write_text(QRELS.replace("q2 0 d4 1", "q2 0 d4 3"))
    os.utime(qrels, ns=(time.time_ns(), time.time_ns() + 10**9))
    judged = trec.read_qrels(qrels).table.to_pydict()["relevance"][1]
    assert [label["label"] for label in judged] == [3.0]  # the table parsed ahead: 1.0


def test_only_regular_files_are_read_ahead(tmp_path):
    """A path that is missing or not a regular file (a pipe is read once) is left for the
    reader, which says what is wrong with it."""
    trec_csv.read_ahead(str(tmp_path / "missing.qrels"), "qrels")
    trec_csv.read_ahead(str(tmp_path), "qrels")
    assert not trec_csv._AHEAD


def test_the_reader_takes_an_unparsable_file_read_ahead_to_the_line_reader(tmp_path):
    """A file pyarrow cannot parse is read line by line, and its bad lines named, read
    ahead or not."""
    bad = tmp_path / "bad.qrels"
    bad.write_text("q1 0 d1 1\nq1 0 d2\n")
    with pytest.raises(engine.InputError) as direct:
        trec.read_qrels(bad)
    trec_csv.read_ahead(str(bad), "qrels")
    with pytest.raises(engine.InputError) as ahead:
        trec.read_qrels(bad)
    assert str(ahead.value) == str(direct.value) and ":2" in str(ahead.value)


@pytest.fixture(autouse=True)
def _nothing_left_ahead():
    yield
    for _, table in trec_csv._AHEAD.values():
        table.result()
    trec_csv._AHEAD.clear()


def test_the_program_prints_what_main_prints(files, tmp_path, capsys):
    """The installed program, which reads ahead, writes the values main() writes without."""
    qrels, run = files
    argv = ["trec-eval", "-q", "-m", "all_trec", str(qrels), str(run)]
    assert main(argv) == 0
    expected = capsys.readouterr().out
    done = subprocess.run([*_program(), *argv], capture_output=True, text=True, check=True)
    assert done.stdout == expected
    metrics = "retrieval-ndcg-at-k@10,retrieval-map"
    argv = [
        "run",
        "--qrels",
        str(qrels),
        "--run",
        str(run),
        "--metrics",
        metrics,
        "--format",
        "json",
    ]
    assert main([*argv, "--output", str(tmp_path / "main.json")]) == 0
    subprocess.run([*_program(), *argv, "--output", str(tmp_path / "program.json")], check=True)
    written = [json.loads((tmp_path / name).read_text()) for name in ("main.json", "program.json")]
    for part in ("dataset", "metrics", "samples", "summary", "diagnostics"):
        assert written[0][part] == written[1][part]


def test_a_command_that_fails_before_it_reads_ends_at_once(files):
    """A usage error after the files were read ahead: exit 2 with the message, no
    traceback (the process waits for the parse it started, then ends)."""
    qrels, run = files
    argv = ["run", "--qrels", str(qrels), "--run", str(run), "--metrics", "retrieval-mrr"]
    done = subprocess.run(
        [*_program(), *argv, "--format", "parquet"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "--format parquet writes a file" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run(
        [*_program(), "trec-eval", "-m", "no_such_measure", str(qrels), str(run)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr


_IMPORTED = """
import sys
import {module}
print(sorted(m for m in sys.modules if m.startswith("engine.")))
"""


@pytest.mark.parametrize("module", ["engine", "engine.cli", "engine.io.trec_csv"])
def test_the_program_starts_reading_before_the_evaluation_is_imported(module):
    """``engine``, the program's module and the parse read ahead import no evaluation,
    analysis or command module: the files are parsed while those are imported."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTED.format(module=module)],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = set(eval(done.stdout))
    assert not {m for m in imported if m.startswith(("engine.evaluation", "engine.analysis"))}
    assert not imported & {f"engine.cli.{name}" for name in commands.MODULES}


def test_every_public_name_is_there_when_used():
    """``engine``'s names are imported at first use, each from where it is defined."""
    for name in engine.__all__:
        assert getattr(engine, name) is not None
    assert set(engine.__all__) <= set(dir(engine))
    assert engine.Engine is importlib.import_module("engine.evaluation.api").Engine
    with pytest.raises(AttributeError, match="no_such_name"):
        engine.no_such_name  # noqa: B018


def test_each_command_is_found_from_its_name():
    """The commands each module adds are the ones commands.MODULES says, so a command line
    imports the module of its command alone."""
    every = Parser(prog="slotwise").add_subparsers(dest="command")
    for name, adds in commands.MODULES.items():
        alone = Parser(prog="slotwise").add_subparsers(dest="command")
        assert tuple(importlib.import_module(f"engine.cli.{name}").add(alone)) == adds
        importlib.import_module(f"engine.cli.{name}").add(every)
    assert sorted(every.choices) == sorted(c for adds in commands.MODULES.values() for c in adds)


def test_the_version_is_the_installed_ones():
    assert engine.__version__ == importlib.metadata.version("slotwise")
    assert main(["--version"]) == 0


_BLAS_THREADS = """
import atexit, sys
from engine.cli import program
def report():
    import threadpoolctl
    print([p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"])
atexit.register(report)
sys.argv = ["slotwise", "metrics", "--format", "json"]  # a command that imports numpy
program()
"""


@pytest.mark.parametrize(("environment", "threads"), [({}, 1), ({"OPENBLAS_NUM_THREADS": "2"}, 2)])
def test_the_program_runs_blas_on_one_thread_unless_told(environment, threads):
    """OpenBLAS's other threads would spin beside the parse for nothing (each BLAS loaded:
    numpy's, and scipy's when a plugin imports it)."""
    env = {name: value for name, value in os.environ.items() if name != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run(
        [sys.executable, "-c", _BLAS_THREADS],
        capture_output=True,
        text=True,
        env={**env, **environment},
        check=True,
    )
    found = json.loads(done.stdout.splitlines()[-1])
    assert found and set(found) == {threads}
