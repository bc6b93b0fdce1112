"""What a new user trips over on the command line: closed pipes, stream titles, the
metrics listing's width, validating TREC files, and the quickstart's README steps."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli import main

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart"
DATA = Path(__file__).resolve().parent / "data"


def _slotwise(*arguments: str, cwd: Path = QUICKSTART, closed: bool = False) -> tuple[int, str]:
    """Run ``python -m engine.cli`` in a subprocess: its exit status and stderr; with
    ``closed``, its stdout is a pipe whose reader has already gone (``| head``)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", *arguments],
        cwd=cwd,
        stdout=subprocess.PIPE if closed else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if closed:
        assert process.stdout is not None
        process.stdout.close()
    _, err = process.communicate()
    return process.returncode, err


@pytest.fixture(scope="module")
def results_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("results")
    paths = []
    for system in ("bm25", "hybrid-rerank"):
        paths.append(str(folder / f"{system}.json"))
        arguments = ["run", "quickstart", "--outputs", f"outputs/{system}.json"]
        code, err = _slotwise(*arguments, "--format", "json", "--output", paths[-1])
        assert code == 0, err
    return paths


class TestClosedPipe:
    @pytest.mark.parametrize(
        "arguments",
        [
            ["run", "quickstart"],
            ["run", "quickstart", "--format", "json"],
            ["metrics"],
            ["validate", "dataset.yaml"],  # one short line: still buffered when main returns
        ],
    )
    def test_exit_141_quietly(self, arguments):
        """`slotwise ... | head`: the reader went away; exit 141 (as C tools), no message
        (but the line that says which slotwise.yaml the command read, before its output)."""
        code, err = _slotwise(*arguments, closed=True)
        said = [line for line in err.splitlines() if not line.startswith("slotwise: read ")]
        assert (code, said) == (141, [])

    def test_compare(self, results_files):
        code, err = _slotwise("compare", *results_files, closed=True)
        said = [line for line in err.splitlines() if not line.startswith("slotwise: read ")]
        assert (code, said) == (141, [])


def test_stream_title_counts_the_samples(capsys):
    """--stream keeps no rows in memory, yet its table's title gives the real count."""
    arguments = ["run", "--qrels", str(DATA / "trec_eval" / "qrels.test"), "--run"]
    arguments += [str(DATA / "trec_eval" / "results.test"), "--metrics", "retrieval-map"]
    assert main([*arguments, "--stream"]) == 0
    streamed = capsys.readouterr().out
    assert main(arguments) == 0
    in_memory = capsys.readouterr().out
    title = in_memory.splitlines()[0].strip()
    assert title.endswith("samples)") and "(0 samples)" not in title
    assert streamed.splitlines()[0].strip() == title


def test_stream_chunks_are_of_4096_samples_unless_given(tmp_path):
    """`run --stream` scores chunks of 4,096 samples (a chunk's arrays are reused from the
    heap, docs/scale.md), as its provenance says; --chunk-size overrides it."""
    arguments = ["run", "--qrels", str(DATA / "trec_eval" / "qrels.test"), "--run"]
    arguments += [str(DATA / "trec_eval" / "results.test"), "--metrics", "retrieval-map"]
    for extra, size in (([], 4096), (["--chunk-size", "100"], 128)):
        out = tmp_path / f"{size}.json"
        assert main([*arguments, "--stream", *extra, "--format", "json", "--output", str(out)]) == 0
        assert json.loads(out.read_text())["provenance"]["chunk_size"] == size


def test_metrics_fit_the_terminal(monkeypatch):
    """On a 120-column terminal the metrics table is at most 120 columns wide, every
    alias whole on one line."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["metrics"]) == 0
    lines = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue()).splitlines()
    assert max(map(len, lines)) <= 120
    assert any("│ retrieval-ndcg-at-k " in line for line in lines)


class TestValidate:
    def test_trec_files(self, capsys):
        """TREC qrels and runs are recognised by their columns and read as trec_eval reads
        them; the count is the number of distinct query ids in the file."""
        for name, kind in (("qrels.test", "qrels"), ("results.test", "run")):
            path = DATA / "trec_eval" / name
            queries = {line.split()[0] for line in path.read_text().splitlines() if line.strip()}
            assert main(["validate", str(path)]) == 0
            assert capsys.readouterr().out == f"{path}: valid {kind} ({len(queries)} queries)\n"

    def test_malformed_trec_lines(self, tmp_path, capsys):
        qrels = tmp_path / "qrels.txt"
        qrels.write_text("q1 0 d1 1\nq1 0 d2 high\n")
        assert main(["validate", str(qrels)]) == 2
        assert (
            f"{qrels}:2 sample 'q1': relevance 'high' is not a finite number"
            in capsys.readouterr().err
        )
        run = tmp_path / "run.trec"
        run.write_text("q1 Q0 d1 1 2.0 tag\nq1 Q0 d2 2 1.0\n")
        assert main(["validate", str(run)]) == 2
        assert f"{run}:2 sample 'q1': expected 6 fields" in capsys.readouterr().err

    def test_unknown_kind_says_so(self, tmp_path, capsys):
        path = tmp_path / "notes.txt"
        path.write_text("three words here\n")
        assert main(["validate", str(path)]) == 2
        err = capsys.readouterr().err
        assert "first line has 3 columns, not a TREC qrels (4) or run (6) line: pass --kind" in err
        assert "Traceback" not in err

    def test_yaml_dataset_problems_have_lines(self, tmp_path, capsys):
        """Each problem of a YAML dataset names the line of the offending value."""
        path = tmp_path / "d.yaml"
        path.write_text(
            "name: t\n"
            "samples:\n"
            "  - id: a\n"
            "    expected_output: [x]\n"
            "  - id: b\n"
            "    expected_output:\n"
            "      relevance: {x: high}\n"
            "  - id: c\n"
            "    metadata: 3\n"
        )
        assert main(["validate", str(path)]) == 2
        err = capsys.readouterr().err
        assert f"{path}:7 sample 'b' /samples/1/expected_output/relevance/x:" in err
        assert f"{path}:9 sample 'c' /samples/2/metadata:" in err
        path.write_text("name: 3\nsamples: []\n")
        assert main(["validate", str(path)]) == 2
        assert f"{path}:1 /name:" in capsys.readouterr().err


@pytest.mark.slow
def test_quickstart_readme_by_hand(tmp_path):
    """examples/quickstart/README.md's "By hand" steps, run as written in a copy of the
    layout: they succeed, and report and explain, run from the root, find the dataset
    (the report embeds the per-sample view; no warning)."""
    import shlex
    import shutil

    text = (QUICKSTART / "README.md").read_text()
    block = text.split("By hand:\n\n```console\n", 1)[1].split("```", 1)[0]
    root = tmp_path / "repo"
    shutil.copytree(QUICKSTART, root / "examples" / "quickstart")
    (root / "out").mkdir()
    here = root
    for line in block.splitlines():
        words = shlex.split(line.removeprefix("$ "))
        if words[0] == "cd":
            here = (here / words[1]).resolve()
            continue
        assert words[0] == "slotwise"
        code, err = _slotwise(*words[1:], cwd=here)
        assert code == 0, (line, err)
        assert "warning" not in err, (line, err)
    assert '"explain":{' in (root / "out" / "report.html").read_text()


@pytest.mark.parametrize("curve", [[], ["--k", "1,3"]], ids=["summary", "curves"])
def test_all_na_metric_says_why(curve, monkeypatch, capsys):
    """`slotwise run` says under its table why a metric is NA on every sample (the
    quickstart has no claims: context-recall-at-k documents it is NA without them)."""
    monkeypatch.chdir(QUICKSTART)
    arguments = ["run", "quickstart", "--metrics", "context-recall-at-k,retrieval-mrr", *curve]
    assert main(arguments) == 0
    out = capsys.readouterr().out
    labels = (
        ["context-recall-at-k@1", "context-recall-at-k@3"] if curve else ["context-recall-at-k"]
    )
    for label in labels:
        assert f"\n{label} is NA on every sample; it is NA when the sample has no claims" in out
    assert "retrieval-mrr is NA" not in out and "retrieval-mrr@1 is NA" not in out


def test_stream_reads_a_declared_dataset(tmp_path, monkeypatch, capsys):
    """`run NAME --stream` of a dataset slotwise.yaml declares reads its file, its outputs
    and its metrics where the command line gives none, and names it as declared: the
    numbers of the same run in memory (it was "unknown dataset format ''")."""
    shutil.copytree(ROOT / "examples" / "quickstart", tmp_path / "quickstart")
    monkeypatch.chdir(tmp_path / "quickstart")
    monkeypatch.setenv("SLOTWISE_CONFIG", "")
    argv = ["run", "quickstart", "--format", "json"]
    assert main(argv) == 0  # the declared outputs and metrics
    in_memory = json.loads(capsys.readouterr().out)
    assert main([*argv, "--stream"]) == 0
    streamed = json.loads(capsys.readouterr().out)
    assert streamed["dataset"]["name"] == in_memory["dataset"]["name"] == "quickstart"
    assert streamed["summary"] == in_memory["summary"] and len(in_memory["summary"]) > 3
    assert streamed["dataset"]["hash"] == in_memory["dataset"]["hash"]
    given = ["--outputs", "outputs/bm25.json", "--metrics", "retrieval-map", "--stream"]
    assert main([*argv, *given]) == 0
    assert list(json.loads(capsys.readouterr().out)["summary"]) == ["retrieval-map"]
