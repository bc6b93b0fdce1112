"""What a fresh ``slotwise`` process costs before and around its work: ``--version``,
``--help`` and every command's ``--help``, and ``slotwise trec-eval`` on trec_eval's own
test files, beside the floors (Python doing nothing; importing numpy and pyarrow, which
any program that reads with pyarrow pays; the engine's own floor, the evaluation API with
trec_eval's measures loaded from the metric registry, which ``trec-eval`` pays before it
reads a byte) and the trec_eval 10 binary built from source.

    python benchmarks/startup.py [--repeat 15]
    python benchmarks/startup.py --many 100 [--repeat 5]

``--many N``: N runs in one ``slotwise trec-eval -q QRELS DIR`` call against the binary
invoked once per run (as a shell loop over a directory of runs does): trec_eval's test run
(results.test) rescored with N seeds, against its qrels.test; the ratio of the medians.
Beside them, the same call on the first run alone (what the process costs before the
other runs').

Each command runs ``--repeat`` times, the commands interleaved (so a slower minute of the
machine falls on all of them); a row gives the median and the least wall time, and the
ratio of the median to the floor's. Run it on a quiet machine: a second process on the
same cores doubles these numbers.

slotwise's own modules are compiled to bytecode first, as pip does when it installs a
wheel: an editable install under ``PYTHONDONTWRITEBYTECODE=1`` (these machines set it)
would otherwise compile some 50 modules in every process, 0.13-0.15 s of each command.
"""

from __future__ import annotations

import argparse
import compileall
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trec_eval_binary

ROOT = Path(__file__).resolve().parent.parent
TEST_FILES = ROOT / "tests" / "data" / "trec_eval"
COMMANDS = (
    "run", "trec-eval", "metrics", "validate", "trec", "compare", "report", "explain",
    "correlate", "fit", "calibrate", "import-udcg-reference", "annotate", "synthesize",
)  # fmt: skip
ALL_TREC = ("-m", "all_trec")
FLOOR = "import numpy, pyarrow, pyarrow.csv, pyarrow.compute"
ENGINE_FLOOR = (
    "from engine.analysis.trec_eval import metric_specs, parse_measures; "
    "from engine.evaluation.api import Engine; engine = Engine(config={}); "
    "[engine.metric(spec) for spec in metric_specs(parse_measures(['all_trec']), 0.0)]"
)


def _slotwise() -> list[str]:
    """The installed ``slotwise`` script beside this Python (as a user runs it)."""
    script = Path(sys.executable).with_name("slotwise")
    return [str(script)] if script.exists() else [sys.executable, "-m", "engine.cli"]


def programs(binary: Path | None) -> dict[str, list[str]]:
    """Each timed command line by its row's name."""
    slotwise = _slotwise()
    files = [str(TEST_FILES / "qrels.test"), str(TEST_FILES / "results.test")]
    found = {
        "python -c pass": [sys.executable, "-c", "pass"],
        f"floor: python -c '{FLOOR}'": [sys.executable, "-c", FLOOR],
        "engine floor: the evaluation API and all_trec's measures from the registry": [
            sys.executable,
            "-c",
            ENGINE_FLOOR,
        ],
        "slotwise --version": [*slotwise, "--version"],
        "slotwise --help": [*slotwise, "--help"],
        **{f"slotwise {name} --help": [*slotwise, name, "--help"] for name in COMMANDS},
        "slotwise trec-eval -m all_trec (test files)": [*slotwise, "trec-eval", *ALL_TREC, *files],
    }
    if binary is not None:
        found["trec_eval 10 binary -m all_trec (test files)"] = [str(binary), *ALL_TREC, *files]
    return found


def measure(commands: dict[str, list[str]], repeat: int) -> dict[str, list[float]]:
    """Wall seconds of each command, ``repeat`` times, interleaved; a failure raises."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, argv in commands.items():
            start = time.perf_counter()
            done = subprocess.run(argv, capture_output=True, check=False, cwd=tempfile.gettempdir())
            times[name].append(time.perf_counter() - start)
            if done.returncode != 0:
                raise RuntimeError(f"{name} exited {done.returncode}: {done.stderr.decode()}")
    return times


def table(times: dict[str, list[float]]) -> list[str]:
    """The Markdown rows: median and least milliseconds, and the median's ratio to the
    floor (importing numpy and pyarrow)."""
    floor = statistics.median(next(t for name, t in times.items() if name.startswith("floor")))
    rows = ["| command | median ms | least ms | / floor |", "|---|---:|---:|---:|"]
    for name, found in times.items():
        median = statistics.median(found)
        rows.append(
            f"| {name} | {median * 1e3:.0f} | {min(found) * 1e3:.0f} | {median / floor:.2f} |"
        )
    return rows


def write_runs(folder: Path, count: int) -> list[Path]:
    """``count`` runs: results.test with each score replaced by a seeded draw (a tenth of
    them tied), under its own tag."""
    lines = [line.split() for line in (TEST_FILES / "results.test").read_text().splitlines()]
    runs = []
    for seed in range(count):
        rng = random.Random(seed)
        text = "".join(
            f"{q} {z} {d} {r} {rng.choice([1.0, round(rng.uniform(0, 10), 3)])} run{seed}\n"
            for q, z, d, r, _, _ in lines
        )
        runs.append(folder / f"run{seed:03d}")
        runs[-1].write_text(text)
    return runs


def many(binary: Path, count: int, repeat: int) -> list[str]:
    """The Markdown rows of ``--many``: one slotwise call over ``count`` runs against the
    binary once per run, the same bytes checked, interleaved ``repeat`` times."""
    qrels = str(TEST_FILES / "qrels.test")
    with tempfile.TemporaryDirectory() as folder:
        runs = write_runs(Path(folder), count)
        ours = [*_slotwise(), "trec-eval", "-q", qrels, folder]
        one = [*_slotwise(), "trec-eval", "-q", qrels, str(runs[0])]
        theirs = [[str(binary), "-q", qrels, str(run)] for run in runs]
        times: dict[str, list[float]] = {"slotwise": [], "binary": [], "one": []}
        for _ in range(repeat):
            start = time.perf_counter()
            out = subprocess.run(ours, capture_output=True, check=True).stdout
            times["slotwise"].append(time.perf_counter() - start)
            start = time.perf_counter()
            subprocess.run(one, capture_output=True, check=True)
            times["one"].append(time.perf_counter() - start)
            start = time.perf_counter()
            outs = [subprocess.run(argv, capture_output=True, check=True).stdout for argv in theirs]
            times["binary"].append(time.perf_counter() - start)
            if out != b"".join(outs):
                raise RuntimeError("slotwise's output differs from the binary's")
    median = {name: statistics.median(found) for name, found in times.items()}
    return [
        f"| {count} runs of results.test, -q | median s | least s |",
        "|---|---:|---:|",
        f"| slotwise trec-eval, one call | {median['slotwise']:.3f} | {min(times['slotwise']):.3f} |",
        f"| trec_eval 10 binary, once per run | {median['binary']:.3f} | {min(times['binary']):.3f} |",
        f"| ratio slotwise / binary | {median['slotwise'] / median['binary']:.2f} | |",
        f"| slotwise trec-eval, one call on the first run | {median['one']:.3f} | {min(times['one']):.3f} |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs of each command")
    parser.add_argument("--many", type=int, metavar="N", help="N runs in one call (see above)")
    args = parser.parse_args()
    for package in ("engine", "metrics_plugins"):  # the __pycache__ folders git ignores
        compileall.compile_dir(ROOT / package, quiet=1)
    with tempfile.TemporaryDirectory() as folder:
        binary = trec_eval_binary.build(Path(folder))
        if binary is None:
            print(f"(no trec_eval binary: {trec_eval_binary.why_not()})", file=sys.stderr)
        elif args.many is not None:
            print("\n".join(many(binary, args.many, args.repeat)))
            return
        print("\n".join(table(measure(programs(binary), args.repeat))))


if __name__ == "__main__":
    main()
