"""What a command writes: every option that names a file to write is declared one
(``engine.cli.common.OUTPUT_TYPES``), so that no output overwrites an input and a rerun
may overwrite its own earlier output; ``--output -`` is standard output where the command
prints, and a usage error where it writes a file of its own."""

from __future__ import annotations

import argparse
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_relabel import _files

from engine.cli import main
from engine.cli.commands import MODULES, _build_parser
from engine.cli.common import OUTPUT_TYPES

ROOT = Path(__file__).resolve().parent.parent


def _options(parser: argparse.ArgumentParser, command: str = "") -> list[tuple[str, Any]]:
    """(command, action) for every option of every command, nested ones included."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _options(sub, f"{command} {name}".strip())
        else:
            found.append((command, action))
    return found


def test_every_option_that_names_a_file_to_write_is_an_output() -> None:
    """An option whose help says it writes (a file, a table, the result) takes an output
    converter; one that reads does not. (--spans-out, --unaligned and
    --uncertainty-output were taken for inputs: a rerun was refused as overwriting one.)"""
    parser, _ = _build_parser([])
    options = _options(parser)
    assert {command.split()[0] for command, _ in options if command} == {
        name for names in MODULES.values() for name in names
    }
    reads = {("trec export", "outputs"), ("relabel", "chunks")}  # "...to write as a run"
    writes = {
        (command, action.dest)
        for command, action in options
        if action.help and "write" in action.help and action.type in (Path, *OUTPUT_TYPES)
    }
    declared = {
        (command, action.dest) for command, action in options if action.type in OUTPUT_TYPES
    }
    assert writes - reads - declared == set()
    assert not reads & declared
    assert {
        ("relabel", "spans_out"),
        ("relabel", "unaligned"),
        ("annotate", "uncertainty_output"),
    } <= declared
    assert ("run", "outputs") not in declared and ("annotate", "outputs") not in declared


def test_a_rerun_overwrites_its_own_outputs_but_never_an_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _files(tmp_path)
    argv = [
        "relabel", str(paths["data.yaml"]), "--documents", str(paths["docs.jsonl"]),
        "--chunks", str(paths["new.jsonl"]), "--passages", str(paths["old.jsonl"]),
        "--output", str(tmp_path / "out.yaml"), "--unaligned", str(tmp_path / "unaligned.jsonl"),
    ]  # fmt: skip
    spans = ["--spans-out", str(tmp_path / "spans.tsv")]
    assert main([*argv, *spans]) == 0
    first = (tmp_path / "spans.tsv").read_bytes()
    assert main([*argv, *spans]) == 0, capsys.readouterr().err  # the same files again
    assert (tmp_path / "spans.tsv").read_bytes() == first
    capsys.readouterr()
    before = paths["docs.jsonl"].read_bytes()
    assert main([*argv, "--spans-out", str(paths["docs.jsonl"])]) == 2
    err = capsys.readouterr().err
    assert f"it is the input {paths['docs.jsonl']}" in err and "Traceback" not in err
    assert paths["docs.jsonl"].read_bytes() == before


def test_output_dash_is_standard_output_where_the_command_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(ROOT / "examples" / "quickstart", tmp_path / "quickstart")
    monkeypatch.chdir(tmp_path / "quickstart")
    monkeypatch.setenv("SLOTWISE_CONFIG", "")
    argv = ["run", "quickstart", "--outputs", "outputs/bm25.json", "--format", "json"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert main([*argv, "--output", "-"]) == 0
    again = capsys.readouterr().out
    stamp = re.compile(r'"\d{4}-\d\d-\d\dT[^"]*"')  # when each ran
    assert stamp.sub("", again) == stamp.sub("", printed) and '"summary"' in printed
    assert not Path("-").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "a.json", "--output", "-"],
        ["relabel", "d.yaml", "--documents", "x", "--chunks", "y", "--output", "-"],
        ["trec", "export", "d.yaml", "--qrels-out", "-"],
    ],
)
def test_output_dash_is_refused_where_the_command_writes_a_file(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    os.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "'-' (standard output) is not one: name a file" in err
    assert not (tmp_path / "-").exists()
