"""Benchmark slotwise against pytrec_eval, ranx and the trec_eval binary on the same data,
in the same run.

    python benchmarks/run.py [--queries 100000] [--docs 100] [--repeat 3]
                             [--sweep 300,50000,2000000,8841823] [--deep-queries 10000]
                             [--stream-queries 1000000] [--slow-once 60]

Data (benchmarks/corpus.py): document ids drawn from a corpus of each size of
``--sweep`` (default: 300; 50,000; 2,000,000 and MS MARCO's 8,841,823 passages, numeric
ids as in its qrels), ``--docs`` distinct documents per query, scores descending with a
few ties; qrels ``sparse`` (about one relevant per query, as MS MARCO dev) at every point
of the sweep, and ``deep`` (about 200 judged per query, as TREC DL's pools) at the
largest corpus with ``--deep-queries`` queries. Every tool computes nDCG@10, AP, RR,
R@100 and P@10. Each step is timed ``--repeat`` times, the tools alternating so machine
noise hits all alike; medians reported. A command whose first run takes longer than
``--slow-once`` seconds runs once (the trec_eval binary on 10 M run lines: 100-300 s, 25-45
times slotwise's; repeating it would double the sweep's length):

- (a) from pytrec_eval-shaped dicts to means (slotwise: ``Engine().evaluate_trec`` and
  ``summary()``, CIs included; pytrec_eval: ``RelevanceEvaluator`` + ``evaluate``);
- (b) from TREC files, in this process (each tool's own reader);
- (c) the metric step alone (slotwise: ``score`` on a compiled Batch; pytrec_eval:
  ``evaluate`` on a built evaluator; ranx: its numba kernels on its typed lists, warm);
- (d) the command line in a fresh process: ``slotwise run --qrels --run --format json
  --output F`` (per-sample JSON and CIs written) against a script doing pytrec_eval's
  ``parse_qrel`` + ``parse_run`` + ``evaluate``, with peak RSS;
- (f) ``slotwise trec-eval -q -m all_trec`` against the trec_eval 10 binary built from
  the vendored source (``benchmarks/trec_eval_binary.py``) with the same arguments, and
  against pytrec_eval with every measure it supports, fresh processes;
- (e) ``slotwise run --stream`` over ``--stream-queries`` queries from the largest corpus
  against the same at ``--queries``: peak RSS and throughput;
- (g) ``evaluation.scorer().add`` one output at a time (benchmarks/scorer.py).

ranx runs end to end ((a), (b)) at the largest corpus only: it takes ten times as long
as the others there. slotwise's modules are compiled to bytecode first, as ``pip
install`` does: an editable install under ``PYTHONDONTWRITEBYTECODE`` (set on some CI
machines) would otherwise compile every module in every fresh process, some 0.4 s that no
installed user pays. Writes a Markdown report (``--out``).
"""

from __future__ import annotations

import argparse
import compileall
import functools
import gc
import itertools
import os
import platform
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
sys.path.insert(0, str(ROOT / "benchmarks"))

from corpus import MSMARCO_PASSAGES, make_dicts, write_files  # noqa: E402

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
SWEEP = (300, 50_000, 2_000_000, MSMARCO_PASSAGES)

Qrels = dict[str, dict[str, int]]
RunDict = dict[str, dict[str, float]]


# -- the tools ----------------------------------------------------------------------------


def _score_all(metrics: list[Any], batch: Any) -> list[Any]:
    return [metric.score(batch) for metric in metrics]


def slotwise_tool() -> dict[str, Callable[..., Any]]:
    import engine

    eng = engine.Engine(config={})
    metrics = [eng.metric(spec) for spec in SLOTWISE]
    return {
        "dicts": lambda qrels, run: eng.evaluate_trec(qrels, run, metrics).summary(),
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
    gc.collect()
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def child(*argv: str) -> dict[str, float]:
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
measures = pytrec_eval.supported_measures if sys.argv[3] == "all" else set(sys.argv[3].split(","))
pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
"""


#: The least program of the same job in pyarrow alone: read both files, hash-join the run
#: to the qrels on (query, document), sort into trec_eval's order; no metric, nothing
#: written. What Python + Arrow pay before scoring, in a fresh process.
ARROW_SCRIPT = """
import sys
from concurrent.futures import ThreadPoolExecutor
import pyarrow as pa, pyarrow.csv as csv
def read(path, names, number):
    return csv.read_csv(path, read_options=csv.ReadOptions(column_names=names),
        parse_options=csv.ParseOptions(delimiter=" ", quote_char=False),
        convert_options=csv.ConvertOptions(include_columns=["query", "doc", number],
            column_types={"query": pa.string(), "doc": pa.string(), number: pa.float64()}))
with ThreadPoolExecutor(1) as pool:
    run = pool.submit(read, sys.argv[2], ["query", "q0", "doc", "rank", "score", "tag"], "score")
    qrels = read(sys.argv[1], ["query", "iter", "doc", "label"], "label")
    run = run.result()
joined = run.join(qrels, keys=["query", "doc"], join_type="left outer")
joined.sort_by([("query", "ascending"), ("score", "descending"), ("doc", "descending")])
"""


def slotwise_cli(qrels: Path, run: Path, out: Path, *extra: str) -> list[str]:
    slotwise = str(Path(sys.executable).with_name("slotwise"))
    return [slotwise, "run", "--qrels", str(qrels), "--run", str(run), "--metrics", ",".join(SLOTWISE),
            "--format", "json", "--output", str(out), *extra]  # fmt: skip


def trec_eval_binary(folder: Path) -> Path | None:
    """trec_eval 10 built from the vendored source (None without a C compiler)."""
    from trec_eval_binary import build, why_not

    binary = build(folder / "trec_eval-build")
    if binary is None:
        print(f"  trec_eval binary: {why_not()}", file=sys.stderr)
    return binary


# -- one point of the sweep ------------------------------------------------------------------


@attrs.define
class Point:
    """The medians measured on one data set."""

    corpus: int
    shape: str
    queries: int
    distinct: int = 0
    steps: dict[tuple[str, str], float] = attrs.field(factory=dict)
    rss: dict[str, float] = attrs.field(factory=dict)
    primitives: list[str] = attrs.field(factory=list)


def measure(
    corpus: int, shape: str, queries: int, docs: int, repeat: int, names: list[str],
    folder: Path, end_to_end_ranx: bool, binary: Path | None, slow_once: float,
) -> Point:  # fmt: skip
    """Every in-process and command-line step on one generated data set."""
    point = Point(corpus, shape, queries)
    print(f"# corpus {corpus:,}, {shape} qrels, {queries:,} queries", file=sys.stderr)
    qrels_path, run_path = write_files(folder, queries, docs, corpus, shape)
    qrels, run = make_dicts(queries, docs, corpus, shape)
    point.distinct = len({d for ranked in run.values() for d in ranked})
    tools = {name: TOOLS[name]() for name in names}
    prepared = {name: tool["prepare"](qrels, run) for name, tool in tools.items()}
    for name, tool in tools.items():  # warm-up: imports, caches, numba JIT
        tool["metrics"](prepared[name])
    steps: dict[tuple[str, str], Callable[[], object]] = {}
    for name, tool in tools.items():
        if name != "ranx" or end_to_end_ranx:
            steps[("dicts", name)] = lambda t=tool: t["dicts"](qrels, run)
            steps[("files", name)] = lambda t=tool: t["files"](qrels_path, run_path)
        steps[("metrics", name)] = lambda t=tool, n=name: t["metrics"](prepared[n])
    slotwise = str(Path(sys.executable).with_name("slotwise"))
    out = folder / "results.json"
    commands = {
        ("cli", "slotwise"): slotwise_cli(qrels_path, run_path, out),
        ("cli", "pytrec_eval"): [
            sys.executable,
            "-c",
            PYTREC_SCRIPT,
            str(qrels_path),
            str(run_path),
            ",".join(PYTREC),
        ],
        ("cli", "pyarrow"): [sys.executable, "-c", ARROW_SCRIPT, str(qrels_path), str(run_path)],
        ("all_trec", "slotwise"): [
            slotwise,
            "trec-eval",
            "-q",
            "-m",
            "all_trec",
            str(qrels_path),
            str(run_path),
        ],
        ("all_trec", "pytrec_eval"): [
            sys.executable,
            "-c",
            PYTREC_SCRIPT,
            str(qrels_path),
            str(run_path),
            "all",
        ],
    }
    if binary is not None:
        commands[("all_trec", "trec_eval")] = [str(binary), "-q", "-m", "all_trec",
                                               str(qrels_path), str(run_path)]  # fmt: skip
    timings: dict[tuple[str, str], list[float]] = {key: [] for key in [*steps, *commands]}
    rss: dict[str, list[float]] = {"slotwise": [], "pytrec_eval": [], "pyarrow": []}
    for _ in range(repeat):
        for key, step in steps.items():
            timings[key].append(timed(step))
            print(f"  {key[0]:8s} {key[1]:12s} {timings[key][-1]:7.2f} s", file=sys.stderr)
        for key, command in commands.items():
            if timings[key] and timings[key][0] > slow_once:
                continue  # (a command far slower than the others: its one run stands)
            done = child(*command)
            timings[key].append(done["seconds"])
            if key[0] == "cli":
                rss[key[1]].append(done["max_rss"])
            print(f"  {key[0]:8s} {key[1]:12s} {done['seconds']:7.2f} s", file=sys.stderr)
    prepared.clear()
    point.steps = {key: statistics.median(values) for key, values in timings.items()}
    point.rss = {name: statistics.median(values) for name, values in rss.items()}
    if end_to_end_ranx:
        point.primitives = floor(qrels_path, run_path, (qrels, run))
    for path in (qrels_path, run_path):
        path.unlink()
    return point


#: What a fresh process pays before any work: Python alone, the libraries slotwise's core
#: stands on (pyarrow imports pandas, when installed, at its first conversion), slotwise,
#: and pytrec_eval.
_PROCESS_COSTS = {
    "Python alone": "pass",
    "`import numpy, pyarrow.compute` and pyarrow's first conversion": (
        "import numpy, pyarrow as pa, pyarrow.compute; pa.array([0])"
    ),
    "`from engine import Engine` (the evaluation; `import engine` alone imports nothing)": (
        "from engine import Engine"
    ),
    "`import pytrec_eval`": "import pytrec_eval",
}


def flattened(nested: Qrels | RunDict) -> tuple[Any, Any]:
    """The least a program given pytrec_eval's dicts does before any join: every doc id
    into one Arrow string array, every number into one float64 array (C-level passes
    over the dicts, as slotwise's reader makes)."""
    import pyarrow as pa

    inner = nested.values()
    ids = pa.array(list(itertools.chain.from_iterable(inner)), pa.string())
    values = list(itertools.chain.from_iterable(map(dict.values, inner)))
    return ids, np.array(values, dtype=np.float64)


def floor(
    qrels_path: Path, run_path: Path, dicts: tuple[Qrels, RunDict] | None = None
) -> list[str]:
    """What the primitives cost on the run: the lower bounds of reading and joining (and,
    given the same data as ``dicts``, of taking them in)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as csv

    from engine.io.fingerprints import fingerprints
    from engine.io.frames import Coded, Where, retrieved_twice

    def read(path: Path, doc: Any) -> Any:
        run = path == run_path
        names = (
            ["query", "q0", "doc", "rank", "score", "tag"]
            if run
            else ["query", "iter", "doc", "label"]
        )
        return csv.read_csv(
            path,
            read_options=csv.ReadOptions(column_names=names, block_size=1 << 24),
            parse_options=csv.ParseOptions(delimiter=" ", quote_char=False),
            convert_options=csv.ConvertOptions(
                include_columns=["query", "doc", names[4] if run else "label"],
                column_types={"query": pa.dictionary(pa.int32(), pa.string()), "doc": doc},
            ),
        )

    ranked = read(run_path, pa.string())
    docs = ranked.column("doc").combine_chunks()
    queries, lines = Coded.of(ranked.column("query")), Coded.rows(docs)
    judged = pc.unique(read(qrels_path, pa.string()).column("doc").combine_chunks())
    steps = {
        "pyarrow reads the run (ids as strings)": lambda: read(run_path, pa.string()),
        "pyarrow reads the qrels (ids as strings)": lambda: read(qrels_path, pa.string()),
        "pyarrow reads the run, ids dictionary-encoded per block": lambda: read(
            run_path, pa.dictionary(pa.int32(), pa.string())
        ),
        "one vocabulary of every run id (`dictionary_encode`)": lambda: pc.dictionary_encode(docs),
        "a 64-bit fingerprint of every run id, sorted as one array": lambda: np.sort(
            fingerprints(docs)
        ),
        "slotwise's repeat check (fingerprints sorted query by query, blocks on both cores)": (
            lambda: retrieved_twice(queries, lines, Where())
        ),
        "the hash join: each run id looked up in the qrels' ids (`index_in`)": lambda: pc.index_in(
            docs, value_set=judged
        ),
        "sorting every run id (`array_sort_indices`)": lambda: pc.array_sort_indices(docs),
        **(
            {
                "the run's dicts flattened: ids to an Arrow array, scores to float64": (
                    lambda: flattened(dicts[1])
                ),
                "the qrels' dicts flattened: ids to an Arrow array, labels to float64": (
                    lambda: flattened(dicts[0])
                ),
            }
            if dicts is not None
            else {}
        ),
        **{
            f"{what} in a fresh process": functools.partial(
                subprocess.run, [sys.executable, "-c", code], check=True
            )
            for what, code in _PROCESS_COSTS.items()
        },
    }
    rows = ["| primitive | seconds |", "|---|---:|"]
    for title, step in steps.items():
        rows.append(f"| {title} | {statistics.median(timed(step) for _ in range(3)):.2f} |")
    return rows


def stream_step(folder: Path, queries: int, big: int, docs: int) -> dict[str, dict[str, float]]:
    """(e): ``--stream`` over ``queries`` and ``big`` queries from the MS MARCO corpus."""
    found = {}
    for count in (queries, big):
        q, r = write_files(folder, count, docs)
        found[str(count)] = child(*slotwise_cli(q, r, folder / "stream.json", "--stream"))
        print(f"  stream {count:,}: {found[str(count)]}", file=sys.stderr)
        q.unlink()
        r.unlink()
    return found


# -- the report ------------------------------------------------------------------------------


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
    from engine.cores import available

    cores = (
        f"{available()} of {os.cpu_count()} cores"
        if available() != os.cpu_count()
        else f"{os.cpu_count()} cores"
    )
    return f"{cpu}, {cores}{memory}; Linux {platform.release()}; Python {platform.python_version()}, numpy {np.__version__}"


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


def cold_start(docs: int) -> float:
    code = (
        "import time; t = time.perf_counter(); import engine; import sys; "
        f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); from corpus import make_dicts; "
        f"from run import SLOTWISE; q, r = make_dicts(1000, {docs}); "
        "engine.Engine(config={}).evaluate_trec(q, r, SLOTWISE).summary(); "
        "print(time.perf_counter() - t)"
    )
    return float(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )


def ratio(point: Point, step: str, peer: str) -> str:
    mine, theirs = point.steps.get((step, "slotwise")), point.steps.get((step, peer))
    return f"{mine / theirs:.2f}" if mine is not None and theirs else ""


def seconds(point: Point, step: str, tool: str) -> str:
    value = point.steps.get((step, tool))
    return f"{value:.2f}" if value is not None else ""


def report(points: list[Point], args: argparse.Namespace, extra: list[str]) -> list[str]:
    lines = [
        "# Benchmark results",
        "",
        f"Command: `python benchmarks/run.py --queries {args.queries} --docs {args.docs} "
        f"--repeat {args.repeat} --sweep {','.join(map(str, args.sweep))} "
        f"--deep-queries {args.deep_queries} --stream-queries {args.stream_queries} "
        f"--slow-once {args.slow_once:g}`",
        "",
        f"Machine: {machine()}. Versions: {versions()}.",
        "",
        "Data (benchmarks/corpus.py): document ids drawn from a corpus of the size shown "
        f"(numeric ids, as MS MARCO's), {args.docs} distinct documents per query with scores "
        "descending (a few ties); sparse qrels: about one relevant passage per query (MS MARCO "
        "dev); deep qrels: about 200 judged passages per query, grades 0-3 (TREC DL). Every "
        "tool computes nDCG@10, AP, RR, R@100 and P@10 (step f: every measure). Medians of "
        f"{args.repeat} alternating repetitions, in seconds (a command whose first run took "
        f"over {args.slow_once:g} s: that run); ratios below 1: slotwise is faster.",
        "",
        "| corpus | qrels | queries | distinct ids in the run | step | slotwise | pytrec_eval "
        "| ranx | trec_eval 10 | slotwise / pytrec_eval | slotwise / ranx | slotwise / trec_eval |",
        "|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    titles = {
        "dicts": "(a) dicts to means (CIs included)",
        "files": "(b) TREC files, in-process",
        "metrics": "(c) metric step alone",
        "cli": "(d) `slotwise run` with per-sample JSON vs pytrec_eval parse + evaluate, fresh processes",
        "all_trec": "(f) `trec-eval -q -m all_trec`, fresh processes",
    }
    for point in points:
        for step, title in titles.items():
            if not any(key[0] == step for key in point.steps):
                continue
            lines.append(
                f"| {point.corpus:,} | {point.shape} | {point.queries:,} | {point.distinct:,} "
                f"| {title} | {seconds(point, step, 'slotwise')} | {seconds(point, step, 'pytrec_eval')} "
                f"| {seconds(point, step, 'ranx')} | {seconds(point, step, 'trec_eval')} "
                f"| {ratio(point, step, 'pytrec_eval')} | {ratio(point, step, 'ranx')} "
                f"| {ratio(point, step, 'trec_eval')} |"
            )
    lines += ["", "Peak RSS of (d):", ""]
    lines += [
        "| corpus | qrels | slotwise (MiB) | pytrec_eval (MiB) | ratio |",
        "|---:|---|---:|---:|---:|",
    ]
    for point in points:
        mine, theirs = point.rss.get("slotwise"), point.rss.get("pytrec_eval")
        if mine and theirs:
            lines.append(
                f"| {point.corpus:,} | {point.shape} | {mine / 2**20:,.0f} | {theirs / 2**20:,.0f} "
                f"| {mine / theirs:.2f} |"
            )
    lines += [
        "",
        "(d) against the least pyarrow program of the same job (benchmarks/run.py "
        "`ARROW_SCRIPT`: read both files, hash-join the run to the qrels, sort in trec_eval's "
        "order; no metric, nothing written), fresh processes:",
        "",
        "| corpus | qrels | slotwise (s) | pyarrow (s) | ratio | slotwise (MiB) "
        "| pyarrow (MiB) | ratio |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for point in points:
        mine, least = point.rss.get("slotwise"), point.rss.get("pyarrow")
        if mine and least:
            lines.append(
                f"| {point.corpus:,} | {point.shape} | {seconds(point, 'cli', 'slotwise')} "
                f"| {seconds(point, 'cli', 'pyarrow')} | {ratio(point, 'cli', 'pyarrow')} "
                f"| {mine / 2**20:,.0f} | {least / 2**20:,.0f} | {mine / least:.2f} |"
            )
    for point in points:
        if point.primitives:
            lines += [
                "",
                f"The floor: what the primitives cost on the {point.shape} qrels and the run of "
                f"the {point.corpus:,}-passage corpus ({point.queries * args.docs:,} run lines, "
                f"{point.queries:,} queries), medians of 3:",
                "",
                *point.primitives,
            ]
    return [*lines, "", *extra]


def other_families(queries: int, docs: int) -> str:
    """Throughput of the set-based family (grades 1-4) and UDCG, slotwise only, on the deep
    qrels of the MS MARCO corpus."""
    import engine

    eng = engine.Engine(config={})
    rows = [
        "| family | metrics | end to end (s) | metric step (s) | queries/s (end to end) |",
        "|---|---|---:|---:|---:|",
    ]
    qrels, run = make_dicts(queries, docs, shape="deep", seed=1)
    ranked = {q: list(s) for q, s in run.items()}
    families = {
        "set-based": (
            [
                {"id": q, "expected_output": {d: g + 1 for d, g in labels.items()}}
                for q, labels in qrels.items()
            ],
            SETBASED,
        ),
        "utility": (
            [
                {
                    "id": q,
                    "expected_output": {"utility": {d: (g - 1.5) / 1.5 for d, g in labels.items()}},
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


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--sweep",
        type=lambda text: [int(x) for x in text.split(",")],
        default=list(SWEEP),
        help="corpus sizes (comma-separated); the last is also used for the deep qrels",
    )
    parser.add_argument("--deep-queries", type=int, default=10_000, help="0: skip deep qrels")
    parser.add_argument("--stream-queries", type=int, default=1_000_000, help="0: skip step (e)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "RESULTS.md")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated subset")
    parser.add_argument(
        "--slow-once", type=float, default=60.0, help="run once a command slower than this (s)"
    )
    args = parser.parse_args()
    names = [n for n in args.tools.split(",") if n]
    for package in ("engine", "metrics_plugins"):
        compileall.compile_dir(ROOT / package, quiet=1)

    points: list[Point] = []
    extra: list[str] = []
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        binary = trec_eval_binary(folder)
        for corpus in args.sweep:
            last = corpus == args.sweep[-1]
            points.append(
                measure(
                    corpus,
                    "sparse",
                    args.queries,
                    args.docs,
                    args.repeat,
                    names,
                    folder,
                    last,
                    binary,
                    args.slow_once,
                )
            )
        if args.deep_queries:
            points.append(
                measure(
                    args.sweep[-1],
                    "deep",
                    args.deep_queries,
                    args.docs,
                    args.repeat,
                    names,
                    folder,
                    True,
                    binary,
                    args.slow_once,
                )
            )
        if args.stream_queries:
            found = stream_step(folder, args.queries, args.stream_queries, args.docs)
            small, big = found[str(args.queries)], found[str(args.stream_queries)]
            extra += [
                f"(e) `slotwise run --stream`, ids from the {MSMARCO_PASSAGES:,}-passage corpus, "
                f"sparse qrels: {args.queries:,} queries in {small['seconds']:.1f} s, peak RSS "
                f"{small['max_rss'] / 2**20:,.0f} MiB; {args.stream_queries:,} queries in "
                f"{big['seconds']:.1f} s, peak RSS {big['max_rss'] / 2**20:,.0f} MiB "
                f"(x{big['max_rss'] / small['max_rss']:.2f} the memory for "
                f"x{args.stream_queries / args.queries:.0f} the queries); "
                f"{args.stream_queries / big['seconds']:,.0f} queries/s.",
                "",
            ]
    try:
        from scorer import least_program_ms, scorer_add_ms

        extra += [
            f"(g) `evaluation.scorer().add(sample_id, output)`, one output at a time, 1,000 "
            f"samples: median {scorer_add_ms(1000):.3f} ms a call (outputs of 100 ids; "
            f"{scorer_add_ms(1000, texts=True):.3f} ms with items and their passage texts, "
            f"as a RAG harness returns them); the least numpy program "
            f"that scores the same outputs one at a time (benchmarks/scorer.py "
            f"`least_program`): {least_program_ms(1000):.3f} ms a call.",
            "",
        ]
    except ImportError:
        pass
    extra += [
        f"Bootstrap CIs alone ({args.queries:,} samples x 5 metrics x 1000 resamples): "
        f"{bootstrap_seconds(args.queries):.2f} s.",
        "",
        "A fresh process scoring 1,000 queries, including `import engine` and data "
        f"generation: median {statistics.median(cold_start(args.docs) for _ in range(3)):.2f} s.",
        "",
        other_families(min(args.queries, 20_000), args.docs),
    ]
    lines = report(points, args, extra)
    print("\n".join(lines))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
