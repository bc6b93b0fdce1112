"""``slotwise trec import|export``: TREC qrels and runs to a slotwise dataset and outputs
file, and back."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine.cli.common import Handler, Parser, UsageError, configured_engine, output_file
from engine.io.config import CONFIG_FILENAME
from engine.io.files import base_name
from engine.io.writer import atomic_write

__all__ = ["add"]


def add(commands: Any) -> dict[str, Handler]:
    trec_command = commands.add_parser(
        "trec",
        help="convert between TREC qrels/run files and slotwise datasets/outputs",
        description="Convert TREC qrels and runs to a slotwise dataset and outputs file, or back.",
    )
    direction = trec_command.add_subparsers(dest="direction", required=True, parser_class=Parser)
    to_slotwise = direction.add_parser("import", help="qrels (+ run) -> dataset (+ outputs)")
    to_slotwise.add_argument("qrels", type=Path)
    to_slotwise.add_argument("run", type=Path, nargs="?")
    to_slotwise.add_argument(
        "--dataset-out",
        type=output_file,
        required=True,
        help="a .jsonl, .yaml or .json dataset file to write",
    )
    to_slotwise.add_argument(
        "--outputs-out", type=output_file, help="a .json outputs file to write (needs RUN)"
    )
    to_trec = direction.add_parser("export", help="dataset (+ outputs) -> qrels (+ run)")
    to_trec.add_argument(
        "dataset", help=f"a dataset declared in {CONFIG_FILENAME}, or a dataset file"
    )
    to_trec.add_argument("--outputs", type=Path, help="outputs to write as a run")
    to_trec.add_argument("--qrels-out", type=output_file, required=True)
    to_trec.add_argument(
        "--run-out", type=output_file, help="the run file to write (needs --outputs)"
    )
    to_trec.add_argument("--tag", default="slotwise", help="the run tag column")
    return {"trec": _trec}


def _trec(args: argparse.Namespace) -> int:
    import orjson

    from engine.io import documents, sources, trec

    if args.direction == "import":
        if args.outputs_out is not None and args.run is None:
            raise UsageError("--outputs-out needs a RUN file")
        samples = documents.raw_samples(sources.read_qrels(args.qrels))
        documents.write_samples(args.dataset_out, samples, name=base_name(args.qrels))
        written = [f"{args.dataset_out} ({len(samples)} samples)"]
        if args.run is not None and args.outputs_out is not None:
            outputs = documents.raw_outputs(sources.read_run(args.run))
            atomic_write(
                args.outputs_out, orjson.dumps(outputs, option=orjson.OPT_INDENT_2) + b"\n"
            )
            written.append(f"{args.outputs_out} ({len(outputs)} outputs)")
    else:
        if args.run_out is not None and args.outputs is None:
            raise UsageError("--run-out needs --outputs")
        dataset = configured_engine(args.config).dataset(args.dataset)
        trec.write_qrels(args.qrels_out, dataset.columns)
        written = [f"{args.qrels_out} ({len(dataset)} queries)"]
        if args.outputs is not None and args.run_out is not None:
            ranked = sources.read_outputs(args.outputs)
            trec.write_run(args.run_out, ranked, tag=args.tag)
            written.append(f"{args.run_out} ({len(ranked)} queries)")
    print("wrote " + ", ".join(written))
    return 0
