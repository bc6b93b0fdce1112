"""``slotwise relabel``: a dataset's labels carried to a new chunking by overlap with
labelled spans of the source documents (:mod:`engine.analysis.relabel`), with no new
judge call."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from engine.cli.common import Handler, UsageError, configured_engine, output_file
from engine.io.config import CONFIG_FILENAME

__all__ = ["add"]


def _coverage(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], got {text!r}")
    return value


def add(commands: Any) -> dict[str, Handler]:
    from engine.analysis.defaults import MIN_COVERAGE

    relabel = commands.add_parser(
        "relabel",
        help="carry a dataset's labels to a new chunking by text overlap (no judge call)",
        description="Relabel DATASET for the chunks of --chunks: each chunk's grade is the "
        "highest grade among the labelled spans of the source documents it covers (an overlap "
        "of at least --min-coverage of the shorter of the two); a chunk covering no relevant "
        "span gets a grade <= 0 only when labelled text makes up --min-coverage of it, else it "
        "stays unjudged. Spans come from the samples' expected_output.spans, from --spans, and "
        "from their passage labels lifted through --passages (the old chunks, with offsets). "
        "Chunks that cannot be aligned to their source are listed and stay unjudged. "
        "See docs/relabelling.md.",
    )
    relabel.add_argument(
        "dataset",
        type=Path,
        help=f"a dataset file (.yaml, .json, .jsonl) or a dataset declared in {CONFIG_FILENAME}",
    )
    relabel.add_argument(
        "--documents",
        type=Path,
        required=True,
        help='the source documents, JSONL of {"id": ..., "text": ...}',
    )
    relabel.add_argument(
        "--chunks",
        type=Path,
        required=True,
        help="the new chunks, JSONL: {id, text, doc?, start?, end?}, or as LangChain "
        "(metadata.start_index, metadata.source), LlamaIndex (start_char_idx, end_char_idx, "
        "ref_doc_id) or Haystack (meta.split_idx_start, meta.source_id) write them",
    )
    relabel.add_argument(
        "--passages",
        type=Path,
        help="the old chunks the dataset's passage labels name (same shapes as --chunks): "
        "their labels are lifted to spans",
    )
    relabel.add_argument(
        "--spans",
        type=Path,
        help="more span labels: QUERY DOC START END GRADE lines, or a .csv/.tsv/.parquet/"
        ".jsonl table with query_id, doc_id, start, end, grade",
    )
    relabel.add_argument(
        "--min-coverage",
        type=_coverage,
        default=MIN_COVERAGE,
        help=f"the rule's share (default {MIN_COVERAGE:g})",
    )
    relabel.add_argument(
        "--output", type=output_file, required=True, help="the relabelled dataset to write"
    )
    relabel.add_argument(
        "--spans-out",
        type=output_file,
        help="also write every sample's span labels as a span table",
    )
    relabel.add_argument(
        "--unaligned", type=output_file, help="write the unaligned chunks, JSONL {id, reason}"
    )
    return {"relabel": _relabel}


def _relabel(args: argparse.Namespace) -> int:
    from engine.analysis.relabel import relabel_dataset
    from engine.io import documents as documents_io
    from engine.io import spans as spans_io
    from engine.io.files import format_suffix, read_document, read_jsonl
    from engine.io.writer import atomic_write

    if format_suffix(args.output) not in documents_io.DOCUMENT_SUFFIXES:
        raise UsageError(
            f"--output {args.output}: use one of {', '.join(documents_io.DOCUMENT_SUFFIXES)}"
        )
    path = args.dataset
    if not path.exists():
        declared = configured_engine(args.config).config.datasets.get(str(path))
        if declared is None:
            raise UsageError(f"{path}: no such file, nor a dataset declared in {CONFIG_FILENAME}")
        path = declared.path
    name, _ = documents_io.read_samples(path)  # validates, with lines
    if format_suffix(path) == ".jsonl":
        raws = [raw for _, raw in read_jsonl(path)]
    else:
        raws = list(read_document(path)["samples"])
    texts = spans_io.read_documents(args.documents)
    alignment = spans_io.align(spans_io.read_chunks(args.chunks), texts)
    passages = (
        None
        if args.passages is None
        else spans_io.align(spans_io.read_chunks(args.passages), texts)
    )
    extra = None if args.spans is None else spans_io.read_span_table(args.spans)
    done = relabel_dataset(
        raws,
        texts,
        alignment,
        passages=passages,
        spans=extra,
        min_coverage=args.min_coverage,
    )
    documents_io.write_samples(args.output, done.samples, name=name)
    print(f"wrote {args.output} ({len(done.samples)} samples)", file=sys.stderr)
    if args.spans_out is not None:
        spans_io.write_span_table(args.spans_out, done.spans)
        print(f"wrote {args.spans_out}", file=sys.stderr)
    if args.unaligned is not None:
        atomic_write(
            args.unaligned,
            "".join(
                json.dumps({"id": chunk, "reason": why}) + "\n"
                for chunk, why in done.relabelled.unaligned.items()
            ),
        )
        print(f"wrote {args.unaligned}", file=sys.stderr)
    print("\n".join(done.lines()), file=sys.stderr)
    return 0
