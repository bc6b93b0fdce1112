"""A conformance kit for adapter plugins (entry-point group ``slotwise.systems``), in the
spirit of ``keyring.testing``: a test module subclasses :class:`AdapterConformance`,
names its adapter and builds one of its framework's retrievers, and pytest runs the
whole contract against them::

    from engine.integrations.conformance import AdapterConformance

    class TestMyAdapter(AdapterConformance):
        adapter = MyAdapter()
        query = "refund window"  # a query the retriever finds documents for

        def system(self):
            return MyRetriever(corpus)

        def document_without_id(self):  # optional: one of its documents with no id
            return MyDocument(text="no id")

The checks: the adapter satisfies :class:`~engine.evaluation.systems.SystemAdapter`; its
entry point (once installed) loads it under its name; it recognises the retriever and
nothing else (no string, list, mapping, function or plain object), and claims no plain
output item as a document; ``check`` passes the retriever; ``call`` returns a list of
its documents, each read as ``{"id", "text", "score"}`` with a string or integer id, a
string text and a float score where present, which validate as a slotwise output;
``acall`` returns the same documents; a document without an id is a ``DocumentIdError``
that names ``id_key``; and a run through the engine gets the same ids. It needs no
pytest to import; a check it cannot make raises ``unittest.SkipTest``.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import unittest
from typing import Any, ClassVar

from engine.evaluation.api import Engine
from engine.evaluation.systems import GROUP, DocumentIdError, SystemRegistry, check_adapter
from engine.io.documents import parse_outputs

__all__ = ["AdapterConformance"]

#: Things no adapter may take for its framework's retrievers or documents.
NOT_SYSTEMS: tuple[Any, ...] = ("a query", ["d1", "d2"], {"retrieved": ["d1"]}, len, object(), 3)


class AdapterConformance:
    """The contract of an adapter plugin; subclass it (see the module docstring)."""

    adapter: ClassVar[Any]
    query: ClassVar[str] = "what is the refund window?"

    def system(self) -> Any:
        """A retriever of the adapter's framework that finds documents for :attr:`query`."""
        raise NotImplementedError("return one of your framework's retrievers")

    def document_without_id(self) -> Any:
        """One of the framework's documents with no id (None: the framework has none)."""
        return None

    def _documents(self) -> list[Any]:
        found = self.adapter.call(self.system(), self.query)
        assert isinstance(found, list | tuple), f"call() returned {type(found).__name__}"
        if not found:
            raise unittest.SkipTest(f"the retriever found nothing for {self.query!r}")
        return list(found)

    def test_is_an_adapter(self) -> None:
        """It has every method of the protocol, an async acall and a name."""
        assert check_adapter(self.adapter) == []

    def test_entry_point(self) -> None:
        """Installed, its entry point of ``slotwise.systems`` loads it under its name."""
        found = [
            ep
            for ep in importlib.metadata.entry_points(group=GROUP)
            if ep.name == self.adapter.name
        ]
        if not found:
            raise unittest.SkipTest(f"no {GROUP} entry point named {self.adapter.name!r} installed")
        assert len(found) == 1, f"{len(found)} entry points claim {self.adapter.name!r}"
        assert found[0].load() is type(self.adapter)

    def test_recognises_its_retriever(self) -> None:
        """It recognises the retriever, and ``check`` lets it through."""
        system = self.system()
        assert self.adapter.recognises(system)
        self.adapter.check(system)

    def test_recognises_nothing_else(self) -> None:
        """Strings, lists, mappings, functions and plain objects are neither its
        retrievers nor its documents."""
        for other in NOT_SYSTEMS:
            assert not self.adapter.recognises(other), f"recognises {other!r}"
            assert not self.adapter.is_document(other), f"takes {other!r} for a document"

    def test_reads_its_documents(self) -> None:
        """``call`` returns the framework's documents, each read as ``{"id", "text",
        "score"}``: an id that is a non-empty str or an int, a str text, a float score."""
        for item in self._documents():
            assert self.adapter.is_document(item), f"{type(item).__name__} is not its document"
            read = self.adapter.document(item, None)
            assert set(read) <= {"id", "text", "score"}, f"unexpected keys: {sorted(read)}"
            assert isinstance(read["id"], str | int) and read["id"] != "", read
            assert not isinstance(read["id"], bool), read
            assert isinstance(read.get("text", ""), str), read
            assert isinstance(read.get("score", 0.0), float), read

    def test_documents_validate_as_an_output(self) -> None:
        """The documents read are a valid slotwise output."""
        read = [self.adapter.document(item, None) for item in self._documents()]
        assert parse_outputs([("q", read, None)])["q"] == read

    def test_acall_returns_the_same(self) -> None:
        """``acall`` finds the same documents as ``call``, in the same order."""
        system = self.system()
        expected = [self.adapter.document(d, None)["id"] for d in self._documents()]
        found = asyncio.run(self.adapter.acall(system, self.query))
        assert [self.adapter.document(d, None)["id"] for d in found] == expected

    def test_a_document_without_an_id_names_id_key(self) -> None:
        """A document without an id is a ``DocumentIdError`` saying ``id_key``."""
        document = self.document_without_id()
        if document is None:
            raise unittest.SkipTest("every document of the framework has an id")
        try:
            self.adapter.document(document, None)
        except DocumentIdError as error:
            assert "id_key" in str(error), str(error)
        else:
            raise AssertionError("a document without an id was read")

    def test_runs_through_the_engine(self) -> None:
        """``collect`` with the adapter registered sends the query and keeps the ids."""
        registry = SystemRegistry(entry_points=list)
        registry.register(self.adapter)
        dataset = Engine(config={}, systems=registry).dataset(
            samples=[{"id": "q", "input": {"question": self.query}}]
        )
        collected = dataset.collect(self.system(), progress=False)
        expected = [self.adapter.document(d, None)["id"] for d in self._documents()]
        assert collected.errors == {}, collected.errors
        assert [item["id"] for item in collected.outputs["q"]] == expected
