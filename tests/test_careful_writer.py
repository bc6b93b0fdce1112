"""The one careful writer (issue 60, round three): an output that is one of the command's
inputs is refused before any work; a FIFO, a device or /dev/stdout is written in place
and a symlink through to its target; a write that fails (disk full, file size limit,
read-only) exits 2 naming the path, the old output intact and no temporary file left,
on stdout too; a plugin's sys.exit at import is a broken plugin. Real files, FIFOs,
devices and limits, no mocks."""

from __future__ import annotations

import importlib.metadata
import json
import os
import resource
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from engine.cli import main
from engine.evaluation import registry as registry_module
from engine.evaluation.registry import GROUP, Registry

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def trec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Qrels and a run of 300 queries (results JSON of about 25 KB), in a fresh directory."""
    monkeypatch.chdir(tmp_path)
    qrels, run = tmp_path / "q.qrels", tmp_path / "r.trec"
    qrels.write_text("".join(f"q{i} 0 d{i % 3} 1\n" for i in range(300)))
    run.write_text(
        "".join(f"q{i} Q0 d{d} {d + 1} {3 - d} t\n" for i in range(300) for d in range(3))
    )
    return qrels, run


def _run(trec: tuple[Path, Path], *extra: str) -> list[str]:
    qrels, run = trec
    return ["run", "--qrels", str(qrels), "--run", str(run), "--metrics", "retrieval-mrr", *extra]


def _cli(args: list[str], limit: int | None = None, **streams) -> subprocess.CompletedProcess:
    """The command in a fresh process, its file size limited to ``limit`` bytes."""

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    streams.setdefault("stdout", subprocess.PIPE)
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args],
        stderr=subprocess.PIPE,
        text=True,
        cwd=os.getcwd(),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=limited if limit else None,
        timeout=120,
        check=False,
        **streams,
    )


@pytest.fixture
def mount(tmp_path: Path):
    """Mount a tmpfs with the given options (root only; skipped elsewhere), unmounted after."""
    mounted = []

    def make(options: str) -> Path:
        where = tmp_path / f"mount{len(mounted)}"
        where.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
            capture_output=True,
            check=False,
        )
        if done.returncode:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        mounted.append(where)
        return where

    yield make
    for where in mounted:
        subprocess.run(["umount", str(where)], check=False)


class TestOutputIsAnInput:
    """Refused before any work, naming both, the input untouched."""

    @pytest.mark.parametrize("which", [0, 1], ids=["qrels", "run"])
    def test_run(self, trec, capsys, which):
        target = trec[which]
        before = target.read_bytes()
        assert main(_run(trec, "--format", "json", "--output", str(target))) == 2
        err = capsys.readouterr().err
        assert f"cannot write {target}: it is the input {target}" in err
        assert target.read_bytes() == before

    def test_a_symlink_to_an_input(self, trec, tmp_path, capsys):
        link = tmp_path / "link.json"
        link.symlink_to(trec[1])
        assert main(_run(trec, "--output", str(link))) == 2
        assert f"cannot write {link}: it is the input {trec[1]}" in capsys.readouterr().err
        assert link.is_symlink() and trec[1].read_text().startswith("q0 Q0 d0 1 3 t")

    def test_report_results_file(self, trec, tmp_path, capsys):
        first, second = tmp_path / "a.json", tmp_path / "b.json"
        for path in (first, second):
            assert main(_run(trec, "--format", "json", "--output", str(path))) == 0
        before = first.read_bytes()
        assert main(["report", str(first), str(second), "--output", str(first)]) == 2
        assert f"cannot write {first}: it is the input {first}" in capsys.readouterr().err
        assert first.read_bytes() == before

    def test_annotate_outputs(self, tmp_path, monkeypatch, capsys):
        monkeypatch.chdir(tmp_path)
        dataset, outputs = tmp_path / "data.jsonl", tmp_path / "outputs.json"
        dataset.write_text(
            json.dumps({"id": "q1", "input": "why?", "expected_output": ["d1"]}) + "\n"
        )
        outputs.write_text(json.dumps({"q1": [{"id": "d1", "text": "because"}]}))
        before = outputs.read_bytes()
        command = [
            "annotate", str(dataset), "--outputs", str(outputs), "--output", str(outputs),
            "--annotator", "openai-compatible", "--base-url", "http://127.0.0.1:9", "--model", "m",
        ]  # fmt: skip
        assert main(command) == 2
        assert f"cannot write {outputs}: it is the input {outputs}" in capsys.readouterr().err
        assert outputs.read_bytes() == before

    def test_trec_import_qrels(self, trec, capsys):
        qrels, run = trec
        before = qrels.read_bytes()
        assert main(["trec", "import", str(qrels), str(run), "--dataset-out", str(qrels)]) == 2
        assert f"it is the input {qrels}" in capsys.readouterr().err
        assert qrels.read_bytes() == before

    @pytest.mark.parametrize("output", ["data.jsonl", "outputs.json", "slotwise.yaml"])
    def test_declared_dataset_its_outputs_and_the_config(
        self, tmp_path, monkeypatch, capsys, output
    ):
        """Named by the config, not the command line: refused as the results are written."""
        monkeypatch.chdir(tmp_path)
        (tmp_path / "data.jsonl").write_text(
            '{"id": "q1", "input": "x", "expected_output": ["d1"]}\n'
        )
        (tmp_path / "outputs.json").write_text('{"q1": ["d1"]}')
        (tmp_path / "slotwise.yaml").write_text(
            "datasets:\n  tiny:\n    path: data.jsonl\n    outputs: outputs.json\n"
        )
        before = (tmp_path / output).read_bytes()
        command = ["run", "tiny", "--metrics", "retrieval-mrr", "--format", "json"]
        assert main([*command, "--output", output]) == 2
        assert f"cannot write {output}: it is the input" in capsys.readouterr().err
        assert (tmp_path / output).read_bytes() == before


class TestSpecialTargets:
    def test_fifo_is_written_in_place(self, trec, tmp_path):
        fifo = tmp_path / "results.fifo"
        os.mkfifo(fifo)
        received = []
        reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
        reader.start()
        assert main(_run(trec, "--format", "json", "--output", str(fifo))) == 0
        reader.join(30)
        assert json.loads(received[0])["summary"]["retrieval-mrr"]["n"] == 300
        assert stat.S_ISFIFO(fifo.lstat().st_mode)

    def test_symlink_target_gets_the_data(self, trec, tmp_path):
        target, link = tmp_path / "target.json", tmp_path / "link.json"
        target.write_text("old")
        link.symlink_to(target)
        assert main(_run(trec, "--format", "json", "--output", str(link))) == 0
        assert link.is_symlink() and os.readlink(link) == str(target)
        assert json.loads(target.read_text())["summary"]["retrieval-mrr"]["n"] == 300
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "link.json", "q.qrels", "r.trec", "target.json"
        ]  # fmt: skip

    @pytest.mark.parametrize(("minor", "code"), [(7, 2), (3, 0)], ids=["full", "null"])
    def test_device_keeps_its_node(self, trec, tmp_path, capsys, minor, code):
        """/dev/full and /dev/null (made beside the test as root: the old writer replaced
        the node)."""
        device = Path("/dev/full" if minor == 7 else "/dev/null")
        if os.geteuid() == 0:
            device = tmp_path / device.name
            os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
        assert main(_run(trec, "--format", "json", "--output", str(device))) == code
        if code:
            assert f"cannot write {device}: No space left on device" in capsys.readouterr().err
        assert stat.S_ISCHR(device.lstat().st_mode)

    def test_dev_stdout(self, trec):
        done = _cli(_run(trec, "--format", "json", "--output", "/dev/stdout"))
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["summary"]["retrieval-mrr"]["n"] == 300
        assert Path("/dev/stdout").is_symlink()


class TestFailedWrites:
    """Exit 2 naming the path and the reason; the old output kept, no temporary file."""

    def test_file_size_limit(self, trec, tmp_path):
        out = tmp_path / "out.json"
        out.write_text("old")
        done = _cli(_run(trec, "--format", "json", "--output", str(out)), limit=4096)
        assert done.returncode == 2
        assert f"cannot write {out}: File too large" in done.stderr
        assert out.read_text() == "old"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "q.qrels", "r.trec"]

    def test_disk_full(self, trec, mount):
        small = mount("size=16k")
        out = small / "out.json"
        out.write_text("old")
        done = _cli(_run(trec, "--format", "json", "--output", str(out)))
        assert done.returncode == 2
        assert f"cannot write {out}: No space left on device" in done.stderr
        assert out.read_text() == "old" and [p.name for p in small.iterdir()] == ["out.json"]

    def test_read_only_directory(self, trec, tmp_path, mount, capsys):
        if os.geteuid() == 0:
            where = mount("ro,size=16k")
        else:
            where = tmp_path / "ro"
            where.mkdir(mode=0o555)
        out = where / "out.json"
        assert main(_run(trec, "--format", "json", "--output", str(out))) == 2
        err = capsys.readouterr().err
        assert f"cannot write {out}: " in err and "internal error" not in err
        assert not out.exists()

    @pytest.mark.parametrize("extra", [["--format", "json"], [], ["--format", "jsonl", "--stream"]])
    def test_stdout_on_a_full_device(self, trec, extra):
        with open("/dev/full", "wb") as full:
            done = _cli(_run(trec, *extra), stdout=full)
        assert done.returncode == 2
        assert done.stderr.strip().endswith("cannot write standard output: No space left on device")

    def test_stdout_cut_short(self, trec, tmp_path):
        """A write cut short (the file size limit here, a filling disk in the trial) was
        dropped by Python's buffered stdout, silently: half a document, exit 0."""
        with open(tmp_path / "out.json", "wb") as out:
            done = _cli(_run(trec, "--format", "json"), limit=4096, stdout=out)
        assert done.returncode == 2
        assert "cannot write standard output: File too large" in done.stderr


EXITS = "exits_at_import"


@pytest.fixture
def exiting_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list:
    """The installed entry points plus one whose module calls sys.exit(0) at import."""
    (tmp_path / f"{EXITS}.py").write_text("import sys\n\nsys.exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    broken = importlib.metadata.EntryPoint("exits", f"{EXITS}:Metric", GROUP)
    return [*registry_module.installed_entry_points(), broken]


class TestPluginExitingAtImport:
    def test_registry_lists_it_broken_and_the_others_work(self, exiting_plugin):
        registry = Registry(entry_points=lambda: exiting_plugin)
        infos = {info.alias: info for info in registry.describe()}
        assert "called sys.exit(0) while being imported" in infos["exits"].error
        assert infos["retrieval-mrr"].error is None
        assert registry.get("retrieval-mrr").alias == "retrieval-mrr"

    def test_metrics_and_run(self, exiting_plugin, trec, monkeypatch, capsys):
        monkeypatch.setattr(registry_module, "installed_entry_points", lambda: exiting_plugin)
        assert main(["metrics"]) == 0
        listed = capsys.readouterr().out
        assert "exits\t\t?\tBROKEN: metric 'exits' failed to load: it called sys.exit(0)" in listed
        assert "retrieval-mrr\t" in listed
        assert main(_run(trec, "--format", "json")) == 0
        assert json.loads(capsys.readouterr().out)["summary"]["retrieval-mrr"]["n"] == 300
        qrels, run = trec
        assert main(["run", "--qrels", str(qrels), "--run", str(run), "--metrics", "exits"]) == 2
        assert "metric 'exits' failed to load: it called sys.exit(0)" in capsys.readouterr().err
