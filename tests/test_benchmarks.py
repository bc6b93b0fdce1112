"""The benchmark's own code runs: ``benchmarks/run.py`` reaches into slotwise for its
floor (the primitives it times), so a move inside slotwise must not leave the benchmark
unable to run. Nothing here is timed."""

from __future__ import annotations

import gc
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_floor_runs_on_a_small_corpus(tmp_path: Path) -> None:
    """Every primitive of the floor runs on a small generated corpus and reports seconds."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import corpus
        import run
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    qrels, ranked = corpus.write_files(tmp_path, 50, 20, 10_000, "deep")
    dicts = corpus.make_dicts(50, 20, 10_000, "deep")
    # The floor collects garbage before each of its 36 timings; frozen, the objects of
    # the test session (torch, Ray, the frameworks: about a million) are not walked by
    # each collection, which took 0.5 s or more each in a long session.
    gc.freeze()
    try:
        rows = run.floor(qrels, ranked, dicts)
    finally:
        gc.unfreeze()
    assert rows[:2] == ["| primitive | seconds |", "|---|---:|"]
    assert len(rows) == 2 + 10 + 4  # the primitives, then what a fresh process pays
    for row in rows[2:]:
        float(row.rsplit("|", 2)[1])  # a number of seconds in the last column


def test_the_least_numpy_program_gives_the_scorers_values() -> None:
    """The floor of one ``scorer().add`` computes what the scorer computes: it raises when
    its values for the samples differ from ``scorer().add``'s."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import scorer
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert scorer.least_program_ms(30) > 0
    building, scoring = scorer.parts_ms(30)  # an add's two largest parts, each alone
    assert building > 0 and scoring > 0
    ranking = ["a", "x", "b", *(f"n{i}" for i in range(97))]
    values = scorer.least_program({"a": 2, "b": 1, "c": 3, "z": 0}, ranking)
    ideal = 3 + 2 / math.log2(3) + 1 / math.log2(4)  # by hand: the labels 3, 2, 1 at ranks 1-3
    expected = [
        (2 + 1 / math.log2(4)) / ideal,  # nDCG@10: a (2) at rank 1, b (1) at rank 3
        (1 / 1 + 2 / 3) / 3,  # AP: relevant at ranks 1 and 3, three relevant in all
        1.0,  # RR
        2 / 3,  # R@100
        2 / 10,  # P@10
    ]
    assert values == pytest.approx(expected, rel=1e-12)


def test_the_least_pyarrow_program_runs_on_a_small_corpus(tmp_path: Path) -> None:
    """The pyarrow program the command line is set against reads, joins and sorts a small
    generated corpus without an error."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import corpus
        import run
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    qrels, ranked = corpus.write_files(tmp_path, 50, 20, 10_000, "deep")
    done = subprocess.run(
        [sys.executable, "-c", run.ARROW_SCRIPT, str(qrels), str(ranked)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_the_cluster_benchmark_cuts_files_at_lines(tmp_path: Path) -> None:
    """``benchmarks/cluster.py`` cuts a file into shards at line boundaries only, every
    line once, and lays a measurement out as a table row."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import cluster
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    lines = [f"q{i} Q0 d{i} {i} {100 - i} t\n" for i in range(100)]
    (tmp_path / "run.trec").write_text("".join(lines))
    (tmp_path / "parts").mkdir()
    cluster.split(tmp_path / "run.trec", tmp_path / "parts", 7)
    parts = sorted((tmp_path / "parts").iterdir())
    assert len(parts) == 7
    assert "".join(part.read_text() for part in parts) == "".join(lines)
    assert all(part.read_text().endswith("\n") for part in parts if part.stat().st_size)
    found = {"seconds": 2.0, "driver": 0.1, "workers": 1.8, "daemons": 0.1, "max_rss": 2**27}
    traffic = {"chunks": 2, "read": 2**21, "scored": 2**12, "summed_to_driver": 2**11}
    row = cluster.row(1000, "shards", 2, {**found, "traffic": traffic, "commit": "abc"})
    assert row.startswith("| 1,000 | shards | abc | 2 | 2.0 | 500 | 0.1 | 1.8 | 0.1 | 5.0% |")
    nodes = {"node 11": 0.45, "node 12": 1.35, "raylet": 0.1}  # a quarter and three quarters
    row = cluster.row(1000, "cli", 2, {**found, "by_process": nodes})
    assert row.startswith("| 1,000 | cli |  | 2 | 2.0 | 500 | 0.1 | 1.8 (25%, 75%) | 0.1 | 5.0% |")


def test_the_long_ranking_benchmark_runs() -> None:
    """benchmarks/long_ranking.py on 20 rankings of 10 and one of 200: every step, with and
    without it, in fresh processes, gives the same summary (it checks that itself) and a
    row of seconds and MiB per step."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import long_ranking
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    qrels, ranked = long_ranking.make_run(20, 10, 200)
    lengths = sorted(len(scored) for scored in ranked.values())
    assert lengths == [10] * 19 + [200] and len(qrels) == 20
    rows = long_ranking.report(long_ranking.measure(20, 10, 200, repeat=1), 20, 10, 200)
    assert [row.split(" | ")[2] for row in rows] == list(long_ranking.STEPS)
    assert {row.split(" | ")[1] for row in rows} == {"1.95"}  # (200 + 190) / 200 ranked ids
    for row in rows:  # seconds, seconds, ratio, MiB, MiB, ratio: numbers, none negative
        assert all(float(cell) >= 0 for cell in row.strip("| ").split(" | ")[3:])


@pytest.mark.slow
def test_the_startup_benchmark_runs() -> None:
    """benchmarks/startup.py times every command line it names (here once each, without
    the trec_eval binary) and tabulates them against the floor."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import startup
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    commands = startup.programs(None)
    rows = startup.table(startup.measure(commands, 1))
    assert rows[:2] == ["| command | median ms | least ms | / floor |", "|---|---:|---:|---:|"]
    assert [row.split(" | ")[0].lstrip("| ") for row in rows[2:]] == list(commands)
    assert all(float(row.rsplit("|", 2)[1]) > 0 for row in rows[2:])


def test_the_gate_simulation_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/gate_simulation.py --quick: a few replicates at small sizes run through
    compare() and gate() (its rows checked equal to compare()'s), with the population's
    true mean change solved exactly, and print a table per margin and a line per target."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gate_simulation
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    for target in (0.0, -0.015, 0.1):
        assert gate_simulation.mean_change(gate_simulation.solve_mu(target)) == pytest.approx(
            target, abs=1e-12
        )
    gate_simulation.main(["--quick", "--workers", "1"])
    out = capsys.readouterr().out
    assert out.count("**margin 0.01**") == 2 and out.count("**margin 0.05**") == 2
    assert "| 5 | 0.0 / 0.0 / 100.0 |" in out  # under min_pairs: always can't tell
    for what in ("the paired test", "PPI"):
        assert f"- {what}: false HELD <= 5%: " in out
        assert f"- {what}: false REGRESSED <= 5%: " in out
