"""Read the UDCG reference implementation's data format (github GiovanniTRA/UDCG) into
slotwise samples and outputs.

The format is a JSON list of questions::

    [{"example_id": "example_1", "question": "...",
      "passages": [{"doc_id": "doc_1", "text": "...", "is_relevant": true,
                    "models_info": {"<model>": {"no_res_prob": 0.02}}}, ...],
      "udcg": {"<model>": 0.555}}]                      # optional: the stored scores

Each question becomes one sample whose ``expected_output.utility`` holds
``{relevant, p_no_response}`` per passage for the chosen model (``u = ±(1 - p)``), and
whose ``metadata.k`` is the number of passages, since the reference scores every passage
it is given. The output is the passages in order, with their texts. A passage without a
``no_res_prob`` for the model is left unlabeled: it counts in ``m`` with ``u = 0``, as the
reference code (which skips it in the sum but not in the count) scores it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from engine.errors import InputError, Problem
from engine.io.files import read_document

__all__ = ["ReferenceData", "convert_reference", "read_reference", "reference_models"]


@attrs.frozen
class ReferenceData:
    """Reference questions as slotwise raw ``samples`` and ``outputs`` for one ``model``;
    ``stored`` holds the reference's own ``udcg`` value per sample id (None if absent) and
    ``unlabeled`` the ``(sample id, doc id)`` pairs that had no score for the model."""

    model: str
    samples: list[dict[str, Any]]
    outputs: dict[str, Any]
    stored: dict[str, float | None]
    unlabeled: list[tuple[str, str]] = attrs.field(factory=list)


def reference_models(items: Sequence[Any]) -> list[str]:
    """The model names that appear in any passage's ``models_info``, in order of appearance."""
    models: dict[str, None] = {}
    for item in items:
        passages = item.get("passages") if isinstance(item, Mapping) else None
        for passage in passages if isinstance(passages, list) else ():
            info = passage.get("models_info") if isinstance(passage, Mapping) else None
            if isinstance(info, Mapping):
                models.update(dict.fromkeys(map(str, info)))
    return list(models)


def read_reference(path: str | Path, model: str | None = None) -> ReferenceData:
    """Read a reference JSON file and convert it; see :func:`convert_reference`."""
    return convert_reference(read_document(Path(path)), model=model, source=str(path))


def convert_reference(
    items: Any, model: str | None = None, *, source: str | None = None
) -> ReferenceData:
    """Convert parsed reference data for ``model`` (default: the first model found).

    Raises :class:`~engine.InputError` listing every malformed question and passage.
    """
    if not isinstance(items, list):
        raise InputError(
            [Problem("the reference format is a JSON list of questions", source=source)],
            summary="invalid UDCG reference file",
        )
    models = reference_models(items)
    if model is None:
        if not models:
            raise InputError(
                [Problem("no passage carries models_info, so there is no model", source=source)],
                summary="invalid UDCG reference file",
            )
        model = models[0]
    elif model not in models:
        raise InputError(
            [
                Problem(
                    f"model {model!r} not found; the file has: {', '.join(models) or 'none'}",
                    source=source,
                )
            ],
            summary="invalid UDCG reference file",
        )
    problems: list[Problem] = []
    data = ReferenceData(model=model, samples=[], outputs={}, stored={})
    for index, item in enumerate(items):
        _convert_item(item, index, model, source, data, problems)
    if problems:
        raise InputError(problems, summary="invalid UDCG reference file")
    return data


def _convert_item(
    item: Any,
    index: int,
    model: str,
    source: str | None,
    data: ReferenceData,
    problems: list[Problem],
) -> None:
    def problem(message: str, pointer: str = "") -> None:
        problems.append(
            Problem(message, sample_id=sample_id, pointer=f"/{index}{pointer}", source=source)
        )

    sample_id = None
    if not isinstance(item, Mapping):
        problem("a question is an object {example_id, question, passages}")
        return
    raw_id = item.get("example_id")
    if not isinstance(raw_id, str | int) or isinstance(raw_id, bool) or raw_id == "":
        problem("example_id must be a non-empty string or an integer", "/example_id")
        return
    sample_id = str(raw_id)
    if sample_id in data.stored:
        problem("duplicate example_id", "/example_id")
        return
    passages = item.get("passages")
    if not isinstance(passages, list):
        problem("passages must be a list", "/passages")
        return
    utility: dict[str, Any] = {}
    retrieved: list[dict[str, Any]] = []
    for position, passage in enumerate(passages):
        where = f"/passages/{position}"
        if not isinstance(passage, Mapping) or not isinstance(passage.get("doc_id"), str | int):
            problem("a passage is an object with a doc_id", where)
            continue
        doc_id = str(passage["doc_id"])
        if any(r["id"] == doc_id for r in retrieved):
            problem(f"doc_id {doc_id!r} appears twice in the question", where + "/doc_id")
            continue
        entry: dict[str, Any] = {"id": doc_id}
        if isinstance(passage.get("text"), str):
            entry["text"] = passage["text"]
        retrieved.append(entry)
        info = passage.get("models_info")
        scores = info.get(model) if isinstance(info, Mapping) else None
        p = scores.get("no_res_prob") if isinstance(scores, Mapping) else None
        if p is None:
            data.unlabeled.append((sample_id, doc_id))
            continue
        relevant = passage.get("is_relevant", False)
        if not isinstance(relevant, bool):
            problem("is_relevant must be true or false", where + "/is_relevant")
            continue
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
            problem(
                f"no_res_prob must be a probability in [0, 1], got {p!r}",
                f"{where}/models_info/{model}/no_res_prob",
            )
            continue
        utility[doc_id] = {"relevant": relevant, "p_no_response": p}
    sample: dict[str, Any] = {
        "id": sample_id,
        "input": {"question": item.get("question")},
        "expected_output": {"utility": utility},
    }
    if retrieved:
        sample["metadata"] = {"k": len(retrieved)}
    data.samples.append(sample)
    data.outputs[sample_id] = {"retrieved": retrieved}
    stored = item.get("udcg")
    value = stored.get(model) if isinstance(stored, Mapping) else None
    data.stored[sample_id] = float(value) if isinstance(value, int | float) else None
