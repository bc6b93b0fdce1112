"""The utility family: UDCG and its position-aware UDCG_theta (Trappolini et al., arXiv
2510.21440), scored from per-passage utility labels (see docs/metrics.md, docs/utility.md).

``u⁺ = max(u, 0)`` and ``u⁻ = min(u, 0)`` at each rank of ``D_k``; a passage without a
utility label counts as ``u = 0`` (it still fills a slot). An empty context (no output, or
an empty ranking) scores 0.0, as the reference code does.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, ClassVar

import attrs
import numpy as np
import numpy.typing as npt

from engine import Batch, MetricBase, MetricParameterError, bounded_number, optional_k, row_sums

__all__ = ["UDCG", "ThetaParams", "UDCGTheta", "read_theta", "utility_parts"]

FloatArray = npt.NDArray[np.float64]


def utility_parts(batch: Batch, k: int | None) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(u⁺, u⁻, m)``: the positive and negative parts of the utility at each rank of
    ``D_k`` (0 outside it and for unlabeled passages), and ``m = |D_k|`` per sample."""
    in_context = batch.top_k(k)
    utility = np.where(in_context, np.nan_to_num(batch.utilities, nan=0.0), 0.0)
    return (
        np.maximum(utility, 0.0),
        np.minimum(utility, 0.0),
        in_context.sum(axis=1).astype(np.float64),
    )


def _sigmoid(x: FloatArray) -> FloatArray:
    """The logistic function ``1 / (1 + e^-x)``, as the reference code computes it."""
    return 1.0 / (1.0 + np.exp(-x))


class _Utility(MetricBase):
    family: ClassVar[str] = "utility"
    requires: ClassVar[frozenset[str]] = frozenset({"utility"})


@attrs.frozen
class UDCG(_Utility):
    """sigmoid(mean u⁺ + gamma · mean u⁻) over the m passages in the context; 0 when empty."""

    alias: ClassVar[str] = "udcg"
    k: int | None = optional_k()
    gamma: float = attrs.field(default=1 / 3, validator=bounded_number(0, 1), kw_only=True)

    def score(self, batch: Batch) -> FloatArray:
        positive, negative, m = utility_parts(batch, self.k)
        # u⁺ + gamma·u⁻ is u or gamma·u: the row sums match the reference's term by term.
        total = row_sums(positive + self.gamma * negative)
        values = _sigmoid(np.divide(total, m, out=np.zeros_like(total), where=m > 0))
        return np.where(m > 0, values, 0.0)


@attrs.frozen
class ThetaParams:
    """Fitted UDCG_theta weights: ``alpha`` for u⁺ and ``beta`` for u⁻ at ranks 1..k."""

    k: int
    alpha: tuple[float, ...]
    beta: tuple[float, ...]
    provenance: dict[str, Any] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The parameter-file document."""
        return {
            "metric": UDCGTheta.alias,
            "k": self.k,
            "alpha": list(self.alpha),
            "beta": list(self.beta),
            "provenance": dict(self.provenance),
        }


def _weights(document: dict[str, Any], name: str, k: int, path: str) -> tuple[float, ...]:
    values = document.get(name)
    if (
        not isinstance(values, list)
        or len(values) != k
        or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in values
        )
    ):
        raise MetricParameterError(
            f"params_file {path}: {name!r} must be a list of {k} finite numbers (one per rank)"
        )
    return tuple(float(v) for v in values)


def read_theta(path: str | Path) -> ThetaParams:
    """Read and check a UDCG_theta parameter file ``{k, alpha, beta, provenance}``.

    Raises :class:`~engine.MetricParameterError` naming the file and what is wrong.
    """
    source = str(path)
    try:
        document = json.loads(Path(path).read_text("utf-8"))
    except OSError as error:
        raise MetricParameterError(
            f"params_file {source}: cannot read: {error.strerror or error}"
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise MetricParameterError(f"params_file {source}: not a JSON document: {error}") from None
    if not isinstance(document, dict):
        raise MetricParameterError(f"params_file {source}: expected a JSON object")
    k = document.get("k")
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise MetricParameterError(f"params_file {source}: 'k' must be a positive integer")
    provenance = document.get("provenance", {})
    return ThetaParams(
        k=k,
        alpha=_weights(document, "alpha", k, source),
        beta=_weights(document, "beta", k, source),
        provenance=dict(provenance) if isinstance(provenance, dict) else {},
    )


def _theta_file(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str | Path) or not str(value):
        raise MetricParameterError(f"{attribute.name} must be a path, got {value!r}")


@attrs.frozen
class UDCGTheta(_Utility):
    """sigmoid(Σ alpha_i u_i⁺ + Σ beta_i u_i⁻), position weights fitted by slotwise fit."""

    alias: ClassVar[str] = "udcg-theta"
    params_file: str = attrs.field(converter=str, validator=_theta_file)
    k: int | None = optional_k()

    def __attrs_post_init__(self) -> None:
        fitted = read_theta(self.params_file).k
        if self.k is not None and self.k != fitted:
            raise MetricParameterError(
                f"k={self.k} but {self.params_file} was fitted for k={fitted}; "
                f"UDCG_theta needs one fit per k (slotwise fit udcg-theta --k {self.k})"
            )

    def score(self, batch: Batch) -> FloatArray:
        theta = read_theta(self.params_file)
        positive, negative, m = utility_parts(batch, min(self.k or theta.k, theta.k))
        width = min(positive.shape[1], theta.k)
        alpha = np.asarray(theta.alpha[:width])
        beta = np.asarray(theta.beta[:width])
        total = row_sums(positive[:, :width] * alpha + negative[:, :width] * beta)
        return np.where(m > 0, _sigmoid(total), 0.0)
