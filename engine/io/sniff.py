"""What format a qrels or run file is in, told by its first bytes, else by its suffix.

- Parquet (``PAR1``), Arrow IPC / Feather (``ARROW1``, ``FEA1``): by their magic bytes;
- gzip, bz2, xz and zstd streams by theirs too: the format is then the decompressed
  bytes' (a compression suffix is not needed);
- JSONL: the first character that is not blank is ``{`` (a file that is one object of
  objects, ranx's JSON ``{q_id: {doc_id: score}}``, is read as such:
  :mod:`engine.io.tables_in`);
- CSV or TSV: the first line names columns (:func:`engine.io.column_names.is_header`:
  ``query-id	corpus-id	score``, ``q_id,doc_id,score``), or the file is named ``.csv``;
- anything else is TREC text (``qid iter docno rel``, ``qid Q0 docno rank score tag``),
  MS MARCO's headerless ``.tsv`` qrels among them.

Only the standard library is imported here: the command line asks before it parses a file
ahead (:mod:`engine.io.trec_csv`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath

from engine.io.column_names import is_header

__all__ = [
    "ARROW",
    "CODECS",
    "CSV",
    "FORMATS",
    "JSONL",
    "PARQUET",
    "TREC",
    "TSV",
    "codec",
    "document_suffix",
    "sniff",
]

TREC, PARQUET, ARROW, CSV, TSV, JSONL = "trec", "parquet", "arrow", "csv", "tsv", "jsonl"
FORMATS = (TREC, PARQUET, ARROW, CSV, TSV, JSONL)
#: Bytes that start a compressed stream, and its codec (as :data:`engine.io.files.COMPRESSIONS`).
CODECS = {
    b"\x1f\x8b": "gzip",
    b"BZh": "bz2",
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
}
#: How many bytes :func:`sniff` needs: the first line of most files.
HEAD = 1 << 16


def codec(head: bytes) -> str | None:
    """The codec whose stream ``head`` starts, or None."""
    return next((name for magic, name in CODECS.items() if head.startswith(magic)), None)


def sniff(head: bytes, name: str | os.PathLike[str] = "") -> str:
    """The format of a file whose (decompressed) bytes start with ``head``, named
    ``name`` (see the module docstring)."""
    if head.startswith(b"PAR1"):
        return PARQUET
    if head.startswith((b"ARROW1", b"FEA1")):
        return ARROW
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if text.startswith(b"{"):
        return JSONL
    line = text.split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", "replace")
    if "\t" in line and is_header(line.split("\t")):
        return TSV
    if "," in line and is_header(line.split(",")):
        return CSV
    suffix = _suffix(name)
    if suffix == ".csv":
        return CSV
    if suffix in (".parquet", ".arrow", ".feather", ".jsonl") and not text:
        return {".parquet": PARQUET, ".jsonl": JSONL}.get(suffix, ARROW)
    return TREC


def _suffix(name: str | os.PathLike[str]) -> str:
    path = PurePosixPath(os.fspath(name))
    if path.suffix.lower() in (".gz", ".bz2", ".xz", ".zst"):
        path = path.with_suffix("")
    return path.suffix.lower()


def document_suffix(path: Path) -> str:
    """The suffix the readers would want for a file named without one (a pipe's copy:
    ``--outputs <(zcat outputs.jsonl.gz)``), told by its bytes: ``.parquet``, ``.arrow``;
    ``.json`` for one JSON value, ``.jsonl`` for lines of objects; else none (TREC text,
    CSV and TSV are told by their content where they are read)."""
    with path.open("rb") as handle:
        head = handle.read(HEAD)
    if head.startswith(b"PAR1"):
        return ".parquet"
    if head.startswith((b"ARROW1", b"FEA1")):
        return ".arrow"
    if not head.removeprefix(b"\xef\xbb\xbf").lstrip().startswith((b"{", b"[")):
        return ""
    try:
        json.loads(path.read_bytes().removeprefix(b"\xef\xbb\xbf"))
    except ValueError:  # (a second value follows the first: lines of objects)
        return ".jsonl"
    return ".json"
