"""The JSON Schemas in ``schemas/`` (shipped as ``engine.schema_files``) and validation
against them. Every problem is collected, each with its sample id and JSON pointer."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import Problem

if TYPE_CHECKING:  # imported when a document first needs the schema (the fast paths do not)
    import jsonschema
    import referencing

__all__ = [
    "LONG_FORM",
    "SCHEMA_NAMES",
    "load_schema",
    "pointer",
    "problems",
    "sample_id_of",
    "validator",
]

SCHEMA_NAMES = ("sample", "dataset", "outputs", "results", "config")
_BASE = "https://slotwise.dev/schemas/"


@cache
def _schema_dir() -> Traversable:
    """The installed copy of ``schemas/`` (package ``engine.schema_files``), or the
    source tree's when ``engine`` is imported from a checkout."""
    try:
        return resources.files("engine.schema_files")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "schemas"


def load_schema(name: str) -> dict[str, Any]:
    """The schema ``schemas/<name>.schema.json`` as a dict."""
    text = _schema_dir().joinpath(f"{name}.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def _registry() -> referencing.Registry[Any]:
    import referencing
    import referencing.jsonschema

    resources_ = [
        (
            _BASE + f"{n}.schema.json",
            referencing.jsonschema.DRAFT202012.create_resource(load_schema(n)),
        )
        for n in SCHEMA_NAMES
    ]
    return referencing.Registry().with_resources(resources_)


@cache
def _validator_class() -> Any:
    """Draft 2020-12, with numbers that are finite: NaN and infinities (which Python's json
    accepts) are not JSON numbers."""
    import jsonschema

    draft = jsonschema.Draft202012Validator

    def finite_number(checker: Any, instance: Any) -> bool:
        finite = not (isinstance(instance, float) and not math.isfinite(instance))
        return bool(draft.TYPE_CHECKER.is_type(instance, "number")) and finite

    checker = draft.TYPE_CHECKER.redefine("number", finite_number)
    return jsonschema.validators.extend(draft, type_checker=checker)


@cache
def validator(name: str, definition: str | None = None) -> jsonschema.protocols.Validator:
    """A validator for a schema, or for one of its ``$defs`` (e.g. outputs' ``line``)."""
    schema: dict[str, Any] = load_schema(name)
    if definition is not None:
        schema = {"$ref": f"{_BASE}{name}.schema.json#/$defs/{definition}"}
    return _validator_class()(schema, registry=_registry())  # type: ignore[no-any-return]


def _explain(error: jsonschema.ValidationError) -> tuple[str, Sequence[Any]]:
    """(message, path) for an error; for failed alternatives, the closest branch's."""
    if error.validator in ("anyOf", "oneOf") and error.context:
        error = _closest_branch_error(error.context)
    instance = error.instance
    if isinstance(instance, float) and not math.isfinite(instance):
        return f"must be a finite number, got {instance}", error.absolute_path
    return error.message, error.absolute_path


def _closest_branch_error(
    errors: Sequence[jsonschema.ValidationError],
) -> jsonschema.ValidationError:
    """The most telling error among failed alternatives: skip branches whose type did not
    even match, then prefer the deepest error."""
    matched = [e for e in errors if not (e.validator == "type" and not e.relative_path)]
    if not matched:
        import jsonschema

        return jsonschema.exceptions.best_match(errors) or errors[0]
    return max(matched, key=lambda e: len(e.relative_path))


def pointer(path: Iterable[Any]) -> str:
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts) if parts else "/"


def problems(
    instance: Any,
    name: str,
    *,
    definition: str | None = None,
    sample_id: str | None = None,
    source: str | None = None,
    line: int | None = None,
    prefix: Sequence[Any] = (),
) -> Iterator[Problem]:
    """Every way ``instance`` violates the schema, as :class:`Problem` records."""
    shortcut = _SHORTCUTS.get((name, definition))
    if shortcut is not None and shortcut(instance):
        return
    for error in validator(name, definition).iter_errors(instance):
        message, path = _explain(error)
        yield Problem(
            message=message,
            sample_id=sample_id,
            pointer=pointer([*prefix, *path]),
            source=source,
            line=line,
        )


# -- fast paths -----------------------------------------------------------------------------
# Validating millions of ranked ids through jsonschema is slow. These checks accept only
# shapes that certainly satisfy the schemas (string ids, finite numeric labels); anything
# else goes through the schema, which then finds and words the problem.


def _is_id(value: Any) -> bool:
    return type(value) is str and value != ""


def _is_label(value: Any) -> bool:
    return (type(value) is int) or (type(value) is float and math.isfinite(value))


def _plain_labels(value: Any) -> bool:
    if type(value) is list:
        return _all_ids(value)
    return type(value) is dict and not (LONG_FORM & value.keys()) and _all_labels(value.values())


def _plain_utility(value: Any) -> bool:
    """id -> u in [-1, 1], or -> {relevant: bool, p_no_response: [0, 1]}."""
    if type(value) is not dict:
        return False
    for label in value.values():
        if type(label) is dict:
            p = label.get("p_no_response")
            if label.keys() != {"relevant", "p_no_response"} or type(label["relevant"]) is not bool:
                return False
        else:
            p = (label + 1) / 2 if type(label) in (int, float) else None
        if not (isinstance(p, int | float) and type(p) is not bool and 0 <= p <= 1):
            return False  # the range test also rejects NaN
    return True


def _plain_grades(value: Any) -> bool:
    """id -> integer grade 1..5."""
    return type(value) is dict and all(type(g) is int and 1 <= g <= 5 for g in value.values())


def _plain_claims(value: Any) -> bool:
    """``[{id, text}, ...]`` with non-empty strings and unique ids."""
    return (
        type(value) is list
        and all(
            type(c) is dict and c.keys() == {"id", "text"} and _is_id(c["id"]) and _is_id(c["text"])
            for c in value
        )
        and len({c["id"] for c in value}) == len(value)
    )


_SPAN_KEYS = frozenset({"doc", "start", "end", "text", "grade", "passage"})


def _plain_spans(value: Any) -> bool:
    """``[{doc, start, end, grade, passage?}, ...]`` (offsets) or ``[{doc, text, grade,
    passage?}, ...]`` (quoted text) with plain contents."""
    return type(value) is list and all(map(_plain_span, value))


def _plain_span(span: Any) -> bool:
    if not (
        type(span) is dict
        and span.keys() <= _SPAN_KEYS
        and _is_id(span.get("doc"))
        and _is_label(span.get("grade"))
        and _is_id(span.get("passage", "x"))
    ):
        return False
    if "text" in span:
        return span.keys().isdisjoint(("start", "end")) and _is_id(span["text"])
    start, end = span.get("start"), span.get("end")
    return type(start) is int and type(end) is int and start >= 0 and end >= 1


def _plain_long_form(value: dict[str, Any]) -> bool:
    """The long form ``{relevance?, utility?, grades?, answers?, groups?, reference?,
    claims?, spans?}`` with plain contents."""
    if not value.keys() <= LONG_FORM:
        return False
    answers = value.get("answers", "x")
    groups = value.get("groups", {})
    return (
        _is_id(value.get("reference", "x"))
        and _plain_claims(value.get("claims", []))
        and _plain_spans(value.get("spans", []))
        and ("relevance" not in value or _plain_labels(value["relevance"]))
        and ("utility" not in value or _plain_utility(value["utility"]))
        and ("grades" not in value or _plain_grades(value["grades"]))
        and (
            (type(answers) is str and answers != "")
            or (type(answers) is list and answers != [] and _all_ids(answers))
        )
        and type(groups) is dict
        and all(type(ids) is list and _all_ids(ids) for ids in groups.values())
    )


def _all_labels(values: Iterable[Any]) -> bool:
    """All finite numbers (ints at C speed; floats also checked for finiteness)."""
    types = set(map(type, values))
    if types <= {int}:
        return True
    if types <= {float}:
        return all(map(math.isfinite, values))
    return types <= {int, float} and all(map(_is_label, values))


#: The keys of ``expected_output``'s long form (a short form is a bare label mapping).
LONG_FORM = frozenset(
    {"relevance", "utility", "grades", "answers", "groups", "reference", "claims", "spans"}
)
_SAMPLE_KEYS = frozenset({"id", "input", "expected_output", "metadata"})
_ITEM_KEYS = frozenset({"id", "text", "score"})


def certainly_valid_sample(raw: Any) -> bool:
    """True only if ``raw`` satisfies ``sample.schema.json`` (False means: ask the schema)."""
    if type(raw) is not dict or not raw.keys() <= _SAMPLE_KEYS or not _is_id(raw.get("id")):
        return False
    expected = raw.get("expected_output", [])
    long_form = type(expected) is dict and bool(LONG_FORM & expected.keys())
    if not (_plain_long_form(expected) if long_form else _plain_labels(expected)):
        return False
    metadata = raw.get("metadata", {})
    if type(metadata) is not dict:
        return False
    k = metadata.get("k", 1)
    sources = metadata.get("label_sources", {})
    return (
        type(k) is int
        and k >= 1
        and type(metadata.get("stratum", "")) is str
        and type(sources) is dict
        and _all_ids(list(sources.values()))
    )


def _all_ids(values: list[Any]) -> bool:
    """All non-empty strings (checked at C speed: this runs once per retrieved document)."""
    return set(map(type, values)) <= {str} and "" not in values


def _plain_item(item: Any) -> bool:
    if type(item) is str:
        return item != ""
    return (
        type(item) is dict
        and item.keys() <= _ITEM_KEYS
        and _is_id(item.get("id"))
        and type(item.get("text", "")) is str
        and _is_label(item.get("score", 0))
    )


def _plain_items(items: list[Any]) -> bool:
    """Every item a non-empty string id or a plain ``{id, text?, score?}`` dict: all
    ids, or all dicts, checked in C-level passes over the list."""
    types = set(map(type, items))
    if types <= {str}:
        return "" not in items
    if types != {dict} or not all(map(_ITEM_KEYS.issuperset, items)):
        return all(map(_plain_item, items))
    fields = (("id", None), ("text", ""), ("score", 0))
    ids, texts, scores = (list(map(dict.get, items, repeat(f), repeat(d))) for f, d in fields)
    return _all_ids(ids) and set(map(type, texts)) <= {str} and _all_labels(scores)


def certainly_valid_output(actual: Any) -> bool:
    """True only if ``actual`` satisfies the ``actualOutput`` definition."""
    if type(actual) is list:
        return _plain_items(actual)
    if type(actual) is not dict or type(actual.get("retrieved")) is not list or "hops" in actual:
        return False  # hops: the schema checks them
    lists = (actual.get(key, []) for key in ("pool", "cited"))
    return _plain_items(actual["retrieved"]) and all(
        type(ids) is list and _all_ids(ids) for ids in lists
    )


_SHORTCUTS = {
    ("sample", None): certainly_valid_sample,
    ("outputs", "actualOutput"): certainly_valid_output,
}


def sample_id_of(raw: Any) -> str | None:
    """The id of a raw sample or output line, as a string, if it has a usable one."""
    if isinstance(raw, Mapping):
        value = raw.get("id")
        integral = isinstance(value, float) and value.is_integer()  # as the schema reads it
        if (isinstance(value, str | int) and not isinstance(value, bool)) or integral:
            return str(value)  # a number's text as written (engine.io.grammar)
    return None
