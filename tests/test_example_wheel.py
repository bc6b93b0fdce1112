"""From a wheel to the docs: the wheel built from this checkout ships the bundled examples
(``engine.example_files``: examples/quickstart, setbased, trec, utility, every file git
tracks),
and every page with python blocks runs from an installed slotwise, as a user of the
package runs it: in an empty folder, ``slotwise example`` writes what the page starts
from, the page's shell steps run, then its python blocks (the driver of
tests/test_docs_snippets.py, with the installed package's Python), showing what the page
shows.

Two environments, each made once: the pages that need the core alone
(:data:`FROM_THE_WHEEL`) run in tests/test_plugin_install.py's fresh environment, where
pip installed slotwise and its dependencies as a user gets them; the pages that need
extras (:data:`WITH_EXTRAS`) run in :func:`with_extras`: the wheel installed without its
dependencies, which, with the extras' packages (LangChain, LlamaIndex, Haystack, Inspect,
ragas, ir_datasets, pandas...), come from this test environment. The pages that need a
judge's labels get them as the page does: their shell steps label the quickstart against
the stand-in judge server (``python -m engine.annotate.stand_in``, from the wheel). The
pages with console steps alone (:data:`CONSOLE_ONLY`: docs/utility.md, docs/set-based.md) run those steps
from the wheel too, each showing what the page shows."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from test_docs_snippets import (
    DOCUMENTS,
    ELSEWHERE,
    _blocks,
    console_steps,
    run_document,
    scale_inputs,
)

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ("quickstart", "setbased", "trec", "utility")
#: The judge's address the pages' shell steps show, replaced by the stand-in's.
DOC_URL = "http://127.0.0.1:8765/v1"

pytestmark = pytest.mark.slow


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
    }
    env.update(SLOTWISE_CONFIG="", PIP_DISABLE_PIP_VERSION_CHECK="1", NO_COLOR="1", **extra)
    return env


def _run(
    args: list[str], cwd: Path, timeout: float = 600, **extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=_env(**extra), capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of a copy of the checkout's files (tracked, or new and not ignored), so
    that no build/ is left in the tree."""
    base = tmp_path_factory.mktemp("wheel")
    tracked = _run(["git", "ls-files", "-z", "-co", "--exclude-standard"], ROOT).stdout.split("\0")
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (base / "src" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, base / "src" / name)
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(base / "dist"), "."],
        base / "src",
    )
    assert built.returncode == 0, built.stderr
    assert not re.findall(r"\b\w+Warning: .*", built.stderr), built.stderr  # setuptools'
    (found,) = (base / "dist").glob("slotwise-*.whl")
    return found


@pytest.fixture(scope="module")
def with_extras(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment where slotwise is the wheel, installed without its
    dependencies, and everything else is this test environment's: a .pth file names its
    site-packages, which is then on the path as a plain folder (the .pth files in it,
    among them the editable install's finder of this checkout, are not run). Installing
    the extras from PyPI would take minutes on CI; these are the versions the rest of the
    suite tests with. Checked: engine and metrics_plugins are imported from the wheel."""
    root = tmp_path_factory.mktemp("extras") / "venv"
    python = root / "bin" / "python"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(root)], root.parent)
    assert made.returncode == 0, made.stderr
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    installed = _run([*install, "--no-deps", "--no-index", str(wheel)], root.parent)
    assert installed.returncode == 0, installed.stderr
    (site,) = root.glob("lib/python*/site-packages")
    (site / "test-environment.pth").write_text(sysconfig.get_path("purelib") + "\n")
    imported = _run(
        [
            str(python),
            "-c",
            "import engine, metrics_plugins as m; print(engine.__file__, m.__file__)",
        ],
        root.parent,
    )
    assert imported.returncode == 0, imported.stderr
    assert all(Path(found).is_relative_to(site) for found in imported.stdout.split())
    return root


def test_the_wheel_ships_every_file_of_the_examples(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = _run(
        ["git", "ls-files", *(f"examples/{name}" for name in SHIPPED)], ROOT
    ).stdout.split()
    expected = {"engine/example_files/" + path.removeprefix("examples/") for path in tracked}
    assert expected and expected <= names
    assert not any(name.startswith("engine/example_files/plugin-example") for name in names)


class Page(NamedTuple):
    """What a page starts from, in an empty folder, and where its python blocks run."""

    folder: str = "quickstart"
    """Where the python blocks run, in the empty folder."""
    examples: tuple[str, ...] = ("quickstart",)
    """The folders ``slotwise example NAME [FOLDER]`` writes first (NAME: the last part)."""
    steps: tuple[tuple[str, ...], ...] = ()
    """``slotwise`` commands the page's earlier shell steps run in ``folder``."""
    console: tuple[str, ...] = ()
    """Sections of the page whose console steps (from the first one's ``$ cd examples/NAME``
    to a section's first python block) run in ``folder`` against the stand-in judge,
    showing what they show."""
    columns: int = 200
    """The terminal's width for those steps (the page's tables are shown at it)."""
    prepare: Callable[[Path], None] | None = None
    """Writes, in ``folder``, the data the page's reader brings (not shipped)."""


#: The pages whose python blocks need slotwise's core alone (and the example plugin,
#: examples/plugin-example, installed beside it: writing-a-metric-plugin.md, its README).
FROM_THE_WHEEL: dict[str, Page] = {
    "docs/getting-started.md": Page(),
    "docs/comparing-systems.md": Page(
        steps=tuple(
            tuple(
                f"run quickstart --outputs outputs/{s}.json --format json --output {s}.json".split()
            )
            for s in ("bm25", "hybrid-rerank")
        )
    ),
    "docs/writing-a-metric-plugin.md": Page(folder=".", examples=()),
    "examples/quickstart/README.md": Page(),
    "examples/plugin-example/README.md": Page(folder=".", examples=()),
}

#: The pages whose python blocks need extras or a judge's labels.
WITH_EXTRAS: dict[str, Page] = {
    "README.md": Page(folder=".", examples=("examples/quickstart", "examples/trec")),
    "docs/embedding.md": Page(examples=("quickstart", "trec")),
    "docs/relabelling.md": Page(),
    "docs/agents.md": Page(),
    "docs/scale.md": Page(prepare=scale_inputs),  # trec_eval's test files, the user's own
    "docs/label-free.md": Page(
        folder="examples/quickstart",
        examples=("examples/quickstart",),
        console=("## The walkthrough",),
    ),
    "docs/ppi.md": Page(
        folder="examples/quickstart", examples=("examples/quickstart",), console=("## Using it",)
    ),
    "docs/annotation.md": Page(
        folder="examples/quickstart",
        examples=("examples/quickstart",),
        console=("## Filling the holes",),
    ),
}


#: The pages with console steps alone, run from the wheel as they are shown.
CONSOLE_ONLY: dict[str, Page] = {
    "docs/utility.md": Page(
        folder="examples/utility",
        examples=("examples/utility",),
        console=("## Choosing a metric", "## Fitting UDCG_theta", "## Calibrating gamma"),
        columns=120,
    ),
    "docs/set-based.md": Page(
        folder="examples/setbased", examples=("examples/setbased",), console=("## Worked example",)
    ),
}


@pytest.mark.parametrize("document", list(CONSOLE_ONLY))
def test_the_pages_console_steps_run_from_the_wheel(
    document: str, with_extras: Path, tmp_path: Path
) -> None:
    page = CONSOLE_ONLY[document]
    where = tmp_path / "empty"
    _write_examples(str(with_extras / "bin" / "slotwise"), page.examples, where)
    _console(with_extras, document, page, where / page.folder)


def test_every_page_with_python_runs_from_the_wheel() -> None:
    """A page that gains a python block is run from the wheel too."""
    assert set(DOCUMENTS) | set(ELSEWHERE) == set(FROM_THE_WHEEL) | set(WITH_EXTRAS)


def check_documents(venv: Path, where: Path) -> None:
    """In an empty folder under ``where``, the ``slotwise`` of the environment ``venv``
    (slotwise installed from a wheel) writes the quickstart (once only), and every page of
    :data:`FROM_THE_WHEEL` runs from an empty folder of its own.
    tests/test_plugin_install.py calls this with its fresh environment."""
    slotwise = str(venv / "bin" / "slotwise")
    empty = where / "empty"
    empty.mkdir()
    wrote = _run([slotwise, "example", "quickstart"], empty)
    assert wrote.returncode == 0, wrote.stderr
    here = empty / "quickstart"
    shipped = sorted(p.name for p in (ROOT / "examples" / "quickstart").iterdir())
    assert sorted(p.name for p in here.iterdir()) == [n for n in shipped if n != "__pycache__"]
    again = _run([slotwise, "example", "quickstart"], empty)
    assert again.returncode == 2 and "exists and is not an empty folder" in again.stderr
    for number, (document, page) in enumerate(FROM_THE_WHEEL.items()):
        run_page(venv, document, page, where / f"page-{number}")
    _check_the_readme_names_its_extras(venv, where / "readme")
    engine_file = _run(
        [str(venv / "bin" / "python"), "-c", "import engine; print(engine.__file__)"], here
    ).stdout
    assert str(venv) in engine_file  # the installed package, not this checkout


def _check_the_readme_names_its_extras(venv: Path, where: Path) -> None:
    """README.md's python block with the core alone (``venv``): each line whose comment
    says ``needs slotwise[EXTRA]`` fails, the error naming that extra, and the block
    without those lines runs."""
    ((code, _),) = _blocks((ROOT / "README.md").read_text())
    lines = code.splitlines()
    marked = {n: re.findall(r"needs slotwise\[(\w+)\]", line) for n, line in enumerate(lines)}
    marked = {n: extras for n, extras in marked.items() if extras}
    assert marked, "the README's block names no extra"
    _write_examples(str(venv / "bin" / "slotwise"), WITH_EXTRAS["README.md"].examples, where)
    python = str(venv / "bin" / "python")
    for number, (extra, *_) in marked.items():
        failed = _run([python, "-c", "\n".join(lines[: number + 1])], where)
        assert failed.returncode != 0 and f"pip install 'slotwise[{extra}]'" in failed.stderr
    rest = "\n".join(line for n, line in enumerate(lines) if n not in marked)
    done = _run([python, "-c", rest], where)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("document", list(WITH_EXTRAS))
def test_the_page_runs_from_the_wheel(document: str, with_extras: Path, tmp_path: Path) -> None:
    run_page(with_extras, document, WITH_EXTRAS[document], tmp_path / "empty")


def run_page(venv: Path, document: str, page: Page, where: Path) -> None:
    """In the empty folder ``where``, with the programs of ``venv``: ``slotwise example``
    writes the page's examples, its shell steps run, then its python blocks."""
    slotwise = str(venv / "bin" / "slotwise")
    _write_examples(slotwise, page.examples, where)
    here = where / page.folder
    if page.prepare is not None:
        page.prepare(here)
    for step in page.steps:
        done = _run([slotwise, *step], here)
        assert done.returncode == 0, done.stderr
    if page.console:
        _console(venv, document, page, here)
    listing = where.with_name(where.name + "-blocks.json")
    run_document(venv / "bin" / "python", document, here, _env(), listing)


def _write_examples(slotwise: str, examples: tuple[str, ...], where: Path) -> None:
    """``slotwise example NAME [FOLDER]`` in the new, empty folder ``where``, for each."""
    where.mkdir()
    for path in examples:
        name = Path(path).name
        wrote = _run([slotwise, "example", name, *([path] if path != name else [])], where)
        assert wrote.returncode == 0, wrote.stderr


def _console(venv: Path, document: str, page: Page, here: Path) -> None:
    """The console steps of ``page.console``'s sections of ``document``, from the first
    one's console block that starts with ``$ cd examples/NAME``, each section's to its
    first python block: each ``slotwise`` command exits 0 (or as the ``echo $?`` after it
    shows) and prints each line the page shows after it ('...' stands for any text, a
    duration for any)."""
    text = (ROOT / document).read_text()
    steps = []
    for number, section in enumerate(page.console):
        start = text.index(section)
        end = text.find("\n## ", start + len(section))
        part = text[start : end if end >= 0 else len(text)]
        if number == 0:
            part = part[part.index("```console\n$ cd examples/") :]
        steps += console_steps(part.split("```python\n")[0])
        assert any(command.startswith("slotwise ") for command, _ in steps), section
    code = None
    with _stand_in(venv / "bin" / "python") as url:
        for number, (command, shown) in enumerate(steps):
            words = shlex.split(command.replace(DOC_URL, url))
            if words[0] == "cd":
                assert here.parts[-2:] == Path(words[1]).parts, command
            elif words[:3] == ["python", "-m", "engine.annotate.stand_in"]:
                continue  # started above, on a free port
            elif words == ["echo", "$?"]:
                assert shown == [str(code)], f"{document}: after {steps[number - 1][0]!r}"
            else:
                assert words[0] == "slotwise", command
                done = _run(
                    [str(venv / "bin" / "slotwise"), *words[1:]], here, COLUMNS=str(page.columns)
                )
                code = done.returncode
                following = steps[number + 1][0] if number + 1 < len(steps) else ""
                assert code == 0 or following == "echo $?", f"{command}\n{done.stderr}"
                _assert_shown(command, shown, done.stdout + done.stderr)


def _timeless(line: str) -> str:
    return re.sub(r"\b\d+(\.\d+)?s\b", "Ns", line.rstrip())


def _assert_shown(command: str, shown: list[str], printed: str) -> None:
    lines = [_timeless(line) for line in printed.splitlines()]
    for line in shown:
        if line.strip() in ("", "..."):
            continue
        pattern = re.compile(".*".join(re.escape(part) for part in _timeless(line).split("...")))
        assert any(pattern.fullmatch(got) for got in lines), (
            f"{command}\nnot printed: {line}\n{printed}"
        )


@contextlib.contextmanager
def _stand_in(python: Path) -> Iterator[str]:
    """The stand-in judge server of ``python``'s slotwise on a free port: its URL."""
    process = subprocess.Popen(
        [str(python), "-m", "engine.annotate.stand_in", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert process.stdout is not None
        yield f"http://127.0.0.1:{int(process.stdout.readline().split()[1])}/v1"
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.parametrize("into", [".", "new/folder"])
def test_the_example_into_an_empty_working_directory_or_a_new_folder(
    tmp_path: Path, into: str
) -> None:
    """``slotwise example trec .`` in an empty folder writes the files there (the folder
    stays the same folder: a shell in it keeps working); a new path is made; the files are
    those of examples/trec; a second time is refused, naming the folder."""
    here = tmp_path / "empty"
    here.mkdir()
    command = [sys.executable, "-m", "engine.cli", "example", "trec", into]
    first = subprocess.run(command, cwd=here, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    written = here / into
    expected = sorted(p.name for p in (ROOT / "examples" / "trec").iterdir())
    assert sorted(p.name for p in written.iterdir()) == expected
    for name in expected:
        assert (written / name).read_bytes() == (ROOT / "examples" / "trec" / name).read_bytes()
    again = subprocess.run(command, cwd=here, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2
    assert f"slotwise: error: {into} exists and is not an empty folder" in again.stderr
