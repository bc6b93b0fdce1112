"""ir_datasets as a source (``irds:<id>``), with a dataset registered locally from files:
nothing can be downloaded here."""

from __future__ import annotations

import itertools
import math

import ir_datasets
import pytest
from ir_datasets.datasets.base import Dataset as IrdsDataset
from ir_datasets.formats import TrecQrels, TsvQueries
from ir_datasets.util import LocalDownload

import engine
from engine.cli import main
from engine.errors import InputError

QRELS = """\
1 0 d1 2
1 0 d2 0
1 0 d3 1
2 0 d4 1
2 0 d5 -1
"""
QUERIES = "1\trefund window for thermostats\n2\twarranty claims\n3\tunjudged query\n"
RUN = """\
1 Q0 d3 1 9.0 sys
1 Q0 d1 2 8.0 sys
2 Q0 d5 1 9.0 sys
2 Q0 d4 2 8.0 sys
"""
_names = (f"slotwise-test/local-{i}" for i in itertools.count())


@pytest.fixture
def irds_id(tmp_path):
    """A dataset id that ir_datasets reads from local TREC qrels and TSV queries."""
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "queries.tsv").write_text(QUERIES)
    (tmp_path / "run.txt").write_text(RUN)
    name = next(_names)
    ir_datasets.registry.register(
        name,
        IrdsDataset(
            TrecQrels(LocalDownload(tmp_path / "qrels.txt"), {2: "answers", 1: "partly", 0: "no"}),
            TsvQueries(LocalDownload(tmp_path / "queries.tsv")),
        ),
    )
    return name


def test_graded_qrels_and_query_texts(irds_id):
    """One sample per judged query (3 has no judgements), graded and negative labels kept,
    the query text as input."""
    dataset = engine.Engine(config={}).dataset(f"irds:{irds_id}")
    assert dataset.name == irds_id and dataset.ids == ["1", "2"]
    first, second = dataset.samples
    assert first.input == "refund window for thermostats"
    assert first.relevance == {"d1": 2.0, "d2": 0.0, "d3": 1.0}
    assert second.relevance == {"d4": 1.0, "d5": -1.0}


def test_run_scores_against_irds_qrels(irds_id, tmp_path, capsys):
    """`slotwise run irds:<id> --run R`. nDCG@10, linear gains, trec_eval's ideal from the
    judged labels: q1 ranks d3 (1) then d1 (2): (1 + 2/log2 3) / (2 + 1/log2 3);
    q2 ranks d5 (-1, gain 0 as in trec_eval) then d4 (1): (1/log2 3) / 1."""
    q1 = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    q2 = 1 / math.log2(3)
    code = main(
        [
            "run",
            f"irds:{irds_id}",
            "--run",
            str(tmp_path / "run.txt"),
            "--metrics",
            "retrieval-ndcg-at-k@10",
            "--format",
            "jsonl",
        ]
    )
    assert code == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    values = [float(line.split('"retrieval-ndcg-at-k@10":')[1].split("}")[0]) for line in rows]
    assert values == pytest.approx([q1, q2], abs=1e-12)


def test_unknown_dataset_id_is_a_clear_error():
    with pytest.raises(InputError, match="ir_datasets knows no dataset 'no/such-dataset'"):
        engine.Engine(config={}).dataset("irds:no/such-dataset")
