"""Hops read from OpenInference traces: a real LangGraph agent, driven by a fake chat
model (no network) that calls a retriever tool twice, traced by the real OpenInference
LangChain instrumentor into the real opentelemetry-sdk's in-memory exporter; the reader
turns the trace into an output with two hops, scored by the agentic metrics."""

from __future__ import annotations

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import engine
from engine.errors import InputError
from engine.integrations.openinference import outputs_from_spans, traced

CORPUS = {
    "kb:acme/history#3": "Acme was founded in 1999 by Ada Byron and Alan Kay.",
    "kb:press/1999#4": "Press release: Acme opens its doors.",
    "kb:acme/board#1": "Acme board members: Ada Byron (chair), Alan Kay.",
    "kb:blog/acme#9": "Ten things about Acme.",
}


class KeywordRetriever(BaseRetriever):
    """Documents sharing a word with the query, most shared words first."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        words = set(query.lower().split())
        scored = [(len(words & set(text.lower().split())), d) for d, text in CORPUS.items()]
        ranked = [d for n, d in sorted(scored, key=lambda x: -x[0]) if n][:2]
        return [Document(page_content=CORPUS[d], metadata={"id": d}) for d in ranked]


RETRIEVER = KeywordRetriever()


@tool
def search(query: str) -> str:
    """Search the knowledge base."""
    return "\n".join(d.page_content for d in RETRIEVER.invoke(query))


def _call(query: str, n: int) -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": "search", "args": {"query": query}, "id": f"call-{n}"}]
    )


class ToolCallingFake(GenericFakeChatModel):
    def bind_tools(self, tools, **kwargs):  # the agent binds its tools; the script is fixed
        return self


@pytest.fixture(scope="module")
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        script = iter(
            [
                _call("acme press", 1),
                _call("acme founded by whom board", 2),
                AIMessage(content="Ada Byron and Alan Kay."),
            ]
        )
        agent = create_react_agent(ToolCallingFake(messages=script), [search])
        agent.invoke({"messages": [("user", "Who founded Acme?")]})
    finally:
        instrumentor.uninstrument()
    return exporter.get_finished_spans()


def test_two_hops_from_the_trace(spans):
    """The agent searched twice: hop 1 'acme press' ranks press#4 (2 words shared:
    acme, press) before history#3 and board#1 (acme; ties in corpus order, cut at 2;
    blog#9 writes 'Acme.' and shares none); hop 2 'acme founded by whom board' ranks
    history#3 (acme, founded, by) before board#1 (acme, board)."""
    outputs = outputs_from_spans(spans, sample_of=lambda _: "who-founded-acme")
    hops = outputs["who-founded-acme"]["hops"]
    assert [h["query"] for h in hops] == ["acme press", "acme founded by whom board"]
    assert [[i["id"] for i in h["retrieved"]] for h in hops] == [
        ["kb:press/1999#4", "kb:acme/history#3"],
        ["kb:acme/history#3", "kb:acme/board#1"],
    ]
    assert hops[0]["retrieved"][0]["text"] == CORPUS["kb:press/1999#4"]


def test_scored_as_hops(spans):
    """Evidence history#3 (first retrieved at hop 1) and board#1 (hop 2): recall at any
    hop 1, first hop (1 + 2) / 2 = 1.5; nDCG@10 at hop 1 sees history#3 at rank 2 only."""
    outputs = outputs_from_spans(spans, sample_of=lambda _: "who-founded-acme")
    dataset = engine.Engine().dataset(
        samples=[
            {"id": "who-founded-acme", "expected_output": ["kb:acme/history#3", "kb:acme/board#1"]}
        ]
    )
    results = dataset.with_metrics(
        ["agentic-evidence-recall", "agentic-first-hop", "retrieval-recall-at-k@10(hop=1)"]
    ).evaluate(outputs)
    assert results.values("agentic-evidence-recall").tolist() == [1.0]
    assert results.values("agentic-first-hop").tolist() == [1.5]
    assert results.values("retrieval-recall-at-k@10(hop=1)").tolist() == [0.5]


def test_trace_id_names_the_sample(spans):
    (trace,) = outputs_from_spans(spans)
    assert trace == format(spans[0].context.trace_id, "032x")


def test_document_without_id_named(spans):
    """A retriever span whose document has no id anywhere is an error naming the span."""
    with pytest.raises(InputError, match=r"retrieval\.documents\.0 has no document\.id"):
        outputs_from_spans(spans, id_key="doc_id")


def test_traced_agent_is_a_system():
    """traced() runs the agent per sample in a trace of its own and returns the hops its
    retriever spans record: the run scores them as the reader's output of the same run."""
    provider = TracerProvider()
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        scripts = {
            "Who founded Acme?": [
                _call("acme press", 1),
                _call("acme founded by whom board", 2),
                AIMessage(content="Ada Byron and Alan Kay."),
            ],
            "Where is Acme's blog?": [AIMessage(content="I don't know.")],  # no retrieval
        }

        def run_agent(question):
            model = ToolCallingFake(messages=iter(scripts[question]))
            agent = create_react_agent(model, [search])
            return agent.invoke({"messages": [("user", question)]})

        dataset = engine.Engine().dataset(
            samples=[
                {
                    "id": "who-founded-acme",
                    "input": "Who founded Acme?",
                    "expected_output": ["kb:acme/history#3", "kb:acme/board#1"],
                },
                {
                    "id": "blog",
                    "input": "Where is Acme's blog?",
                    "expected_output": ["kb:blog/acme#9"],
                },
            ]
        )
        results = dataset.with_metrics(
            ["agentic-first-hop", "agentic-evidence-recall", "retrieval-recall-at-k@10"]
        ).run(traced(run_agent, provider))
    finally:
        instrumentor.uninstrument()
    # who-founded-acme: as test_scored_as_hops; blog: no hop, empty context: recall 0
    assert results.values("agentic-first-hop").tolist()[0] == 1.5
    assert results.values("agentic-evidence-recall").tolist() == [1.0, 0.0]
    assert results.values("retrieval-recall-at-k@10").tolist() == [1.0, 0.0]
