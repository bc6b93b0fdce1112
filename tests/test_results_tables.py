"""Results as tables: ``results.by(key)`` prints a table as ``print(results)`` does (its
means checked against a hand grouping of the per-sample scores), and the sample id has one
name, ``id``, in every table and frame (per_sample, CSV, JSONL, Arrow, Parquet, pandas)."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq

import engine

QUICKSTART = Path(__file__).resolve().parent.parent / "examples" / "quickstart"
METRICS = ["retrieval-ndcg-at-k@10", "retrieval-mrr"]


def _results() -> engine.Results:
    dataset = engine.Engine(config=QUICKSTART / "slotwise.yaml").dataset("quickstart")
    return dataset.with_metrics(METRICS).evaluate(QUICKSTART / "outputs" / "bm25.json")


def test_by_prints_a_table_of_each_strata_means() -> None:
    results = _results()
    breakdown = results.by("stratum")
    text, line = str(breakdown), repr(breakdown)
    assert "Breakdown(" not in text and "Breakdown(" not in line and "\n" not in line
    assert line.startswith("<Breakdown by stratum: 2 metrics;")
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in results.per_sample():  # the means by hand, from the per-sample scores
        for label, value in row["scores"].items():
            if value is not None:
                groups[(row["metadata"]["stratum"], label)].append(value)
    assert len(groups) == 8  # the quickstart's four strata, two metrics
    rows = [line for line in text.splitlines() if "retrieval-" in line]
    for (stratum, label), values in groups.items():
        mean = f"{math.fsum(values) / len(values):.4f}"
        assert any(label in row and f" {len(values)} " in row and mean in row for row in rows), (
            stratum,
            label,
            mean,
        )
    for stratum in {stratum for stratum, _ in groups}:
        assert stratum in text


def test_one_name_for_the_sample_id(tmp_path: Path) -> None:
    results = _results()
    ids = [row["id"] for row in results.per_sample()]
    assert ids[:2] == ["q-01", "q-02"] and len(ids) == 46
    table = results.to_arrow()
    assert table.column_names == ["id", *METRICS]
    assert table.column("id").to_pylist() == ids
    assert results.to_pandas()["id"].tolist() == ids
    assert results.to_polars()["id"].to_list() == ids
    results.to_parquet(tmp_path / "scores.parquet")
    assert pq.read_table(tmp_path / "scores.parquet").column_names == ["id", *METRICS]
    assert results.to_csv().splitlines()[0] == ",".join(["id", *METRICS])
    rows = [json.loads(line) for line in results.write("jsonl").decode().splitlines()]
    assert [row["id"] for row in rows] == ids
