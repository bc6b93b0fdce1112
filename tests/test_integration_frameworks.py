"""LangChain, LlamaIndex and Haystack retrievers run as systems through their adapter
plugins: the real packages, in memory over examples/quickstart's corpus (no network).
Each adapter passes the conformance kit; a framework retriever wrapping the quickstart's
BM25 scores exactly as the function does; the query rule, ids and ``id_key``, the
outputs file ``collect`` writes, and framework documents given to ``evaluate``."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no network from the tests

import pytest
from haystack import Document as HaystackDocument
from haystack import Pipeline, component
from haystack.components.joiners import DocumentJoiner
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from langchain_core.documents import Document as LangChainDocument
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.retrievers import BaseRetriever as LangChainRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import Document as LlamaDocument
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.retrievers import BaseRetriever as LlamaRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

import engine
from engine.errors import InputError
from engine.evaluation.systems import SystemRegistry
from engine.integrations.conformance import AdapterConformance
from engine.integrations.haystack import HaystackAdapter
from engine.integrations.langchain import LangChainAdapter
from engine.integrations.llamaindex import LlamaIndexAdapter

pytestmark = pytest.mark.slow  # LangChain, LlamaIndex and Haystack at work

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart"
METRICS = ["retrieval-ndcg-at-k@10", "retrieval-mrr", "pct-proc-at-k"]


def _quickstart_systems() -> Any:
    spec = importlib.util.spec_from_file_location("quickstart_systems", QUICKSTART / "systems.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SYSTEMS = _quickstart_systems()
CORPUS = SYSTEMS.load_corpus()


def hits(query: str) -> list[dict[str, Any]]:
    """The quickstart BM25's top 10 for a query: ``{"id", "text", "score"}`` items."""
    return SYSTEMS.bm25(query)["retrieved"]  # type: ignore[no-any-return]


class QuickstartLangChain(LangChainRetriever):
    """A LangChain retriever over the quickstart's BM25, its documents with ids."""

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[LangChainDocument]:
        return [LangChainDocument(id=h["id"], page_content=h["text"]) for h in hits(query)]


class QuickstartLlama(LlamaRetriever):
    """A LlamaIndex retriever over the quickstart's BM25, with its scores."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=TextNode(id_=h["id"], text=h["text"]), score=h["score"])
            for h in hits(query_bundle.query_str)
        ]


@component
class QuickstartHaystack:
    """A Haystack component over the quickstart's BM25."""

    @component.output_types(documents=list[HaystackDocument])
    def run(self, query: str) -> dict[str, Any]:
        found = [
            HaystackDocument(id=h["id"], content=h["text"], score=h["score"]) for h in hits(query)
        ]
        return {"documents": found}


def haystack_store() -> InMemoryDocumentStore:
    store = InMemoryDocumentStore()
    store.write_documents([HaystackDocument(id=i, content=text) for i, text in CORPUS])
    return store


@pytest.fixture(scope="module")
def evaluation() -> engine.Evaluation:
    return (
        engine.Engine(config=QUICKSTART / "slotwise.yaml")
        .dataset("quickstart")
        .with_metrics(METRICS)
    )


@pytest.fixture(scope="module")
def expected(evaluation: engine.Evaluation) -> engine.Results:
    """The quickstart's BM25 function run as it is (its top 10, without its pool)."""
    return evaluation.run(lambda value: hits(value["question"]), progress=False)


def same_values(found: engine.Results, expected: engine.Results) -> None:
    for label in METRICS:
        assert found.values(label).tobytes() == expected.values(label).tobytes(), label


# -- the conformance kit, on each adapter and the real package -----------------------------


class TestLangChainConformance(AdapterConformance):
    adapter = LangChainAdapter()
    query = "refund window for a thermostat"

    def system(self) -> Any:
        return QuickstartLangChain()

    def document_without_id(self) -> Any:
        return LangChainDocument(page_content="no id", metadata={"source": "faq"})


class TestLlamaIndexConformance(AdapterConformance):
    adapter = LlamaIndexAdapter()
    query = "refund window for a thermostat"

    def system(self) -> Any:
        return QuickstartLlama()


class TestHaystackConformance(AdapterConformance):
    adapter = HaystackAdapter()
    query = "refund window for a thermostat"

    def system(self) -> Any:
        return InMemoryBM25Retriever(haystack_store(), top_k=10)


# -- the same numbers as the function they wrap -------------------------------------------


class TestSameNumbers:
    @pytest.mark.parametrize(
        "make",
        [QuickstartLangChain, QuickstartLlama, QuickstartHaystack],
        ids=["langchain", "llamaindex", "haystack"],
    )
    def test_run_and_arun_equal_the_function(self, evaluation, expected, make):
        """A retriever of each framework wrapping the quickstart's BM25 gives its values,
        bit for bit, from run (threads) and from arun (ainvoke, aretrieve, run_async)."""
        same_values(evaluation.run(make(), progress=False), expected)
        same_values(asyncio.run(evaluation.arun(make(), progress=False)), expected)

    def test_haystack_pipeline_as_its_retriever(self, evaluation):
        """A Haystack pipeline gets the query in its retriever's open ``query`` input and
        scores as the retriever alone; both equal the documents Haystack returns when
        called by hand, scored as ids."""
        retriever = InMemoryBM25Retriever(haystack_store(), top_k=10)
        pipeline = Pipeline()
        pipeline.add_component("retriever", InMemoryBM25Retriever(haystack_store(), top_k=10))
        by_hand = {
            s.id: [d.id for d in retriever.run(query=s.input["question"])["documents"]]
            for s in evaluation.dataset.samples
        }
        expected = evaluation.evaluate(by_hand)
        same_values(evaluation.run(retriever, progress=False), expected)
        same_values(evaluation.run(pipeline, progress=False), expected)
        same_values(asyncio.run(evaluation.arun(pipeline, progress=False)), expected)

    def test_hybrid_pipeline_gets_the_query_in_every_open_input(self, evaluation):
        """Two retrievers joined: each gets the query, the joiner's list is the output."""
        pipeline = Pipeline()
        pipeline.add_component("bm25", InMemoryBM25Retriever(haystack_store(), top_k=5))
        pipeline.add_component("more", InMemoryBM25Retriever(haystack_store(), top_k=10))
        pipeline.add_component("joiner", DocumentJoiner(join_mode="reciprocal_rank_fusion"))
        pipeline.connect("bm25", "joiner")
        pipeline.connect("more", "joiner")
        collected = evaluation.collect(pipeline, progress=False)
        question = evaluation.dataset.samples[0].input["question"]
        joined = pipeline.run({"bm25": {"query": question}, "more": {"query": question}})
        assert [i["id"] for i in collected.outputs["q-01"]] == [
            d.id for d in joined["joiner"]["documents"]
        ]

    def test_langchain_vector_store_with_id_key(self, evaluation):
        """A vector store makes up its own ids: ``id_key`` reads the corpus id from the
        metadata, and without it a warning says that no retrieved id is labelled."""
        store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
        store.add_documents(
            [LangChainDocument(page_content=t, metadata={"doc_id": i}) for i, t in CORPUS]
        )
        retriever = store.as_retriever(search_kwargs={"k": 10})
        by_hand = {
            s.id: [d.metadata["doc_id"] for d in retriever.invoke(s.input["question"])]
            for s in evaluation.dataset.samples
        }
        same_values(
            evaluation.run(retriever, id_key="doc_id", progress=False), evaluation.evaluate(by_hand)
        )

    def test_made_up_ids_are_warned_about(self, evaluation, caplog):
        """Without ``id_key`` the store's own ids match no label: a warning says so."""
        store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
        store.add_documents([LangChainDocument(page_content=t) for _, t in CORPUS])
        with caplog.at_level(logging.WARNING, logger="slotwise"):
            evaluation.run(store.as_retriever(), progress=False)
        assert any("outputs.none_labelled" in r.getMessage() for r in caplog.records)

    def test_llamaindex_split_nodes_with_id_key(self, evaluation):
        """Nodes a splitter made carry random ids and their document's id in metadata."""
        documents = [LlamaDocument(text=t, metadata={"doc_id": i}) for i, t in CORPUS]
        nodes = SentenceSplitter(chunk_size=512).get_nodes_from_documents(documents)
        index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
        retriever = index.as_retriever(similarity_top_k=5)
        by_hand = {
            s.id: [n.node.metadata["doc_id"] for n in retriever.retrieve(s.input["question"])]
            for s in evaluation.dataset.samples
        }
        found = evaluation.run(retriever, id_key="doc_id", progress=False)
        same_values(found, evaluation.evaluate(by_hand))


# -- the query rule ------------------------------------------------------------------------


class Recorder(LangChainRetriever):
    """A LangChain retriever that keeps the queries it was sent."""

    seen: list[Any]

    def _get_relevant_documents(self, query: Any, *, run_manager: Any) -> list[LangChainDocument]:
        self.seen.append(query)
        return [LangChainDocument(id="d1", page_content="text")]


QUERY_SAMPLES = [
    {"id": "a", "input": "refund window", "expected_output": ["d1"]},
    {
        "id": "b",
        "input": {"question": "shipping time", "lang": "en"},
        "expected_output": ["d1"],
    },
]


class TestQueryRule:
    def test_string_input_or_its_question(self, eng):
        """A string input is the query; a mapping's ``question`` is."""
        recorder = Recorder(seen=[])
        eng.dataset(samples=QUERY_SAMPLES).collect(recorder, progress=False, concurrency=1)
        assert recorder.seen == ["refund window", "shipping time"]

    @pytest.mark.parametrize(
        ("query", "sent"),
        [
            ("lang", ["en"]),
            (lambda value: f"[{value['lang']}] {value['question']}", ["[en] shipping time"]),
        ],
        ids=["field", "function"],
    )
    def test_query_overrides(self, eng, query, sent):
        """``query=`` names another field, or is a function of the input."""
        recorder = Recorder(seen=[])
        dataset = eng.dataset(samples=QUERY_SAMPLES[1:])
        dataset.collect(recorder, query=query, progress=False)
        assert recorder.seen == sent

    def test_plain_function_gets_the_input_unless_query_is_given(self, eng):
        """A plain function gets the whole input, as before; with ``query=``, the query."""
        dataset = eng.dataset(samples=QUERY_SAMPLES[1:])
        seen: list[Any] = []
        dataset.collect(lambda value: seen.append(value) or ["d1"], progress=False)
        dataset.collect(
            lambda value: seen.append(value) or ["d1"], query="question", progress=False
        )
        assert seen == [{"question": "shipping time", "lang": "en"}, "shipping time"]

    def test_no_query_stops_before_any_call(self, eng):
        """When no input gives a query, the run stops before calling the retriever, and
        the error says the rule and ``query=``."""
        recorder = Recorder(seen=[])
        dataset = eng.dataset(
            samples=[{"id": "a", "input": {"text": "x"}, "expected_output": ["d1"]}]
        )
        with pytest.raises(InputError, match=r"input\['question'\].*query="):
            dataset.collect(recorder, progress=False)
        assert recorder.seen == []

    def test_a_sample_without_a_query_is_an_error_row(self, eng):
        """Among samples that give one, a sample without a query is an error row."""
        samples = [*QUERY_SAMPLES, {"id": "c", "input": {"text": "x"}, "expected_output": ["d1"]}]
        results = (
            eng.dataset(samples=samples)
            .with_metrics(["retrieval-mrr"])
            .run(Recorder(seen=[]), progress=False)
        )
        assert results.values("retrieval-mrr").tolist()[:2] == [1.0, 1.0]
        assert results.diagnostics.errors["c"].startswith("QueryError: no query in the input")


# -- documents and ids ---------------------------------------------------------------------


class NoIds(LangChainRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[LangChainDocument]:
        return [
            LangChainDocument(page_content=h["text"], metadata={"doc_id": h["id"]})
            for h in hits(query)
        ]


class TestDocuments:
    def test_documents_without_ids_name_id_key(self, evaluation):
        """LangChain documents without ids: one InputError naming the item and id_key."""
        with pytest.raises(InputError) as caught:
            evaluation.run(NoIds(), progress=False)
        message = str(caught.value)
        assert "/actual_output/retrieved/0" in message and "id_key" in message
        assert "'doc_id'" in message  # the metadata keys it has

    def test_id_key_reads_the_metadata(self, evaluation, expected):
        same_values(evaluation.run(NoIds(), id_key="doc_id", progress=False), expected)

    def test_id_key_missing_from_the_metadata(self, evaluation):
        with pytest.raises(InputError, match=r"id_key='corpus_id' names no metadata key"):
            evaluation.run(NoIds(), id_key="corpus_id", progress=False)

    def test_plain_function_and_evaluate_take_framework_documents(self, evaluation, expected):
        """What a plain function returns, or evaluate is given, is read the same way:
        LangChain, LlamaIndex and Haystack documents, ids from ``id_key`` if named."""
        systems = {
            "langchain": lambda q: QuickstartLangChain().invoke(q["question"]),
            "llamaindex": lambda q: QuickstartLlama().retrieve(q["question"]),
            "haystack": lambda q: QuickstartHaystack().run(q["question"])["documents"],
        }
        for system in systems.values():
            same_values(evaluation.run(system, progress=False), expected)
            outputs = {s.id: system(s.input) for s in evaluation.dataset.samples}
            same_values(evaluation.evaluate(outputs), expected)
        outputs = {s.id: NoIds().invoke(s.input["question"]) for s in evaluation.dataset.samples}
        same_values(evaluation.evaluate(outputs, id_key="doc_id"), expected)
        with pytest.raises(InputError, match="id_key"):
            evaluation.evaluate(outputs)

    def test_documents_keep_text_and_score(self, evaluation):
        """Items keep the document's text, and its score where the framework has one."""
        collected = evaluation.collect(QuickstartLlama(), progress=False)
        first = hits(evaluation.dataset.samples[0].input["question"])[0]
        assert collected.outputs["q-01"][0] == first
        langchain = evaluation.collect(QuickstartLangChain(), progress=False).outputs["q-01"][0]
        assert langchain == {"id": first["id"], "text": first["text"]}

    def test_a_runnable_chain(self, evaluation, expected):
        """Any LangChain runnable is a system: a chain ending in the documents."""
        chain = RunnableLambda(lambda q: q.strip()) | QuickstartLangChain()
        same_values(evaluation.run(chain, progress=False), expected)

    def test_haystack_outputs_with_no_documents_are_error_rows(self, eng):
        """A Haystack component whose outputs hold no documents: error rows saying so."""

        @component
        class Replies:
            @component.output_types(replies=list[str])
            def run(self, query: str) -> dict[str, Any]:
                return {"replies": [query]}

        results = (
            eng.dataset(samples=QUERY_SAMPLES)
            .with_metrics(["retrieval-mrr"])
            .run(Replies(), progress=False)
        )
        assert set(results.diagnostics.errors) == {"a", "b"}
        assert "0 lists of Documents" in results.diagnostics.errors["a"]

    def test_haystack_without_a_text_input_refused_before_any_call(self, eng):
        @component
        class Numbers:
            @component.output_types(documents=list[HaystackDocument])
            def run(self, top_k: int) -> dict[str, Any]:
                raise AssertionError("called")

        with pytest.raises(TypeError, match=r"no mandatory text input.*top_k"):
            eng.dataset(samples=QUERY_SAMPLES).collect(Numbers(), progress=False)


# -- collect, the outputs file, and the core without frameworks ---------------------------


class TestCollect:
    def test_written_outputs_rescore_as_the_run(self, evaluation, expected, tmp_path):
        """collect writes an outputs file with texts (JSON or JSONL) that validates,
        and scores as the run does, from Python and from the CLI."""
        collected = evaluation.collect(QuickstartHaystack(), progress=False)
        assert (len(collected), collected.errors) == (46, {})
        for name in ("outputs.json", "outputs.jsonl"):
            path = collected.write(tmp_path / name)
            same_values(evaluation.evaluate(path), expected)
        document = json.loads((tmp_path / "outputs.json").read_text())
        assert (
            document["q-01"][0]["text"]
            == hits(evaluation.dataset.samples[0].input["question"])[0]["text"]
        )
        done = subprocess.run(
            [sys.executable, "-m", "engine.cli", "validate", str(tmp_path / "outputs.json")],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        same_values(evaluation.evaluate(collected), expected)

    def test_core_imports_no_framework(self):
        """Running a function, and a callable object (which every adapter is asked
        about), imports no framework."""
        script = (
            "import sys, engine\n"
            "class System:\n"
            "    def __call__(self, value):\n"
            "        return ['d']\n"
            "d = engine.Engine(config={}).dataset(samples=[{'id': 'a', 'input': 'x', 'expected_output': ['d']}])\n"
            "d.with_metrics(['retrieval-mrr']).run(lambda q: ['d'], progress=False)\n"
            "d.with_metrics(['retrieval-mrr']).run(System(), progress=False)\n"
            "d.with_metrics(['retrieval-mrr']).evaluate({'a': ['d']})\n"
            "loaded = [m for m in ('langchain_core', 'llama_index', 'haystack') if m in sys.modules]\n"
            "assert not loaded, loaded\n"
            "assert engine.Engine().systems.names() == ['haystack', 'langchain', 'llamaindex']\n"
        )
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


class TestRegistry:
    def test_a_broken_adapter_breaks_nothing_else(self, eng):
        """An adapter that fails to load is left out with its reason, and named when
        nothing else recognises a system."""
        from importlib.metadata import EntryPoint

        group = "slotwise.systems"
        registry = SystemRegistry(
            entry_points=lambda: [
                EntryPoint("langchain", "engine.integrations.langchain:LangChainAdapter", group),
                EntryPoint("broken", "no_such_module:Adapter", group),
            ]
        )
        assert [a.name for a in registry.adapters()] == ["langchain"]
        assert "ModuleNotFoundError" in registry.broken["broken"]
        dataset = engine.Engine(config={}, systems=registry).dataset(samples=QUERY_SAMPLES)
        assert dataset.collect(QuickstartLangChain(), progress=False).errors == {}
        with pytest.raises(TypeError, match=r"no adapter recognises it.*broken left out"):
            dataset.collect(object(), progress=False)

    def test_a_name_claimed_twice_is_left_out(self):
        from importlib.metadata import EntryPoint

        group = "slotwise.systems"
        registry = SystemRegistry(
            entry_points=lambda: [
                EntryPoint("langchain", "engine.integrations.langchain:LangChainAdapter", group),
                EntryPoint("langchain", "engine.integrations.haystack:HaystackAdapter", group),
            ]
        )
        assert registry.adapters() == []
        assert "claimed by several plugins" in registry.broken["langchain"]

    def test_not_an_adapter_is_refused(self):
        with pytest.raises(TypeError, match="no method recognises"):
            SystemRegistry(entry_points=list).register(object())  # type: ignore[arg-type]
