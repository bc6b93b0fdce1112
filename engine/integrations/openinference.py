"""Hops read from traces (docs/agents.md): OpenTelemetry spans as the OpenInference
semantic conventions write them (Arize Phoenix; the LangChain and LlamaIndex
instrumentors) become outputs with hops.

Every span whose ``openinference.span.kind`` is ``RETRIEVER`` is a hop: its query from
``input.value``, its ranked ids and scores from ``retrieval.documents.<i>.document.id``
and ``.score`` (an instrumentor that writes no ``document.id``, as LangChain's: the
``id_key`` entry of ``document.metadata``). A trace's retriever spans, ordered by start time, are one sample's
hops; the sample is named by ``sample_of`` (a trace's spans -> sample id), by default
the trace id as 32 hex digits. A retrieved document without an id is an error naming
its span, never dropped.

:func:`traced` makes an agent a system whose output is the hops its own run's retriever
spans record, read the same way.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from engine.errors import InputError, Problem

__all__ = ["RETRIEVER", "outputs_from_spans", "traced"]

#: The span kind of a retrieval (``openinference.span.kind``).
RETRIEVER = "RETRIEVER"
_KIND = "openinference.span.kind"
_QUERY = "input.value"
_DOCUMENT = re.compile(r"retrieval\.documents\.(\d+)\.document\.(id|score|content|metadata)$")


def _trace_id(span: Any) -> str:
    return format(span.context.trace_id, "032x")


def outputs_from_spans(
    spans: Iterable[Any],
    sample_of: Callable[[Sequence[Any]], str] | None = None,
    id_key: str = "id",
) -> dict[str, Any]:
    """``{sample_id: {"hops": [...]}}`` from finished spans (``ReadableSpan``, e.g. an
    ``InMemorySpanExporter``'s ``get_finished_spans()``), for ``Dataset.evaluate``.
    Traces without a retriever span give no output."""
    traces: dict[str, list[Any]] = {}
    for span in spans:
        traces.setdefault(_trace_id(span), []).append(span)
    outputs: dict[str, Any] = {}
    problems: list[Problem] = []
    for trace, members in traces.items():
        retrievals = sorted(
            (s for s in members if (s.attributes or {}).get(_KIND) == RETRIEVER),
            key=lambda s: (s.start_time or 0, s.context.span_id),
        )
        if not retrievals:
            continue
        sample = str(sample_of(members)) if sample_of is not None else trace
        hops = []
        for span in retrievals:
            hop, found = _hop(span, sample, id_key)
            hops.append(hop)
            problems.extend(found)
        if sample in outputs:
            problems.append(Problem(f"two traces name this sample (trace {trace})", sample))
        outputs[sample] = {"hops": hops}
    if problems:
        raise InputError(problems, summary="unreadable retriever spans")
    return outputs


def _hop(span: Any, sample: str, id_key: str) -> tuple[dict[str, Any], list[Problem]]:
    """One retriever span as a hop, and what is wrong with it."""
    attributes: Mapping[str, Any] = span.attributes or {}
    documents: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        match = _DOCUMENT.match(key)
        if match:
            documents.setdefault(int(match[1]), {})[match[2]] = value
    items, problems = [], []
    for index in sorted(documents):
        found = documents[index]
        if found.get("id") in (None, "") and isinstance(found.get("metadata"), str):
            with contextlib.suppress(ValueError, AttributeError):
                found["id"] = json.loads(found["metadata"]).get(id_key)
        if found.get("id") in (None, ""):
            where = f"span {span.name!r} ({format(span.context.span_id, '016x')})"
            message = (
                f"{where}: retrieval.documents.{index} has no document.id "
                f"(nor a {id_key!r} in its document.metadata)"
            )
            problems.append(Problem(message, sample))
            continue
        item: dict[str, Any] = {"id": str(found["id"])}
        if isinstance(found.get("score"), int | float) and not isinstance(found["score"], bool):
            item["score"] = float(found["score"])
        if isinstance(found.get("content"), str):
            item["text"] = found["content"]
        items.append(item)
    hop: dict[str, Any] = {"retrieved": items}
    if isinstance(attributes.get(_QUERY), str):
        hop["query"] = attributes[_QUERY]
    return hop, problems


def traced(
    call: Callable[[Any], Any], tracer_provider: Any, id_key: str = "id"
) -> Callable[[Any], dict[str, Any]]:
    """A system that runs ``call(query)`` (e.g. ``lambda q: agent.invoke(...)``) in a
    span of its own, a trace per sample, and returns the hops its retriever spans record
    (:func:`outputs_from_spans`; no retriever span: an empty final context). The spans
    come from the instrumentors of ``tracer_provider`` (an ``opentelemetry-sdk``
    ``TracerProvider``), to which it adds a span processor; calls may run in threads."""
    from opentelemetry.sdk.trace import SpanProcessor

    class Traces(SpanProcessor):  # type: ignore[misc]
        """Finished spans by trace, each trace handed out once."""

        def __init__(self) -> None:
            self.spans: dict[int, list[Any]] = {}
            self.lock = threading.Lock()

        def on_end(self, span: Any) -> None:
            with self.lock:
                self.spans.setdefault(span.context.trace_id, []).append(span)

        def pop(self, trace: int) -> list[Any]:
            with self.lock:
                return self.spans.pop(trace, [])

    traces = Traces()
    tracer_provider.add_span_processor(traces)
    tracer = tracer_provider.get_tracer("slotwise")

    def system(query: Any) -> dict[str, Any]:
        with tracer.start_as_current_span("slotwise.sample") as root:
            call(query)
        spans = traces.pop(root.get_span_context().trace_id)
        found = outputs_from_spans(spans, sample_of=lambda _: "sample", id_key=id_key)
        return found.get("sample", {"retrieved": []})  # type: ignore[no-any-return]

    return system
