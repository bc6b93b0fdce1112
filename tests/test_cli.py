"""The slotwise command line: commands, formats, exit codes, and no tracebacks on user errors."""

from __future__ import annotations

import gc
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli import main, program
from engine.cli.commands import MODULES
from engine.cli.common import split_specs

DATASET = """\
name: tiny
samples:
  - id: q-1
    input: {question: "What is our refund window?"}
    expected_output: [doc-3, doc-9]
  - id: q-2
    expected_output: {doc-1: 2, doc-2: 1}
    metadata: {stratum: graded}
"""
OUTPUTS = {"q-1": ["doc-7", "doc-3", "doc-1", "doc-9", "doc-2"], "q-2": ["doc-2", "doc-1"]}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "data.yaml").write_text(DATASET)
    (tmp_path / "outputs.json").write_text(json.dumps(OUTPUTS))
    (tmp_path / "slotwise.yaml").write_text(
        "datasets:\n  tiny:\n    path: data.yaml\n    outputs: outputs.json\n    metrics: [retrieval-mrr, retrieval-hit-at-k@1]\n"
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


class TestRun:
    def test_declared_dataset_needs_nothing_else(self, project, capsys):
        """`slotwise run NAME` uses the declared outputs and metrics."""
        assert main(["run", "tiny"]) == 0
        out = capsys.readouterr().out
        assert "retrieval-mrr" in out and "0.7500" in out  # (1/2 + 1/1) / 2
        assert "retrieval-hit-at-k@1" in out and "0.5000" in out

    def test_only_declared_dataset_is_the_default(self, project, capsys):
        """With one declared dataset the name may be left out."""
        assert main(["run", "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out)["dataset"]["name"] == "tiny"

    def test_file_dataset_with_metrics_and_k(self, project, capsys):
        """A path, --metrics (commas inside parentheses kept) and --k for specs without k."""
        code = main(
            [
                "run",
                "data.yaml",
                "--outputs",
                "outputs.json",
                "--metrics",
                "retrieval-recall-at-k,retrieval-ndcg-at-k(k=2, gain=exponential)",
                "--k",
                "3",
                "--format",
                "json",
            ]
        )
        assert code == 0
        document = json.loads(capsys.readouterr().out)
        labels = [m["label"] for m in document["metrics"]]
        assert labels == ["retrieval-recall-at-k@3", "retrieval-ndcg-at-k@2(gain=exponential)"]
        assert document["summary"]["retrieval-recall-at-k@3"]["mean"] == 0.75  # (1/2 + 2/2) / 2

    def test_csv_to_file(self, project, capsys):
        """--output writes the chosen format to a file."""
        assert main(["run", "tiny", "--format", "csv", "--output", "scores.csv"]) == 0
        assert (project / "scores.csv").read_text().splitlines()[
            0
        ] == "id,retrieval-mrr,retrieval-hit-at-k@1"

    def test_table_reports_diagnostics(self, project, capsys):
        """Missing outputs and duplicates are reported under the table: an outputs file's
        missing sample is an error row (exit 3, as Python scores it), or with --missing
        empty an empty ranking (exit 0)."""
        (project / "partial.json").write_text(json.dumps({"q-1": ["doc-3", "doc-3"]}))
        assert main(["run", "tiny", "--outputs", "partial.json"]) == 3
        out = capsys.readouterr().out
        assert "1 sample(s) failed and are NA: q-2" in out and "no output" in out
        assert "1 duplicate retrieved id(s) dropped" in out
        assert main(["run", "tiny", "--outputs", "partial.json", "--missing", "empty"]) == 0
        out = capsys.readouterr().out
        assert "1 sample(s) had no output" in out and "q-2" in out


class TestExitCodes:
    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            (
                ["run", "tiny", "--metrics", "retrieval-ndgc-at-k"],
                "Did you mean: retrieval-ndcg-at-k",
            ),
            (
                ["run", "tiny", "--metrics", "retrieval-ndcg-at-k(k=x)"],
                "k must be a positive integer, got 'x'",
            ),
            (["run", "tiny", "--k", "0"], "must be a positive integer"),
            (
                ["run", "missing.yaml", "--outputs", "outputs.json", "--metrics", "retrieval-mrr"],
                "cannot read file",
            ),
            (["run", "nope"], "no dataset named 'nope'"),
            (["run", "tiny", "--outputs", "broken.json"], "malformed JSON"),
            (["run", "tiny", "--outputs", "strict.json", "--strict"], "not in the dataset"),
            (["run", "tiny", "--metrics", "answer-containment-at-k"], "needs answers"),
            (["validate", "bad.yaml"], "'oops' is not of type 'number'"),
            (["frobnicate"], "invalid choice"),
        ],
    )
    def test_user_errors_exit_2(self, project, capsys, argv, message):
        """Bad input and usage exit 2 with a message on stderr and no traceback."""
        (project / "broken.json").write_text('{"q-1": [')
        (project / "strict.json").write_text('{"q-9": []}')
        (project / "bad.yaml").write_text("samples:\n  - id: a\n    expected_output: {d: oops}\n")
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err
        assert "Traceback" not in err

    def test_help_and_version_exit_0(self, capsys):
        """--help and --version exit 0."""
        assert main(["--version"]) == 0
        assert main(["run", "--help"]) == 0
        assert "--outputs" in capsys.readouterr().out


class TestOtherCommands:
    def test_metrics_json(self, capsys):
        """`slotwise metrics` lists aliases with family, distribution and description."""
        assert main(["metrics", "--format", "json"]) == 0
        infos = {i["alias"]: i for i in json.loads(capsys.readouterr().out)}
        assert infos["retrieval-mrr"]["distribution"] == "slotwise"
        assert infos["retrieval-mrr"]["family"] == "retrieval"
        assert infos["retrieval-mrr"]["description"]

    def test_metrics_in_a_pipe_one_per_line(self, capsys):
        """Not on a terminal, `slotwise metrics` prints alias, family, distribution and
        description per line, tab-separated: grep finds every alias whole."""
        assert main(["metrics"]) == 0
        lines = capsys.readouterr().out.splitlines()
        rows = {line.split("\t")[0]: line.split("\t") for line in lines}
        assert all(len(row) == 4 for row in rows.values())
        assert rows["answer-containment-at-k"][1:3] == ["rag", rows["answer-containment-at-k"][2]]
        assert rows["answer-containment-at-k"][2].startswith("slotwise ")
        assert rows["retrieval-mrr"][3].startswith("1 / rank of the first relevant document")

    def test_tables_never_wrap_a_label(self, project, capsys):
        """A long metric label stays whole on one line of the table, even in a pipe."""
        long = "retrieval-err-at-k@10(mapping=linear, max_grade=3)"
        assert main(["run", "tiny", "--metrics", long, "--by", "stratum"]) == 0
        out = capsys.readouterr().out
        assert sum(long in line for line in out.splitlines()) == 3  # summary + two strata

    @pytest.mark.parametrize(
        ("name", "kind"),
        [
            ("data.yaml", "dataset (2 samples)"),
            ("outputs.json", "outputs (2 outputs)"),
            ("slotwise.yaml", "config"),
        ],
    )
    def test_validate_guesses_kind(self, project, capsys, name, kind):
        """validate recognises datasets, outputs and config files."""
        assert main(["validate", name]) == 0
        assert f"valid {kind}" in capsys.readouterr().out

    def test_validate_help_names_every_kind(self, capsys):
        """`slotwise --help` and `slotwise validate --help` name every kind of file that
        validate checks (its --kind choices)."""
        assert main(["--help"]) == 0
        lines = capsys.readouterr().out.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("    validate "))
        ends = [i for i, line in enumerate(lines) if i > start and not line.startswith(" " * 8)]
        listed = " ".join(lines[start : ends[0]])
        assert main(["validate", "--help"]) == 0
        page = capsys.readouterr().out.split("\n\n", 1)[1]  # after the usage line
        described = page.split("options:")[0]
        for text in (listed, described):
            for kind in ("dataset", "outputs", "config", "results", "qrels", "run"):
                assert kind in text, (kind, text)

    def test_validate_results(self, project, capsys):
        """A results file written by `run` validates against the results schema."""
        assert main(["run", "tiny", "--format", "json", "--output", "results.json"]) == 0
        assert main(["validate", "results.json"]) == 0
        assert "valid results" in capsys.readouterr().out

    def test_validate_reports_config_problems(self, project, capsys):
        """An invalid slotwise.yaml is reported with the offending key."""
        (project / "slotwise.yaml").write_text("metrics:\n  retrieval:\n    default_k: -1\n")
        assert main(["validate", "slotwise.yaml"]) == 2
        assert "/metrics/retrieval/default_k" in capsys.readouterr().err


def test_split_specs():
    """Commas inside parentheses do not split metric specs."""
    assert split_specs(["a,b(k=1, g=x)", " c "]) == ["a", "b(k=1, g=x)", "c"]


def test_console_script_json_logs(project):
    """The installed program runs, logs JSON events to stderr with --log-format json -v."""
    program = shutil.which("slotwise") or str(Path(sys.executable).parent / "slotwise")
    done = subprocess.run(
        [program, "--log-format", "json", "-v", "run", "tiny", "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)
    events = [json.loads(line) for line in done.stderr.splitlines()]
    assert any(e["event"] == "evaluation.finished" and e["samples"] == 2 for e in events)


class TestTrecFiles:
    def test_run_on_qrels_and_run_matches_trec_eval(
        self, reference_data, tmp_path, monkeypatch, capsys
    ):
        """`run --qrels --run` reproduces trec_eval's `all` values from its own test suite."""
        monkeypatch.chdir(tmp_path)
        folder = reference_data / "trec_eval"
        expected = {}
        for line in (folder / "out.test.aq").read_text().splitlines():
            name, query, value = line.split()
            if query == "all" and name in ("map", "Rprec", "recip_rank", "P_10", "ndcg_cut_10"):
                expected[name] = float(value)
        specs = "retrieval-map,retrieval-r-precision,retrieval-mrr,retrieval-precision-at-k@10,retrieval-ndcg-at-k@10"
        argv = [
            "run",
            "--qrels",
            str(folder / "qrels.test"),
            "--run",
            str(folder / "results.test"),
            "--metrics",
            specs,
            "--format",
            "json",
        ]
        assert main(argv) == 0
        summary = json.loads(capsys.readouterr().out)["summary"]
        labels = dict(
            zip(
                ["map", "Rprec", "recip_rank", "P_10", "ndcg_cut_10"], specs.split(","), strict=True
            )
        )
        for name, label in labels.items():
            assert summary[label]["mean"] == pytest.approx(expected[name], abs=5e-5), name

    def test_run_document_is_the_apis(self, reference_data, tmp_path, monkeypatch, capsys):
        """`run --qrels --run --format json` (which hashes the qrels on a thread while it
        reads the run, and reads the two files side by side) writes the document the API
        makes reading them one after the other: hash, summary, per-sample rows."""
        import engine
        from engine.io import trec

        monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
        monkeypatch.chdir(tmp_path)  # no configuration file, for either
        folder = reference_data / "trec_eval"
        specs = ["retrieval-map", "retrieval-ndcg-at-k@10"]
        argv = ["run", "--qrels", str(folder / "qrels.test"), "--run"]
        argv += [str(folder / "results.test"), "--metrics", ",".join(specs), "--format", "json"]
        assert main(argv) == 0
        written = json.loads(capsys.readouterr().out)
        dataset = engine.Engine().dataset(trec.read_qrels(folder / "qrels.test"), name="qrels")
        results = dataset.with_metrics(specs).evaluate(trec.read_run(folder / "results.test"))
        expected = json.loads(results.to_json())
        assert written["dataset"]["hash"] == dataset.hash == expected["dataset"]["hash"]
        assert written["dataset"]["hash"].startswith("sha256:")
        assert written == expected

    def test_import_export_round_trip(self, reference_data, tmp_path, monkeypatch, capsys):
        """qrels + run -> dataset + outputs -> qrels + run gives the same scores."""
        monkeypatch.chdir(tmp_path)
        folder = reference_data / "trec_eval"
        assert (
            main(
                [
                    "trec",
                    "import",
                    str(folder / "qrels.test"),
                    str(folder / "results.test"),
                    "--dataset-out",
                    "d.yaml",
                    "--outputs-out",
                    "o.json",
                ]
            )
            == 0
        )
        assert (
            main(
                [
                    "trec",
                    "export",
                    "d.yaml",
                    "--outputs",
                    "o.json",
                    "--qrels-out",
                    "q",
                    "--run-out",
                    "r",
                ]
            )
            == 0
        )
        capsys.readouterr()
        scores = []
        for argv in (
            ["run", "d.yaml", "--outputs", "o.json"],
            ["run", "--qrels", "q", "--run", "r"],
        ):
            assert (
                main(
                    [*argv, "--metrics", "retrieval-map,retrieval-ndcg-at-k@20", "--format", "csv"]
                )
                == 0
            )
            scores.append(capsys.readouterr().out)
        assert scores[0] == scores[1]
        assert len(scores[0].splitlines()) == 4  # header + 3 queries

    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            (["run", "tiny", "--qrels", "q"], "either DATASET or --qrels"),
            (
                ["run", "tiny", "--run", "bad.run", "--outputs", "outputs.json"],
                "either --outputs or --run",
            ),
            (["run", "tiny", "--run", "bad.run"], "bad.run:2"),
            (
                ["trec", "import", "q", "--dataset-out", "d.jsonl", "--outputs-out", "o.json"],
                "needs a RUN",
            ),
        ],
    )
    def test_trec_usage_errors(self, project, capsys, argv, message):
        """Conflicting options and malformed TREC lines exit 2 with a clear message."""
        (project / "q").write_text("q-1 0 doc-3 1\n")
        (project / "bad.run").write_text("q-1 Q0 doc-3 1 2.0 tag\nq-1 Q0 doc-9 two\n")
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("module", "argv", "extra"),
    [
        ("ray", ["run", "tiny", "--executor", "ray"], "ray"),
    ],
)
def test_missing_optional_dependency_exits_2(project, capsys, monkeypatch, module, argv, extra):
    """A feature whose optional extra is not installed is a usage error naming the extra."""
    monkeypatch.setitem(sys.modules, module, None)  # makes `import <module>` fail
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"pip install 'slotwise[{extra}]'" in err and "Traceback" not in err


_PANDAS_LATER = """
import math, sys
from engine.cli import main
assert main(sys.argv[1:]) == 0
imported = {"pandas", "structlog", "asyncio"} & set(sys.modules)
assert not imported, f"the command imported {imported}"
import pandas as pd, pyarrow as pa
series = pa.array(pd.Series([1.0, math.nan]))
assert series.null_count == 1, series  # NaN in a Series is null, as pyarrow's default
assert pa.types.is_dictionary(pa.array(pd.Categorical(["a", "b", "a"])).type)
frame = pa.Table.from_pandas(pd.DataFrame({"x": [1.0, math.nan]}), preserve_index=False)
assert frame.column("x").null_count == 1
print("ok")
"""


def test_the_command_line_imports_no_pandas_and_pyarrow_knows_it_later(tmp_path: Path):
    """pyarrow looks for pandas at its first conversion (0.2-0.35 s of a fresh process);
    the command line has it find none while pandas is not imported, and once something
    imports pandas, pyarrow converts pandas objects as it does by default (NaN to null,
    categoricals to dictionaries). A command that logs nothing and calls no system
    imports neither structlog nor asyncio either (some 40 ms)."""
    pytest.importorskip("pandas")
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 a 1\nq2 0 b 1\n", encoding="utf-8")
    run = tmp_path / "r.txt"
    run.write_text("q1 Q0 a 1 2 t\nq1 Q0 c 2 1 t\nq2 Q0 d 1 1 t\n", encoding="utf-8")
    argv = ["run", "--qrels", str(qrels), "--run", str(run), "--metrics", "retrieval-map",
            "--format", "json", "--output", str(tmp_path / "out.json")]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", _PANDAS_LATER, *argv], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


_HELP_IMPORTS = """
import json, sys
from engine.cli import main
from engine.cli.commands import MODULES
heavy = ("numpy", "pyarrow", "jsonschema", "rich", "structlog", "yaml", "orjson", "httpx",
         "attrs", "inspect", "logging", "tempfile", "importlib.abc", "importlib.resources")
lines = [["--version"], ["--help"]] + [[c, "--help"] for adds in MODULES.values() for c in adds]
found = {}
for argv in lines:
    assert main(argv) == 0, argv
    found[" ".join(argv)] = sorted(name for name in heavy if name in sys.modules)
print(json.dumps(found))
"""


@pytest.mark.slow
def test_help_and_version_import_nothing_heavy():
    """``--version``, ``--help`` and every command's ``--help`` build the parser alone:
    numpy, pyarrow, jsonschema, rich, structlog, attrs, logging and the rest are imported
    when a command runs, not before (a fresh process's 0.5 s down to 0.06-0.08 s, its
    interpreter's 0.03-0.04 s and argparse's)."""
    done = subprocess.run(
        [sys.executable, "-c", _HELP_IMPORTS], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert len(found) == 2 + sum(len(adds) for adds in MODULES.values())
    assert {argv: names for argv, names in found.items() if names} == {}


def test_arrows_buffers_come_from_the_system_allocator_unless_the_user_chose(monkeypatch):
    """The command line gives Arrow the C library's allocator (mimalloc, Arrow's default,
    keeps the pages its threads freed); ARROW_DEFAULT_MEMORY_POOL, when set, is obeyed."""
    import pyarrow as pa

    before = pa.default_memory_pool()
    try:
        mimalloc = pa.mimalloc_memory_pool()
    except NotImplementedError:
        pytest.skip("this pyarrow has no mimalloc")
    try:
        pa.set_memory_pool(mimalloc)
        monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
        assert main(["metrics", "--format", "json"]) == 0
        assert pa.default_memory_pool().backend_name == "system"
        pa.set_memory_pool(mimalloc)
        monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "mimalloc")
        assert main(["metrics", "--format", "json"]) == 0
        assert pa.default_memory_pool().backend_name == "mimalloc"
    finally:
        pa.set_memory_pool(before)


@pytest.mark.parametrize(("argv", "code"), [(["--version"], 0), (["run", "--no-such-option"], 2)])
def test_the_program_exits_with_mains_code_its_objects_left_to_the_exit(monkeypatch, argv, code):
    """``slotwise`` and ``python -m engine.cli`` end with main's exit code, the objects
    alive then frozen: the interpreter's collections at shutdown pass them by (35-40 ms
    of each command's exit)."""
    monkeypatch.setattr(sys, "argv", ["slotwise", *argv])
    try:
        with pytest.raises(SystemExit) as exit_:
            program()
        assert exit_.value.code == code
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


_NEW_HEAPS = """
import ctypes, sys, tempfile, threading
from engine.cli import process
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
def heaps():
    with tempfile.NamedTemporaryFile(suffix=".xml") as report:
        stream = libc.fopen(report.name.encode(), b"w")
        libc.malloc_info(0, ctypes.c_void_p(stream))
        libc.fclose(ctypes.c_void_p(stream))
        return open(report.name).read().count("<heap nr=")
if sys.argv[1] == "prepared":
    process.prepare()
before = heaps()
thread = threading.Thread(target=lambda: bytearray(4096))  # a new thread's first malloc
thread.start()
thread.join()
print(heaps() - before)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
@pytest.mark.parametrize(("how", "environment", "new_heaps"), [
    ("prepared", {}, 0), ("prepared", {"ARROW_DEFAULT_MEMORY_POOL": "system"}, 0),
    ("prepared", {"MALLOC_ARENA_MAX": "64"}, 1), ("plain", {}, 1),
])  # fmt: skip
def test_no_thread_of_a_command_gets_a_malloc_heap_of_its_own(how, environment, new_heaps):
    """glibc gives each new thread a heap of its own, and what one heap frees the others
    never reuse; the command line keeps the heaps it has (deep qrels: a 30-60 MiB lower
    peak), whichever allocator Arrow's buffers come from, unless MALLOC_ARENA_MAX says
    otherwise."""
    chosen = ("MALLOC_ARENA_MAX", "ARROW_DEFAULT_MEMORY_POOL")
    env = {name: value for name, value in os.environ.items() if name not in chosen}
    env.update(environment)
    done = subprocess.run(
        [sys.executable, "-c", _NEW_HEAPS, how], capture_output=True, text=True, env=env, check=True
    )
    assert int(done.stdout) == new_heaps
