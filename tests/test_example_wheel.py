"""From a wheel to the docs: the wheel built from this checkout ships the bundled examples
(``engine.example_files``: examples/quickstart, setbased, trec, every file git tracks).
:func:`check_documents` is what a user of the installed package does: in an empty
folder ``slotwise example quickstart`` writes the quickstart, in which every python block
of docs/getting-started.md and docs/comparing-systems.md (the pages that need the core
alone) runs as written and shows what the page shows (the driver of
tests/test_docs_snippets.py, with the installed package's Python); it runs in
tests/test_plugin_install.py's fresh environment (slotwise installed from a copy of this
checkout, not editable), made once for both."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from test_docs_snippets import DRIVER, _blocks, _lines

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ("quickstart", "setbased", "trec")

pytestmark = pytest.mark.slow


def _run(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(SLOTWISE_CONFIG="", PIP_DISABLE_PIP_VERSION_CHECK="1", NO_COLOR="1")
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


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
    (found,) = (base / "dist").glob("slotwise-*.whl")
    return found


def test_the_wheel_ships_every_file_of_the_examples(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = _run(
        ["git", "ls-files", *(f"examples/{name}" for name in SHIPPED)], ROOT
    ).stdout.split()
    expected = {"engine/example_files/" + path.removeprefix("examples/") for path in tracked}
    assert expected and expected <= names
    assert not any(name.startswith("engine/example_files/plugin-example") for name in names)


#: The pages whose python blocks need slotwise's core alone, each with the commands its
#: earlier shell steps run in the written quickstart (as tests/test_docs_snippets.py's
#: ``_prepare`` does in a copy of the checkout's).
FROM_THE_WHEEL: dict[str, list[list[str]]] = {
    "docs/getting-started.md": [],
    "docs/comparing-systems.md": [
        [
            "run",
            "quickstart",
            "--outputs",
            f"outputs/{system}.json",
            "--format",
            "json",
            "--output",
            f"{system}.json",
        ]
        for system in ("bm25", "hybrid-rerank")
    ],
}


def check_documents(venv: Path, where: Path) -> None:
    """In an empty folder under ``where``, the ``slotwise`` of the environment ``venv``
    (slotwise installed from a wheel) writes the quickstart, and every python block of
    each page of :data:`FROM_THE_WHEEL` runs in a fresh copy of it with that
    environment's Python, showing what the page shows. tests/test_plugin_install.py
    calls this with its fresh environment."""
    python, slotwise = venv / "bin" / "python", str(venv / "bin" / "slotwise")
    empty = where / "empty"
    empty.mkdir()
    wrote = _run([slotwise, "example", "quickstart"], empty)
    assert wrote.returncode == 0, wrote.stderr
    here = empty / "quickstart"
    shipped = sorted(p.name for p in (ROOT / "examples" / "quickstart").iterdir())
    assert sorted(p.name for p in here.iterdir()) == [n for n in shipped if n != "__pycache__"]
    again = _run([slotwise, "example", "quickstart"], empty)
    assert again.returncode == 2 and "exists and is not an empty folder" in again.stderr
    for number, (document, steps) in enumerate(FROM_THE_WHEEL.items()):
        folder = where / f"page-{number}"
        assert _run([slotwise, "example", "quickstart", str(folder)], where).returncode == 0
        for step in steps:
            done = _run([slotwise, *step], folder)
            assert done.returncode == 0, done.stderr
        _check_page(python, document, folder, where / f"blocks-{number}.json")
    engine_file = _run([str(python), "-c", "import engine; print(engine.__file__)"], here).stdout
    assert str(venv) in engine_file  # the installed package, not this checkout


def _check_page(python: Path, document: str, folder: Path, listing: Path) -> None:
    """Every python block of ``document`` runs in ``folder`` and shows what it shows."""
    blocks = _blocks((ROOT / document).read_text())
    listing.write_text(json.dumps([[n, code, False] for n, (code, _) in enumerate(blocks)]))
    done = _run([str(python), "-c", DRIVER, str(listing)], folder)
    assert done.returncode == 0, f"{document}: {done.stderr[-3000:]}"
    printed = json.loads(done.stdout)
    for number, ((_, expected), got) in enumerate(zip(blocks, printed, strict=True)):
        if expected is not None:
            assert _lines(got) == _lines(expected), f"{document}, python block {number}"


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
