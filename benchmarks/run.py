"""Benchmark slotwise against pytrec_eval and ranx on the same data, in the same run.

    python benchmarks/run.py [--queries 100000] [--docs 100] [--repeat 3] [--stream-queries 1000000]

Data: seeded synthetic queries, each with a ranked run of ``--docs`` documents (scores
strictly descending, as run files are written) drawn from 300 candidates, and ~10 judged
documents with grades 0-3. Every tool computes the same five measures: nDCG@10, AP, RR,
R@100 and P@10. Steps, each timed ``--repeat`` times with the tools alternating so
machine noise hits all alike (medians reported):

- (a) end to end from pytrec_eval-shaped Python dicts;
- (b) end to end from TREC qrels/run files, in this process (each tool's own reader);
- (c) the metric step alone (slotwise: ``score`` on a compiled Batch; pytrec_eval:
  ``evaluate`` on a built evaluator; ranx: its numba kernels on its typed lists, warm);
- (d) the command line in a fresh process: ``slotwise run --qrels --run --format json
  --output F`` (per-sample JSON and confidence intervals written) against a script doing
  pytrec_eval's ``parse_qrel`` + ``parse_run`` + ``evaluate``, with peak RSS;
- (e) ``slotwise run --stream`` over ``--stream-queries`` queries from TREC files against
  the same at ``--queries``: peak RSS and throughput, and the in-memory throughput.

Also: bootstrap CIs alone (``--queries`` samples x 5 metrics x 1000 resamples), the
set-based family and UDCG, and a fresh process scoring 1,000 queries. Writes a Markdown
report (``--out``).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SLOTWISE = [
    "retrieval-ndcg-at-k@10",
    "retrieval-map",
    "retrieval-mrr",
    "retrieval-recall-at-k@100",
    "retrieval-precision-at-k@10",
]
PYTREC = ["ndcg_cut.10", "map", "recip_rank", "recall.100", "P.10"]
RANX = [("ndcg", 10), ("map", 0), ("mrr", 0), ("recall", 100), ("precision", 10)]
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


def write_big_files(queries: int, docs: int, folder: Path, seed: int = 0) -> tuple[Path, Path]:
    """The same distribution as :func:`make_data`, written block by block with numpy (no
    dicts: a million queries would not fit them)."""
    rng = np.random.default_rng(seed)
    qrels_path, run_path = folder / f"big{queries}.qrels", folder / f"big{queries}.run"
    with qrels_path.open("w") as labels, run_path.open("w") as ranked:
        for start in range(0, queries, 10_000):
            count = min(10_000, queries - start)
            q = np.arange(start, start + count)
            judged = rng.integers(0, 300, (count, 10))
            grades = rng.integers(0, 4, (count, 10))
            lines = [
                f"q{qid} 0 d{doc} {grade}\n"
                for qid, row, grade_row in zip(
                    q.tolist(), judged.tolist(), grades.tolist(), strict=True
                )
                for doc, grade in dict(zip(row, grade_row, strict=True)).items()
            ]
            labels.writelines(lines)
            order = np.argsort(rng.random((count, 300)), axis=1)[:, :docs]
            ranked.writelines(
                f"q{qid} Q0 d{doc} {rank + 1} {docs - rank}.0 bench\n"
                for qid, row in zip(q.tolist(), order.tolist(), strict=True)
                for rank, doc in enumerate(row)
            )
    return qrels_path, run_path


# -- the tools ----------------------------------------------------------------------------


def _score_all(metrics: list[Any], batch: Any) -> list[Any]:
    return [metric.score(batch) for metric in metrics]


def slotwise_tool() -> dict[str, Callable[..., Any]]:
    import engine

    eng = engine.Engine(config={})
    metrics = [eng.metric(spec) for spec in SLOTWISE]
    return {
        "dicts": lambda qrels, run: eng.evaluate_trec(qrels, run, metrics),
        "files": lambda qrels_path, run_path: eng.evaluate_trec(qrels_path, run_path, metrics),
        "prepare": lambda qrels, run: eng.dataset(qrels).batch(run),
        # a copy per call: what one evaluation's metrics share stays out of the next one
        "metrics": lambda batch: _score_all(metrics, attrs.evolve(batch)),
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
    from ranx.metrics import metric_switch

    names = [f"{m}@{k}" if k else m for m, k in RANX]

    def files(qrels_path: Path, run_path: Path) -> Any:
        qrels = RQrels.from_file(str(qrels_path), kind="trec")
        return evaluate(
            qrels, RRun.from_file(str(run_path), kind="trec"), names, make_comparable=True
        )

    def prepare(qrels: Qrels, run: RunDict) -> Any:
        return RQrels(qrels).to_typed_list(), RRun(run).to_typed_list()

    def kernels(prepared: Any) -> Any:  # the numba kernels on typed lists: no conversions
        return [metric_switch(m)(prepared[0], prepared[1], k, 1) for m, k in RANX]

    return {
        "dicts": lambda qrels, run: evaluate(RQrels(qrels), RRun(run), names, make_comparable=True),
        "files": files,
        "prepare": prepare,
        "metrics": kernels,
    }


TOOLS = {"slotwise": slotwise_tool, "pytrec_eval": pytrec_tool, "ranx": ranx_tool}


def timed(step: Callable[[], object]) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def in_process_child(*argv: str) -> dict[str, float]:
    """A command in a fresh process: wall seconds and peak RSS (bytes)."""
    wrapper = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
        "print(done.returncode, time.perf_counter() - t, "
        "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)"
    )
    out = subprocess.run(
        [sys.executable, "-c", wrapper, *argv], capture_output=True, text=True, check=True
    )
    code, seconds, rss = out.stdout.split()
    if code != "0":
        raise RuntimeError(f"{argv} exited {code}")
    return {"seconds": float(seconds), "max_rss": float(rss)}


PYTREC_SCRIPT = """
import sys, pytrec_eval
with open(sys.argv[1]) as q, open(sys.argv[2]) as r:
    qrels, run = pytrec_eval.parse_qrel(q), pytrec_eval.parse_run(r)
pytrec_eval.RelevanceEvaluator(qrels, set(sys.argv[3].split(","))).evaluate(run)
"""


PYTREC_ALL_TREC = """
import sys, pytrec_eval
with open(sys.argv[1]) as q, open(sys.argv[2]) as r:
    qrels, run = pytrec_eval.parse_qrel(q), pytrec_eval.parse_run(r)
pytrec_eval.RelevanceEvaluator(qrels, pytrec_eval.supported_measures).evaluate(run)
"""


def trec_eval_step(qrels: Path, run: Path, repeat: int, folder: Path) -> dict[str, float]:
    """(f) `slotwise trec-eval -q -m all_trec`, pytrec_eval with every measure it supports
    (parse + evaluate) and, where a C compiler is present, the trec_eval 10 binary built
    from tests/data/trec_eval-10 (trec_eval_binary.py) with the same options; fresh
    processes: median seconds of each."""
    from trec_eval_binary import build

    slotwise = str(Path(sys.executable).with_name("slotwise"))
    commands = {
        "slotwise": [slotwise, "trec-eval", "-q", "-m", "all_trec", str(qrels), str(run)],
        "pytrec_eval": [sys.executable, "-c", PYTREC_ALL_TREC, str(qrels), str(run)],
    }
    binary = build(folder / "trec_eval-build")
    if binary is not None:
        commands["trec_eval"] = [str(binary), "-q", "-m", "all_trec", str(qrels), str(run)]
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, command in commands.items():
            times[name].append(in_process_child(*command)["seconds"])
        print(
            f"  trec-eval {times['slotwise'][-1]:.2f} s vs {times['pytrec_eval'][-1]:.2f} s",
            file=sys.stderr,
        )
    return {name: statistics.median(values) for name, values in times.items()}


def slotwise_cli(qrels: Path, run: Path, out: Path, *extra: str) -> list[str]:
    slotwise = str(Path(sys.executable).with_name("slotwise"))
    return [slotwise, "run", "--qrels", str(qrels), "--run", str(run), "--metrics", ",".join(SLOTWISE),
            "--format", "json", "--output", str(out), *extra]  # fmt: skip


def cold_start(docs: int) -> float:
    code = (
        "import time; t = time.perf_counter(); import engine; import sys; "
        f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); from run import make_data, SLOTWISE; "
        f"q, r = make_data(1000, {docs}); engine.Engine(config={{}}).evaluate_trec(q, r, SLOTWISE); "
        "print(time.perf_counter() - t)"
    )
    return float(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )


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
    return f"{cpu}, {os.cpu_count()} cores{memory}; Linux {platform.release()}; Python {platform.python_version()}, numpy {np.__version__}"


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for names in (["slotwise"], ["pytrec-eval-terrier", "pytrec_eval"], ["ranx"], ["pyarrow"]):
        for name in names:
            try:
                found.append(f"{name} {version(name)}")
                break
            except PackageNotFoundError:
                continue
    return ", ".join(found)


def bootstrap_seconds(queries: int) -> float:
    from engine.evaluation.statistics import Bootstrap

    values = np.random.default_rng(1).random((queries, 5))
    values[::7, 1] = np.nan

    def run() -> None:
        bootstrap = Bootstrap(5)
        bootstrap.add(values)
        bootstrap.intervals()

    return statistics.median(timed(run) for _ in range(3))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stream-queries", type=int, default=1_000_000, help="0: skip step (e)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "RESULTS.md")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated subset")
    args = parser.parse_args()

    names = [n for n in args.tools.split(",") if n]
    tools = {name: TOOLS[name]() for name in names}
    qrels, run = make_data(args.queries, args.docs)
    lines: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    with tempfile.TemporaryDirectory() as folder:
        qrels_path, run_path = write_files(qrels, run, Path(folder))
        prepared = {name: tool["prepare"](qrels, run) for name, tool in tools.items()}
        for name, tool in tools.items():  # warm-up: imports, caches, numba JIT
            tool["metrics"](prepared[name])
        steps: dict[tuple[str, str], Callable[[], object]] = {}
        for name, tool in tools.items():
            steps[("dicts", name)] = lambda t=tool: t["dicts"](qrels, run)
            steps[("files", name)] = lambda t=tool: t["files"](qrels_path, run_path)
            steps[("metrics", name)] = lambda t=tool, n=name: t["metrics"](prepared[n])
        timings: dict[tuple[str, str], list[float]] = {key: [] for key in steps}
        cli: dict[str, list[dict[str, float]]] = {"slotwise": [], "pytrec_eval": []}
        out = Path(folder) / "results.json"
        for _ in range(args.repeat):
            for key, step in steps.items():
                timings[key].append(timed(step))
                print(f"  {key[0]:8s} {key[1]:12s} {timings[key][-1]:7.2f} s", file=sys.stderr)
            cli["slotwise"].append(in_process_child(*slotwise_cli(qrels_path, run_path, out)))
            script = [
                sys.executable,
                "-c",
                PYTREC_SCRIPT,
                str(qrels_path),
                str(run_path),
                ",".join(PYTREC),
            ]
            cli["pytrec_eval"].append(in_process_child(*script))
            print(
                f"  cli      {cli['slotwise'][-1]['seconds']:.2f} s vs {cli['pytrec_eval'][-1]['seconds']:.2f} s",
                file=sys.stderr,
            )
        prepared.clear()
        trec_eval = trec_eval_step(qrels_path, run_path, args.repeat, Path(folder))
        stream = {}
        if args.stream_queries:
            big = write_big_files(args.stream_queries, args.docs, Path(folder))
            for label, (q, r) in (("small", (qrels_path, run_path)), ("big", big)):
                stream[label] = in_process_child(*slotwise_cli(q, r, out, "--stream"))
                print(f"  stream {label}: {stream[label]}", file=sys.stderr)
    cold = [cold_start(args.docs) for _ in range(3)]
    medians = {key: statistics.median(values) for key, values in timings.items()}
    cli_median = {
        name: {k: statistics.median(r[k] for r in runs) for k in ("seconds", "max_rss")}
        for name, runs in cli.items()
    }

    say("# Benchmark results")
    say()
    say(
        f"Command: `python benchmarks/run.py --queries {args.queries} --docs {args.docs} --repeat {args.repeat} --stream-queries {args.stream_queries}`"
    )
    say()
    say(f"Machine: {machine()}. Versions: {versions()}.")
    say()
    say(
        f"Data: {args.queries:,} queries x {args.docs} ranked documents, ~10 judged per query "
        f"(grades 0-3); every tool computes nDCG@10, AP, RR, R@100 and P@10; median of "
        f"{args.repeat} alternating repetitions. Ratios below 1: slotwise is faster."
    )
    say()
    peers = [n for n in names if n != "slotwise"]
    say(
        "| step | "
        + " | ".join(f"{n} (s)" for n in names)
        + "".join(f" | slotwise / {p}" for p in peers)
        + " |"
    )
    say("|---" * (1 + len(names) + len(peers)) + "|")
    titles = {
        "dicts": "(a) end to end, pytrec_eval-shaped dicts",
        "files": "(b) end to end, TREC files, in-process",
        "metrics": "(c) metric step alone (ranx: warm numba kernels)",
    }
    for step, title in titles.items():
        row = [title, *(f"{medians[(step, n)]:.2f}" for n in names)]
        row += [f"{medians[(step, 'slotwise')] / medians[(step, p)]:.2f}" for p in peers]
        say("| " + " | ".join(row) + " |")
    s, p = cli_median["slotwise"], cli_median["pytrec_eval"]
    say(
        f"| (d) `slotwise run --qrels --run --format json --output` vs pytrec_eval parse + evaluate, fresh processes "
        f"| {s['seconds']:.2f} | {p['seconds']:.2f} | | {s['seconds'] / p['seconds']:.2f} | |"
    )
    say()
    say(
        f"Peak RSS of (d): slotwise {s['max_rss'] / 2**20:,.0f} MiB, pytrec_eval "
        f"{p['max_rss'] / 2**20:,.0f} MiB (ratio {s['max_rss'] / p['max_rss']:.2f})."
    )
    say()
    say(
        f"(f) `slotwise trec-eval -q -m all_trec` (parse, evaluate, print every line) "
        f"{trec_eval['slotwise']:.2f} s vs pytrec_eval with every measure it supports (parse + "
        f"evaluate) {trec_eval['pytrec_eval']:.2f} s, fresh processes: ratio "
        f"{trec_eval['slotwise'] / trec_eval['pytrec_eval']:.2f}"
        + (
            f"; the trec_eval 10 binary {trec_eval['trec_eval']:.2f} s: ratio "
            f"{trec_eval['slotwise'] / trec_eval['trec_eval']:.2f}."
            if "trec_eval" in trec_eval
            else " (no C compiler: trec_eval not built)."
        )
    )
    say()
    if stream:
        small, big = stream["small"], stream["big"]
        in_memory = args.queries / s["seconds"]
        say(
            f"(e) `--stream`: {args.queries:,} queries in {small['seconds']:.1f} s, peak RSS "
            f"{small['max_rss'] / 2**20:,.0f} MiB; {args.stream_queries:,} queries in "
            f"{big['seconds']:.1f} s, peak RSS {big['max_rss'] / 2**20:,.0f} MiB (x"
            f"{big['max_rss'] / small['max_rss']:.2f}); throughput {args.stream_queries / big['seconds']:,.0f} "
            f"queries/s streamed vs {in_memory:,.0f} in memory (x{args.stream_queries / big['seconds'] / in_memory:.2f})."
        )
        say()
    say(
        f"Bootstrap CIs alone ({args.queries:,} samples x 5 metrics x 1000 resamples): "
        f"{bootstrap_seconds(args.queries):.2f} s."
    )
    say()
    say(
        "A fresh process scoring 1,000 queries, including `import engine` and data "
        f"generation: median {statistics.median(cold):.2f} s."
    )
    say()
    say(other_families(args.queries, args.docs))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


def other_families(queries: int, docs: int) -> str:
    """Throughput of the set-based family (graded 1-5) and UDCG, slotwise only."""
    import engine

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
        metrics = [eng.metric(spec) for spec in specs]
        started = time.perf_counter()
        dataset = eng.dataset(samples=samples)
        dataset.with_metrics(metrics).evaluate(ranked)
        end_to_end = time.perf_counter() - started
        batch = dataset.batch(ranked)
        step = timed(lambda m=metrics, b=batch: [x.score(b) for x in m])
        rows.append(
            f"| {family} | {', '.join(specs)} | {end_to_end:.2f} | {step:.2f} | {queries / end_to_end:,.0f} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    main()
