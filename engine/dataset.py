"""Datasets: samples loaded from YAML/JSON/JSONL files or Python, validated against
``sample.schema.json`` with every problem reported together."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from engine import schemas
from engine.errors import InputError, Problem
from engine.fileio import atomic_write, read_document, read_jsonl
from engine.logs import log
from engine.records import Sample

if TYPE_CHECKING:
    from engine.api import Engine, Evaluation
    from engine.metric import Metric
    from engine.results import Results

__all__ = ["Dataset", "load_samples", "parse_samples", "write_samples"]


DATASET_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl", ".parquet", ".arrow", ".feather")


def parse_samples(
    raws: Iterable[tuple[Any, int | None]], source: str | None = None, *, prefix: str = ""
) -> list[Sample]:
    """Validate raw samples (each with its line number, if any) and normalise them.

    Pointers locate each problem in the document: ``{prefix}/{index}/...`` for samples
    without a line number, relative to the line for JSONL.

    Raises :class:`InputError` listing every problem: schema violations, duplicate ids,
    an empty dataset.
    """
    problems: list[Problem] = []
    samples: list[Sample] = []
    seen: dict[str, int] = {}
    for index, (raw, line) in enumerate(raws):
        if schemas.certainly_valid_sample(raw) and raw["id"] not in seen:  # the fast path
            seen[raw["id"]] = index
            samples.append(Sample.from_raw(raw))
            continue
        sample_id = schemas.sample_id_of(raw)
        path = [] if line is not None else [*filter(None, prefix.split("/")), index]
        found = list(
            schemas.problems(
                raw, "sample", sample_id=sample_id, source=source, line=line, prefix=path
            )
        )
        if sample_id is not None and sample_id in seen:
            found.append(
                Problem(
                    f"duplicate sample id (first at item {seen[sample_id]})",
                    sample_id=sample_id,
                    pointer=schemas.pointer([*path, "id"]),
                    source=source,
                    line=line,
                )
            )
        elif sample_id is not None:
            seen[sample_id] = index
        problems.extend(found)
        if not found:
            samples.append(Sample.from_raw(raw))
    if not problems and not seen:
        problems.append(Problem("the dataset has no samples", source=source))
    if problems:
        raise InputError(problems, summary=f"invalid dataset{f' {source}' if source else ''}")
    return samples


def load_samples(path: str | Path) -> tuple[str | None, list[Sample]]:
    """(name, samples) from a ``.yaml``/``.yml``/``.json`` dataset file or a ``.jsonl`` file."""
    path = Path(path)
    source = str(path)
    if path.suffix.lower() not in DATASET_SUFFIXES:
        raise InputError(
            [
                Problem(
                    f"unknown dataset format {path.suffix!r}; use one of {', '.join(DATASET_SUFFIXES)}",
                    source=source,
                )
            ]
        )
    if path.suffix.lower() == ".jsonl":
        return path.stem, parse_samples(((raw, line) for line, raw in read_jsonl(path)), source)
    if path.suffix.lower() in (".parquet", ".arrow", ".feather"):  # long-format labels
        from engine import columnar

        raws = columnar.labels_to_samples(columnar.read_frame(path), source)
        return path.stem, parse_samples(((raw, None) for raw in raws), source)
    document = read_document(path)
    envelope = (
        {k: v for k, v in document.items() if k != "samples"}
        if isinstance(document, dict)
        else document
    )
    if isinstance(document, dict):
        envelope["samples"] = []
    problems = list(schemas.problems(envelope, "dataset", source=source))
    if problems:
        raise InputError(problems, summary=f"invalid dataset {source}")
    name = document.get("name") or path.stem
    return name, parse_samples(
        ((raw, None) for raw in document["samples"]), source, prefix="/samples"
    )


def write_samples(
    path: str | Path, samples: Sequence[Mapping[str, Any]], name: str | None = None
) -> None:
    """Write raw samples as JSONL (one per line) or, for ``.yaml``/``.yml``/``.json``, as a
    dataset document; atomically."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        text = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in samples)
    else:
        document = {"name": name or path.stem, "schema_version": 1, "samples": list(samples)}
        if suffix in (".yaml", ".yml"):
            import yaml

            text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
        elif suffix == ".json":
            text = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
        else:
            raise InputError(
                [
                    Problem(
                        f"unknown dataset format {path.suffix!r}; use one of {', '.join(DATASET_SUFFIXES)}",
                        source=str(path),
                    )
                ]
            )
    atomic_write(path, text)


def content_hash(samples: Sequence[Sample]) -> str:
    """sha256 of the normalised samples: equal content gives an equal hash, whatever the file format."""
    encoder = json.JSONEncoder(sort_keys=True, default=str, separators=(",", ":"))
    digest = hashlib.sha256()
    step = 4096  # many samples per encoder call: one C-level pass instead of one each
    for start in range(0, len(samples), step):
        rows = [
            [s.id, s.input, s.relevance, s.utility, s.answers, s.groups, s.metadata]
            for s in samples[start : start + step]
        ]
        digest.update(encoder.encode(rows).encode())
    return "sha256:" + digest.hexdigest()


@attrs.define(eq=False)
class Dataset:
    """Validated samples plus what a declaration says about them (name, metrics, outputs)."""

    samples: tuple[Sample, ...]
    engine: Engine = attrs.field(repr=False)
    name: str | None = None
    metrics: tuple[str, ...] = ()
    outputs: Path | None = None
    hash: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.hash = content_hash(self.samples)
        log.debug("dataset.loaded", dataset=self.name, samples=len(self.samples))

    def __len__(self) -> int:
        return len(self.samples)

    @property
    def ids(self) -> list[str]:
        return [s.id for s in self.samples]

    def with_metrics(self, metrics: Sequence[str | Metric]) -> Evaluation:
        """Bind metrics (aliases, ``alias@K``, ``alias(k=..., ...)`` specs or instances)."""
        return self.engine.evaluation(self, metrics)

    def evaluate(self, outputs: Any, **options: Any) -> Results:
        """Score ``outputs`` with the metrics declared for this dataset."""
        return self.with_metrics(self.metrics).evaluate(outputs, **options)

    def run(self, system: Callable[[Any], Any], **options: Any) -> Results:
        """Call ``system(sample.input)`` for every sample and score the outputs with the
        declared metrics."""
        return self.with_metrics(self.metrics).run(system, **options)

    @classmethod
    def from_raw(
        cls, engine: Engine, samples: Sequence[Mapping[str, Any] | Sample], name: str | None = None
    ) -> Dataset:
        """From Python: raw sample mappings (validated), or already-built :class:`Sample` objects."""
        if samples and all(isinstance(s, Sample) for s in samples):
            parsed: list[Sample] = list(samples)  # type: ignore[arg-type]
        else:
            parsed = parse_samples((s, None) for s in samples)
        return cls(samples=tuple(parsed), engine=engine, name=name)
