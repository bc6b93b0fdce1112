"""What ``slotwise labels`` hands people and reads back, beside the formats
(:mod:`engine.io.label_exchange`): the pairs a drawn sample (:mod:`engine.analysis.sampling`)
asks people to grade (for a query unit, every pair the runs pool for the query; for a pair
unit, the pair) with each pair's passage, the tasks of the handout, the human-labelled
dataset built from the settled grades with each label's provenance, and the annotators'
agreement among themselves."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import numpy as np
import numpy.typing as npt

from engine.analysis.sampling import DrawnSample, Unit, design_path
from engine.analysis.sampling_frame import Pooled
from engine.errors import InputError, Problem
from engine.evaluation.label_sources import HUMAN, SOURCES_KEY
from engine.io.label_exchange import Resolved, Scale, Task
from engine.io.records import Sample, samples_of

if TYPE_CHECKING:
    from engine.analysis.agreement import Mutual
    from engine.io.columns import Columns

__all__ = [
    "Handout",
    "PooledTexts",
    "check_sample",
    "handout",
    "human_samples",
    "panel_agreement",
]


class PooledTexts(Pooled, Protocol):
    """Pooled pairs (:class:`Pooled`) with whether a run gave each pair's passage, and
    the passages."""

    @property
    def has_text(self) -> npt.NDArray[np.bool_]: ...

    def texts(self, selected: npt.NDArray[np.bool_]) -> list[str]: ...


@attrs.frozen
class Handout:
    """The dataset's samples, the drawn sample and its design, and the pairs people must
    grade (in order), with each pair's passage where a run gave one; ``empty``: the drawn
    queries no run pooled a pair for."""

    samples: Mapping[str, Sample]
    drawn: DrawnSample
    design: Path
    design_sha256: str
    pairs: list[tuple[str, str]]
    texts: Mapping[tuple[str, str], str]
    empty: list[str]

    @property
    def unit(self) -> str:
        return self.drawn.design.unit

    @property
    def queries(self) -> list[str]:
        """The drawn queries, in the sample's order."""
        return self.drawn.queries()

    @property
    def units(self) -> dict[tuple[str, str | None], Unit]:
        """Each drawn unit by (query, document; None for a query unit)."""
        return {(u.query_id, u.doc_id): u for u in self.drawn.units}

    def tasks(
        self, questions: Mapping[str, str | None], corpus: Mapping[str, str] | None
    ) -> list[Task]:
        """The handout's rows: each pair with its query's question and its passage (from
        the runs, else ``corpus``: the texts of --corpus, None when not given); a pair
        without either is an error, every one listed."""
        units = self.units
        tasks, problems = [], []
        for query, doc in self.pairs:
            question = questions[query]
            text = self.texts.get((query, doc)) or (corpus or {}).get(doc)
            if question is None:
                problems.append(Problem(f"{doc}: no question (input.question)", query, "/input"))
            elif text is None:
                lacks = (
                    "--corpus has no such passage"
                    if corpus is not None
                    else "give the texts with --corpus"
                )
                problems.append(Problem(f"{doc}: no run gave the passage's text; {lacks}", query))
            else:
                stratum = units[(query, None if self.unit == "query" else doc)].stratum
                tasks.append(Task(query, doc, question, text, stratum))
        if problems:
            raise InputError(problems, summary="cannot write the handout")
        return tasks


def check_sample(
    columns: Columns, drawn: DrawnSample, sample: Path, dataset: Path, *, runs: bool
) -> None:
    """An error unless every query ``drawn`` (read from ``sample``) is in the ``dataset``
    and, for a query sample, there are ``runs`` to pool its pairs."""
    ids = set(columns.column("id").to_pylist())
    missing = [q for q in drawn.queries() if q not in ids]
    if missing:
        raise InputError(
            [Problem("a drawn query that is not in the dataset", q, source=str(sample))
             for q in missing],
            summary=f"the sample does not match {dataset}",
        )  # fmt: skip
    if drawn.design.unit == "query" and not runs:
        raise InputError([Problem("a query sample's pairs are the runs' pool: name the runs "
                                  "with --runs", source=str(sample))])  # fmt: skip


def handout(
    columns: Columns, drawn: DrawnSample, sample: Path, pooled: PooledTexts | None
) -> Handout:
    """The handout of ``drawn`` (read from ``sample``, its design beside it) from the
    dataset ``columns`` and the runs' pool (None: no runs; the pairs of a pair sample have
    no passage then)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    samples = {s.id: s for s in samples_of(columns)}
    queries = drawn.queries()
    texts: dict[tuple[str, str], str] = {}
    pooled_docs: dict[str, list[str]] = {}
    if pooled is not None:
        ids = columns.column("id").to_pylist()
        chosen = pc.is_in(columns.column("id"), value_set=pa.array(queries))
        mine = chosen.to_numpy(zero_copy_only=False)[pooled.rows]
        with_text = mine & pooled.has_text
        for row, doc, text in zip(
            pooled.rows[with_text].tolist(),
            pooled.docs.filter(pa.array(with_text)).to_pylist(),
            pooled.texts(with_text),
            strict=True,
        ):
            texts[(ids[row], doc)] = text
        rows = pooled.rows[mine].tolist()
        for row, doc in zip(rows, pooled.docs.filter(pa.array(mine)).to_pylist(), strict=True):
            pooled_docs.setdefault(ids[row], []).append(doc)
    pairs: list[tuple[str, str]] = []
    empty: list[str] = []
    if drawn.design.unit == "pair":
        pairs = [(u.query_id, u.doc_id) for u in drawn.units if u.doc_id is not None]
    else:
        for query in queries:
            docs = sorted(pooled_docs.get(query, []))
            if not docs:
                empty.append(query)
            pairs += [(query, doc) for doc in docs]
    design = design_path(sample)
    digest = hashlib.sha256(design.read_bytes()).hexdigest()
    return Handout(samples, drawn, design, digest, pairs, texts, empty)


def human_samples(resolved: Resolved, frame: Handout, scale: Scale) -> list[dict[str, Any]]:
    """The drawn queries as dataset samples with the human labels (source ``human``) and,
    in ``metadata``: ``human_labels`` (document -> each annotator's grade, where it was
    read, how they were settled) and ``sample`` (unit, design path and SHA-256, scale, and
    the stratum and inclusion probability of the query, or of each drawn pair)."""
    by_query: dict[str, list[tuple[str, float]]] = {}
    for (query, doc), label in resolved.labels.items():
        by_query.setdefault(query, []).append((doc, label))
    units = frame.units
    result = []
    for query in frame.queries:
        given = frame.samples[query]
        raw: dict[str, Any] = {"id": query}
        if given.input is not None:
            raw["input"] = given.input
        metadata = {k: v for k, v in given.metadata.items() if k not in (SOURCES_KEY, "unjudged")}
        raw["metadata"] = metadata
        labelled = by_query.get(query, [])
        where: dict[str, Any] = {
            "unit": frame.unit,
            "design": str(frame.design.resolve()),
            "design_sha256": frame.design_sha256,
            "scale": scale.name,
        }
        if frame.unit == "query":
            unit = units[(query, None)]
            where |= {"stratum": unit.stratum, "probability": unit.probability}
        else:
            where["pairs"] = {
                d: {"stratum": units[(query, d)].stratum, "probability": units[(query, d)].probability}
                for d, _ in labelled
            }  # fmt: skip
        metadata["sample"] = where
        if labelled:
            relevance = {
                doc: int(label) if label == int(label) else label for doc, label in labelled
            }
            raw["expected_output"] = {"relevance": relevance}
            metadata[SOURCES_KEY] = dict.fromkeys(relevance, HUMAN)
            metadata["human_labels"] = {
                doc: {
                    "grades": dict(resolved.grades[(query, doc)]),
                    "read_from": dict(resolved.sources[(query, doc)]),
                    "settled": resolved.how[(query, doc)],
                }
                for doc, _ in labelled
            }
        result.append(raw)
    return result


def panel_agreement(resolved: Resolved) -> Mutual | None:
    """The annotators' agreement among themselves on the pairs two or more graded (None
    with one annotator, or no such pair)."""
    from engine.analysis.agreement import mutual_agreement

    names = sorted({name for grades in resolved.grades.values() for name in grades})
    shared = [grades for grades in resolved.grades.values() if len(grades) > 1]
    if len(names) < 2 or not shared:
        return None
    matrix = np.array([[g.get(name, np.nan) for g in shared] for name in names], dtype=np.float64)
    return mutual_agreement(names, matrix)
