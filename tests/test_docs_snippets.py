"""Every ```python block of README.md, docs/*.md and the examples' READMEs runs as written, in order, one
document per process, like cells of a notebook (top-level ``await`` allowed; a
``test_*`` function a block defines is called, with the ``slotwise_engine`` fixture's
engine). Where a block is followed by an untagged block, that block is what the python
block shows, as the REPL shows it (its prints, then the repr of a last bare
expression), and must be what it shows, line for line. Each document runs in a copy of
the folder it is written for, made with the repository's own files."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)

#: Per document: the folder it runs in ('.': the repository's examples/ under a root),
#: and the blocks (numbered from 0) whose shown output is not compared, with why.
DOCUMENTS: dict[str, tuple[str, dict[int, str]]] = {
    "README.md": (".", {}),
    "docs/getting-started.md": ("examples/quickstart", {}),
    "docs/comparing-systems.md": ("examples/quickstart", {}),
    "docs/embedding.md": ("examples/quickstart", {}),
    "docs/scale.md": ("examples/quickstart", {}),
    "docs/relabelling.md": ("examples/quickstart", {}),
    "docs/agents.md": ("examples/quickstart", {}),
    "docs/writing-a-metric-plugin.md": ("examples/plugin-example", {}),
    "examples/quickstart/README.md": ("examples/quickstart", {}),
}

#: Documents whose python blocks need more than this checkout, with where they are run.
ELSEWHERE = {
    "examples/plugin-example/README.md": "needs the example distribution pip-installed: "
    "tests/test_plugin_install.py (slow) installs it and scores example-junk-at-k@3",
    "docs/annotation.md": "reads the judge's cache of the page's shell step: "
    "tests/test_example_wheel.py runs the section's shell steps against the stand-in judge "
    "server, then the page's python block",
    "docs/ppi.md": "needs a judge's labels of every pooled pair: tests/test_example_wheel.py "
    "runs the page's shell steps against the stand-in judge server, then its python blocks",
    "docs/label-free.md": "needs the judge's labels of the walkthrough (out/labelled.yaml): "
    "tests/test_example_wheel.py runs the walkthrough's shell steps against the stand-in "
    "judge server, then the page's python block",
}

DRIVER = r"""
import ast, asyncio, contextlib, inspect, io, json, sys, traceback
import engine

blocks = json.load(open(sys.argv[1]))
namespace = {"__name__": "__main__"}
shown = []


def fixture(name):
    if name == "slotwise_engine":
        return engine.Engine.from_config()
    raise LookupError(f"no fixture {name!r} for a documentation snippet")


for number, code, expect_failure in blocks:
    tree = ast.parse(code, mode="exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    before = set(namespace)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for part, mode in ((tree, "exec"), (last, "eval")):
            if part is None:
                continue
            value = eval(compile(part, f"<block {number}>", mode, flags=flags), namespace)
            if inspect.iscoroutine(value):
                value = asyncio.run(value)
            if mode == "eval" and value is not None:
                print(repr(value))
        for name in sorted(set(namespace) - before):
            test = namespace[name]
            if name.startswith("test_") and inspect.isfunction(test):
                kwargs = {p: fixture(p) for p in inspect.signature(test).parameters}
                try:
                    test(**kwargs)
                except AssertionError as error:
                    if not expect_failure:
                        raise
                    print(f"AssertionError: {error}")
                else:
                    assert not expect_failure, f"{name} was shown failing but passed"
    shown.append(out.getvalue())
json.dump(shown, sys.stdout)
"""


def _blocks(text: str) -> list[tuple[str, str | None]]:
    """The python blocks, each with the untagged block right after it (or None)."""
    fences = list(FENCE.finditer(text))
    found = []
    for index, fence in enumerate(fences):
        if fence.group(1) != "python":
            continue
        after = fences[index + 1] if index + 1 < len(fences) else None
        follows = after is not None and after.group(1) == "" and after.start() == fence.end()
        found.append((fence.group(2), after.group(2) if follows else None))  # type: ignore[union-attr]
    return found


def _prepare(document: str, folder: str, tmp_path: Path) -> Path:
    """A copy of the examples with what the document's earlier shell steps make."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    here = tmp_path if folder == "." else tmp_path / folder
    cli = [sys.executable, "-m", "engine.cli"]
    if document == "docs/comparing-systems.md":
        for system in ("bm25", "hybrid-rerank"):
            arguments = ["run", "quickstart", "--outputs", f"outputs/{system}.json"]
            arguments += ["--format", "json", "--output", f"{system}.json"]
            subprocess.run([*cli, *arguments], cwd=here, check=True, capture_output=True)
    if document == "docs/scale.md":
        scale_inputs(here)
    return here


def scale_inputs(here: Path) -> None:
    """scale.md's inputs in ``here``: trec_eval's test files, as TREC and as Parquet."""
    for name, target in (("qrels.test", "qrels.txt.gz"), ("results.test", "run.trec.gz")):
        (here / target).write_bytes(gzip.compress((DATA / "trec_eval" / name).read_bytes()))
    import engine
    from engine.io import frames, trec

    labels = engine.Engine(config={}).dataset(trec.read_qrels(DATA / "trec_eval" / "qrels.test"))
    frames.write_table(labels.to_arrow(), here / "labels.parquet")
    run = frames.run_table(trec.read_run(DATA / "trec_eval" / "results.test"))
    frames.write_table(run, here / "run.parquet")
    _shards(here, labels.to_arrow(), run)


def _shards(here: Path, labels: Any, run: Any) -> None:
    """scale.md's sharded inputs: trec_eval's test files (queries 301-303) cut after the
    first query, as TREC files (qrels/, run/ gzipped) and as Parquet (labels/,
    run-tables/)."""
    for name, folder, parts in (
        ("qrels.test", "qrels", ("a.txt", "b.txt")),
        ("results.test", "run", ("part-0.trec.gz", "part-1.trec.gz")),
    ):
        lines = (DATA / "trec_eval" / name).read_text().splitlines(keepends=True)
        cut = next(i for i, line in enumerate(lines) if not line.startswith("301 "))
        (here / folder).mkdir()
        for part, chunk in zip(parts, (lines[:cut], lines[cut:]), strict=True):
            data = "".join(chunk).encode()
            (here / folder / part).write_bytes(
                gzip.compress(data) if part.endswith(".gz") else data
            )
    from engine.io import frames

    for folder, table in (("labels", labels), ("run-tables", run)):
        (here / folder).mkdir()
        first = pc.equal(table.column("query_id"), "301")
        frames.write_table(table.filter(first), here / folder / "part-0.parquet")
        frames.write_table(table.filter(pc.invert(first)), here / folder / "part-1.parquet")


@pytest.mark.slow
@pytest.mark.parametrize("document", list(DOCUMENTS))
def test_python_blocks_run_as_written(document, tmp_path):
    folder, uncompared = DOCUMENTS[document]
    here = _prepare(document, folder, tmp_path)
    env = {**os.environ, "SLOTWISE_CONFIG": ""}
    if document == "docs/writing-a-metric-plugin.md":
        env["PYTHONPATH"] = str(here / "src")
    run_document(Path(sys.executable), document, here, env, tmp_path / "blocks.json", uncompared)


def run_document(
    python: Path,
    document: str,
    here: Path,
    env: dict[str, str],
    listing: Path,
    uncompared: dict[int, str] | None = None,
) -> None:
    """Every python block of ``document`` runs in ``here`` with ``python`` (the driver,
    one process) and shows what the page shows, but for the blocks ``uncompared`` and
    a shown traceback (a line starting with '>'). tests/test_example_wheel.py runs the
    pages with an installed package's Python."""
    blocks = _blocks((ROOT / document).read_text())
    assert blocks, f"{document} has no python block"
    listing.write_text(
        json.dumps(
            [[n, code, "AssertionError" in (shown or "")] for n, (code, shown) in enumerate(blocks)]
        )
    )
    done = subprocess.run(
        [str(python), "-c", DRIVER, str(listing)],
        cwd=here,
        env={**env, "HAYSTACK_TELEMETRY_ENABLED": "False"},  # offline
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{document}:\n{done.stderr[-3000:]}"
    printed = json.loads(done.stdout)
    for number, ((_, expected), got) in enumerate(zip(blocks, printed, strict=True)):
        if expected is None or number in (uncompared or {}) or expected.lstrip().startswith(">"):
            continue
        assert _lines(got) == _lines(expected), f"{document}, python block {number}"


def console_steps(text: str) -> list[tuple[str, list[str]]]:
    """Each command of the console blocks of ``text`` (``$ `` lines, a trailing ``\\``
    continued) with the lines the page shows after it."""
    steps: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        lines = block.splitlines()
        while lines:
            line = lines.pop(0)
            if line.startswith("$ "):
                command = line[2:]
                while command.endswith("\\"):
                    command = command[:-1] + lines.pop(0).strip()
                steps.append((command.split("  #")[0].strip(), []))
            elif steps:
                steps[-1][1].append(line)
    return steps


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def test_every_document_with_python_is_run():
    """A document that gains a python block must be added to DOCUMENTS (or ELSEWHERE)."""
    found = {
        str(path.relative_to(ROOT))
        for path in [
            ROOT / "README.md",
            *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "examples").glob("*/README.md")),
        ]
        if _blocks(path.read_text())
    }
    assert found == set(DOCUMENTS) | set(ELSEWHERE)
