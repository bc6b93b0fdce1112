"""slotwise and third-party plugins installed for real, in a fresh virtual environment.

One module-scoped environment gets, in a single pip run, slotwise (non-editable, from a
copy of this checkout), examples/plugin-example, a deliberately broken plugin and pytest.
Every command then runs from another directory, so imports, entry points and the JSON
schemas all come from the installed packages, never from this source tree.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = Path("examples") / "plugin-example"
BROKEN_DISTRIBUTION = "slotwise-broken-plugin"

pytestmark = pytest.mark.slow

_NOT_COPIED = shutil.ignore_patterns(
    ".git",
    ".venv",
    "__pycache__",
    "*.egg-info",
    "build",
    "dist",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
)

# Two samples, hand-scored. q1 ranks b (label 0), x (unjudged), a (2), c (-1);
# q2 ranks e (0), f (0), g (unjudged) and has relevant d nowhere.
SAMPLES = [
    {"id": "q1", "expected_output": {"a": 2, "b": 0, "c": -1}},
    {"id": "q2", "expected_output": {"d": 1, "e": 0, "f": 0}},
]
OUTPUTS = {"q1": ["b", "x", "a", "c"], "q2": ["e", "f", "g"]}
# junk@3: q1 1/3 (b), q2 2/3 (e, f). hit@5 (the default k): q1 1 (a at rank 3), q2 0.
EXPECTED = {
    "example-junk-at-k@3": {"q1": 1 / 3, "q2": 2 / 3, "mean": 0.5},
    "retrieval-hit-at-k": {"q1": 1.0, "q2": 0.0, "mean": 0.5},
}


@attrs.frozen
class Venv:
    """A fresh virtual environment with everything installed, and a directory to work in."""

    root: Path
    workdir: Path
    sources: Path
    installed: str = ""
    """What ``pip install --quiet`` printed."""

    def bin(self, name: str) -> Path:
        return self.root / "bin" / name

    def run(
        self, *args: str | Path, stdin: str | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """Run a command in ``workdir``, isolated from this checkout's environment."""
        return _run([str(a) for a in args], cwd=self.workdir, stdin=stdin, timeout=timeout)


def _run(
    args: Sequence[str], cwd: Path, stdin: str | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
    }
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", COLUMNS="200", NO_COLOR="1")
    return subprocess.run(
        args,
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _write_broken_plugin(where: Path) -> Path:
    """A distribution whose entry point ``broken-metric`` names a module that fails to import."""
    package = where / "src" / "slotwise_broken_plugin"
    package.mkdir(parents=True)
    (where / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""\
            [build-system]
            requires = ["setuptools>=68"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "{BROKEN_DISTRIBUTION}"
            version = "0.0.1"
            dependencies = ["slotwise"]

            [project.entry-points."slotwise.metrics"]
            broken-metric = "slotwise_broken_plugin.metric:Broken"

            [tool.setuptools.packages.find]
            where = ["src"]
            """
        )
    )
    (package / "__init__.py").write_text("")
    (package / "metric.py").write_text(
        'raise ImportError("slotwise_broken_plugin needs libfrobnicate, which is missing")\n'
    )
    return where


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """slotwise, the example plugin, the broken plugin and pytest in a fresh environment."""
    base = tmp_path_factory.mktemp("install")
    # Build from a copy, so that setuptools' in-tree build/ and *.egg-info stay out of
    # the checkout (and concurrent runs do not share them).
    sources = base / "sources"
    shutil.copytree(ROOT, sources / "slotwise", ignore=_NOT_COPIED)
    broken = _write_broken_plugin(sources / "broken")
    workdir = base / "work"
    workdir.mkdir()
    env = Venv(root=base / "venv", workdir=workdir, sources=sources)
    created = _run([sys.executable, "-m", "venv", str(env.root)], cwd=base)
    assert created.returncode == 0, created.stderr
    installed = env.run(
        env.bin("python"),
        "-m",
        "pip",
        "install",
        "--quiet",
        sources / "slotwise",
        sources / "slotwise" / PLUGIN,
        broken,
        "pytest",
        timeout=900,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return attrs.evolve(env, installed=installed.stdout + installed.stderr)


def _metrics_listing(venv: Venv) -> dict[str, dict[str, Any]]:
    listed = venv.run(venv.bin("slotwise"), "metrics", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    return {info["alias"]: info for info in json.loads(listed.stdout)}


def _write_inputs(venv: Venv) -> tuple[Path, Path]:
    dataset = venv.workdir / "dataset.json"
    outputs = venv.workdir / "outputs.json"
    dataset.write_text(json.dumps({"name": "install-check", "samples": SAMPLES}))
    outputs.write_text(json.dumps(OUTPUTS))
    return dataset, outputs


class TestInstalledPlugin:
    """The example plugin, installed beside slotwise, is found and scores."""

    def test_listed_with_its_distribution(self, venv: Venv) -> None:
        """`slotwise metrics --format json` lists example-junk-at-k from its distribution."""
        info = _metrics_listing(venv)["example-junk-at-k"]
        assert info["distribution"] == "slotwise-example-plugin"
        assert info["version"] == "0.1.0"
        assert info["error"] is None
        assert info["family"] == "example"

    def test_python_api_scores_with_the_plugin(self, venv: Venv) -> None:
        """engine.dataset(...).with_metrics([...]).evaluate(...) gives the hand-derived values."""
        script = textwrap.dedent(
            """\
            import json, sys
            import engine
            data = json.load(sys.stdin)
            results = (
                engine.dataset(samples=data["samples"])
                .with_metrics(["example-junk-at-k@3", "retrieval-hit-at-k"])
                .evaluate(data["outputs"])
            )
            print(json.dumps({
                "engine_file": engine.__file__,
                "results": json.loads(results.to_json()),
            }))
            """
        )
        ran = venv.run(
            venv.bin("python"),
            "-c",
            script,
            stdin=json.dumps({"samples": SAMPLES, "outputs": OUTPUTS}),
        )
        assert ran.returncode == 0, ran.stderr
        report = json.loads(ran.stdout)
        assert Path(report["engine_file"]).is_relative_to(venv.root)
        results = report["results"]
        scores = {row["id"]: row["scores"] for row in results["samples"]}
        for label, expected in EXPECTED.items():
            assert results["summary"][label]["mean"] == pytest.approx(expected["mean"])
            for sample_id in ("q1", "q2"):
                assert scores[sample_id][label] == pytest.approx(expected[sample_id])
        junk = next(m for m in results["metrics"] if m["alias"] == "example-junk-at-k")
        assert junk["distribution"] == "slotwise-example-plugin"
        assert junk["higher_is_better"] is False
        assert junk["params"] == {"k": 3}

    def test_plugin_test_suite_passes(self, venv: Venv) -> None:
        """The plugin's own tests (conformance suite included) pass against the install."""
        tests = venv.sources / "slotwise" / PLUGIN / "tests"
        ran = venv.run(venv.bin("python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", tests)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert " passed" in ran.stdout
        assert "failed" not in ran.stdout


class TestInstalledSlotwise:
    """slotwise installed from its sources (a wheel built by setuptools) is whole."""

    def test_build_warns_of_nothing(self, venv: Venv) -> None:
        """Building slotwise raises no Python warning (pip prints those of setuptools even
        with --quiet): e.g. none that a folder of package data is missing from setuptools'
        packages. pip's own notes (``WARNING: ...``, about its index configuration) are
        not the build's."""
        raised = re.findall(r"\b\w+Warning: .*", venv.installed)
        assert raised == [], venv.installed

    def test_report_inlines_its_assets(self, venv: Venv) -> None:
        """The installed `slotwise report` writes a page with report.css and report.js
        (package data) inlined as the checkout has them."""
        dataset, outputs = _write_inputs(venv)
        results, page = venv.workdir / "results.json", venv.workdir / "report.html"
        ran = venv.run(
            *(venv.bin("slotwise"), "run", dataset, "--outputs", outputs),
            *("--metrics", "retrieval-hit-at-k", "--format", "json", "--output", results),
        )
        assert ran.returncode == 0, ran.stderr
        ran = venv.run(venv.bin("slotwise"), "report", results, "--output", page)
        assert ran.returncode == 0, ran.stderr
        text = page.read_text(encoding="utf-8")
        assets = ROOT / "engine" / "analysis" / "report_assets"
        assert f"<style>{(assets / 'report.css').read_text(encoding='utf-8')}</style>" in text
        assert f"<script>{(assets / 'report.js').read_text(encoding='utf-8')}</script>" in text


class TestBrokenPlugin:
    """A plugin that fails to import breaks only itself."""

    def test_listing_shows_the_error_and_the_other_metrics(self, venv: Venv) -> None:
        """`slotwise metrics` exits 0, lists broken-metric with its error, and the rest."""
        listing = _metrics_listing(venv)
        broken = listing["broken-metric"]
        assert broken["distribution"] == BROKEN_DISTRIBUTION
        assert BROKEN_DISTRIBUTION in broken["error"]
        assert "ImportError" in broken["error"]
        assert "libfrobnicate" in broken["error"]
        for alias in ("example-junk-at-k", "retrieval-hit-at-k"):
            assert listing[alias]["error"] is None
        table = venv.run(venv.bin("slotwise"), "metrics")
        assert table.returncode == 0, table.stderr
        assert "broken-metric" in table.stdout
        assert "BROKEN" in table.stdout
        assert "example-junk-at-k" in table.stdout
        assert "Traceback" not in table.stdout + table.stderr

    def test_other_metrics_still_run(self, venv: Venv) -> None:
        """`slotwise run ... --metrics retrieval-hit-at-k` works with the broken plugin installed."""
        dataset, outputs = _write_inputs(venv)
        ran = venv.run(
            venv.bin("slotwise"),
            "run",
            dataset,
            "--outputs",
            outputs,
            "--metrics",
            "retrieval-hit-at-k",
            "--format",
            "json",
        )
        assert ran.returncode == 0, ran.stderr
        summary = json.loads(ran.stdout)["summary"]
        assert summary["retrieval-hit-at-k"]["mean"] == pytest.approx(0.5)

    def test_requesting_it_fails_cleanly(self, venv: Venv) -> None:
        """`--metrics broken-metric` exits 2 naming the distribution, without a traceback."""
        dataset, outputs = _write_inputs(venv)
        ran = venv.run(
            venv.bin("slotwise"),
            "run",
            dataset,
            "--outputs",
            outputs,
            "--metrics",
            "broken-metric",
        )
        assert ran.returncode == 2, ran.stdout + ran.stderr
        assert BROKEN_DISTRIBUTION in ran.stderr
        assert "broken-metric" in ran.stderr
        assert "Traceback" not in ran.stdout + ran.stderr


class TestFromTheWheel:
    """What the installed package gives a user without this repository."""

    def test_getting_started_runs_in_the_written_example(self, venv: Venv, tmp_path: Path) -> None:
        """`slotwise example quickstart` in an empty folder, then every python block of
        the pages that need the core alone (tests/test_example_wheel.py's
        FROM_THE_WHEEL: getting-started, comparing-systems, writing-a-metric-plugin, the
        examples' READMEs) in folders of their own."""
        from test_example_wheel import check_documents

        check_documents(venv.root, tmp_path)
