"""``slotwise example NAME [DIR]``: write a bundled example (the repository's examples/NAME,
shipped in the wheel as ``engine.example_files``) into a folder, so that the docs' snippets
run from a pip install as from a checkout."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.cli.common import Handler, UsageError

if TYPE_CHECKING:  # what copies is imported when the command runs, not for --help
    from importlib.abc import Traversable

__all__ = ["EXAMPLES", "add", "write_example"]

#: The bundled examples, each with what it holds.
EXAMPLES = {
    "quickstart": "46 help-center questions, 99 passages, two systems' outputs and "
    "systems.py (docs/getting-started.md's snippets run in it)",
    "setbased": "graded 1..5 utility labels for the set-based metrics (RA-nWG, PROC, Harm)",
    "trec": "a TREC qrels file, a run and the queries (slotwise trec-eval, run --qrels)",
    "utility": "12 questions x 5 contexts with the LLM's answer utility, and fitted UDCG_theta "
    "weights (slotwise correlate, fit, calibrate: docs/utility.md)",
}


def add(commands: Any) -> dict[str, Handler]:
    command = commands.add_parser(
        "example",
        help="write a bundled example (dataset, corpus, outputs, systems) into a folder",
        description="Write a bundled example into DIR (default: ./NAME), to follow the docs "
        "from a pip install: "
        + "; ".join(f"{name}: {what}" for name, what in EXAMPLES.items())
        + ". DIR must not exist or be empty; nothing is overwritten.",
    )
    command.add_argument("name", choices=tuple(EXAMPLES), metavar="NAME", help=", ".join(EXAMPLES))
    command.add_argument("dir", nargs="?", type=Path, metavar="DIR", help="where (default ./NAME)")
    return {"example": _example}


def _example(args: argparse.Namespace) -> int:
    target = write_example(args.name, args.dir if args.dir is not None else Path(args.name))
    print(f"wrote the {args.name} example to {target}/ (cd {target})")
    return 0


def _bundled(name: str) -> Traversable:
    """The installed copy of examples/NAME, or the checkout's when ``engine`` is imported
    from one."""
    from importlib import resources

    try:
        return resources.files("engine.example_files").joinpath(name)
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "examples" / name


def write_example(name: str, target: Path) -> Path:
    """Copy the example ``name`` into ``target`` (made; it must not exist or be empty), all
    at once: the files are written into a temporary folder, beside a new ``target`` (then
    renamed to it) or inside an empty one such as the working directory (then each entry
    moved up)."""
    import shutil
    import tempfile

    if name not in EXAMPLES:
        raise UsageError(f"no example {name!r}: {', '.join(EXAMPLES)}")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"{target} exists and is not an empty folder: name another DIR")
    existing = target.exists()
    where = target if existing else target.resolve().parent
    where.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=where))
    try:
        _copy(_bundled(name), staging)
        if existing:
            for entry in staging.iterdir():
                os.rename(entry, target / entry.name)
            staging.rmdir()
        else:
            os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _copy(source: Traversable, into: Path) -> None:
    """``source``'s files and folders, every level, into ``into`` (no ``__pycache__``)."""
    for entry in source.iterdir():
        if entry.name == "__pycache__":
            continue
        if entry.is_dir():
            (into / entry.name).mkdir()
            _copy(entry, into / entry.name)
        else:
            (into / entry.name).write_bytes(entry.read_bytes())
