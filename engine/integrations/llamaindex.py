"""LlamaIndex retrievers as systems (the ``llamaindex`` adapter of the
``slotwise.systems`` entry-point group; ``pip install 'slotwise[llamaindex]'``).

A ``BaseRetriever`` (``index.as_retriever()``, or one of your own) is called with the
sample's query, ``retrieve`` in ``run`` and ``aretrieve`` in ``arun``; each
``NodeWithScore`` it returns is read as ``{"id": node.node_id, "text": its content,
"score": its score}``, or the node's metadata key ``id_key`` as the id: nodes a splitter
made get random ids, and their document's id is in their metadata. A bare node is read
the same way, without a score.
"""

from __future__ import annotations

from typing import Any

from engine.evaluation.systems import document_id, imported

__all__ = ["LlamaIndexAdapter"]


class LlamaIndexAdapter:
    """Runs LlamaIndex retrievers and reads their ``NodeWithScore``s (and nodes)."""

    name = "llamaindex"

    def recognises(self, system: Any) -> bool:
        retrievers = imported("llama_index.core.base.base_retriever")
        return retrievers is not None and isinstance(system, retrievers.BaseRetriever)

    def check(self, system: Any) -> None:
        """Any retriever takes a text."""

    def call(self, system: Any, query: Any) -> Any:
        return system.retrieve(query)

    async def acall(self, system: Any, query: Any) -> Any:
        return await system.aretrieve(query)

    def is_document(self, item: Any) -> bool:
        schema = imported("llama_index.core.schema")
        return schema is not None and isinstance(item, schema.NodeWithScore | schema.BaseNode)

    def document(self, item: Any, id_key: str | None) -> dict[str, Any]:
        schema = imported("llama_index.core.schema")
        assert schema is not None  # is_document said so
        node = item.node if isinstance(item, schema.NodeWithScore) else item
        found = document_id(node.node_id, node.metadata, id_key, "LlamaIndex node")
        read = {"id": found, "text": node.get_content(metadata_mode=schema.MetadataMode.NONE)}
        score = getattr(item, "score", None)
        if score is not None:
            read["score"] = float(score)
        return read
