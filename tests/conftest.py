"""Shared fixtures. Reference data lives in tests/data (see its README for where each file comes from)."""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

import engine
from engine.io.trec import read_qrels, read_run

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files that hold slow tests first, each file's tests in their order: on a worker
    per core (``make test``, a file to a worker) a long file begun last would keep one
    worker busy while the other waits."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture
def reference_data() -> Path:
    """``tests/data``: trec_eval's test files and the UDCG reference fixture."""
    return DATA


@pytest.fixture(scope="session")
def trec_eval_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """trec_eval 10 built from tests/data/trec_eval-10 (benchmarks/trec_eval_binary.py);
    the test is skipped, with the reason, where it cannot be built."""
    spec = importlib.util.spec_from_file_location(
        "trec_eval_binary", ROOT / "benchmarks" / "trec_eval_binary.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    binary = module.build(tmp_path_factory.mktemp("trec_eval"))
    if binary is None:
        pytest.skip(f"trec_eval 10 cannot be built: {module.why_not()}")
    return binary


@pytest.fixture
def eng(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> engine.Engine:
    """A fresh engine with default configuration, isolated from any slotwise.yaml."""
    monkeypatch.chdir(tmp_path)
    return engine.Engine(config={})


def qrels_of(columns: engine.Columns) -> dict[str, dict[str, float]]:
    """The relevance labels of columns of samples as pytrec_eval-shaped qrels."""
    from engine.io.records import samples_of

    return {s.id: dict(s.relevance) for s in samples_of(columns) if s.relevance is not None}


def run_of(columns: engine.Columns) -> dict[str, list[str]]:
    """The ranked lists of columns of outputs, ``{qid: [docid, ...]}``."""
    from engine.io.records import outputs_of

    return {qid: list(o.retrieved) for qid, o in outputs_of(columns).items()}


def read_reference(path: Path) -> dict[str, dict[str, float]]:
    """out.test.aq as {measure: {qid or 'all': value}} (numeric measures only)."""
    table: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        measure, qid, value = line.split()
        try:
            table.setdefault(measure, {})[qid] = float(value)
        except ValueError:  # runid, relstring
            continue
    return table


@pytest.fixture
def trec_collection(reference_data: Path) -> tuple[dict, dict, dict[str, dict[str, float]]]:
    """(qrels, run, reference table) of trec_eval's test collection."""
    base = reference_data / "trec_eval"
    return (
        qrels_of(read_qrels(base / "qrels.test")),
        run_of(read_run(base / "results.test")),
        read_reference(base / "out.test.aq"),
    )


class StandIn:
    """The stand-in chat-completions server (``python -m engine.annotate.stand_in
    ARGS``) as a subprocess on 127.0.0.1: its ``url`` and request counts."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "engine.annotate.stand_in", *args],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline().split()[1])
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def stats(self) -> dict[str, object]:
        return httpx.get(f"http://127.0.0.1:{self.port}/stats").json()  # type: ignore[no-any-return]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


@pytest.fixture
def server_factory() -> Iterator[Callable[..., StandIn]]:
    """``server_factory(*args)`` starts a stand-in server; every one is stopped after the test."""
    servers: list[StandIn] = []

    def start(*args: str) -> StandIn:
        servers.append(StandIn(*args))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """A local Ray of two CPUs of its own (address="local": never another worker's)."""
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


@contextlib.contextmanager
def simulated_cluster(nodes: int) -> Iterator[str]:
    """A Ray cluster on this machine: a head node without CPUs (the driver's) and
    ``nodes`` worker nodes of one CPU each; its address, written nowhere another
    ``ray.init()`` of this machine would find it (Ray's ``Cluster`` writes
    /tmp/ray/ray_current_cluster)."""
    pytest.importorskip("ray")
    from unittest import mock

    from ray._private import utils as ray_utils
    from ray.cluster_utils import Cluster

    store = 100 * 2**20
    with mock.patch.object(ray_utils, "write_ray_address", lambda *_, **__: None):
        simulated = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 0,
                "object_store_memory": store,
                "include_dashboard": False,
            },
        )
    try:
        for _ in range(nodes):
            simulated.add_node(num_cpus=1, object_store_memory=store)
        yield simulated.address
    finally:
        simulated.shutdown()


@contextlib.contextmanager
def connected_cluster(nodes: int) -> Iterator[str]:
    """:func:`simulated_cluster`, this process's driver connected to it; its address."""
    ray = pytest.importorskip("ray")
    with simulated_cluster(nodes) as address:
        ray.init(address=address, log_to_driver=False)
        try:
            yield address
        finally:
            ray.shutdown()
