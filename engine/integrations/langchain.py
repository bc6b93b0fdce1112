"""LangChain retrievers and runnables as systems (the ``langchain`` adapter of the
``slotwise.systems`` entry-point group; ``pip install 'slotwise[langchain]'``).

A ``Runnable`` (every ``BaseRetriever`` is one, and so is a chain) is called with the
sample's query, ``invoke`` in ``run`` and ``ainvoke`` in ``arun``; it returns LangChain
``Document``s, read as ``{"id": document.id, "text": document.page_content}`` (LangChain
documents carry no score), or the metadata key ``id_key`` as the id. Runnables are called
one query at a time: a retriever's ``batch`` is ``invoke`` on a thread pool, as ``run``'s
own, which adds a timeout per call.
"""

from __future__ import annotations

from typing import Any

from engine.evaluation.systems import document_id, imported

__all__ = ["LangChainAdapter"]


class LangChainAdapter:
    """Runs LangChain runnables (retrievers included) and reads their ``Document``s."""

    name = "langchain"

    def recognises(self, system: Any) -> bool:
        runnables = imported("langchain_core.runnables")
        return runnables is not None and isinstance(system, runnables.Runnable)

    def check(self, system: Any) -> None:
        """Any runnable takes a text."""

    def call(self, system: Any, query: Any) -> Any:
        return system.invoke(query)

    async def acall(self, system: Any, query: Any) -> Any:
        return await system.ainvoke(query)

    def is_document(self, item: Any) -> bool:
        documents = imported("langchain_core.documents")
        return documents is not None and isinstance(item, documents.Document)

    def document(self, item: Any, id_key: str | None) -> dict[str, Any]:
        found = document_id(item.id, item.metadata, id_key, "LangChain Document")
        return {"id": found, "text": item.page_content}
