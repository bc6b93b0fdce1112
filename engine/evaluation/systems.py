"""Systems under test: a plain callable, or a framework's retriever that an adapter plugin
recognises, with the query each sample sends it and the framework's documents it returns
read as ``{"id", "text", "score"}`` items.

Adapters are plugins of the entry-point group ``slotwise.systems``, found as metric
plugins are: listed without importing, loaded on first use, a broken one left out with
its reason (and the others kept), a name claimed twice refused. The LangChain, LlamaIndex
and Haystack adapters ship with slotwise (``engine.integrations``). An adapter imports no
framework: it recognises a framework's objects only once the framework is imported
(:func:`imported`), as it must be for such an object to exist.

The query rule: a framework retriever gets a text, the sample's ``input`` when that is a
string, else ``input["question"]``; ``query=`` overrides it, as a field name of the input
or a function of it (and a plain callable then gets the query too, instead of the whole
input).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import inspect
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

import attrs

from engine.errors import InputError, Problem, SlotwiseError
from engine.evaluation.registry import installed_entry_points
from engine.logs import log

__all__ = [
    "GROUP",
    "DocumentIdError",
    "QueryError",
    "System",
    "SystemAdapter",
    "SystemRegistry",
    "check_adapter",
    "default_query",
    "document_id",
    "imported",
    "is_async",
    "resolve",
]

GROUP = "slotwise.systems"

Query = str | Callable[[Any], Any] | None


class DocumentIdError(SlotwiseError, ValueError):
    """A framework document has no id where slotwise looks for one (its own id, or the
    metadata key ``id_key`` names)."""


class QueryError(SlotwiseError, ValueError):
    """A sample's input gives no query by the query rule (or by ``query=``)."""


@runtime_checkable
class SystemAdapter(Protocol):
    """An adapter plugin: makes a framework's retrievers systems slotwise can run.

    ``recognises(system)`` says whether ``system`` is one of its framework's retrievers
    (without importing the framework: see :func:`imported`); ``check(system)`` raises
    ``TypeError`` saying why it cannot be called with a query, before any call;
    ``call(system, query)`` (and ``acall`` inside an event loop) returns the documents it
    retrieves for a query text, rank 1 first; ``is_document(item)`` recognises one of the
    framework's documents and ``document(item, id_key)`` reads it as ``{"id", "text",
    "score"}`` (text and score where it has them): the id is the metadata key ``id_key``
    when one is named, else the document's own (:func:`document_id`). ``name`` is the
    adapter's entry-point name.
    """

    name: str

    def recognises(self, system: Any) -> bool: ...

    def check(self, system: Any) -> None: ...

    def call(self, system: Any, query: Any) -> Any: ...

    async def acall(self, system: Any, query: Any) -> Any: ...

    def is_document(self, item: Any) -> bool: ...

    def document(self, item: Any, id_key: str | None) -> dict[str, Any]: ...


def check_adapter(adapter: Any) -> list[str]:
    """Why ``adapter`` (an instance) is not a :class:`SystemAdapter` (empty when it is)."""
    reasons = [
        f"it has no method {name}()"
        for name in ("recognises", "check", "call", "acall", "is_document", "document")
        if not callable(getattr(adapter, name, None))
    ]
    if callable(getattr(adapter, "acall", None)) and not inspect.iscoroutinefunction(adapter.acall):
        reasons.append("its acall() is not an async def")
    if not isinstance(getattr(adapter, "name", None), str):
        reasons.append("it has no name")
    return reasons


def imported(module: str) -> ModuleType | None:
    """``module`` when its top-level package is already imported (else None): what an
    adapter checks before ``isinstance``, so that recognising never imports a framework."""
    if module.split(".")[0] not in sys.modules:
        return None
    return importlib.import_module(module)


def document_id(
    own: Any, metadata: Mapping[str, Any] | None, id_key: str | None, kind: str
) -> str | int:
    """A framework document's id: ``metadata[id_key]`` when ``id_key`` is named, else its
    own id (``own``). Neither, or an id that is not a string or an integer, is a
    :class:`DocumentIdError` that says what to do, naming ``id_key``."""
    keys = ", ".join(sorted(map(repr, metadata or {}))) or "none"
    if id_key is None:
        found, where = own, "an id"
        advice = f"give the documents ids, or name the metadata key that holds one: id_key=... (its metadata keys: {keys})"
    else:
        found, where = (metadata or {}).get(id_key), f"metadata[{id_key!r}]"
        advice = f"id_key={id_key!r} names no metadata key of it (its metadata keys: {keys})"
    if found is None or found == "":
        raise DocumentIdError(f"a {kind} without {where}: {advice}")
    if isinstance(found, bool) or not isinstance(found, str | int):
        raise DocumentIdError(
            f"a {kind} whose {where} is {type(found).__name__} {found!r}, not a str or int id"
        )
    return found


def default_query(value: Any) -> str:
    """The query of the documented rule: the input when it is a string, else its
    ``question``."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("question"), str):
        return value["question"]
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    raise QueryError(
        f"no query in the input {shown}: the query is the input when it is a string, else "
        "input['question']; name another field with query='field', or pass query=function"
    )


def _query_function(query: Query) -> Callable[[Any], Any]:
    if query is None:
        return default_query
    if isinstance(query, str):
        field = query

        def read(value: Any) -> Any:
            if not isinstance(value, Mapping) or field not in value:
                keys = ", ".join(map(repr, value)) if isinstance(value, Mapping) else "none"
                raise QueryError(
                    f"query={field!r}: the input has no such field (its fields: {keys})"
                )
            return value[field]

        return read
    if callable(query):
        return query
    raise TypeError(f"query= is a field name of the input or a function of it, not {query!r}")


def is_async(target: Any) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(type(target).__call__)


def _plain(item: Any) -> bool:
    """An item a slotwise output may hold as it is (an id, an ``{"id", ...}`` mapping; a
    number and a numpy scalar are left for validation to judge)."""
    return isinstance(item, str | int | float | Mapping) or type(item).__module__ == "numpy"


@attrs.frozen
class _Entry:
    name: str
    entry_point: importlib.metadata.EntryPoint
    distribution: str | None


class SystemRegistry:
    """Installed adapters (the ``slotwise.systems`` entry points) and in-process ones
    (:meth:`register`). ``entry_points`` replaces discovery, for tests."""

    def __init__(
        self, entry_points: Callable[[], Iterable[importlib.metadata.EntryPoint]] | None = None
    ) -> None:
        self._find = entry_points or (lambda: installed_entry_points(GROUP))
        self._lock = threading.Lock()
        self._installed: list[SystemAdapter] | None = None
        self._local: list[SystemAdapter] = []
        self.broken: dict[str, str] = {}  # name -> why the adapter is left out

    def names(self) -> list[str]:
        """Every installed adapter's name, without importing any."""
        return sorted({ep.name for ep in self._find()})

    def adapters(self) -> list[SystemAdapter]:
        """The installed adapters that load (by name), then the in-process ones."""
        with self._lock:
            if self._installed is None:
                self._installed = self._load()
            return [*self._installed, *self._local]

    def _load(self) -> list[SystemAdapter]:
        entries: dict[str, list[_Entry]] = {}
        for ep in self._find():
            dist = getattr(ep, "dist", None)
            entry = _Entry(ep.name, ep, dist.metadata["Name"] if dist is not None else None)
            if all(e.entry_point.value != ep.value for e in entries.get(ep.name, [])):
                entries.setdefault(ep.name, []).append(entry)
        loaded = []
        for name, claims in sorted(entries.items()):
            if len(claims) > 1:
                owners = "; ".join(
                    f"{c.distribution or 'unknown distribution'} ({c.entry_point.value})"
                    for c in claims
                )
                self._leave_out(name, None, f"the name is claimed by several plugins: {owners}")
                continue
            (entry,) = claims
            try:
                adapter = entry.entry_point.load()()
            except Exception as error:
                self._leave_out(name, entry.distribution, f"{type(error).__name__}: {error}")
                continue
            reasons = check_adapter(adapter)
            if not reasons and adapter.name != name:
                reasons = [f"its name {adapter.name!r} differs from its entry point name"]
            if reasons:
                why = f"{entry.entry_point.value} is not a slotwise adapter: {'; '.join(reasons)}"
                self._leave_out(name, entry.distribution, why)
                continue
            loaded.append(adapter)
        return loaded

    def _leave_out(self, name: str, distribution: str | None, reason: str) -> None:
        owner = f" (distribution {distribution})" if distribution else ""
        self.broken[name] = f"{reason}{owner}"
        log.warning("plugin.load_failed", adapter=name, distribution=distribution, reason=reason)

    def register(self, adapter: SystemAdapter) -> SystemAdapter:
        """Add an in-process adapter (an instance); its name must be new."""
        reasons = check_adapter(adapter)
        if reasons:
            raise TypeError(f"{adapter!r} is not a slotwise adapter: {'; '.join(reasons)}")
        if adapter.name in {a.name for a in self.adapters()}:
            raise ValueError(f"an adapter named {adapter.name!r} is already registered")
        with self._lock:
            self._local.append(adapter)
        return adapter

    def adapter_for(self, system: Any) -> SystemAdapter | None:
        """The adapter that recognises ``system`` (None when none does); two that do are
        an error naming both."""
        found = [a for a in self.adapters() if _recognises(a, system)]
        if len(found) > 1:
            names = ", ".join(a.name for a in found)
            raise TypeError(
                f"{type(system).__name__} is recognised by several adapters ({names}): wrap "
                "it in a function to say how it is called"
            )
        return found[0] if found else None

    def read_documents(self, output: Any, id_key: str | None, sample_id: str | None) -> Any:
        """``output`` with the framework documents in it (in a retrieved list, or a
        mapping's ``retrieved`` and ``pool``) read as ``{"id", "text", "score"}`` items
        (ids alone in a pool); anything else is returned as it is, for validation to
        judge. A document without an id is an :class:`InputError` naming the item."""
        if isinstance(output, Mapping) and isinstance(output.get("hops"), list | tuple):
            hops = [self.read_documents(h, id_key, sample_id) for h in output["hops"]]
            return {
                **self.read_documents({**output, "hops": None}, id_key, sample_id),
                "hops": hops,
            }
        if isinstance(output, Mapping) and "retrieved" in output:
            read = dict(output)
            for name in ("retrieved", "pool"):
                if isinstance(output.get(name), list | tuple):
                    read[name] = self._items(output[name], id_key, sample_id, name)
            if read.get("pool") is not output.get("pool"):
                read["pool"] = [i["id"] if isinstance(i, dict) else i for i in read["pool"]]
            return read
        if isinstance(output, list | tuple):
            return self._items(output, id_key, sample_id, "retrieved")
        return output

    def _items(self, items: Any, id_key: str | None, sample_id: str | None, where: str) -> Any:
        if all(map(_plain, items)):
            return items
        readers: dict[type, SystemAdapter | None] = {}
        read, problems = [], []
        for index, item in enumerate(items):
            kind = type(item)
            if kind not in readers:
                readers[kind] = next((a for a in self.adapters() if a.is_document(item)), None)
            adapter = readers[kind]
            if adapter is None:
                read.append(item)
                continue
            try:
                read.append(adapter.document(item, id_key))
            except DocumentIdError as error:
                pointer = f"/actual_output/{where}/{index}"
                problems.append(Problem(str(error), sample_id=sample_id, pointer=pointer))
        if problems:
            raise InputError(problems, summary="documents without ids")
        return read


def _recognises(adapter: SystemAdapter, system: Any) -> bool:
    """``adapter.recognises(system)``; an adapter that raises is taken not to."""
    try:
        return bool(adapter.recognises(system))
    except Exception as error:
        log.warning(
            "adapter.failed", adapter=adapter.name, reason=f"{type(error).__name__}: {error}"
        )
        return False


@attrs.frozen
class System:
    """A system as a run calls it: ``target`` (a callable, or a framework retriever that
    ``adapter`` recognises), what each sample sends it (:meth:`argument`) and how what it
    returns is read (:meth:`output`)."""

    target: Any
    adapter: SystemAdapter | None
    query: Callable[[Any], Any] | None  # None: a plain callable gets the input as it is
    id_key: str | None
    registry: SystemRegistry

    @property
    def asynchronous(self) -> bool:
        """A plain ``async def`` callable: ``run`` awaits it on an event loop."""
        return self.adapter is None and is_async(self.target)

    @property
    def awaitable(self) -> bool:
        """Whether :meth:`acall` works (an async callable, or an adapter's ``acall``)."""
        return self.adapter is not None or self.asynchronous

    def argument(self, value: Any) -> Any:
        """What a sample whose input is ``value`` sends the system."""
        return value if self.query is None else self.query(value)

    def call(self, argument: Any) -> Any:
        if self.adapter is not None:
            return self.adapter.call(self.target, argument)
        return self.target(argument)

    async def acall(self, argument: Any) -> Any:
        if self.adapter is not None:
            return await self.adapter.acall(self.target, argument)
        return await self.target(argument)

    def output(self, found: Any, sample_id: str) -> Any:
        """What the system returned, its framework documents read (see
        :meth:`SystemRegistry.read_documents`)."""
        return self.registry.read_documents(found, self.id_key, sample_id)


def resolve(
    system: Any, registry: SystemRegistry, *, query: Query = None, id_key: str | None = None
) -> System:
    """``system`` ready to run: an adapter's if one recognises it (checked before any
    call), else a callable; anything else is a ``TypeError`` naming the adapters."""
    plain = inspect.isfunction(system) or inspect.ismethod(system) or inspect.isbuiltin(system)
    plain = plain or isinstance(system, functools.partial)
    adapter = None if plain else registry.adapter_for(system)
    if adapter is not None:
        adapter.check(system)
    elif not callable(system):
        installed = ", ".join(a.name for a in registry.adapters()) or "none"
        broken = "".join(f"; {name} left out: {why}" for name, why in registry.broken.items())
        raise TypeError(
            f"{type(system).__name__} is not callable and no adapter recognises it: pass a "
            "function of the sample's input, or a retriever of a framework an adapter "
            f"knows (adapters: {installed}{broken})"
        )
    chosen = _query_function(query) if adapter is not None or query is not None else None
    return System(system, adapter, chosen, id_key, registry)
