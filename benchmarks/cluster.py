"""Scale-out on a simulated Ray cluster: the same data scored on one worker node and on
two, side by side in the same run.

    python benchmarks/cluster.py [--queries 100000,1000000] [--nodes 1,2] [--shards 8]
                                 [--modes shards,files,memory,threads,cli,cli-stream,
                                          cli-docs]
                                 [--cli-format jsonl|json] [--folder DIR]

The cluster is Ray's ``ray.cluster_utils.Cluster`` on this machine: a head node with no
CPU for tasks (the driver's node) and ``--nodes`` worker nodes of one CPU each, every node
with its own raylet and object store (3 GiB). The driver is a fresh process connected to
it (``RAY_ADDRESS``); it scores nDCG@10, AP, RR, R@100 and P@10 with CIs and reports its
wall time, its CPU time, its peak RSS and what went through the object stores. It first
scores a small input the same way, so that each node has a worker that imported slotwise
(a warm cluster, as a long-running one is). This process samples the CPU time of every
process of the cluster meanwhile: Ray's workers (processes named ``ray::...``) and its
daemons (raylets, GCS, agents) apart. Run it with another checkout's interpreter to
measure that code (the cluster's workers run the interpreter that runs this file).

Data (benchmarks/corpus.py): ids from MS MARCO's 8,841,823 passages, 100 documents a
query, sparse qrels, as TREC files; for ``shards`` the qrels are cut into 2 files and the
run into ``--shards`` files at line boundaries that ignore queries (a query's lines may
be in two files).

Modes:

- ``shards``: ``Engine(executor="ray").evaluate_stream(qrels=DIR, run=DIR)`` (summary,
  no per-sample rows);
- ``files``: the same with one qrels file and one run file (before issue 53 the driver
  read them and shipped each chunk to a worker; since, the workers read byte ranges);
- ``memory``: samples and outputs already in the driver's memory (read before the clock
  starts), ``Dataset.evaluate`` on a local Ray of two CPUs (the driver's node): chunks
  shipped to the workers;
- ``threads``: the same in a fresh process on ``Engine(executor="threads")``, no Ray (the
  yardstick of ``memory``);
- ``cli``: ``slotwise run --qrels FILE --run FILE --executor ray --format jsonl --output
  ROWS`` as a user runs it, measured from the process's start to its exit (imports,
  ``ray.init`` and every per-sample row written included; ``--cli-format json`` writes
  one document): its wall time and CPU time (``wait4``) and its peak memory (VmHWM at
  exit); ``cli-stream``: the same with ``--stream``;
- ``cli-docs``: ``slotwise run DATASET.jsonl --outputs OUTPUTS.jsonl --executor ray
  --missing empty`` likewise, the same queries as documents (a sample per qrels query,
  its labels; an output per run query, its ranking), which the workers read (issue 65).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

METRICS = [
    "retrieval-ndcg-at-k@10",
    "retrieval-map",
    "retrieval-mrr",
    "retrieval-recall-at-k@100",
    "retrieval-precision-at-k@10",
]
MODES = ("shards", "files", "memory", "threads", "cli", "cli-stream", "cli-docs")
CLI_FORMAT = ["jsonl"]  # --cli-format: what the cli modes write
_OBJECT_STORE = 3 << 30  # bytes of object store per node


# -- the data --------------------------------------------------------------------------------


def data(folder: Path, queries: int, shards: int) -> dict[str, Path]:
    """The TREC files of ``queries`` queries, and the same cut into shard folders."""
    from corpus import write_files

    qrels, run = (
        folder / f"sparse-8841823-{queries}.qrels",
        folder / f"sparse-8841823-{queries}.run",
    )
    if not (qrels.exists() and run.exists()):
        qrels, run = write_files(folder, queries, 100)
    found = {"qrels": qrels, "run": run}
    for name, path, parts in (("qrels", qrels, 2), ("run", run, shards)):
        cut = folder / f"{path.name}.{parts}"
        if not cut.exists():
            cut.mkdir()
            split(path, cut, parts)
        found[f"{name}_shards"] = cut
    return found


def documents(qrels: Path, run: Path) -> tuple[Path, Path]:
    """The dataset and outputs documents (JSONL) of the TREC files, made once beside them:
    each qrels query a sample with its labels, each run query an output with its ranking
    (the run's lines of a query are together, in rank order)."""
    dataset, outputs = qrels.with_suffix(".dataset.jsonl"), run.with_suffix(".outputs.jsonl")
    for source, target, line in ((qrels, dataset, _sample), (run, outputs, _output)):
        if target.exists():
            continue
        with source.open() as lines, target.with_suffix(".part").open("w") as out:
            query, found = None, []
            for words in map(str.split, lines):
                if words[0] != query and query is not None:
                    out.write(line(query, found))
                    found = []
                query = words[0]
                found.append(words[2] if line is _output else (words[2], int(words[3])))
            if query is not None:
                out.write(line(query, found))
        target.with_suffix(".part").rename(target)
    return dataset, outputs


def _sample(query: str, labels: list[Any]) -> str:
    return json.dumps({"id": query, "expected_output": dict(labels)}) + "\n"


def _output(query: str, ranked: list[str]) -> str:
    return json.dumps({"id": query, "actual_output": ranked}) + "\n"


def split(path: Path, folder: Path, parts: int) -> None:
    """``path`` cut into ``parts`` files of about equal size at line boundaries."""
    size = path.stat().st_size
    with path.open("rb") as source:
        for part in range(parts):
            end = size * (part + 1) // parts
            block = source.read(max(0, end - source.tell()))
            block += source.readline()  # to the end of the line
            (folder / f"part-{part:05d}{path.suffix}").write_bytes(block)


# -- the cluster -----------------------------------------------------------------------------


@contextlib.contextmanager
def cluster(nodes: int) -> Iterator[str]:
    """A head node without CPUs and ``nodes`` worker nodes of one CPU each; its address.
    (Ray's ``Cluster`` would write its address to /tmp/ray/ray_current_cluster, where any
    ``ray.init()`` of this machine would find it, and find it stale once it is shut down:
    it is not written, and the driver is given the address.)"""
    from unittest import mock

    import ray._private.utils
    from ray.cluster_utils import Cluster

    head = {"num_cpus": 0, "object_store_memory": _OBJECT_STORE, "include_dashboard": False}
    with mock.patch.object(ray._private.utils, "write_ray_address", lambda *_, **__: None):
        simulated = Cluster(initialize_head=True, head_node_args=head)
    try:
        for _ in range(nodes):
            simulated.add_node(num_cpus=1, object_store_memory=_OBJECT_STORE)
        simulated.wait_for_nodes()
        yield simulated.address
    finally:
        simulated.shutdown()


class CpuSampler:
    """The CPU seconds the descendants of this process (but ``driver``, which reports its
    own) spend from :meth:`start` to :meth:`stop`, sampled every half second so that a
    worker that exits is counted up to its last sample: Ray's workers (``ray::...``) and
    the rest of Ray (raylets, GCS, agents) apart."""

    def __init__(self, driver: int) -> None:
        import psutil

        self.psutil, self.driver = psutil, driver
        self.first: dict[int, float] = {}
        self.last: dict[int, tuple[str, str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._sample()
        self.first = {pid: seconds for pid, (_, _, seconds) in self.last.items()}
        self._thread.start()

    def _sample(self) -> None:
        for process in self.psutil.Process().children(recursive=True):
            try:
                times = process.cpu_times()
                words = process.cmdline() or [process.name()]
            except (self.psutil.NoSuchProcess, self.psutil.AccessDenied):
                continue
            if process.pid == self.driver or words[0] == "git":
                continue
            kind = "workers" if words[0].startswith("ray::") else "daemons"
            name = os.path.basename(words[0].split()[0])
            if kind == "workers":  # a worker's parent is its node's raylet
                name = f"node {process.ppid()}"
            self.last[process.pid] = (kind, name, times.user + times.system)

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            self._sample()

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join()
        self._sample()
        found: dict[str, Any] = {"workers": 0.0, "daemons": 0.0, "by_process": {}}
        for pid, (kind, name, seconds) in self.last.items():
            spent = seconds - self.first.get(pid, 0.0)
            found[kind] += spent
            found["by_process"][name] = round(found["by_process"].get(name, 0.0) + spent, 2)
        return found


def measure_cli(mode: str, files: dict[str, Path], nodes: int) -> dict[str, Any]:
    """``slotwise run`` on a fresh cluster, after one small run that warms its workers,
    measured from process start to exit, the per-sample rows written to a file."""
    rows = files["run"].with_suffix(".rows.jsonl")
    peak = files["run"].with_suffix(".peak")
    if mode == "cli-docs":  # made before the clock starts
        documents(files["qrels"], files["run"])
        documents(files["warm_qrels"], files["warm_run"])
    with cluster(nodes) as address:

        def command(qrels: Path, run: Path) -> list[str]:
            extra = ["--stream"] if mode == "cli-stream" else []
            inputs = ["--qrels", str(qrels), "--run", str(run)]
            if mode == "cli-docs":  # (the labels of a sample the run lacks: empty ranking)
                dataset, outputs = documents(qrels, run)
                inputs, extra = [str(dataset), "--outputs", str(outputs)], ["--missing", "empty"]
            argv = [
                "run", *inputs, "--metrics", ",".join(METRICS),
                "--executor", "ray", "--format", CLI_FORMAT[0], "--output", str(rows), *extra,
            ]  # fmt: skip
            return [sys.executable, "-c", _PEAK_AT_EXIT, str(peak), *argv]

        env = {**os.environ, "RAY_ADDRESS": address}  # (as an older slotwise takes it too)
        subprocess.run(command(files["warm_qrels"], files["warm_run"]), check=True, env=env)
        sampler = CpuSampler(-1)
        sampler.start()
        started = time.perf_counter()
        driver = subprocess.Popen(command(files["qrels"], files["run"]), env=env)
        sampler.driver = driver.pid
        _, status, usage = os.wait4(driver.pid, 0)
        seconds = time.perf_counter() - started
        found = sampler.stop()
    if status:
        raise RuntimeError(f"{mode} on {nodes} node(s) exited with status {status}")
    count = rows.stat().st_size
    rows.unlink()
    return {
        **found,
        "seconds": seconds,
        "driver": usage.ru_utime + usage.ru_stime,
        "max_rss": int(peak.read_text()) * 1024,
        "bytes_written": count,
    }


#: ``slotwise`` as a user runs it, writing its own peak memory (VmHWM, KiB) to the file
#: ``argv[1]`` at exit: the rusage of a child started by vfork counts its parent's peak.
_PEAK_AT_EXIT = """
import atexit, pathlib, sys
out = pathlib.Path(sys.argv[1])
def peak():
    status = pathlib.Path("/proc/self/status").read_text().splitlines()
    out.write_text(next(l for l in status if l.startswith("VmHWM")).split()[1])
atexit.register(peak)
sys.argv = ["slotwise", *sys.argv[2:]]
from engine.cli import program
program()
"""


def measure(mode: str, files: dict[str, Path], nodes: int) -> dict[str, Any]:
    """One driver run of ``mode`` on a fresh cluster of ``nodes`` worker nodes (``memory``:
    a local Ray of two CPUs in the driver; ``threads``: no Ray): the driver's report and
    the CPU seconds of the rest of Ray while the driver scored."""
    spec = json.dumps({"mode": mode, **{k: str(v) for k, v in files.items()}})  # warm_* too
    command = [sys.executable, __file__, "--driver", spec]
    with cluster(nodes) if nodes else contextlib.nullcontext("") as address:
        env = {**os.environ, "RAY_ADDRESS": address} if address else dict(os.environ)
        driver = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        sampler = CpuSampler(driver.pid)
        heard(driver, "start")
        sampler.start()
        go(driver)  # the driver's clock runs from here...
        heard(driver, "stop")  # ... to here
        found = sampler.stop()
        go(driver)
        out, _ = driver.communicate()
    if driver.returncode:
        raise RuntimeError(f"{mode} on {nodes} node(s) exited {driver.returncode}")
    return {**json.loads(out.splitlines()[-1]), **found}


def heard(driver: subprocess.Popen[str], say: str) -> None:
    """Wait for the driver to say ``say``."""
    assert driver.stdout is not None
    line = driver.stdout.readline().strip()
    if line != say:
        driver.kill()
        raise RuntimeError(f"the driver said {line!r}, not {say!r}")


def go(driver: subprocess.Popen[str]) -> None:
    """Let the driver go on."""
    assert driver.stdin is not None
    driver.stdin.write("go\n")
    driver.stdin.flush()


# -- the driver ------------------------------------------------------------------------------


def drive(spec: dict[str, str]) -> dict[str, Any]:
    """Score the data as ``spec["mode"]`` says (on Ray, after a small input the same way);
    the driver's own seconds, CPU and memory, and the traffic it logged."""
    import logging

    import engine

    mode = spec["mode"]
    eng = engine.Engine(config={}, executor="threads" if mode == "threads" else "ray")
    if mode == "memory":
        import ray

        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    if mode != "threads":  # in chunks of 256 queries: work for every worker
        score(eng, mode, {k[5:]: v for k, v in spec.items() if k.startswith("warm_")}, 256)
    if mode in ("memory", "threads"):
        INPUTS[spec["run"]] = read(spec)
    events: list[logging.LogRecord] = []
    catch = logging.Handler(logging.INFO)
    catch.emit = events.append  # type: ignore[method-assign]
    logging.getLogger("slotwise").addHandler(catch)
    logging.getLogger("slotwise").setLevel(logging.INFO)
    handshake("start")
    started, cpu = time.perf_counter(), time.process_time()
    results = score(eng, mode, spec)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    handshake("stop")
    traffic = next((e.fields for e in events if e.event == "evaluation.sharded"), None)  # type: ignore[attr-defined]
    head = subprocess.run(
        ["git", "-C", str(Path(engine.__file__).parent), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return {
        "seconds": seconds,
        "driver": cpu,
        # the peak of this process's own memory (VmHWM), not ru_maxrss: a child started
        # by vfork (as subprocess does) inherits its parent's peak in ru_maxrss, and the
        # parent here made the data
        "max_rss": int(status["VmHWM"].split()[0]) * 1024,
        "rss_now": {k: status[k].strip() for k in ("VmRSS", "RssAnon", "RssFile", "RssShmem")},
        "samples": results.samples,
        "hash": results.dataset_hash,
        "ndcg": results.summary()["retrieval-ndcg-at-k@10"]["mean"],
        "traffic": traffic,
        "commit": head,
    }


def handshake(say: str) -> None:
    """Tell the measuring process, and wait until it has sampled the cluster's CPU."""
    print(say, flush=True)
    sys.stdin.readline()


def read(spec: dict[str, str]) -> tuple[Any, Any]:
    from engine.io import trec

    return trec.read_qrels(spec["qrels"]), trec.read_run(spec["run"])


def score(eng: Any, mode: str, spec: dict[str, str], chunk_size: int | None = None) -> Any:
    if mode in ("memory", "threads"):
        samples, outputs = INPUTS.get(spec["run"]) or read(spec)
        evaluation = eng.dataset(samples=samples).with_metrics(METRICS)
        return evaluation.evaluate(outputs, missing="empty", chunk_size=chunk_size)
    shards = mode == "shards"
    return eng.evaluate_stream(
        METRICS,
        qrels=spec["qrels_shards" if shards else "qrels"],
        run=spec["run_shards" if shards else "run"],
        chunk_size=chunk_size or 16384,
    )


INPUTS: dict[str, tuple[Any, Any]] = {}  # the data read before the clock starts


# -- the report ------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", default="100000,1000000")
    parser.add_argument("--nodes", default="1,2")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--modes", default="shards,files,memory,threads")
    parser.add_argument("--folder", type=Path, default=Path("/tmp/slotwise-cluster"))
    parser.add_argument("--cli-format", default="jsonl", help="what the cli modes write")
    parser.add_argument("--driver", help=argparse.SUPPRESS)
    args = parser.parse_args()
    CLI_FORMAT[0] = args.cli_format
    if args.driver:
        print(json.dumps(drive(json.loads(args.driver))))
        return
    args.folder.mkdir(parents=True, exist_ok=True)
    print(
        "| queries | mode | slotwise | worker nodes | seconds | queries/s | driver CPU-s "
        "| workers CPU-s (by node) | Ray daemons CPU-s | driver share | queries per CPU-s "
        "| driver peak RSS (MiB) | MiB read | KiB per chunk: scored, to the driver |"
    )
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    warm = data(args.folder, 2000, args.shards)
    for queries in map(int, args.queries.split(",")):
        files = {**data(args.folder, queries, args.shards)}
        files.update({f"warm_{key}": path for key, path in warm.items()})
        for mode in args.modes.split(","):
            local = mode in ("memory", "threads")
            for nodes in map(int, args.nodes.split(",")) if not local else [0]:
                found = (measure_cli if mode.startswith("cli") else measure)(mode, files, nodes)
                print(row(queries, mode, nodes, found), flush=True)
                print(f"    {json.dumps(found)}", file=sys.stderr, flush=True)


def row(queries: int, mode: str, nodes: int, found: dict[str, Any]) -> str:
    total = found["driver"] + found["workers"] + found["daemons"]
    traffic = found.get("traffic") or {}
    chunks = traffic.get("chunks") or 0
    read = f"{traffic['read'] / 2**20:,.0f}" if traffic else ""
    per_chunk = (
        f"{traffic['scored'] / chunks / 2**10:,.0f}, "
        f"{traffic['summed_to_driver'] / chunks / 2**10:,.0f}"
        if chunks
        else ""
    )
    return (
        f"| {queries:,} | {mode} | {found.get('commit', '')} | {nodes or '-'} "
        f"| {found['seconds']:.1f} | {queries / found['seconds']:,.0f} "
        f"| {found['driver']:.1f} | {found['workers']:.1f}{_by_node(found)} "
        f"| {found['daemons']:.1f} "
        f"| {found['driver'] / total:.1%} | {queries / total:,.0f} "
        f"| {found['max_rss'] / 2**20:,.0f} | {read} | {per_chunk} |"
    )


def _by_node(found: dict[str, Any]) -> str:
    """Each worker node's share of the workers' CPU seconds, as ``(51%, 49%)``."""
    by_process = found.get("by_process", {})
    nodes = [v for k, v in sorted(by_process.items()) if k.startswith("node ")]
    if len(nodes) < 2 or not found["workers"]:
        return ""
    return " (" + ", ".join(f"{v / found['workers']:.0%}" for v in nodes) + ")"


if __name__ == "__main__":
    main()
