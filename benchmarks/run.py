"""Benchmark slotwise against pytrec_eval and ranx on the same data, in the same run.

    python benchmarks/run.py [--queries 100000] [--docs 100] [--repeat 3] [--out benchmarks/RESULTS.md]

Data: seeded synthetic queries, each with a ranked run of ``--docs`` documents (scores
strictly descending, as run files are written) drawn from 300 candidates, and ~10 judged
documents with grades 0-3. Steps, each timed ``--repeat`` times with the tools alternating
so machine noise hits all alike (medians reported):

- (a) end to end from in-memory Python dicts (pytrec_eval's shapes);
- (b) end to end from TREC qrels/run files (each tool's own reader);
- (c) the metric step alone (slotwise: ``score`` on a compiled Batch; pytrec_eval:
  ``evaluate`` on a built evaluator; ranx: ``evaluate`` after a warm-up call).

Peak memory (max RSS) of (b) is measured per tool in a separate process, as is a fresh
process scoring 1,000 queries including the import. Writes a Markdown report.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SLOTWISE = [
    "retrieval-hit-at-k@10",
    "retrieval-precision-at-k@10",
    "retrieval-recall-at-k@100",
    "retrieval-r-precision",
    "retrieval-mrr",
    "retrieval-map",
    "retrieval-dcg-at-k@10",
    "retrieval-ndcg-at-k@10",
    "retrieval-err-at-k@10",
    "retrieval-auc-pr",
    "retrieval-judged-at-k@10",
]
PYTREC = ["success.10", "P.10", "recall.100", "Rprec", "recip_rank", "map", "ndcg_cut.10"]
PYTREC += ["iprec_at_recall"]
RANX = ["hit_rate@10", "precision@10", "recall@100", "r-precision", "mrr", "map", "dcg@10"]
RANX += ["ndcg@10"]
SETBASED = ["ra-nwg-at-k@10", "proc-at-k@10", "pct-proc-at-k@10", "harm-at-k@10"]

Qrels = dict[str, dict[str, int]]
RunDict = dict[str, dict[str, float]]


def make_data(
    queries: int, docs: int, seed: int = 0, grades: range = range(4)
) -> tuple[Qrels, RunDict]:
    rng = random.Random(seed)
    qrels: Qrels = {}
    run: RunDict = {}
    for q in range(queries):
        qid = f"q{q}"
        qrels[qid] = {f"d{rng.randrange(300)}": rng.choice(grades) for _ in range(10)}
        ranked = rng.sample(range(300), docs)
        run[qid] = {f"d{d}": float(docs - i) for i, d in enumerate(ranked)}
    return qrels, run


def write_files(qrels: Qrels, run: RunDict, folder: Path) -> tuple[Path, Path]:
    qrels_path, run_path = folder / "bench.qrels", folder / "bench.run"
    with qrels_path.open("w") as handle:
        for qid, labels in qrels.items():
            handle.writelines(f"{qid} 0 {doc} {label}\n" for doc, label in labels.items())
    with run_path.open("w") as handle:
        for qid, scored in run.items():
            handle.writelines(
                f"{qid} Q0 {doc} {rank} {score} bench\n"
                for rank, (doc, score) in enumerate(scored.items(), start=1)
            )
    return qrels_path, run_path


# -- the tools ----------------------------------------------------------------------------


def slotwise_tool() -> dict[str, Callable[..., Any]]:
    import engine

    eng = engine.Engine(config={})
    metrics = [eng.metric(spec) for spec in SLOTWISE]

    def batch(qrels: Qrels, run: RunDict) -> Any:
        from engine import trec
        from engine.batch import Batch
        from engine.dataset import parse_samples
        from engine.outputs import load_outputs

        samples = parse_samples((s, None) for s in trec.qrels_to_samples(qrels))
        outputs = load_outputs(trec.rank_scored(run))
        return Batch.compile(samples, [outputs.get(s.id) for s in samples])

    return {
        "dicts": lambda qrels, run: eng.evaluate_trec(qrels, run, metrics),
        "files": lambda qrels_path, run_path: eng.evaluate_trec(qrels_path, run_path, metrics),
        "prepare": batch,
        "metrics": lambda prepared: [m.score(prepared) for m in metrics],
    }


def pytrec_tool() -> dict[str, Callable[..., Any]]:
    import pytrec_eval

    measures = set(PYTREC)

    def files(qrels_path: Path, run_path: Path) -> Any:
        with qrels_path.open() as q, run_path.open() as r:
            qrels, run = pytrec_eval.parse_qrel(q), pytrec_eval.parse_run(r)
        return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)

    return {
        "dicts": lambda qrels, run: pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run),
        "files": files,
        "prepare": lambda qrels, run: (pytrec_eval.RelevanceEvaluator(qrels, measures), run),
        "metrics": lambda prepared: prepared[0].evaluate(prepared[1]),
    }


def ranx_tool() -> dict[str, Callable[..., Any]]:
    from ranx import Qrels as RQrels
    from ranx import Run as RRun
    from ranx import evaluate

    def files(qrels_path: Path, run_path: Path) -> Any:
        qrels = RQrels.from_file(str(qrels_path), kind="trec")
        return evaluate(
            qrels, RRun.from_file(str(run_path), kind="trec"), RANX, make_comparable=True
        )

    return {
        "dicts": lambda qrels, run: evaluate(RQrels(qrels), RRun(run), RANX, make_comparable=True),
        "files": files,
        "prepare": lambda qrels, run: (RQrels(qrels), RRun(run)),
        "metrics": lambda prepared: evaluate(*prepared, RANX, make_comparable=True),
    }


TOOLS = {"slotwise": slotwise_tool, "pytrec_eval": pytrec_tool, "ranx": ranx_tool}


def timed(step: Callable[[], object]) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


# -- child processes: peak memory, ranx first call, a small cold start -------------------------


def child(args: argparse.Namespace) -> None:
    """Run one step in this (fresh) process and print JSON with its time and max RSS."""
    started = time.perf_counter()
    if args.child == "cold":
        import engine

        qrels, run = make_data(1000, args.docs)
        engine.Engine(config={}).evaluate_trec(qrels, run, SLOTWISE)
        seconds = time.perf_counter() - started
    else:
        tool = TOOLS[args.child]()
        if args.mode == "first-call":
            qrels, run = make_data(100, args.docs)
            prepared = tool["prepare"](qrels, run)
            seconds = timed(lambda: tool["metrics"](prepared))
        else:
            seconds = timed(lambda: tool["files"](Path(args.qrels), Path(args.run)))
    print(json.dumps({"seconds": seconds, "max_rss": peak_rss()}))


def peak_rss() -> int:
    """This process's peak resident memory in bytes: VmHWM (reset by exec, unlike
    ru_maxrss, which a child forked from a large parent inherits)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def in_child(*argv: str) -> dict[str, float]:
    command = [sys.executable, __file__, *argv]
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- the report ----------------------------------------------------------------------------


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        import psutil

        memory = f", {psutil.virtual_memory().total / 2**30:.0f} GiB RAM"
    except ImportError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores{memory}; Linux {platform.release()}; "
        f"Python {platform.python_version()}, numpy {np.__version__}"
    )


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for names in (["slotwise"], ["pytrec-eval-terrier", "pytrec_eval"], ["ranx"]):
        for name in names:
            try:
                found.append(f"{name} {version(name)}")
                break
            except PackageNotFoundError:
                continue
    return ", ".join(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "RESULTS.md")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated subset")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--qrels", help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    names = [n for n in args.tools.split(",") if n]
    tools = {name: TOOLS[name]() for name in names}
    qrels, run = make_data(args.queries, args.docs)
    lines: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    with tempfile.TemporaryDirectory() as folder:
        qrels_path, run_path = write_files(qrels, run, Path(folder))
        if "ranx" in tools:  # its first call compiles (or loads) the numba kernels
            first = in_child("--child", "ranx", "--mode", "first-call", "--docs", str(args.docs))
        prepared = {name: tool["prepare"](qrels, run) for name, tool in tools.items()}
        for name, tool in tools.items():  # warm-up: imports, caches, JIT
            tool["metrics"](prepared[name])
        steps: dict[tuple[str, str], Callable[[], object]] = {}
        for name, tool in tools.items():
            steps[("dicts", name)] = lambda t=tool: t["dicts"](qrels, run)
            steps[("files", name)] = lambda t=tool: t["files"](qrels_path, run_path)
            steps[("metrics", name)] = lambda t=tool, n=name: t["metrics"](prepared[n])
        timings: dict[tuple[str, str], list[float]] = {key: [] for key in steps}
        for _ in range(args.repeat):
            for key, step in steps.items():
                timings[key].append(timed(step))
                print(f"  {key[0]:8s} {key[1]:12s} {timings[key][-1]:7.2f} s", file=sys.stderr)
        memory = {
            name: in_child(
                "--child",
                name,
                "--mode",
                "files",
                "--qrels",
                str(qrels_path),
                "--run",
                str(run_path),
            )
            for name in tools
        }
    cold = [in_child("--child", "cold", "--docs", str(args.docs)) for _ in range(3)]
    medians = {key: statistics.median(values) for key, values in timings.items()}

    say("# Benchmark results")
    say()
    say(
        f"Command: `python benchmarks/run.py --queries {args.queries} --docs {args.docs} "
        f"--repeat {args.repeat}`"
    )
    say()
    say(f"Machine: {machine()}. Versions: {versions()}.")
    say()
    say(
        f"Data: {args.queries:,} queries x {args.docs} ranked documents, ~10 judged per "
        f"query (grades 0-3); median of {args.repeat} alternating repetitions. slotwise "
        f"computes {len(SLOTWISE)} metrics, pytrec_eval {len(PYTREC)} measures, ranx "
        f"{len(RANX)} (it has no ERR, AUC-PR or judged@k). Ratios below 1: slotwise is faster."
    )
    say()
    peers = [n for n in names if n != "slotwise"]
    header = "| step | " + " | ".join(f"{n} (s)" for n in names)
    header += "".join(f" | slotwise / {p}" for p in peers if "slotwise" in tools)
    say(header + " |")
    say("|---" * (1 + len(names) + (len(peers) if "slotwise" in tools else 0)) + "|")
    titles = {
        "dicts": "(a) end to end, in-memory dicts",
        "files": "(b) end to end, TREC files",
        "metrics": "(c) metric step alone",
    }
    for step, title in titles.items():
        row = [title, *(f"{medians[(step, n)]:.2f}" for n in names)]
        if "slotwise" in tools:
            row += [f"{medians[(step, 'slotwise')] / medians[(step, p)]:.2f}" for p in peers]
        say("| " + " | ".join(row) + " |")
    say()
    say("Peak memory (max RSS of a fresh process running step (b)):")
    say()
    for name, found in memory.items():
        say(f"- {name}: {found['max_rss'] / 2**20:,.0f} MiB ({found['seconds']:.2f} s)")
    if "ranx" in tools:
        say(
            f"- ranx first metric call in a fresh process (numba compile or cache load): "
            f"{first['seconds']:.2f} s"
        )
    say()
    say(
        "A fresh process scoring 1,000 queries with the slotwise metrics, including "
        f"`import engine` and data generation: median "
        f"{statistics.median(c['seconds'] for c in cold):.2f} s in-process after start; "
        "see also `time python -c ...` in docs/scale.md."
    )
    say()
    say(other_families(args.queries, args.docs))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


def other_families(queries: int, docs: int) -> str:
    """Throughput of the set-based family (graded 0-5) and UDCG, slotwise only."""
    import engine
    from engine.batch import Batch
    from engine.dataset import parse_samples
    from engine.outputs import load_outputs

    eng = engine.Engine(config={})
    rows = [
        "| family | metrics | end to end (s) | metric step (s) | queries/s (end to end) |",
        "|---|---|---:|---:|---:|",
    ]
    qrels, run = make_data(queries, docs, seed=1, grades=range(1, 6))
    ranked = {q: list(s) for q, s in run.items()}
    families = {
        "set-based": ([{"id": q, "expected_output": g} for q, g in qrels.items()], SETBASED),
        "utility": (
            [
                {
                    "id": q,
                    "expected_output": {"utility": {d: (g - 2.5) / 2.5 for d, g in labels.items()}},
                }
                for q, labels in qrels.items()
            ],
            ["udcg@10"],
        ),
    }
    for family, (samples, specs) in families.items():
        try:
            metrics = [eng.metric(spec) for spec in specs]
            started = time.perf_counter()
            eng.dataset(samples=samples).with_metrics(metrics).evaluate(ranked)
            end_to_end = time.perf_counter() - started
            parsed = parse_samples((s, None) for s in samples)
            outputs = load_outputs(ranked)
            batch = Batch.compile(parsed, [outputs.get(s.id) for s in parsed])
            step = timed(lambda m=metrics, b=batch: [x.score(b) for x in m])
        except Exception as error:  # a family still landing: say so, do not fail the run
            rows.append(f"| {family} | {', '.join(specs)} | skipped: {type(error).__name__} | | |")
            continue
        rows.append(
            f"| {family} | {', '.join(specs)} | {end_to_end:.2f} | {step:.2f} | "
            f"{queries / end_to_end:,.0f} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    main()
