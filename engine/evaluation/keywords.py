"""The ``name=value, ...`` parameters of a metric spec (``retrieval-ndcg-at-k(gain=exponential)``)
and of an ir_measures name (``nDCG(dcg='exp-log2')``): Python literals, parsed safely."""

from __future__ import annotations

import ast
from typing import Any

from engine.errors import MetricParameterError

__all__ = ["parse_keywords"]


def parse_keywords(text: str, params: str, *, bare_words: bool) -> dict[str, Any]:
    """``params`` (the text between the parentheses of ``text``) as a dict; with
    ``bare_words`` a bare word is a string (``gain=exponential``)."""
    try:
        call = ast.parse(f"f({params})", mode="eval").body
    except SyntaxError as error:
        raise MetricParameterError(
            f"cannot parse the parameters of {text!r}: {error.msg}"
        ) from None
    assert isinstance(call, ast.Call)
    if call.args or any(keyword.arg is None for keyword in call.keywords):
        raise MetricParameterError(f"parameters of {text!r} must be given as name=value")
    return {str(k.arg): _literal(text, k.value, bare_words) for k in call.keywords}


def _literal(text: str, node: ast.expr, bare_words: bool) -> Any:
    if bare_words and isinstance(node, ast.Name):
        return {"True": True, "False": False, "None": None}.get(node.id, node.id)
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise MetricParameterError(
            f"parameter value {ast.unparse(node)!r} in {text!r} is not a literal"
        ) from None
