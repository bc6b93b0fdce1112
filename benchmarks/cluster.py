"""Scale-out on a simulated Ray cluster: the same data scored on one worker node and on
two, side by side in the same run.

    python benchmarks/cluster.py [--queries 100000,1000000] [--nodes 1,2] [--shards 8]
                                 [--modes shards,files,memory,threads] [--folder DIR]

The cluster is Ray's ``ray.cluster_utils.Cluster`` on this machine: a head node with no
CPU for tasks (the driver's node) and ``--nodes`` worker nodes of one CPU each, every node
with its own raylet and object store (2 GiB). The driver is a fresh process connected to
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
  starts), ``Dataset.evaluate`` on Ray: chunks shipped to the workers;
- ``threads``: the same in a fresh process on ``Engine(executor="threads")``, no Ray (the
  yardstick of ``memory``).
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
MODES = ("shards", "files", "memory", "threads")
_OBJECT_STORE = 2 << 30  # bytes of object store per node


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
    """A head node without CPUs and ``nodes`` worker nodes of one CPU each; its address."""
    from ray.cluster_utils import Cluster

    head = {"num_cpus": 0, "object_store_memory": _OBJECT_STORE, "include_dashboard": False}
    simulated = Cluster(initialize_head=True, head_node_args=head)
    try:
        for _ in range(nodes):
            simulated.add_node(num_cpus=1, object_store_memory=_OBJECT_STORE)
        simulated.wait_for_nodes()
        yield simulated.address
    finally:
        simulated.shutdown()


class CpuSampler:
    """The CPU seconds this process's descendants (outside ``exclude``) spend, sampled
    every half second so that a worker that exits is counted up to its last sample:
    Ray's workers and Ray's daemons apart."""

    def __init__(self, exclude: int) -> None:
        import psutil

        self.psutil, self.exclude = psutil, exclude
        self.first: dict[int, float] = {}
        self.last: dict[int, tuple[str, float]] = {}
        self.names: dict[int, str] = {}
        self._stop = threading.Event()
        self._sample()
        self.first = {pid: seconds for pid, (_, seconds) in self.last.items()}
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        me = self.psutil.Process()
        skip = {self.exclude}
        with contextlib.suppress(self.psutil.NoSuchProcess):
            skip |= {p.pid for p in self.psutil.Process(self.exclude).children(recursive=True)}
        for process in me.children(recursive=True):
            if process.pid in skip:
                continue
            try:
                times = process.cpu_times()
                name = " ".join(process.cmdline()[:1]) or process.name()
            except (self.psutil.NoSuchProcess, self.psutil.AccessDenied):
                continue
            kind = "workers" if name.startswith("ray::") else "daemons"
            self.names[process.pid] = os.path.basename(name.split()[0]) if name else "?"
            self.last[process.pid] = (kind, times.user + times.system)

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            self._sample()

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        self._sample()
        found: dict[str, Any] = {"workers": 0.0, "daemons": 0.0, "by_process": {}}
        for pid, (kind, seconds) in self.last.items():
            spent = seconds - self.first.get(pid, 0.0)
            found[kind] += spent
            name = self.names[pid]
            found["by_process"][name] = found["by_process"].get(name, 0.0) + spent
        return found


def measure(mode: str, files: dict[str, Path], nodes: int) -> dict[str, Any]:
    """One driver run of ``mode`` on a fresh cluster of ``nodes`` worker nodes (or, for
    ``threads``, no cluster): the driver's report and the cluster's CPU seconds."""
    spec = json.dumps({"mode": mode, **{k: str(v) for k, v in files.items()}})  # warm_* too
    command = [sys.executable, __file__, "--driver", spec]
    if mode == "threads":
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        return {**json.loads(done.stdout.splitlines()[-1]), "workers": 0.0, "daemons": 0.0}
    with cluster(nodes) as address:
        env = {**os.environ, "RAY_ADDRESS": address}
        driver = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
        sampler = CpuSampler(exclude=driver.pid)
        out, _ = driver.communicate()
        cluster_cpu = sampler.stop()
    if driver.returncode:
        raise RuntimeError(f"{mode} on {nodes} node(s) exited {driver.returncode}")
    return {**json.loads(out.splitlines()[-1]), **cluster_cpu}


# -- the driver ------------------------------------------------------------------------------


def drive(spec: dict[str, str]) -> dict[str, Any]:
    """Score the data as ``spec["mode"]`` says (on Ray, after a small input the same way);
    the driver's own seconds, CPU and memory, and the traffic it logged."""
    import logging
    import resource

    import engine

    mode = spec["mode"]
    eng = engine.Engine(config={}, executor="threads" if mode == "threads" else "ray")
    if mode != "threads":
        score(eng, mode, {k[5:]: v for k, v in spec.items() if k.startswith("warm_")})
    inputs = read(spec) if mode in ("memory", "threads") else None
    events: list[logging.LogRecord] = []
    catch = logging.Handler(logging.INFO)
    catch.emit = events.append  # type: ignore[method-assign]
    logging.getLogger("slotwise").addHandler(catch)
    logging.getLogger("slotwise").setLevel(logging.INFO)
    started, cpu = time.perf_counter(), time.process_time()
    results = score(eng, mode, spec, inputs)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    traffic = next((e.fields for e in events if e.event == "evaluation.sharded"), None)  # type: ignore[attr-defined]
    head = subprocess.run(
        ["git", "-C", str(Path(engine.__file__).parent), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    return {
        "seconds": seconds,
        "driver": cpu,
        "max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "samples": results.samples,
        "hash": results.dataset_hash,
        "ndcg": results.summary()["retrieval-ndcg-at-k@10"]["mean"],
        "traffic": traffic,
        "commit": head,
    }


def read(spec: dict[str, str]) -> tuple[Any, Any]:
    from engine.io import trec

    return trec.read_qrels(spec["qrels"]), trec.read_run(spec["run"])


def score(eng: Any, mode: str, spec: dict[str, str], inputs: tuple[Any, Any] | None = None) -> Any:
    if mode in ("memory", "threads"):
        samples, outputs = inputs or read(spec)
        evaluation = eng.dataset(samples=samples).with_metrics(METRICS)
        return evaluation.evaluate(outputs, missing="empty")
    shards = mode == "shards"
    return eng.evaluate_stream(
        METRICS,
        qrels=spec["qrels_shards" if shards else "qrels"],
        run=spec["run_shards" if shards else "run"],
        chunk_size=16384,
    )


# -- the report ------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", default="100000,1000000")
    parser.add_argument("--nodes", default="1,2")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--modes", default="shards,files,memory,threads")
    parser.add_argument("--folder", type=Path, default=Path("/tmp/slotwise-cluster"))
    parser.add_argument("--driver", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver:
        print(json.dumps(drive(json.loads(args.driver))))
        return
    args.folder.mkdir(parents=True, exist_ok=True)
    print(
        "| queries | mode | slotwise | worker nodes | seconds | queries/s | driver CPU-s "
        "| workers CPU-s | Ray daemons CPU-s | driver share | queries per CPU-s "
        "| driver peak RSS (MiB) | MiB shuffled | KiB per chunk: to sum, to driver |"
    )
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    warm = data(args.folder, 2000, args.shards)
    for queries in map(int, args.queries.split(",")):
        files = {**data(args.folder, queries, args.shards)}
        files.update({f"warm_{key}": path for key, path in warm.items()})
        for mode in args.modes.split(","):
            for nodes in map(int, args.nodes.split(",")) if mode != "threads" else [0]:
                found = measure(mode, files, nodes)
                print(row(queries, mode, nodes, found), flush=True)
                print(f"    {json.dumps(found)}", file=sys.stderr, flush=True)


def row(queries: int, mode: str, nodes: int, found: dict[str, Any]) -> str:
    total = found["driver"] + found["workers"] + found["daemons"]
    traffic = found.get("traffic") or {}
    chunks = traffic.get("chunks") or 0
    shuffled = f"{traffic['read_to_join'] / 2**20:,.0f}" if traffic else ""
    per_chunk = (
        f"{traffic['scored_to_summed'] / chunks / 2**10:,.0f}, "
        f"{traffic['summed_to_driver'] / chunks / 2**10:,.0f}"
        if chunks
        else ""
    )
    return (
        f"| {queries:,} | {mode} | {found.get('commit', '')} | {nodes or '-'} "
        f"| {found['seconds']:.1f} | {queries / found['seconds']:,.0f} "
        f"| {found['driver']:.1f} | {found['workers']:.1f} | {found['daemons']:.1f} "
        f"| {found['driver'] / total:.1%} | {queries / total:,.0f} "
        f"| {found['max_rss'] / 2**20:,.0f} | {shuffled} | {per_chunk} |"
    )


if __name__ == "__main__":
    main()
