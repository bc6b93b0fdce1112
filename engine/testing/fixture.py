"""Raw samples and outputs compiled as the engine compiles them, and a small fixture of
them: :func:`make_batch` (the :class:`~engine.Batch` a metric's ``score`` receives, for a
metric's own tests to pin values by hand), ``SAMPLES`` and ``OUTPUTS``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.errors import InputError, Problem
from engine.evaluation.batch import Batch
from engine.evaluation.pipeline import aligned
from engine.io.columns import Columns
from engine.io.config import DEFAULT_K
from engine.io.documents import parse_samples, read_outputs_mapping

__all__ = ["OUTPUTS", "SAMPLES", "joined_columns", "make_batch"]


def make_batch(
    samples: Sequence[Mapping[str, Any]],
    outputs: Mapping[str, Any],
    default_k: int = DEFAULT_K,
) -> Batch:
    """Validate raw samples and ``{sample_id: actual_output}`` as the engine does, and
    compile them into a :class:`~engine.Batch` (a sample without an output has none).

    Raises :class:`~engine.InputError` for invalid input or outputs of unknown samples.
    """
    return Batch.compile(joined_columns(samples, outputs), default_k=default_k)


def joined_columns(samples: Sequence[Mapping[str, Any]], outputs: Mapping[str, Any]) -> Columns:
    """Raw samples validated, with their outputs beside them (what :func:`make_batch`
    compiles); an output of an unknown sample is an :class:`~engine.InputError`."""
    joined, unknown = aligned(
        parse_samples((sample, None) for sample in samples), read_outputs_mapping(outputs)
    )
    if unknown:
        raise InputError(
            [Problem("output for a sample id not in the samples", sample_id=i) for i in unknown],
            summary="outputs do not match the samples",
        )
    return joined


def _item(doc: str, text: str) -> dict[str, Any]:
    return {"id": doc, "text": text}


#: Eight samples that carry relevance (binary and graded, with 0 and negative labels),
#: utility (both forms), answers and groups. Edge cases: ``no-relevant`` has no relevant
#: document, ``cutoff`` sets ``metadata.k = 2``. Treat as read-only.
SAMPLES: tuple[dict[str, Any], ...] = (
    {
        "id": "graded",
        "input": {"question": "How long is the refund window?"},
        "expected_output": {
            "relevance": {"d1": 3, "d2": 1, "d3": 0, "d4": -1, "d7": 2},
            "utility": {"d1": 0.9, "d2": {"relevant": True, "p_no_response": 0.5}, "d4": -0.5},
            "answers": ["30 days", "thirty days"],
            "groups": {"window": ["d1", "d7"], "exceptions": ["d2"]},
        },
        "metadata": {"stratum": "policy"},
    },
    {
        "id": "binary",
        "input": {"question": "What is the capital of France?"},
        "expected_output": {
            "relevance": ["b1", "b2"],
            "utility": {"b1": 1, "b2": {"relevant": False, "p_no_response": 0.2}},
            "answers": "Paris",
            "groups": {"capital": ["b1", "b2"]},
        },
    },
    {
        "id": "duplicates",
        "input": {"question": "Which plan includes SSO?"},
        "expected_output": {
            "relevance": {"c1": 1, "c2": 2},
            "utility": {"c1": 0.4, "c2": 0.8, "c3": -0.2},
            "answers": ["Enterprise"],
            "groups": {"plan": ["c2"], "sso": ["c1", "c2"]},
        },
    },
    {
        "id": "no-relevant",
        "input": {"question": "Who won the 1900 moon landing?"},
        "expected_output": {
            "relevance": {"n1": 0, "n2": -2},
            "utility": {"n1": -1, "n2": {"relevant": False, "p_no_response": 0.9}},
            "answers": ["nobody"],
            "groups": {"none": []},
        },
    },
    {
        "id": "empty-output",
        "input": {"question": "Where is the API key page?"},
        "expected_output": {
            "relevance": {"e1": 1},
            "utility": {"e1": 1},
            "answers": ["Settings"],
            "groups": {"location": ["e1"]},
        },
    },
    {
        "id": "no-output",
        "input": {"question": "What port does the server use?"},
        "expected_output": {
            "relevance": {"m1": 2, "m2": 1},
            "utility": {"m1": 0.7},
            "answers": ["8080"],
            "groups": {"port": ["m1"]},
        },
    },
    {
        "id": "cutoff",
        "input": {"question": "List the supported regions."},
        "expected_output": {
            "relevance": {"k1": 1, "k2": 1, "k3": 1},
            "utility": {"k1": 0.5, "k2": 0.5, "k3": 0.5},
            "answers": ["eu-west"],
            "groups": {"eu": ["k1"], "us": ["k2", "k3"]},
        },
        "metadata": {"k": 2, "stratum": "list"},
    },
    {
        "id": "deep",
        "input": {"question": "What does error E42 mean?"},
        "expected_output": {
            "relevance": {"p7": 2, "p1": 0, "p2": 0},
            "utility": {"p7": 1, "p1": -0.3},
            "answers": ["disk quota"],
            "groups": {"meaning": ["p7"]},
        },
    },
)

#: Outputs for :data:`SAMPLES`: every retrieved item has a text, every output a pool that
#: contains its ranking and cited ids. ``duplicates`` repeats ids in its ranking,
#: ``empty-output`` retrieved nothing, ``no-output`` has no output at all.
OUTPUTS: dict[str, Any] = {
    "graded": {
        "retrieved": [
            _item("d4", "Refunds for gift cards are not possible."),
            _item("d1", "Refunds are accepted within 30 days of purchase."),
            _item("d5", "Our office is closed on public holidays."),
            _item("d2", "Sale items can be refunded with a receipt."),
            _item("d3", "Shipping takes three to five days."),
            _item("d6", "Contact support by email."),
        ],
        "pool": ["d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8"],
        "cited": ["d1", "d2"],
    },
    "binary": {
        "retrieved": [
            _item("b2", "France is a country in Western Europe."),
            _item("b9", "Paris hosted the 2024 Olympic Games."),
            _item("b1", "The capital of France is Paris."),
        ],
        "pool": ["b1", "b2", "b9"],
        "cited": ["b1"],
    },
    "duplicates": {
        "retrieved": [
            _item("c1", "SSO is available on some plans."),
            _item("c1", "SSO is available on some plans."),
            _item("c3", "All plans include email support."),
            _item("c2", "The Enterprise plan includes SSO."),
            _item("c3", "All plans include email support."),
        ],
        "pool": ["c1", "c2", "c3"],
        "cited": ["c2"],
    },
    "no-relevant": {
        "retrieved": [
            _item("n2", "The first crewed moon landing was in 1969."),
            _item("n1", "The 1900 World's Fair was held in Paris."),
            _item("n3", "Balloons were popular in 1900."),
        ],
        "pool": ["n1", "n2", "n3"],
        "cited": [],
    },
    "empty-output": {"retrieved": [], "pool": ["e1"], "cited": []},
    "cutoff": {
        "retrieved": [
            _item("k4", "Regions are listed in the console."),
            _item("k1", "We run in eu-west."),
            _item("k2", "We run in us-east."),
            _item("k3", "We run in us-west."),
        ],
        "pool": ["k1", "k2", "k3", "k4"],
        "cited": ["k1"],
    },
    "deep": {
        "retrieved": [
            _item(f"p{rank}", f"Error E{40 + rank} is documented here.") for rank in range(1, 7)
        ]
        + [
            _item("p7", "E42 means the disk quota is exceeded."),
            _item("p8", "Errors are logged to syslog."),
        ],
        "pool": [f"p{rank}" for rank in range(1, 10)],
        "cited": ["p7"],
    },
}
