"""engine.analysis.sampling and ``slotwise sample``: which units are drawn, with which
inclusion probabilities (hand-derived allocations and probabilities, and draw frequencies
over many seeds against them), the files' shape, and the command's errors, end to end on
examples/quickstart."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from engine.analysis import sampling
from engine.cli import main
from engine.errors import InputError

QUICKSTART = Path(__file__).resolve().parent.parent / "examples" / "quickstart"
RUNS = [
    str(QUICKSTART / "outputs" / "bm25.json"),
    str(QUICKSTART / "outputs" / "hybrid-rerank.json"),
]
IDS = [f"q-{i:03d}" for i in range(20)]
STRATA = ["a"] * 10 + ["b"] * 6 + ["c"] * 4


class TestDraw:
    def test_uniform(self):
        drawn = sampling.draw(IDS, 5, seed=1)
        assert len(drawn.units) == 5 == drawn.design.drawn
        assert all(u.probability == 5 / 20 and u.stratum == "all" for u in drawn.units)
        assert drawn.design.to_dict()["strata"] == {"all": {"population": 20, "drawn": 5}}
        assert drawn == sampling.draw(IDS, 5, seed=1)
        assert drawn.units != sampling.draw(IDS, 5, seed=2).units

    def test_uniform_frequencies_match_the_probability(self):
        """Over 4,000 seeds each unit is drawn 5/20 of the time (within 4.5 s.e.)."""
        counts = dict.fromkeys(IDS, 0)
        for seed in range(4000):
            for unit in sampling.draw(IDS, 5, seed=seed).units:
                counts[unit.query_id] += 1
        se = math.sqrt(0.25 * 0.75 / 4000)
        assert max(abs(c / 4000 - 0.25) for c in counts.values()) < 4.5 * se

    def test_stratified_proportional(self):
        """8 over strata of 10, 6 and 4: targets 4, 2.4, 1.6 -> floors 4, 2, 1, the
        smallest raised to 2 (PPI's least): 4, 2, 2; pi = 4/10, 2/6, 2/4."""
        drawn = sampling.draw(IDS, 8, strata=STRATA, seed=4)
        table = drawn.design.strata
        assert {k: v["drawn"] for k, v in table.items()} == {"a": 4, "b": 2, "c": 2}
        assert {u.stratum: u.probability for u in drawn.units} == {"a": 0.4, "b": 2 / 6, "c": 0.5}
        assert drawn.design.method == "stratified"
        assert drawn.design.assignment == dict(zip(IDS, STRATA, strict=True))

    def test_stratified_equal_and_remainders(self):
        """9 over 10, 6, 4 in equal shares: 3 each. 11 proportionally: 5.5, 3.3, 2.2 ->
        5, 3, 2 (10), the largest remainder (.5, a) gets the last: 6, 3, 2."""
        equal = sampling.draw(IDS, 9, strata=STRATA, allocation="equal")
        assert [v["drawn"] for v in equal.design.strata.values()] == [3, 3, 3]
        drawn = sampling.draw(IDS, 11, strata=STRATA)
        assert [v["drawn"] for v in drawn.design.strata.values()] == [6, 3, 2]

    def test_too_small_for_two_per_stratum(self):
        with pytest.raises(ValueError, match="2 units PPI needs"):
            sampling.draw(IDS, 5, strata=STRATA)

    def test_exclusion(self):
        drawn = sampling.draw(IDS, 18, exclude={"q-000", "q-001"}, seed=0)
        assert {u.query_id for u in drawn.units} == set(IDS[2:])
        assert (drawn.design.population, drawn.design.excluded) == (18, 2)
        assert drawn.units[0].probability == 1.0
        with pytest.raises(ValueError, match=r"population of 18 \(2 excluded"):
            sampling.draw(IDS, 19, exclude={"q-000", "q-001"})

    def test_pairs(self):
        queries, docs = ["q1", "q1", "q2"], ["d1", "d2", "d1"]
        drawn = sampling.draw(queries, 2, doc_ids=docs, exclude={("q1", "d2")}, seed=0)
        assert {(u.query_id, u.doc_id) for u in drawn.units} == {("q1", "d1"), ("q2", "d1")}
        assert drawn.design.unit == "pair"
        with pytest.raises(ValueError, match="twice"):
            sampling.draw(["q1", "q1"], 1, doc_ids=["d", "d"])

    def test_bad_sizes(self):
        with pytest.raises(ValueError, match="at least 1"):
            sampling.draw(IDS, 0)
        with pytest.raises(ValueError, match="21 units from a population of 20"):
            sampling.draw(IDS, 21)


class TestActive:
    def test_probabilities_by_hand(self):
        """u = 0 on 10 units, 3 on 10; mix .2: weights .8 u/1.5 + .2 = .2 and 1.8 (sum
        20); 8 expected: pi = .4 x weight = .08 and .72."""
        pi = sampling.active_probabilities([0.0] * 10 + [3.0] * 10, 8, mix=0.2)
        assert pi == pytest.approx([0.08] * 10 + [0.72] * 10, abs=1e-12)

    def test_capped_at_one(self):
        """u = [0, 0, 0, 10], 2 expected, mix .2: weights .2, .2, .2, 3.4 (sum 4): the
        last would be 1.7, capped at 1; the other 1 spread over .6 of weight: 1/3 each."""
        pi = sampling.active_probabilities([0, 0, 0, 10], 2, mix=0.2)
        assert pi == pytest.approx([1 / 3, 1 / 3, 1 / 3, 1.0], abs=1e-12)

    def test_uninformative_is_uniform(self):
        assert sampling.active_probabilities(np.zeros(5), 2) == pytest.approx([0.4] * 5)

    def test_bad_uncertainty(self):
        with pytest.raises(ValueError, match="finite and >= 0"):
            sampling.active_probabilities([1.0, -1.0], 1)
        with pytest.raises(ValueError, match="mix"):
            sampling.active_probabilities([1.0, 2.0], 1, mix=0)

    def test_poisson_frequencies_match(self):
        """Each unit drawn independently with its pi: over 4,000 seeds its frequency is pi
        (within 4.5 s.e.), and the mean size is the expected size."""
        u = np.linspace(0, 2, 20)
        pi = sampling.active_probabilities(u, 6)
        counts = dict.fromkeys(IDS, 0)
        sizes = []
        for seed in range(4000):
            drawn = sampling.draw(IDS, 6, uncertainty=u, seed=seed)
            sizes.append(len(drawn.units))
            for unit in drawn.units:
                counts[unit.query_id] += 1
        frequency = np.array([counts[q] / 4000 for q in IDS])
        se = np.sqrt(pi * (1 - pi) / 4000)
        assert np.all(np.abs(frequency - pi) < 4.5 * se)
        assert abs(np.mean(sizes) - 6) < 4.5 * math.sqrt(np.sum(pi * (1 - pi)) / 4000)
        assert {u.probability for u in drawn.units} <= set(pi.tolist())


class TestBudget:
    def test_sizes(self):
        assert sampling.size_for(size=7) == (7, None)
        assert sampling.size_for(money=50, price=0.25) == (
            200,
            {"labels": 200, "labels_per_unit": 1.0, "units": 200, "money": 50, "price": 0.25},
        )
        size, budget = sampling.size_for(labels=200, labels_per_unit=7.5)  # 26.67 queries
        assert size == 26 and budget is not None and budget["labels"] == 200

    def test_errors(self):
        with pytest.raises(ValueError, match="buys nothing"):
            sampling.size_for(labels=0)
        with pytest.raises(ValueError, match="buys no unit"):
            sampling.size_for(labels=5, labels_per_unit=9)
        with pytest.raises(ValueError, match="one of"):
            sampling.size_for(size=3, labels=4)
        with pytest.raises(ValueError, match="price"):
            sampling.size_for(money=3)


class TestFiles:
    def test_round_trip(self, tmp_path):
        drawn = sampling.draw(IDS, 8, strata=STRATA, seed=3, dataset="d.json sha256:x")
        design_file = sampling.write_sample(drawn, tmp_path / "s.jsonl")
        assert design_file == tmp_path / "s.design.json"
        first = json.loads((tmp_path / "s.jsonl").read_text().splitlines()[0])
        assert list(first) == ["query_id", "stratum", "probability"]
        document = json.loads(design_file.read_text())
        assert document["format"] == "slotwise.sample-design/1"
        assert set(document) == {"format", "unit", "method", "seed", "population", "strata",
                                 "excluded", "budget", "dataset", "created_by", "assignment"}  # fmt: skip
        assert sampling.read_sample(tmp_path / "s.jsonl") == drawn
        assert sampling.read_sample(design_file) == drawn
        assert sampling.read_design(design_file) == drawn.design

    def test_bad_files_are_named(self, tmp_path):
        sampling.write_sample(sampling.draw(IDS, 3), tmp_path / "s.jsonl")
        (tmp_path / "s.jsonl").write_text(
            '{"query_id": "q-001", "stratum": "all", "probability": 0.15}\n'
            '{"query_id": "q-002", "stratum": "all"}\n'
            '{"query_id": "q-003", "stratum": "all", "probability": 1.5}\n'
        )
        with pytest.raises(
            InputError,
            match=r"(?s)s\.jsonl:2: not a sample unit: no "
            r"'probability'.*s\.jsonl:3 sample 'q-003' /probability",
        ):
            sampling.read_sample(tmp_path / "s.jsonl")
        design = json.loads((tmp_path / "s.design.json").read_text())
        del design["seed"]
        (tmp_path / "s.design.json").write_text(json.dumps(design))
        with pytest.raises(InputError, match="missing 'seed'"):
            sampling.read_design(tmp_path / "s.design.json")


def _sample(tmp_path, *options, name="s"):
    return main(["sample", str(QUICKSTART / "dataset.yaml"), "--output",
                 str(tmp_path / f"{name}.jsonl"), *options])  # fmt: skip


def _units(tmp_path, name="s"):
    return [json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]


class TestCommand:
    @pytest.fixture(autouse=True)
    def _elsewhere(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)

    def test_stratified_by_metadata(self, tmp_path):
        """The quickstart's 46 questions by metadata.stratum: factoid 13, multi-hop 10,
        policy 11, troubleshooting 12; 12 proportionally: 3.39, 2.61, 2.87, 3.13 ->
        floors 3, 2, 2, 3 and the two largest remainders (.87 policy, .61 multi-hop): 3
        each."""
        assert (
            _sample(tmp_path, "--size", "12", "--stratify", "metadata.stratum", "--seed", "5") == 0
        )
        units = _units(tmp_path)
        design = sampling.read_design(tmp_path / "s.design.json")
        assert design.strata == {
            "factoid": {"population": 13, "drawn": 3},
            "multi-hop": {"population": 10, "drawn": 3},
            "policy": {"population": 11, "drawn": 3},
            "troubleshooting": {"population": 12, "drawn": 3},
        }
        assert {u["stratum"]: u["probability"] for u in units} == {
            "factoid": 3 / 13, "multi-hop": 3 / 10, "policy": 3 / 11, "troubleshooting": 3 / 12
        }  # fmt: skip
        assert design.dataset.endswith(str(QUICKSTART / "dataset.yaml") + " sha256:"
                                       + design.dataset.split("sha256:")[1])  # fmt: skip
        again = (tmp_path / "s.jsonl").read_text()
        assert (
            _sample(tmp_path, "--size", "12", "--stratify", "metadata.stratum", "--seed", "5") == 0
        )
        assert (tmp_path / "s.jsonl").read_text() == again
        assert (
            _sample(tmp_path, "--size", "12", "--stratify", "metadata.stratum", "--seed", "6") == 0
        )
        assert (tmp_path / "s.jsonl").read_text() != again

    def test_exclude_what_people_labelled(self, tmp_path):
        """human-third.yaml labels every third question (16): never drawn again."""
        labelled = {f"q-{i:02d}" for i in range(1, 47, 3)}
        assert len(labelled) == 16
        assert _sample(tmp_path, "--size", "30", "--exclude",
                       str(QUICKSTART / "human-third.yaml")) == 0  # fmt: skip
        drawn = {u["query_id"] for u in _units(tmp_path)}
        assert drawn == {f"q-{i:02d}" for i in range(1, 47)} - labelled
        design = sampling.read_design(tmp_path / "s.design.json")
        assert (design.population, design.excluded) == (30, 16)

    def test_pairs_within_money(self, tmp_path, capsys):
        """$5 at $0.25 a label: 20 pairs, from the runs' pooled top 10."""
        assert _sample(tmp_path, "--unit", "pair", "--runs", *RUNS, "--budget-money", "5",
                       "--price", "0.25", "--stratify", "grade") == 0  # fmt: skip
        units = _units(tmp_path)
        assert len(units) == 20
        pooled = set()
        for run in RUNS:
            for query, output in json.loads(Path(run).read_text()).items():
                pooled |= {(query, d["id"] if isinstance(d, dict) else d)
                           for d in output["retrieved"][:10]}  # fmt: skip
        assert {(u["query_id"], u["doc_id"]) for u in units} <= pooled
        design = sampling.read_design(tmp_path / "s.design.json")
        assert design.unit == "pair" and design.population == len(pooled)
        assert design.budget == {"labels": 20, "labels_per_unit": 1.0, "units": 20,
                                 "money": 5.0, "price": 0.25}  # fmt: skip
        assert "drew 20 of" in capsys.readouterr().err

    def test_active_by_the_systems_disagreement(self, tmp_path):
        assert _sample(tmp_path, "--active", "--runs", *RUNS, "--size", "10", "--seed", "2") == 0
        design = sampling.read_design(tmp_path / "s.design.json")
        assert design.method == "active" and design.population == 46
        floor = 0.2 * 10 / 46  # mix x size / N: the least probability
        assert all(floor - 1e-12 <= u["probability"] <= 1 for u in _units(tmp_path))

    def test_active_from_an_uncertainty_file(self, tmp_path):
        rows = [{"query_id": f"q-{i:02d}", "uncertainty": 0.0 if i > 2 else 5.0}
                for i in range(1, 47)]  # fmt: skip
        (tmp_path / "u.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        assert _sample(tmp_path, "--active", "--uncertainty", str(tmp_path / "u.jsonl"),
                       "--size", "5") == 0  # fmt: skip
        by_id = {u["query_id"]: u["probability"] for u in _units(tmp_path)}
        # weights .8 x 5/(10/46) + .2 = 18.6 on two, .2 on 44 (sum 46): 5/46 x 18.6 > 1,
        # capped; the other 3 over 44 x .2: 3/44 each
        assert by_id.get("q-01") == 1.0 and by_id.get("q-02") == 1.0
        assert all(
            p == pytest.approx(3 / 44) for q, p in by_id.items() if q not in ("q-01", "q-02")
        )

    def test_stratified_by_disagreement(self, tmp_path):
        assert _sample(tmp_path, "--stratify", "disagreement", "--runs", *RUNS, "--size", "12") == 0
        design = sampling.read_design(tmp_path / "s.design.json")
        assert sum(v["population"] for v in design.strata.values()) == 46
        assert "|Δ|=0" in design.strata and len(design.strata) == 3

    @pytest.mark.parametrize(
        ("options", "message"),
        [
            (["--size", "47"], "a sample of 47 units from a population of 46"),
            (
                ["--size", "5", "--stratify", "metadata.nope"],
                "no sample has the metadata field 'nope'",
            ),
            (["--budget", "0"], "--budget: must be a positive integer"),
            (["--budget", "30"], "give --runs"),
            (["--budget-money", "5"], "--budget-money AMOUNT and --price go together"),
            (["--size", "5", "--active"], "two --runs"),
            (["--size", "5", "--stratify", "grade"], "add --unit pair"),
            (["--size", "5", "--stratify", "metadata.stratum"], "2 units PPI needs"),
            (["--size", "5", "--active", "--stratify", "metadata.stratum"], "not both"),
        ],
    )
    def test_errors(self, tmp_path, capsys, options, message):
        assert _sample(tmp_path, *options) == 2
        assert message in capsys.readouterr().err
        assert not (tmp_path / "s.jsonl").exists()

    def test_bad_uncertainty_file_is_named(self, tmp_path, capsys):
        (tmp_path / "u.jsonl").write_text('{"query_id": "q-99", "uncertainty": 1}\n'
                                          '{"query_id": "q-01", "uncertainty": -1}\n')  # fmt: skip
        assert _sample(tmp_path, "--active", "--uncertainty", str(tmp_path / "u.jsonl"),
                       "--size", "5") == 2  # fmt: skip
        err = capsys.readouterr().err
        assert "sample 'q-99': no such unit in the population" in err
        assert "u.jsonl:2 sample 'q-01' /uncertainty: uncertainty -1.0 is not a number >= 0" in err
        assert "sample 'q-46': no uncertainty for this unit" in err
