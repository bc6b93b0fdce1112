"""One long ranking among short ones: what it costs ``evaluate``, the command line and the
scorer, as ratios to the same run without it.

    python benchmarks/long_ranking.py [--queries 1000] [--docs 100] [--long 20000,100000]
                                      [--repeat 5] [--out FILE]

Data (benchmarks/corpus.py): ``--queries`` queries with sparse qrels (about one relevant
passage each, MS MARCO dev's shape) and rankings of ``--docs`` distinct ids drawn from
MS MARCO's 8,841,823 passages. The run *with* a long ranking is the same run with the
first query's ranking continued to ``--long`` ids (fresh corpus ids, scores below its
100th), so the two differ only by the long ranking's extra ids. Each step runs in a fresh
process, alternating with and without, ``--repeat`` times; medians reported:

- ``evaluate``: ``dataset.with_metrics(METRICS).evaluate(outputs)``, outputs as
  ``{qid: [doc, ...]}`` in trec_eval's order (score, then doc id, descending), the
  dataset built before the clock starts;
- ``scorer``: a fresh ``evaluation.scorer()``, ``add`` for every output, then
  ``results()``;
- ``CLI``: ``slotwise run --qrels --run --metrics ... --format json --output F`` on TREC
  files, the whole process.

Time is the step's wall time (the CLI's: the whole process); memory is the peak RSS of the
process while the step ran above its RSS when it started (the CLI's: its whole peak RSS).
Beside them, the ratio of the ranked ids with and without the long ranking: what a cost
linear in the ranked ids would give.
Every step's summary must be the same with and without the long ranking (it adds
unjudged ids below rank 100, which move none of the metrics). The metrics
are those of benchmarks/run.py. The target: a ratio of 1.2 or less where the ranked ids
grow by 1.2 (one of 20,000 among 1,000 of 100); at most the ids' ratio beyond: scoring
costs the ranked ids, not the number of rankings times the longest one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from corpus import MSMARCO_PASSAGES, make_dicts  # noqa: E402
from run import SLOTWISE as METRICS  # noqa: E402
from run import child  # noqa: E402

STEPS = ("evaluate", "scorer", "CLI")


def make_run(
    queries: int, docs: int, long: int, seed: int = 0
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """Sparse qrels and a run of ``docs`` ids per query, the first query's ranking
    continued to ``long`` ids (``long`` 0: none)."""
    qrels, run = make_dicts(queries, docs, shape="sparse", seed=seed)
    if long:
        first = run[next(iter(run))]
        rng = np.random.default_rng(seed + 1)
        lowest = min(first.values())
        drawn = rng.choice(MSMARCO_PASSAGES, size=long + docs, replace=False)
        extra = (str(d) for d in drawn.tolist())
        fresh = [d for d in extra if d not in first][: long - len(first)]
        first.update({doc: lowest - 1e-4 * (i + 1) for i, doc in enumerate(fresh)})
    return qrels, run


def write_trec(folder: Path, qrels: dict, run: dict) -> tuple[Path, Path]:
    """The data as TREC qrels and run files."""
    qrels_path, run_path = folder / "qrels", folder / "run"
    with qrels_path.open("w") as out:
        out.writelines(f"{q} 0 {d} {g}\n" for q, labels in qrels.items() for d, g in labels.items())
    with run_path.open("w") as out:
        for q, scored in run.items():
            ranked = sorted(scored.items(), key=lambda item: (item[1], item[0]), reverse=True)
            out.writelines(f"{q} Q0 {d} {i} {s} bench\n" for i, (d, s) in enumerate(ranked, 1))
    return qrels_path, run_path


STEP = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from long_ranking import METRICS, make_run, peak_rss
import engine
step, queries, docs, long = sys.argv[2], *map(int, sys.argv[3:6])
qrels, run = make_run(queries, docs, long)
outputs = {q: sorted(s, key=lambda d: (s[d], d), reverse=True) for q, s in run.items()}
evaluation = engine.Engine(config={}).dataset(qrels).with_metrics(METRICS)
del run
before, started = peak_rss(reset=True), time.perf_counter()
if step == "evaluate":
    results = evaluation.evaluate(outputs)
else:
    scorer = evaluation.scorer()
    for sample_id, output in outputs.items():
        scorer.add(sample_id, output)
    results = scorer.results()
seconds = time.perf_counter() - started
memory = peak_rss() - before
print(json.dumps({"seconds": seconds, "memory": memory, "summary": results.summary()}))
"""


def peak_rss(*, reset: bool = False) -> int:
    """This process's peak resident set size (Linux's VmHWM), in bytes; ``reset`` first
    sets the peak to the RSS now (``/proc/self/clear_refs``), so that a later call reads
    the peak of what ran in between."""
    if reset:
        Path("/proc/self/clear_refs").write_text("5")
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def in_process(step: str, queries: int, docs: int, long: int) -> dict[str, Any]:
    """``step`` (evaluate or scorer) in a fresh process: seconds, memory and the summary."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            STEP,
            str(ROOT / "benchmarks"),
            step,
            str(queries),
            str(docs),
            str(long),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def command_line(folder: Path) -> dict[str, Any]:
    """``slotwise run`` on the TREC files in ``folder``: seconds, peak RSS and summary."""
    slotwise = str(Path(sys.executable).with_name("slotwise"))
    out = folder / "results.json"
    argv = [slotwise, "run", "--qrels", str(folder / "qrels"), "--run", str(folder / "run")]
    found = child(*argv, "--metrics", ",".join(METRICS), "--format", "json", "--output", str(out))
    summary = json.loads(out.read_text())["summary"]
    return {"seconds": found["seconds"], "memory": found["max_rss"], "summary": summary}


def measure(queries: int, docs: int, long: int, repeat: int) -> dict[str, dict[str, list]]:
    """Every step with and without the long ranking, alternating, ``repeat`` times. The
    summaries must be equal: the long ranking adds unjudged ids below rank 100, which move
    none of the metrics."""
    found: dict[str, dict[str, list]] = {s: {"with": [], "without": []} for s in STEPS}
    with tempfile.TemporaryDirectory() as folder:
        folders = {}
        for name, length in (("with", long), ("without", 0)):
            folders[name] = Path(folder) / name
            folders[name].mkdir()
            write_trec(folders[name], *make_run(queries, docs, length))
        for _ in range(repeat):
            for name, length in (("without", 0), ("with", long)):
                for step in STEPS:
                    if step == "CLI":
                        done = command_line(folders[name])
                    else:
                        done = in_process(step, queries, docs, length)
                    found[step][name].append(done)
    summaries = [r["summary"] for runs in found.values() for done in runs.values() for r in done]
    if any(summary != summaries[0] for summary in summaries):
        raise AssertionError("the summaries differ with and without the long ranking")
    return found


def report(found: dict[str, dict[str, list]], queries: int, docs: int, long: int) -> list[str]:
    """A table row per step: medians without and with the long ranking, and their ratios
    beside the ratio of the ranked ids (what a cost linear in them would be)."""
    ids = (queries * docs + long - docs) / (queries * docs)
    rows = []
    for step, runs in found.items():
        median = {
            name: {key: statistics.median(r[key] for r in done) for key in ("seconds", "memory")}
            for name, done in runs.items()
        }
        time_ratio = median["with"]["seconds"] / median["without"]["seconds"]
        memory_ratio = median["with"]["memory"] / max(median["without"]["memory"], 1)
        rows.append(
            f"| {long:,} | {ids:.2f} | {step} | {median['without']['seconds']:.3f} | "
            f"{median['with']['seconds']:.3f} | {time_ratio:.2f} | "
            f"{median['without']['memory'] / 2**20:.1f} | {median['with']['memory'] / 2**20:.1f} | "
            f"{memory_ratio:.2f} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--long", default="20000,100000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lines = [
        f"{args.queries:,} rankings of {args.docs} (sparse qrels, MS MARCO ids), the first "
        f"continued to the long ranking's length; medians of {args.repeat}, fresh processes.",
        "",
        "| long ranking | ranked ids ratio | step | s without | s with | time ratio | "
        "MiB without | MiB with | memory ratio |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for long in map(int, args.long.split(",")):
        found = measure(args.queries, args.docs, long, args.repeat)
        lines += report(found, args.queries, args.docs, long)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
