"""The JSON Schemas in ``schemas/`` (shipped as ``engine.schema_files``) and validation
against them. Every problem is collected, each with its sample id and JSON pointer."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import jsonschema
import referencing
import referencing.jsonschema

from engine.errors import Problem

__all__ = ["SCHEMA_NAMES", "load_schema", "pointer", "problems", "sample_id_of", "validator"]

SCHEMA_NAMES = ("sample", "dataset", "outputs", "results", "config")
_BASE = "https://slotwise.dev/schemas/"


@cache
def _schema_dir() -> Traversable:
    """The installed copy of ``schemas/`` (package ``engine.schema_files``), or the
    source tree's when ``engine`` is imported from a checkout."""
    try:
        return resources.files("engine.schema_files")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parent.parent / "schemas"


def load_schema(name: str) -> dict[str, Any]:
    """The schema ``schemas/<name>.schema.json`` as a dict."""
    text = _schema_dir().joinpath(f"{name}.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def _registry() -> referencing.Registry[Any]:
    resources_ = [
        (
            _BASE + f"{n}.schema.json",
            referencing.jsonschema.DRAFT202012.create_resource(load_schema(n)),
        )
        for n in SCHEMA_NAMES
    ]
    return referencing.Registry().with_resources(resources_)


def _is_finite_number(checker: Any, instance: Any) -> bool:
    """JSON numbers are finite: NaN and infinities (which Python's json accepts) are not."""
    is_number = jsonschema.Draft202012Validator.TYPE_CHECKER.is_type(instance, "number")
    return bool(is_number) and not (isinstance(instance, float) and not math.isfinite(instance))


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("number", _is_finite_number),
)


@cache
def validator(name: str, definition: str | None = None) -> jsonschema.protocols.Validator:
    """A validator for a schema, or for one of its ``$defs`` (e.g. outputs' ``line``)."""
    schema: dict[str, Any] = load_schema(name)
    if definition is not None:
        schema = {"$ref": f"{_BASE}{name}.schema.json#/$defs/{definition}"}
    return _Validator(schema, registry=_registry())


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
    for error in validator(name, definition).iter_errors(instance):
        message, path = _explain(error)
        yield Problem(
            message=message,
            sample_id=sample_id,
            pointer=pointer([*prefix, *path]),
            source=source,
            line=line,
        )


def sample_id_of(raw: Any) -> str | None:
    """The id of a raw sample or output line, as a string, if it has a usable one."""
    if isinstance(raw, Mapping):
        value = raw.get("id")
        if isinstance(value, str | int) and not isinstance(value, bool):
            return str(value)
    return None
