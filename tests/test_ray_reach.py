"""Reaching a Ray cluster (docs/scale.md, "On a real cluster"): ``--ray-address`` and
``--runtime-env`` (and slotwise.yaml's ``ray``), a named error with the address and the fix
when the cluster does not answer or its workers cannot import slotwise, and the tested
recipe that ships a locally built slotwise wheel and a third-party metric plugin to the
workers of a cluster whose nodes do not see the source tree.

The nodes are simulated: ``ray.cluster_utils.Cluster`` nodes on this machine whose
workers run a Python (``py_executable``) that sees this environment's packages but not
slotwise, nor the plugin (a venv whose one ``.pth`` line names this venv's
site-packages: the editable install's finder and the plugin are not on it)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import simulated_cluster

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "examples" / "plugin-example"
METRICS = "example-junk-at-k@5,retrieval-ndcg-at-k@10"


def _cli(
    *argv: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "engine.cli", *argv]
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=600,
    )


def _free_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """TREC qrels and a run: 300 queries, 0-8 graded labels each (some none), 40 ranked."""
    import numpy as np

    folder = tmp_path_factory.mktemp("reach")
    rng = np.random.default_rng(7)
    qrels, run = [], []
    for query in range(300):
        for doc in rng.choice(60, size=int(rng.integers(0, 9)), replace=False):
            qrels.append(f"q{query} 0 doc-{query % 11}-{doc} {int(rng.integers(0, 4))}\n")
        for rank, doc in enumerate(rng.choice(100, size=40, replace=False)):
            run.append(f"q{query} Q0 doc-{query % 11}-{doc} {rank + 1} {100 - rank} system\n")
    (folder / "qrels.txt").write_text("".join(qrels))
    (folder / "run.txt").write_text("".join(run))
    return folder


class TestNamedErrors:
    """No cluster needed: each failure is exit 2 with the address and the fix."""

    def test_an_address_that_does_not_answer(self, inputs: Path) -> None:
        address = f"127.0.0.1:{_free_port()}"
        done = _cli(
            "run", "--qrels", "qrels.txt", "--run", "run.txt", "--metrics", "retrieval-map",
            "--executor", "ray", "--ray-address", address, cwd=inputs,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert f"the Ray cluster at {address}: cannot reach it" in done.stderr
        assert "ray start --head" in done.stderr and "Traceback" not in done.stderr

    def test_the_address_from_slotwise_yaml(self, inputs: Path, tmp_path: Path) -> None:
        address = f"ray://127.0.0.1:{_free_port()}"
        config = tmp_path / "slotwise.yaml"
        config.write_text(f"ray:\n  address: {address}\n")
        done = _cli(
            "--config", str(config), "run", "--qrels", "qrels.txt", "--run", "run.txt",
            "--metrics", "retrieval-map", "--executor", "ray", cwd=inputs,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert f"the Ray cluster at {address}: cannot reach it" in done.stderr

    def test_auto_without_a_cluster_here(self, inputs: Path, tmp_path: Path) -> None:
        """``auto`` reads the address `ray start` left in Ray's temporary folder: none."""
        done = _cli(
            "run", "--qrels", "qrels.txt", "--run", "run.txt", "--metrics", "retrieval-map",
            "--executor", "ray", cwd=inputs, env={"RAY_ADDRESS": "auto", "RAY_TMPDIR": str(tmp_path)},
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "the Ray cluster at auto: none was started on this machine" in done.stderr

    def test_runtime_env_problems_listed(self, inputs: Path, tmp_path: Path) -> None:
        env = tmp_path / "env.yaml"
        env.write_text("py_modules: [missing.whl]\nenv_vars: {AWS_ENDPOINT_URL: 9000}\n")
        done = _cli(
            "run", "--qrels", "qrels.txt", "--run", "run.txt", "--metrics", "retrieval-map",
            "--executor", "ray", "--runtime-env", str(env), cwd=inputs,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "invalid runtime_env: 2 problems" in done.stderr
        assert f"{env} /py_modules/0: no such file or folder: {tmp_path / 'missing.whl'}" in (
            done.stderr
        )
        assert f"{env} /env_vars: env_vars maps names to strings" in done.stderr

    def test_runtime_env_paths_resolve_against_the_config(self, tmp_path: Path) -> None:
        from engine.io.config import Config

        (tmp_path / "ship").mkdir()
        (tmp_path / "slotwise.yaml").write_text(
            "ray:\n  address: head:6379\n  runtime_env:\n    working_dir: ship\n"
            "    env_vars: {AWS_ENDPOINT_URL: 'http://minio:9000'}\n"
        )
        found = Config.load(tmp_path / "slotwise.yaml").ray
        assert found["address"] == "head:6379"
        assert found["runtime_env"] == {
            "working_dir": str((tmp_path / "ship").resolve()),
            "env_vars": {"AWS_ENDPOINT_URL": "http://minio:9000"},
        }


# -- the recipe: a wheel and a plugin shipped to nodes without them ----------------------------


def _wheel(source: Path, into: Path, name: str) -> Path:
    """The wheel of the project at ``source``, built into ``into``."""
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         str(source), "-w", str(into)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (found,) = into.glob(f"{name}-*.whl")
    return found


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """slotwise's wheel (built from a copy of the tree) and the example plugin's; the
    plugin unpacked for the driver (it is not installed here); a bare Python for nodes."""
    import shutil

    base = tmp_path_factory.mktemp("ship")
    tree = base / "slotwise"
    shutil.copytree(
        ROOT, tree, ignore=shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info", "out")
    )
    wheels = base / "wheels"
    engine_wheel = _wheel(tree, wheels, "slotwise")
    plugin_wheel = _wheel(PLUGIN, wheels, "slotwise_example_plugin")
    ship = base / "ship"  # the recipe: the wheels unpacked, given as the job's working_dir
    for wheel in (engine_wheel, plugin_wheel):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(ship)
    driver_plugin = base / "driver-plugin"
    with zipfile.ZipFile(plugin_wheel) as archive:
        archive.extractall(driver_plugin)
    bare = base / "bare"
    made = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], timeout=120)
    assert made.returncode == 0
    python = bare / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(site, "this-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return {"ship": ship, "driver_plugin": driver_plugin, "python": python}


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """One worker node of one CPU (the jobs below connect to it themselves)."""
    with simulated_cluster(1) as address:
        yield address


@pytest.mark.slow
class TestShippedToBareNodes:
    def _run(
        self, inputs: Path, shipped: dict[str, Path], *argv: str
    ) -> subprocess.CompletedProcess[str]:
        return _cli(
            "run", "--qrels", "qrels.txt", "--run", "run.txt", "--metrics", METRICS,
            "--format", "json", *argv, cwd=inputs, env={"PYTHONPATH": str(shipped["driver_plugin"])},
        )  # fmt: skip

    def _on_ray(
        self, inputs: Path, shipped: dict[str, Path], cluster: str, env: Path
    ) -> subprocess.CompletedProcess[str]:
        ray = ["--executor", "ray", "--ray-address", cluster, "--runtime-env", str(env)]
        return self._run(inputs, shipped, *ray)

    def test_the_nodes_do_not_see_slotwise(
        self, cluster: str, inputs: Path, shipped: dict[str, Path], tmp_path: Path
    ) -> None:
        env = tmp_path / "bare.yaml"
        env.write_text(f"py_executable: {shipped['python']}\n")
        done = self._on_ray(inputs, shipped, cluster, env)
        assert done.returncode == 2, done.stderr[-3000:]
        assert (
            f"slotwise: error: the Ray cluster at {cluster}: its workers cannot import 'engine'"
            in (done.stderr)
        )
        assert "--runtime-env FILE with a working_dir" in done.stderr

    def test_a_wheel_and_a_plugin_shipped_give_the_local_numbers(
        self, cluster: str, inputs: Path, shipped: dict[str, Path], tmp_path: Path
    ) -> None:
        import json

        env = tmp_path / "env.yaml"
        env.write_text(f"working_dir: {shipped['ship']}\npy_executable: {shipped['python']}\n")
        on_ray = self._on_ray(inputs, shipped, cluster, env)
        assert on_ray.returncode == 0, on_ray.stderr[-3000:]
        here = self._run(inputs, shipped)
        assert here.returncode == 0, here.stderr
        got, expected = json.loads(on_ray.stdout), json.loads(here.stdout)
        assert got["summary"] == expected["summary"]
        assert got["samples"] == expected["samples"]
        junk = expected["summary"]["example-junk-at-k@5"]["mean"]
        assert 0 < junk < 1  # the plugin scored (its number is not a default)


# -- S3-compatible endpoints on the workers --------------------------------------------------


@pytest.fixture(scope="module")
def bucket(inputs: Path) -> Iterator[str]:
    """A local S3-compatible server (moto's) holding the qrels and the run; its endpoint."""
    import pyarrow.fs as pafs
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    store = pafs.S3FileSystem(
        access_key="testing",
        secret_key="testing",
        endpoint_override=f"127.0.0.1:{port}",
        scheme="http",
        region="us-east-1",
        allow_bucket_creation=True,
    )
    store.create_dir("eval")
    made = _cli(  # the same queries as documents: a JSONL dataset and a JSON outputs file
        "trec", "import", "qrels.txt", "run.txt", "--dataset-out", "dataset.jsonl",
        "--outputs-out", "outputs.json", cwd=inputs,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    for name in ("qrels.txt", "run.txt", "dataset.jsonl", "outputs.json"):
        with store.open_output_stream(f"eval/data/{name}") as out:
            out.write((inputs / name).read_bytes())
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop()


CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class TestS3Endpoint:
    """The two documented forms reach the workers; the shell's variable alone does not."""

    def _run(
        self, inputs: Path, cluster: str, qrels: str, run: str, env: dict[str, str], *argv: str
    ) -> subprocess.CompletedProcess[str]:
        return _cli(
            "run", "--qrels", qrels, "--run", run, "--metrics", "retrieval-ndcg-at-k@10",
            "--format", "json", "--executor", "ray", "--ray-address", cluster, *argv,
            cwd=inputs, env=env,
        )  # fmt: skip

    def _local(self, inputs: Path) -> dict[str, object]:
        import json

        done = _cli(
            "run", "--qrels", "qrels.txt", "--run", "run.txt",
            "--metrics", "retrieval-ndcg-at-k@10", "--format", "json", cwd=inputs,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout)["summary"])

    def test_the_environment_form_in_the_runtime_env(
        self, cluster: str, bucket: str, inputs: Path, tmp_path: Path
    ) -> None:
        import json

        variables = {**CREDENTIALS, "AWS_ENDPOINT_URL": f"http://{bucket}"}
        env = tmp_path / "env.json"
        env.write_text(json.dumps({"env_vars": variables}))
        qrels, run = "s3://eval/data/qrels.txt", "s3://eval/data/run.txt"
        done = self._run(inputs, cluster, qrels, run, variables, "--runtime-env", str(env))
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout)["summary"] == self._local(inputs)

    def test_documents_on_the_workers(
        self, cluster: str, bucket: str, inputs: Path, tmp_path: Path
    ) -> None:
        """A JSONL dataset and a JSON outputs file in the bucket, read by the workers:
        the numbers of the same files read here."""
        import json

        variables = {**CREDENTIALS, "AWS_ENDPOINT_URL": f"http://{bucket}"}
        env = tmp_path / "env.json"
        env.write_text(json.dumps({"env_vars": variables}))
        metrics = ["--metrics", "retrieval-ndcg-at-k@10,retrieval-map", "--format", "json"]
        done = _cli(
            "-v", "run", "s3://eval/data/dataset.jsonl", "--outputs", "s3://eval/data/outputs.json",
            *metrics, "--executor", "ray", "--ray-address", cluster, "--runtime-env", str(env),
            cwd=inputs, env=variables,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert "evaluation.documents" in done.stderr  # the workers' rounds read them
        here = _cli("run", "dataset.jsonl", "--outputs", "outputs.json", *metrics, cwd=inputs)
        assert here.returncode == 0, here.stderr
        got, expected = json.loads(done.stdout), json.loads(here.stdout)
        assert got["summary"] == expected["summary"] and len(expected["samples"]) > 200
        assert got["samples"] == expected["samples"]
        assert got["dataset"]["hash"] == expected["dataset"]["hash"]

    def test_the_uri_form(self, cluster: str, bucket: str, inputs: Path, tmp_path: Path) -> None:
        import json

        env = tmp_path / "env.json"
        env.write_text(json.dumps({"env_vars": CREDENTIALS}))
        endpoint = f"?endpoint_override={bucket}&scheme=http"
        qrels, run = f"s3://eval/data/qrels.txt{endpoint}", f"s3://eval/data/run.txt{endpoint}"
        done = self._run(inputs, cluster, qrels, run, CREDENTIALS, "--runtime-env", str(env))
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout)["summary"] == self._local(inputs)

    def test_the_drivers_variable_alone_is_named(
        self, cluster: str, bucket: str, inputs: Path
    ) -> None:
        """The driver lists the bucket with AWS_ENDPOINT_URL; Ray's workers, started by
        the nodes, never see this shell's variables: exit 2 saying so, with both forms."""
        variables = {**CREDENTIALS, "AWS_ENDPOINT_URL": f"http://{bucket}"}
        qrels, run = "s3://eval/data/qrels.txt", "s3://eval/data/run.txt"
        done = self._run(inputs, cluster, qrels, run, variables)
        assert done.returncode == 2, done.stderr[-3000:]
        assert "slotwise: error: the Ray cluster at " in done.stderr
        assert "a worker cannot read its input" in done.stderr
        assert "in --runtime-env's env_vars (AWS_ENDPOINT_URL" in done.stderr
        assert "endpoint_override=HOST:PORT&scheme=http" in done.stderr
