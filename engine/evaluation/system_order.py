"""Do two sets of labels order the systems alike? Each system's mean of a metric under
each set, on each set's own samples, and Kendall's tau-b between the two orders (the
judge-against-people check of ``slotwise annotate --agreement`` and ``compare --ppi``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["means_and_tau"]


def means_and_tau(
    first: Any, second: Any, systems: Mapping[str, Any], metric: str
) -> tuple[dict[str, float], dict[str, float], float | None]:
    """Each system's mean of ``metric`` under the datasets ``first`` and ``second`` (its
    outputs cut to each dataset's samples), and Kendall's tau-b between the two orders
    (None with one system, or where tau is undefined: every mean equal)."""
    from scipy import stats

    from engine.evaluation.api import subset_outputs

    means: list[dict[str, float]] = []
    for dataset in (first, second):
        evaluation = dataset.with_metrics([metric])
        found = {}
        for name, outputs in systems.items():
            results = evaluation.evaluate(subset_outputs(outputs, dataset.ids))
            found[name] = float(results.summary()[results.labels[0]]["mean"])
        means.append(found)
    tau = None
    if len(systems) > 1:
        value = stats.kendalltau(list(means[0].values()), list(means[1].values())).statistic
        tau = None if np.isnan(value) else float(value)
    return means[0], means[1], tau
