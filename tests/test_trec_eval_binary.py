"""Differential tests: ``slotwise trec-eval`` against the real trec_eval 10, built from the
vendored source tree (tests/data/trec_eval-10; the ``trec_eval_binary`` fixture skips,
with the reason, where no C compiler is present).

Seeded random qrels and runs with trec_eval's edge cases — tied scores (one decimal,
``-0.0`` among them, whole rankings tied), labels -2..4, retrieved documents without a
label, queries of the qrels without a run and of the run without judgements, CRLF line
ends, tabs and runs of blanks between fields, a seventh run field, comment lines,
unicode doc ids and query ids whose byte order is not their numeric order — are written
to files; each option set runs through both programs, and stdout must be the same bytes
and the exit status the same number.

rbp's values are trec_eval's when m_rbp.c's uninitialised ``min`` and ``max`` happen to
start at 0 (as they do when rbp is asked for alone or with ``all_trec``; after some other
measures they hold other values, and trec_eval's rbp with them), so rbp is asked for on
its own here.

Deliberate refusals (docs/cli.md, "slotwise trec-eval"): where trec_eval accepts input
by accident (a non-numeric label or score read as 0, every label of a query negative,
which crashes it), slotwise exits 2 with a message; those inputs are tested on their own
below, not generated at random.
"""

from __future__ import annotations

import random
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.cli import main

#: Option sets of the issue: -q, -c, -n, -J, -M, -l, -m with parameters.
OPTIONS: tuple[tuple[str, ...], ...] = (
    (),
    ("-q",),
    ("-q", "-m", "all_trec"),
    ("-q", "-c", "-m", "all_trec"),
    ("-q", "-n", "-m", "all_trec"),
    ("-q", "-J", "-m", "all_trec"),
    ("-q", "-J", "-c", "-m", "all_trec"),
    ("-q", "-M", "5", "-m", "all_trec"),
    ("-q", "-M5", "-J", "-m", "all_trec"),
    ("-q", "-M", "0", "-m", "official"),
    ("-q", "-l", "2", "-m", "all_trec"),
    ("-q", "-l2", "-c", "-m", "all_trec"),
    ("-q", "-l", "1.5", "-m", "official"),
    ("-q", "-l", "3", "-J", "-m", "all_trec"),
    ("-q", "-m", "set"),
    ("-q", "-m", "P.5,7,3", "-m", "recall.20,2000", "-m", "success.2,5,20"),
    ("-q", "-m", "iprec_at_recall..10,.20,.25,.75,.50", "-m", "Rprec_mult.5.0,0.2,0.35"),
    ("-q", "-m", "utility.2,-1,0,0", "-m", "11pt_avg..25,.5,.75"),
    ("-q", "-m", "11pt_avg..5", "-m", "ndcg_cut.10,20,23.4"),
    ("-q", "-m", "ndcg.1=3,2=9,4=4.5", "-m", "G.1=3", "-m", "ndcg_rel.1=3"),
    ("-q", "-m", "rbp.p=0.8", "-m", "rbp_resid.p=0.8"),
    ("-q", "-m", "relstring.20", "-m", "relstring"),
    ("-q", "-m", "set_F.0.5", "-m", "map_cut.3,7", "-m", "unj.2,50"),
    ("-q", "-c", "-J", "-m", "11pt_avg", "-m", "iprec_at_recall"),
    ("-q", "-c", "-M", "0", "-m", "all_trec"),
    ("-q", "-l", "0", "-m", "all_trec"),
    ("-n", "-m", "all_trec"),
    ("-q", "-m", "P", "-m", "P.5", "-m", "P.10"),
    ("-q", "-m", "relstring.0", "-m", "set_F.0", "-m", "success.1", "-m", "unj.1"),
    ("-q", "-m", "relstring.-3"),
    ("-q", "-m", "Rndcg.1=3,3=0", "-m", "G.0=1,1=-1", "-m", "ndcg_rel.1=0,2=7"),
    # gains less than 1 apart: trec_eval's sort of gain levels keeps them as given
    # (trec_eval frees the gains twice when two of ndcg, dcg, ideal_dcg have them: apart)
    ("-q", "-m", "ndcg.1=1.5,2=1.2", "-m", "G.2=0.5", "-m", "ndcg_rel.1=0.5,2=1"),
    ("-q", "-m", "Rndcg.2=0.5", "-m", "Rndcg.1=1.5,2=1.2", "-m", "ideal_dcg.1=1.5,2=1.2"),
    ("-q", "-m", "ndcg.1=0.5", "-m", "G.0=0.5,1=0.2"),
    ("-q", "-m", "ideal_dcg.2=0.5", "-m", "ndcg_rel.2=0.9,3=0.2"),
    # levels -1 (retrieved, not in the qrels) and -2 (judged below 0): their own gains
    ("-q", "-m", "ndcg.-1=2,-2=3", "-m", "G.-1=1,2=0.5", "-m", "ndcg_rel.-1=2"),
    ("-q", "-J", "-m", "Rndcg.-2=2", "-m", "Rndcg.1=3,-1=0.5", "-m", "dcg.-1=-1"),
    ("-q", "-c", "-m", "ideal_dcg.-1=2", "-m", "G.-2=3"),
    ("-q", "-m", "dcg.-2=1,1=3", "-m", "ndcg_rel.-2=0.5,0=1"),
    ("-q", "-m", "11pt_avg..9,.1,.5", "-m", "iprec_at_recall.1,0.05"),
    ("-q", "-m", "11pt_avg.0", "-m", "Rprec_mult.0.5"),
    ("-q", "-m", "ndcg.2=3,x=4", "-m", "ndcg_cut.3"),
    ("-q", "-m", "dcg", "-m", "ndcg", "-m", "yaap", "-m", "ideal_dcg"),
    ("-q", "-J", "-l", "2", "-m", "ideal_dcg.1=3,2=5"),
    ("-q", "-J", "-m", "dcg.1=2,3=0"),
    ("-q", "-m", "rbp.p=0.5,q=3", "-m", "rbp_resid"),
    ("-q", "-m", "utility.1,2"),
    ("-q", "-c", "-m", "utility.1,-2,3,4"),
    ("-q", "-N", "1000", "-m", "utility.1,-1,0,0.5", "-m", "set"),
    ("-m", "P.5,5"),
    ("-m", "P.0"),
    ("-m", "bogus"),
)


@dataclass
class Files:
    qrels: Path
    run: Path
    complete: bool  # every query of the qrels has a run (else only -c succeeds)


def _doc(rng: random.Random, j: int) -> str:
    return rng.choice([f"d{j}", f"D{j}", f"doc-{j:03d}", f"dé{j}", f"文書{j}", f"d{j}#x"])


def write_collection(
    directory: Path, seed: int, queries: int, *, complete: bool = True, negative: bool = True
) -> Files:
    """A random qrels and run in ``directory``; with ``complete`` every qrels query has
    a ranking (trec_eval 10 stops with status 4 on the first that has none, unless -c);
    without ``negative`` no label is below 0."""
    rng = random.Random(seed)
    qids = [rng.choice([f"{i}", f"q{i}", f"Q{i}", f"クエリ{i}"]) for i in range(queries)]
    qids = list(dict.fromkeys(qids))
    newline = "\r\n" if rng.random() < 0.3 else "\n"
    qrels, run = ["# a comment line"], []
    for n, qid in enumerate(qids):
        pool = [_doc(rng, j) for j in range(rng.randint(1, 25))]
        pool = list(dict.fromkeys(pool))
        judged = rng.sample(pool, rng.randint(1, len(pool)))
        choices = [-2, -1, 0, 0, 1, 1, 2, 3, 4] if negative else [0, 0, 1, 1, 2, 3, 4]
        labels = [rng.choice(choices) for _ in judged]
        if all(label < 0 for label in labels):
            labels[0] = rng.randint(0, 2)  # trec_eval crashes on a query of negative labels
        if n % 7 != 3:  # a few queries whose labels are all 0: nothing relevant
            pass
        else:
            labels = [min(label, 0) for label in labels]
            labels[0] = 0
        for doc, label in zip(judged, labels, strict=True):
            sep = rng.choice([" ", "\t", "  "])
            qrels.append(sep.join([qid, "0", doc, str(label)]))
        if not complete and n % 5 == 1:
            continue  # a qrels query without a run
        extra = [_doc(rng, 100 + j) for j in range(rng.randint(0, 8))]
        ranked = list(dict.fromkeys(rng.sample(pool, rng.randint(0, len(pool))) + extra))
        if not ranked:
            ranked = [pool[0]]
        tied = rng.random() < 0.1
        for rank, doc in enumerate(ranked, start=1):
            score = 1.0 if tied else rng.choice([round(rng.uniform(-2, 3), 1), -0.0, 0.0])
            fields = [qid, "Q0", doc, str(rank), repr(score), "tag-a"]
            if rng.random() < 0.05:
                fields.append("extra")
            run.append(rng.choice([" ", "\t"]).join(fields))
    for i in range(rng.randint(0, 3)):  # queries of the run without judgements
        run.append(f"only{i} Q0 d1 1 1.0 tag-a")
    rng.shuffle(run)
    run.append(f"{qids[0]} Q0 zzz 99 -9.5 tag-last")  # the runid is the last line's tag
    (directory / "qrels").write_bytes((newline.join(qrels) + newline).encode())
    (directory / "run").write_bytes((newline.join(run) + newline).encode())
    return Files(directory / "qrels", directory / "run", complete)


def run_binary(binary: Path, args: Sequence[str], cwd: Path) -> tuple[int, bytes]:
    done = subprocess.run([str(binary), *args], cwd=cwd, capture_output=True, check=False)
    return done.returncode, done.stdout


def run_slotwise(
    args: Sequence[str], capsysbinary: pytest.CaptureFixture[bytes]
) -> tuple[int, bytes]:
    capsysbinary.readouterr()
    code = main(["trec-eval", *args])
    return code, capsysbinary.readouterr().out


def _differences(
    binary: Path,
    directory: Path,
    files: Files,
    options: Sequence[Sequence[str]],
    capsysbinary: pytest.CaptureFixture[bytes],
) -> list[str]:
    found = []
    for option in options:
        args = [*option, str(files.qrels), str(files.run)]
        expected = run_binary(binary, args, directory)
        got = run_slotwise(args, capsysbinary)
        if got != expected:
            found.append(_describe(args, expected, got))
    return found


def _describe(args: Sequence[str], expected: tuple[int, bytes], got: tuple[int, bytes]) -> str:
    lines = [f"trec-eval {' '.join(args)}: status {got[0]}, trec_eval {expected[0]}"]
    theirs, ours = expected[1].decode().splitlines(), got[1].decode().splitlines()
    if len(theirs) != len(ours):
        lines.append(f"  {len(ours)} lines, trec_eval {len(theirs)}")
    for mine, reference in zip(ours, theirs, strict=False):
        if mine != reference:
            lines.append(f"  slotwise  {mine!r}\n  trec_eval {reference!r}")
            break
    return "\n".join(lines)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_random_collections_byte_for_byte(
    seed: int, trec_eval_binary: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    files = write_collection(tmp_path, seed, queries=25)
    assert _differences(trec_eval_binary, tmp_path, files, OPTIONS, capsysbinary) == []


def test_small_chunks_byte_for_byte(
    trec_eval_binary: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    """Queries scored, and their relevance strings computed, a few at a time (chunks of
    at most about 64 judged documents, as deep pools are split) print what the binary
    prints."""
    monkeypatch.setattr("engine.evaluation.pipeline._CHUNK_LABELS", 64)
    files = write_collection(tmp_path, 4, queries=25)
    options = [("-q", "-m", "all_trec"), ("-q", "-m", "relstring.20", "-m", "relstring")]
    assert _differences(trec_eval_binary, tmp_path, files, options, capsysbinary) == []


def test_a_qrels_query_without_a_run(
    trec_eval_binary: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """Without -c trec_eval 10 stops (status 4) at the first qrels query the run lacks,
    having printed the queries before it; with -c it scores it on an empty ranking."""
    files = write_collection(tmp_path, 3, queries=12, complete=False)
    options = [("-q",), ("-q", "-c"), ("-q", "-c", "-J", "-m", "all_trec"), ("-c", "-n")]
    assert _differences(trec_eval_binary, tmp_path, files, options, capsysbinary) == []


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10, 20))
def test_random_collections_byte_for_byte_large(
    seed: int, trec_eval_binary: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    files = write_collection(tmp_path, seed, queries=300)
    assert _differences(trec_eval_binary, tmp_path, files, OPTIONS, capsysbinary) == []


def test_run_from_stdin(trec_eval_binary: Path, tmp_path: Path, monkeypatch, capsysbinary) -> None:
    """``-`` reads the run from standard input, as trec_eval does."""
    import io

    files = write_collection(tmp_path, 4, queries=10)
    args = ["-q", "-m", "all_trec", str(files.qrels), "-"]
    done = subprocess.run(
        [str(trec_eval_binary), *args], input=files.run.read_bytes(), capture_output=True
    )

    class Stdin:
        buffer = io.BytesIO(files.run.read_bytes())

    monkeypatch.setattr("sys.stdin", Stdin())
    assert run_slotwise(args, capsysbinary) == (done.returncode, done.stdout)
    assert done.returncode == 0 and done.stdout


@pytest.mark.parametrize(
    ("qrels", "run"),
    [
        ("a 0 d1 1\nb 0 d1 1\nc 0 d1 1\n", "a Q0 d1 1 1 t\nc Q0 d1 1 1 t\n"),
        ("a 0 d1 1\n", ""),  # an empty run
        ("", "a Q0 d1 1 1 t\n"),  # empty qrels
        (  # 1e400 is +inf to trec_eval (and Python): ranked first, tied with inf
            "a 0 d1 1\na 0 d3 1\nb 0 d2 1\n",
            "a Q0 d1 1 1e400 t\na Q0 d2 1 5 t\na Q0 d3 1 inf t\na Q0 d4 1 -1e400 t\n"
            "b Q0 d1 1 -inf t\nb Q0 d2 1 -1e999 t\nb Q0 d3 1 0 t\n",
        ),
    ],
    ids=["a-qrels-query-without-a-run", "empty-run", "empty-qrels", "infinite-scores"],
)
def test_statuses_as_trec_eval(
    qrels: str, run: str, trec_eval_binary: Path, tmp_path: Path, capsysbinary
) -> None:
    """Status 4 and the queries before it printed (-c: scored); status 2 for an empty
    file; infinite scores ranked as trec_eval ranks them."""
    (tmp_path / "qrels").write_text(qrels)
    (tmp_path / "run").write_text(run)
    for option in (["-q"], ["-q", "-c"], ["-q", "-m", "relstring", "-m", "recip_rank"]):
        args = [*option, str(tmp_path / "qrels"), str(tmp_path / "run")]
        assert run_slotwise(args, capsysbinary) == run_binary(trec_eval_binary, args, tmp_path)


def test_number_texts_as_trec_eval(trec_eval_binary: Path, tmp_path: Path, capsysbinary) -> None:
    """Labels and scores written every way the grammar allows (docs/file-formats.md, "What
    comes in"): signs, leading zeros, a bare or trailing decimal point, exponents, an
    overflow to infinity, ``inf`` spelled as C's atof reads it: the same bytes as
    trec_eval, which reads each as written (atol for labels, atof for scores)."""
    (tmp_path / "qrels").write_text(
        "a 0 d1 +1\na 0 d2 01\na 0 d3 -0\na 0 d4 007\na 0 d5 2\nb 0 d1 1\nb 0 d2 +0\n"
    )
    scores = ["1e3", "+2", ".5", "5.", "1E-2", "-0", "007", "2.50", "1e400", "-Infinity"]
    lines = [f"a Q0 d{i} {i} {s} t\n" for i, s in enumerate(scores, start=1)]
    lines += ["b Q0 d1 1 INF t\n", "b Q0 d2 2 -1.5e+2 t\n", "b Q0 d3 3 0.0 t\n"]
    (tmp_path / "run").write_text("".join(lines))
    for option in (["-q"], ["-q", "-m", "all_trec"], ["-q", "-l", "2", "-m", "relstring"]):
        args = [*option, str(tmp_path / "qrels"), str(tmp_path / "run")]
        assert run_slotwise(args, capsysbinary) == run_binary(trec_eval_binary, args, tmp_path)


def test_numbers_as_atol_and_atof_read_them(
    trec_eval_binary: Path, tmp_path: Path, capsysbinary
) -> None:
    """Labels and scores trec_eval reads by C's atol and atof whatever they are: ``1.5``,
    ``1e3`` and ``1_0`` labels are 1, ``rel`` and a full-width 2 are 0; scores ``abc`` 0,
    ``1_000`` 1, Arabic-Indic digits 0, ``0x1F`` 31, ``0x1.8p1`` 3, ``1e400`` +inf,
    ``-infinity``: the same bytes as trec_eval. Before: 10, 1000 and 2 for ``1_0``, ``1e3``
    and the full-width 2 (Python's int and float), and 1000 and 12 for the scores."""
    (tmp_path / "qrels").write_text(
        "a 0 d1 1.5\na 0 d2 rel\na 0 d3 1e3\na 0 d4 1_0\na 0 d5 \uff12\na 0 d6 2\n"
        "b 0 d1 1\nb 0 d2 1_0\nb 0 d3 +2x\n",
        encoding="utf-8",
    )
    scores = ["abc", "1_000", "\u0661\u0662", "0x1F", "0x1.8p1", "1e400", "-infinity", "2.5e"]
    lines = [f"a Q0 d{i} {i} {s} t\n" for i, s in enumerate(scores, start=1)]
    lines += ["b Q0 d1 1 1_0 t\n", "b Q0 d2 2 0x.8 t\n", "b Q0 d3 3 .5e+ t\n"]
    (tmp_path / "run").write_text("".join(lines), encoding="utf-8")
    for option in (["-q"], ["-q", "-m", "all_trec"], ["-q", "-l", "2", "-m", "relstring"]):
        args = [*option, str(tmp_path / "qrels"), str(tmp_path / "run")]
        assert run_slotwise(args, capsysbinary) == run_binary(trec_eval_binary, args, tmp_path)


@pytest.mark.parametrize(
    ("qrels", "run", "args", "message"),
    [
        ("a 0 d1 1\n", "a Q0 d1 1 nan t\n", [], "is not a finite number"),  # sorted by chance
        ("a 0 d1 1\nb 0 d1 -2\n", "a Q0 d1 1 1 t\n", ["-c"], "no label >= 0"),  # crashes
        ("a 0 d1 1\nb 0 d1 -1\n", "a Q0 d1 1 1 t\n", ["-c"], "no label >= 0"),  # stale memory
        ("a 0 d1 1\n", "a Q0 d1 1 1 t\n", ["-l", "-1"], "integer >= 0"),
        ("a 0 d1 1\n", "a Q0 d1 1 1 t\n", ["-M", "-1"], "whole number >= 0"),
        ("a 0 d1 1\n", "a Q0 d1 1 1 t\n", ["-N", "abc"], "whole number >= 0"),
        ("a 0 d1 1\n", "a Q0 d1 1 1 t\n", ["-m", "map.5"], "takes no parameters"),
        ("a 0 d1 1\n", "a Q0 d1 1 1 t\n", ["-m", "ndcg.1=x"], "not a number"),
        ("a 0 d1 1\n", "a Q0 d1 1 1 t\n", ["-m", "rbp.1=2"], "rbp takes no gains"),
        ("a 0 d1 1\n", "a Q0 d1 1 1 t\n", ["-m", "ndcg.1=2,1=3"], "two gains"),
        ("a 0 d1 1\n", "a Q0 d1 1 1 t\n", ["-m", "ndcg.2=1.2,1=1.5"], "increasing order"),
        ("a 0 d1 1\n", "a Q0 d1 1 1 t\n", ["-m", "set_F.-1"], "beta must lie in"),
        ("a 0 d1 1\n", "a Q0 d1 1 1 t\n", ["-m", "Rprec_mult.0"], "multiplier"),
        ("a 0 d1 1\n", "a Q0 d1 1 1 t\n", ["-m", "iprec_at_recall.1.5"], "[0, 1]"),
        (
            "a 0 d1 1\na 0 d2 -1\n",
            "a Q0 d1 1 1 t\n",
            ["-R", "qrels_prefs", "-m", "prefs"],
            "negative",
        ),
    ],
)
def test_deliberate_refusals(
    qrels: str, run: str, args: list[str], message: str, tmp_path: Path, capsys
) -> None:
    """What trec_eval accepts by accident (docs/cli.md): refused with a message."""
    (tmp_path / "qrels").write_text(qrels)
    (tmp_path / "run").write_text(run)
    status = main(["trec-eval", *args, str(tmp_path / "qrels"), str(tmp_path / "run")])
    assert status in (2, 4)
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["-x", "QRELS", "RUN"],  # an unknown option
        ["--bogus", "QRELS", "RUN"],
        ["QRELS"],  # a file missing
        ["QRELS", "RUN", "-M"],  # an option without its argument
        ["-m"],
    ],
)
def test_usage_errors_as_trec_eval(
    args: list[str], trec_eval_binary: Path, tmp_path: Path, capsysbinary
) -> None:
    """A command line trec_eval cannot read: status 1, nothing on stdout, the usage on
    stderr, in both programs. (A second run file, which trec_eval refuses, is slotwise's
    many runs in one call: tests/test_trec_eval_many.py.)"""
    (tmp_path / "QRELS").write_text("a 0 d1 1\n")
    (tmp_path / "RUN").write_text("a Q0 d1 1 1 t\n")
    args = [str(tmp_path / a) if a in ("QRELS", "RUN") else a for a in args]
    done = subprocess.run([str(trec_eval_binary), *args], capture_output=True, check=False)
    assert (done.returncode, done.stdout) == (1, b"")
    assert b"Usage: trec_eval" in done.stderr
    capsysbinary.readouterr()
    assert main(["trec-eval", *args]) == 1
    out, err = capsysbinary.readouterr()
    assert out == b"" and b"usage: slotwise trec-eval" in err


def write_judgment_groups(files: Files, seed: int) -> Path:
    """A ``-R qrels_jg`` file from the collection's qrels: each query judged by 1 to 3
    groups (named ``0``..``2``, the second field), each group's labels a perturbation."""
    rng = random.Random(seed)
    lines = []
    for line in files.qrels.read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if len(fields) != 4 or line.startswith("#"):
            continue
        groups = 1 + sum(ord(c) for c in fields[0]) % 3
        for group in range(groups):
            label = int(fields[3]) if group == 0 else max(0, int(fields[3]) + rng.randint(-1, 1))
            lines.append(f"{fields[0]} {group} {fields[2]} {label}\n")
    rng.shuffle(lines)
    path = files.qrels.with_name("qrels_jg")
    path.write_text("".join(lines), encoding="utf-8")
    return path


JUDGMENT_GROUP_OPTIONS = (
    ("-q", "-R", "qrels_jg", "-m", "qrels_jg"),
    ("-q", "-c", "-R", "qrels_jg", "-m", "qrels_jg"),
    ("-q", "-J", "-R", "qrels_jg", "-m", "qrels_jg"),
    ("-q", "-M", "5", "-l", "2", "-R", "qrels_jg", "-m", "qrels_jg"),
    ("-q", "-R", "qrels_jg", "-m", "P_avgjg.3,7", "-m", "Rprec_mult_avgjg.0.5"),
    ("-q", "-R", "qrels_jg", "-m", "map"),  # status 4: map needs -R qrels
    ("-q", "-m", "map_avgjg"),  # status 4: needs -R qrels_jg
)


@pytest.mark.parametrize("seed", [5, 6])
def test_judgment_groups_byte_for_byte(
    seed: int, trec_eval_binary: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    files = write_collection(tmp_path, seed, queries=25)
    grouped = Files(write_judgment_groups(files, seed), files.run, files.complete)
    found = _differences(trec_eval_binary, tmp_path, grouped, JUDGMENT_GROUP_OPTIONS, capsysbinary)
    assert found == []


def write_prefs(files: Files, seed: int) -> Path:
    """A ``-R prefs`` file over the collection's queries: per query 1 to 3 judgment
    groups, each with 1 to 3 sub-groups of documents whose rel_levels come from one
    order per group (so a group's preferences never conflict, as trec_eval requires),
    0.0 marking non-relevant documents."""
    rng = random.Random(seed)
    lines = []
    run_docs: dict[str, list[str]] = {}
    for line in files.run.read_text(encoding="utf-8").splitlines():
        fields = line.split()
        run_docs.setdefault(fields[0], []).append(fields[2])
    for qid, docs in run_docs.items():
        if qid.startswith("only"):
            continue
        pool = list(dict.fromkeys(docs + [f"p{j}" for j in range(rng.randint(0, 6))]))
        for group in range(rng.randint(1, 3)):
            level = {d: rng.choice([0.0, 0.0, 1.0, 2.0, 2.5, 4.0]) for d in pool}
            for sub in range(rng.randint(1, 3)):
                for doc in rng.sample(pool, min(len(pool), rng.randint(2, 8))):
                    lines.append(f"{qid} g{group} s{sub} {doc} {level[doc]}\n")
    rng.shuffle(lines)
    path = files.qrels.with_name("prefs")
    path.write_text("".join(lines), encoding="utf-8")
    return path


PREFS_OPTIONS = (
    ("-q", "-R", "prefs", "-m", "all_prefs"),
    ("-q", "-c", "-R", "prefs", "-m", "all_prefs"),
    ("-q", "-M", "4", "-R", "prefs", "-m", "prefs"),
    ("-R", "prefs"),  # official: no preference measure
)


@pytest.mark.parametrize("seed", [7, 8])
def test_preferences_byte_for_byte(
    seed: int, trec_eval_binary: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    files = write_collection(tmp_path, seed, queries=20)
    prefs = Files(write_prefs(files, seed), files.run, files.complete)
    found = _differences(trec_eval_binary, tmp_path, prefs, PREFS_OPTIONS, capsysbinary)
    assert found == []


@pytest.mark.parametrize("seed", [9, 10])
def test_qrels_as_preferences_byte_for_byte(
    seed: int, trec_eval_binary: Path, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """-R qrels_prefs on qrels with labels 0..4 (a negative one is refused: see
    test_deliberate_refusals)."""
    files = write_collection(tmp_path, seed, queries=20, negative=False)
    options = [("-q", "-R", "qrels_prefs", "-m", "all_prefs"), ("-c", "-R", "qrels_prefs")]
    assert _differences(trec_eval_binary, tmp_path, files, options, capsysbinary) == []
