"""The transformers annotator on a tiny Llama built locally: p(NO-RESPONSE) equals a
softmax over the full vocabulary computed here from the model's logits, whatever the
batch size; long passages are truncated; bad model paths are clear errors."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from engine.annotate.base import AnnotationError, UtilityItem  # noqa: E402
from engine.annotate.prompts import UTILITY_SYSTEM  # noqa: E402
from engine.annotate.transformers_annotator import TransformersAnnotator  # noqa: E402
from engine.cli import main  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_lm import make_tiny_lm  # noqa: E402

ITEMS = [
    UtilityItem("What is the capital?", "Paris is the capital of France."),
    UtilityItem("Who released Follow the Leader?", "Follow the Leader was released on August 18, 1998 by Korn."),
    UtilityItem("Where?", "x"),
    UtilityItem("Where does The Great Gatsby take place?", "The Great Gatsby takes place on Long Island in the summer of 1922."),
]  # fmt: skip


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_lm(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def annotator(model_dir: Path) -> TransformersAnnotator:
    return TransformersAnnotator(str(model_dir), device="cpu")


@functools.cache
def _load(model_dir: Path) -> tuple[Any, Any]:
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    return tokenizer, transformers.AutoModelForCausalLM.from_pretrained(model_dir)


def direct_p(model_dir: Path, question: str, passage: str) -> float:
    """The reference computation, from scratch: chat template, one forward pass of the
    unpadded prompt, softmax over the whole vocabulary at the last position."""
    tokenizer, model = _load(model_dir)
    messages = [
        {"role": "system", "content": UTILITY_SYSTEM},
        {"role": "user", "content": f"Document: {passage}\nQuestion: {question}\nAnswer:"},
    ]
    ids = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, -1].double()
    first = tokenizer.encode("NO-RESPONSE", add_special_tokens=False)[0]
    return float(torch.softmax(logits, dim=-1)[first])


@pytest.fixture(scope="module")
def expected(model_dir: Path) -> list[float]:
    return [direct_p(model_dir, i.question, i.passage) for i in ITEMS]


class TestProbability:
    @pytest.mark.parametrize("batch_size", [1, 3, 4])
    def test_matches_a_direct_softmax(
        self, annotator: TransformersAnnotator, expected: list[float], batch_size: int
    ) -> None:
        """Equal to the direct softmax to 1e-6 at any batch size (left padding is neutral)."""
        values: list[float] = []
        for start in range(0, len(ITEMS), batch_size):
            result = annotator.p_no_response(ITEMS[start : start + batch_size], lambda: None)
            values += result.values
            assert result.calls == 1 and result.truncated == [False] * len(result.values)
        assert values == pytest.approx(expected, abs=1e-6)
        assert len(set(round(v, 6) for v in values)) > 1  # the fixture's model discriminates

    def test_first_sub_token_of_no_response(self, annotator: TransformersAnnotator) -> None:
        """The token read is the first of NO-RESPONSE's tokens."""
        ids = annotator.tokenizer.encode("NO-RESPONSE", add_special_tokens=False)
        assert annotator.token_id == ids[0] and len(ids) > 1

    def test_long_passage_is_truncated_to_fit(self, model_dir: Path) -> None:
        """A passage beyond the context is cut from its end; the item is flagged."""
        short = TransformersAnnotator(str(model_dir), device="cpu", max_length=160)
        item = UtilityItem("What is the capital?", "Paris is the capital of France. " * 60)
        ids, cut = short.encode_utility(item)
        assert cut and 140 < len(ids) <= 160
        result = short.p_no_response([item, ITEMS[0]], lambda: None)
        assert result.truncated == [True, False]
        kept = short.tokenizer.decode(ids)
        assert "Paris is the capital" in kept and kept.count("Paris") < 60


class TestErrors:
    def test_missing_model_path(self, tmp_path: Path) -> None:
        """A model path that does not exist is an AnnotationError naming it."""
        with pytest.raises(AnnotationError, match="does not exist"):
            TransformersAnnotator(str(tmp_path / "nope"))

    def test_directory_without_a_model(self, tmp_path: Path) -> None:
        """An empty directory: cannot load, and nothing is downloaded."""
        with pytest.raises(AnnotationError, match="nothing is downloaded"):
            TransformersAnnotator(str(tmp_path))


def _write_dataset(tmp_path: Path) -> tuple[Path, Path]:
    samples = [
        {
            "id": f"q{n}",
            "input": {"question": item.question},
            "expected_output": {"relevance": ["a"]},
        }
        for n, item in enumerate(ITEMS)
    ]
    outputs: dict[str, Any] = {
        f"q{n}": {
            "retrieved": [
                {"id": "a", "text": item.passage},
                {"id": "b", "text": ITEMS[(n + 1) % len(ITEMS)].passage},
                {"id": "c"},
            ]
        }
        for n, item in enumerate(ITEMS)
    }
    dataset, out = tmp_path / "data.yaml", tmp_path / "outputs.jsonl"
    import yaml

    dataset.write_text(yaml.safe_dump({"name": "tiny", "samples": samples}))
    out.write_text(
        "".join(json.dumps({"id": k, "actual_output": v}) + "\n" for k, v in outputs.items())
    )
    return dataset, out


class TestCommandLine:
    def test_annotate_then_udcg(
        self,
        model_dir: Path,
        tmp_path: Path,
        expected: list[float],
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """`slotwise annotate --annotator transformers` writes labels that `run --metrics udcg` scores."""
        dataset, outputs = _write_dataset(tmp_path)
        labelled, cache = tmp_path / "labelled.json", tmp_path / "ann.sqlite"
        command = [
            "annotate", str(dataset), "--outputs", str(outputs), "--output", str(labelled),
            "--annotator", "transformers", "--model", str(model_dir), "--device", "cpu",
            "--batch-size", "3", "--cache", str(cache),
        ]  # fmt: skip
        assert main(command) == 0
        err = capsys.readouterr().err
        assert "8 computed with 3 model calls" in err
        assert "4 retrieved passage(s) have no text" in err
        document = json.loads(labelled.read_text())
        for n, sample in enumerate(document["samples"]):
            utility = sample["expected_output"]["utility"]
            assert utility["a"]["relevant"] is True and utility["b"]["relevant"] is False
            assert utility["a"]["p_no_response"] == pytest.approx(expected[n], abs=1e-6)
            other = direct_p(model_dir, ITEMS[n].question, ITEMS[(n + 1) % 4].passage)
            assert utility["b"]["p_no_response"] == pytest.approx(other, abs=1e-6)
        assert main(command) == 0
        assert "0 computed with 0 model calls" in capsys.readouterr().err
        code = main(
            [
                "run",
                str(labelled),
                "--outputs",
                str(outputs),
                "--metrics",
                "udcg",
                "--format",
                "json",
            ]
        )
        assert code == 0
        assert json.loads(capsys.readouterr().out)["summary"]["udcg"]["n"] == 4

    def test_truncation_is_counted(
        self, model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--max-length below a prompt's length truncates, and the summary says how many."""
        dataset, outputs = _write_dataset(tmp_path)
        command = [
            "annotate", str(dataset), "--outputs", str(outputs), "--output", str(tmp_path / "o.jsonl"),
            "--annotator", "transformers", "--model", str(model_dir), "--max-length", "140",
        ]  # fmt: skip
        assert main(command) == 0
        err = capsys.readouterr().err
        assert " 0 passages truncated" not in err and "passages truncated" in err

    def test_missing_model_exits_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A bad --model path: exit 2 and a one-line reason, no traceback."""
        dataset, outputs = _write_dataset(tmp_path)
        command = [
            "annotate", str(dataset), "--outputs", str(outputs), "--output", str(tmp_path / "o.json"),
            "--annotator", "transformers", "--model", str(tmp_path / "missing"),
        ]  # fmt: skip
        assert main(command) == 2
        err = capsys.readouterr().err
        assert "does not exist" in err and "Traceback" not in err

    def test_option_of_another_annotator_is_refused(
        self, model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--base-url does not apply to the transformers annotator."""
        dataset, outputs = _write_dataset(tmp_path)
        command = [
            "annotate", str(dataset), "--outputs", str(outputs), "--output", str(tmp_path / "o.json"),
            "--annotator", "transformers", "--model", str(model_dir), "--base-url", "http://x",
        ]  # fmt: skip
        assert main(command) == 2
        assert "--base-url does not apply" in capsys.readouterr().err
