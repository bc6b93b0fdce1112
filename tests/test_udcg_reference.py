"""The UDCG reference fixture (github GiovanniTRA/UDCG, data/) reproduces through slotwise."""

from __future__ import annotations

import copy
import json

import pytest

import engine
from engine.io.udcg_reference import convert_reference, read_reference, reference_models

MODEL = "meta-llama/Llama-3.2-3B-Instruct"


@pytest.fixture
def reference(reference_data):
    return reference_data / "udcg" / "udcg_dataset_with_udcg.json"


def scores(data, eng, **params):
    results = (
        eng.dataset(samples=data.samples)
        .with_metrics([eng.metric("udcg", **params)])
        .evaluate(data.outputs)
    )
    return dict(zip(results.sample_ids, results.scores[results.labels[0]].tolist(), strict=True))


class TestFixture:
    def test_stored_values_reproduce_exactly_with_gamma_0_333(self, reference, eng):
        """The reference's irrelevant weight -0.333 is gamma = 0.333: identical floats."""
        data = read_reference(reference)
        assert data.model == MODEL and len(data.samples) == 3
        assert all(v is not None for v in data.stored.values())
        got = scores(data, eng, gamma=0.333)
        for sample_id, stored in data.stored.items():
            assert got[sample_id] == stored, sample_id

    def test_stored_values_within_1e_4_with_gamma_one_third(self, reference, eng):
        """The paper's gamma = 1/3 differs from -0.333 by less than 1e-4."""
        data = read_reference(reference)
        got = scores(data, eng)
        for sample_id, stored in data.stored.items():
            assert got[sample_id] == pytest.approx(stored, abs=1e-4)
            assert got[sample_id] != stored

    def test_fixture_values(self, reference):
        """The stored values are those of the reference file (a guard on the fixture)."""
        stored = read_reference(reference).stored
        assert stored == {
            "example_1": 0.5553808928170055,
            "example_2": 0.5501411475208001,
            "example_3": 0.4837510250741193,
        }


class TestConversion:
    def test_samples_and_outputs(self, reference):
        """utility in the long form, the question as input, passages with texts in order."""
        data = read_reference(reference)
        first = data.samples[0]
        raw = json.loads(reference.read_text())[0]
        assert first["id"] == "example_1"
        assert first["input"] == {"question": "What is the capital of France?"}
        assert first["metadata"] == {"k": 5}
        assert "answers" not in first["expected_output"]
        assert first["expected_output"]["utility"]["doc_1"] == {
            "relevant": True,
            "p_no_response": raw["passages"][0]["models_info"][MODEL]["no_res_prob"],
        }
        retrieved = data.outputs["example_1"]["retrieved"]
        assert [r["id"] for r in retrieved] == [p["doc_id"] for p in raw["passages"]]
        assert retrieved[0]["text"] == raw["passages"][0]["text"]

    def test_the_samples_validate(self, reference, eng):
        """The converted samples pass sample.schema.json."""
        assert len(eng.dataset(samples=read_reference(reference).samples)) == 3

    def test_models(self, reference):
        """reference_models lists the models; an unknown model is an InputError listing them."""
        items = json.loads(reference.read_text())
        assert reference_models(items) == [MODEL]
        with pytest.raises(engine.InputError, match=r"Llama-3\.2-3B"):
            convert_reference(items, model="gpt-x")

    def test_chosen_model(self, reference):
        """With two models, the chosen one's no_res_prob is used; the default is the first."""
        items = json.loads(reference.read_text())
        for passage in items[0]["passages"]:
            passage["models_info"]["other"] = {"no_res_prob": 1.0}
        other = convert_reference(copy.deepcopy(items), model="other")
        utility = other.samples[0]["expected_output"]["utility"]
        assert {u["p_no_response"] for u in utility.values()} == {1.0}
        assert convert_reference(items).model == MODEL

    def test_passage_without_a_score_is_unlabeled_but_counted(self, reference, eng):
        """Like the reference (skipped in the sum, counted in the length): u = 0 in m."""
        items = json.loads(reference.read_text())
        del items[0]["passages"][4]["models_info"][MODEL]
        data = convert_reference(items)
        assert data.unlabeled == [("example_1", "doc_5")]
        p = [p["models_info"][MODEL]["no_res_prob"] for p in items[0]["passages"][:4]]
        expected = ((1 - p[0]) + (1 - p[1]) - 0.333 * ((1 - p[2]) + (1 - p[3]))) / 5
        assert scores(data, eng, gamma=0.333)["example_1"] == pytest.approx(
            1 / (1 + 2.718281828459045**-expected), abs=1e-12
        )

    def test_empty_passages(self):
        """A question with no passages becomes a sample with an empty ranking (score 0.0)."""
        items = [
            {"example_id": "e", "question": "?", "passages": []},
            {
                "example_id": "f",
                "question": "?",
                "passages": [
                    {"doc_id": "x", "is_relevant": True, "models_info": {"m": {"no_res_prob": 0}}}
                ],
            },
        ]
        data = convert_reference(items)
        assert data.outputs["e"] == {"retrieved": []} and "metadata" not in data.samples[0]

    @pytest.mark.parametrize(
        ("mutate", "message"),
        [
            (lambda items: items[0].pop("example_id"), "example_id"),
            (lambda items: items[0].update(passages="x"), "passages must be a list"),
            (lambda items: items[1].update(example_id="example_1"), "duplicate example_id"),
            (lambda items: items[0]["passages"][1].update(doc_id="doc_1"), "appears twice"),
            (
                lambda items: items[0]["passages"][0]["models_info"][MODEL].update(no_res_prob=2),
                "no_res_prob must be a probability",
            ),
            (lambda items: items[0]["passages"][0].update(is_relevant="yes"), "is_relevant"),
        ],
    )
    def test_malformed_input_is_an_input_error(self, reference, mutate, message):
        """Every problem is an InputError with the question's pointer, never a KeyError."""
        items = json.loads(reference.read_text())
        mutate(items)
        with pytest.raises(engine.InputError, match=message):
            convert_reference(items)

    def test_not_a_list(self):
        """A document that is not a list is an InputError."""
        with pytest.raises(engine.InputError, match="JSON list"):
            convert_reference({"example_id": "x"})
