"""engine.analysis.sampling_frame's disagreement bands and engine.io.uncertainty's files:
hand examples of the bands, and every problem an uncertainty file can have, named."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.analysis.sampling_frame import bands
from engine.errors import InputError
from engine.io.uncertainty import read_uncertainty, write_uncertainty


class TestBands:
    def test_quantile_bands_beside_zero(self):
        """Two bands of the positive values: up to the median 0.25, up to the max 0.4."""
        found = bands(np.array([0.0, 0.1, 0.2, 0.3, 0.4]), 2)
        assert found == ["|Δ|=0", "|Δ|<=0.25", "|Δ|<=0.25", "|Δ|<=0.4", "|Δ|<=0.4"]

    def test_no_disagreement_is_one_band(self):
        assert bands(np.zeros(3), 2) == ["|Δ|=0"] * 3

    def test_coinciding_edges_are_one_band(self):
        assert bands(np.array([0.0, 1.0, 1.0, 1.0]), 3) == ["|Δ|=0"] + ["|Δ|<=1"] * 3


class TestUncertaintyFile:
    def test_round_trip(self, tmp_path):
        """What annotate --uncertainty-output writes, sample --uncertainty reads, per unit."""
        path = tmp_path / "u.jsonl"
        write_uncertainty(path, [{"query_id": "b", "doc_id": "d1", "uncertainty": 0.5},
                                 {"query_id": "a", "doc_id": "d2", "uncertainty": 0}])  # fmt: skip
        assert read_uncertainty(path, ["a", "b"], ["d2", "d1"]).tolist() == [0.0, 0.5]

    def test_every_problem_is_named(self, tmp_path):
        path = tmp_path / "u.jsonl"
        rows = ['{"query_id": "a", "uncertainty": 1}', "not json", "",
                json.dumps({"query_id": "b"}), '{"query_id": "c", "uncertainty": "NaN"}',
                '{"query_id": "z", "uncertainty": 2}']  # fmt: skip
        path.write_text("\n".join(rows) + "\n")
        with pytest.raises(InputError) as raised:
            read_uncertainty(path, ["a", "b", "c", "d"], None)
        assert raised.value.summary == "invalid --uncertainty"
        found = {(p.sample_id, p.line, p.message.split(":")[0]) for p in raised.value.problems}
        assert found == {
            (None, 2, "not an uncertainty row"),
            (None, 4, "not an uncertainty row"),
            ("c", 5, "uncertainty nan is not a number >= 0"),
            ("z", None, "no such unit in the population"),
            ("b", None, "no uncertainty for this unit"),
            ("d", None, "no uncertainty for this unit"),
        }
        assert {str(p.source) for p in raised.value.problems} == {str(path)}

    def test_a_pair_needs_its_document(self, tmp_path):
        path = tmp_path / "u.jsonl"
        path.write_text('{"query_id": "a", "doc_id": "d9", "uncertainty": 1}\n')
        with pytest.raises(InputError) as raised:
            read_uncertainty(path, ["a"], ["d1"])
        assert [p.message for p in raised.value.problems] == [
            "no such unit in the population",
            "no uncertainty for this unit (doc d1)",
        ]

    def test_a_missing_file_cannot_be_read(self, tmp_path):
        with pytest.raises(InputError, match="cannot draw the sample") as raised:
            read_uncertainty(tmp_path / "gone.jsonl", ["a"], None)
        assert raised.value.problems[0].message.startswith("cannot read: ")
