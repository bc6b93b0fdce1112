"""Haystack retrievers and pipelines as systems (the ``haystack`` adapter of the
``slotwise.systems`` entry-point group; ``pip install 'slotwise[haystack]'``).

A component (``InMemoryBM25Retriever``, any ``@component``) or a ``Pipeline`` gets the
sample's query in every mandatory text input it leaves open (a pipeline's ``query`` of
its retriever, ``text`` of its text embedder: all of them at once, as a hybrid pipeline
wants), through ``run`` (``run_async`` in ``arun``, where it has one). What it returns
must hold exactly one list of ``Document``s (a pipeline's from its last components); each
is read as ``{"id": document.id, "text": document.content, "score": document.score}``, or
its ``meta`` key ``id_key`` as the id.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from engine.evaluation.calls import in_thread
from engine.evaluation.systems import document_id, imported

__all__ = ["HaystackAdapter"]


class HaystackAdapter:
    """Runs Haystack components and pipelines and reads their ``Document``s."""

    name = "haystack"

    def recognises(self, system: Any) -> bool:
        pipelines = imported("haystack.core.pipeline.base")
        if pipelines is None:
            return False
        return isinstance(system, pipelines.PipelineBase) or hasattr(system, "__haystack_input__")

    def check(self, system: Any) -> None:
        if not _text_inputs(system):
            raise TypeError(
                f"the Haystack {type(system).__name__} has no mandatory text input left open "
                f"for the query (its inputs: {_inputs_shown(system)}): give it one, or wrap "
                "it in a function of the sample's input"
            )

    def call(self, system: Any, query: Any) -> Any:
        return _documents(system.run(**_arguments(system, query)))

    async def acall(self, system: Any, query: Any) -> Any:
        run_async = getattr(system, "run_async", None)
        if inspect.iscoroutinefunction(run_async):
            return _documents(await run_async(**_arguments(system, query)))
        return await in_thread(lambda text: self.call(system, text), query)

    def is_document(self, item: Any) -> bool:
        haystack = imported("haystack")
        return haystack is not None and isinstance(item, haystack.Document)

    def document(self, item: Any, id_key: str | None) -> dict[str, Any]:
        read: dict[str, Any] = {"id": document_id(item.id, item.meta, id_key, "Haystack Document")}
        if item.content is not None:
            read["text"] = item.content
        if item.score is not None:
            read["score"] = float(item.score)
        return read


def _sockets(system: Any) -> dict[str, dict[str, dict[str, Any]]]:
    """Open inputs by component (a component alone: under the name ``""``)."""
    if hasattr(system, "__haystack_input__"):
        sockets = system.__haystack_input__._sockets_dict
        return {
            "": {
                name: {"type": socket.type, "is_mandatory": socket.is_mandatory}
                for name, socket in sockets.items()
            }
        }
    return system.inputs()  # type: ignore[no-any-return]


def _text_inputs(system: Any) -> dict[str, list[str]]:
    """The mandatory ``str`` inputs that get the query, by component."""
    found = {
        component: [
            name for name, spec in inputs.items() if spec["is_mandatory"] and spec["type"] is str
        ]
        for component, inputs in _sockets(system).items()
    }
    return {component: names for component, names in found.items() if names}


def _inputs_shown(system: Any) -> str:
    shown = [
        f"{component}.{name}" if component else name
        for component, inputs in _sockets(system).items()
        for name in inputs
    ]
    return ", ".join(shown) or "none"


def _arguments(system: Any, query: Any) -> dict[str, Any]:
    """``run``'s keyword arguments: the query in every open text input."""
    targets = _text_inputs(system)
    if "" in targets:
        return dict.fromkeys(targets[""], query)
    return {
        "data": {component: dict.fromkeys(names, query) for component, names in targets.items()}
    }


def _documents(outputs: Mapping[str, Any]) -> Any:
    """The one list of ``Document``s in a component's (or a pipeline's) outputs."""
    haystack = imported("haystack")
    assert haystack is not None
    found = {}
    for key, value in outputs.items():
        nested = value.items() if isinstance(value, Mapping) else [("", value)]
        for name, item in nested:
            if isinstance(item, list) and all(isinstance(d, haystack.Document) for d in item):
                found[f"{key}.{name}" if name else key] = item
    if len(found) > 1:  # empty lists of other things: keep the documents
        found = {where: item for where, item in found.items() if where.endswith("documents")}
    if len(found) != 1:
        what = ", ".join(found) or "none"
        raise TypeError(
            f"the Haystack outputs hold {len(found)} lists of Documents ({what}) where slotwise "
            f"takes exactly one; outputs: {', '.join(outputs)}"
        )
    return next(iter(found.values()))
