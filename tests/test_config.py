"""Config is explicit in library use: ``engine.dataset()`` and ``Engine()`` read no file the
caller did not name; the CLI and the pytest fixture find the nearest ``slotwise.yaml``; and
every results records which config, if any, set each default."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import engine
from engine.errors import ConfigError

QUICKSTART = Path(__file__).resolve().parent.parent / "examples" / "quickstart"
OUTPUTS = QUICKSTART / "outputs" / "bm25.json"
METRIC = "retrieval-recall-at-k"


@pytest.fixture
def stray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory below an unrelated ``slotwise.yaml`` with ``default_k: 3``; no
    SLOTWISE_CONFIG. Returns the stray file."""
    monkeypatch.delenv("SLOTWISE_CONFIG", raising=False)
    config = tmp_path / "slotwise.yaml"
    config.write_text("metrics:\n  retrieval:\n    default_k: 3\n")
    work = tmp_path / "project" / "sub"
    work.mkdir(parents=True)
    shutil.copy(QUICKSTART / "dataset.yaml", work / "dataset.yaml")
    monkeypatch.chdir(work)
    return config


def _recall_by_hand(k: int) -> float:
    """Mean recall@k of bm25 on the quickstart, from the files themselves: relevant
    (label > 0) retrieved in the top k (a sample's metadata.k wins) over all relevant, 0
    without relevant documents (as trec_eval scores them)."""
    import yaml

    samples = yaml.safe_load((QUICKSTART / "dataset.yaml").read_text())["samples"]
    outputs = json.loads(OUTPUTS.read_text())
    values = []
    for sample in samples:
        labels = sample["expected_output"].get("relevance") or {}
        if isinstance(labels, list):
            labels = dict.fromkeys(labels, 1)
        relevant = {d for d, label in labels.items() if label > 0}
        if not relevant:
            values.append(0.0)
            continue
        cut = (sample.get("metadata") or {}).get("k", k)
        ranked = [item["id"] for item in outputs[sample["id"]]["retrieved"]]
        values.append(len(relevant & set(ranked[:cut])) / len(relevant))
    return sum(values) / len(values)


def test_library_ignores_a_stray_parent_config(stray: Path) -> None:
    """engine.dataset() and Engine() use the built-in k = 5 below a stray default_k: 3, and
    the provenance says no config set it."""
    results = engine.dataset("dataset.yaml").with_metrics([METRIC]).evaluate(OUTPUTS)
    assert results.summary()[METRIC]["mean"] == pytest.approx(_recall_by_hand(5), abs=1e-12)
    assert results.metrics[0].params["k"] == 5
    assert results.provenance["config"] is None
    assert results.provenance["defaults"]["default_k"] == {"value": 5, "set_by": "built-in"}
    assert engine.Engine().config.origin is None


def test_cli_finds_the_parent_config_and_says_so(stray: Path, tmp_path: Path) -> None:
    """`slotwise run` (a subprocess) finds the stray file upward, scores at k = 3 and
    records the file as what set default_k."""
    out = tmp_path / "r.json"
    command = [sys.executable, "-m", "engine.cli", "run", "dataset.yaml", "--outputs", str(OUTPUTS)]
    done = subprocess.run(
        [*command, "--metrics", METRIC, "--format", "json", "--output", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    assert document["summary"][METRIC]["mean"] == pytest.approx(_recall_by_hand(3), abs=1e-12)
    assert _recall_by_hand(3) != pytest.approx(_recall_by_hand(5))
    assert document["metrics"][0]["params"]["k"] == 3
    provenance = document["provenance"]
    assert provenance["config"] == str(stray)
    assert provenance["defaults"]["default_k"] == {"value": 3, "set_by": str(stray)}
    assert provenance["dataset_source"] == str(Path.cwd() / "dataset.yaml")


def test_named_configs(stray: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A library call reads the file it is given, the one SLOTWISE_CONFIG names, or, with
    Engine.from_config(), the nearest slotwise.yaml; a mapping is recorded as such, and
    metric parameters from a config are recorded with their file."""
    assert engine.Engine.from_config().config.default_k == 3
    assert engine.Engine(config=stray).config.origin == str(stray)
    other = tmp_path / "other.yaml"
    other.write_text(
        "metrics:\n  retrieval:\n    default_k: 2\n  params:\n    retrieval-ndcg-at-k:\n"
        "      gain: exponential\n"
    )
    monkeypatch.setenv("SLOTWISE_CONFIG", str(other))
    eng = engine.Engine()
    assert eng.config.default_k == 2
    assert engine.Engine.from_config().config.default_k == 2  # the variable beats the search
    results = eng.dataset("dataset.yaml").with_metrics([METRIC]).evaluate(OUTPUTS)
    assert results.summary()[METRIC]["mean"] == pytest.approx(_recall_by_hand(2), abs=1e-12)
    assert results.provenance["defaults"] == {
        "default_k": {"value": 2, "set_by": str(other)},
        "metrics.params.retrieval-ndcg-at-k.gain": {"value": "exponential", "set_by": str(other)},
    }
    mapping = engine.Engine(config={"metrics": {"retrieval": {"default_k": 4}}})
    assert mapping.config.provenance()["defaults"]["default_k"] == {"value": 4, "set_by": "mapping"}
    monkeypatch.setenv("SLOTWISE_CONFIG", str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match="no such file"):
        engine.Engine()


def test_undeclared_name_says_how_to_name_a_config(stray: Path) -> None:
    with pytest.raises(engine.InputError, match=r"no config: name one with Engine.from_config\(\)"):
        engine.Engine().dataset("quickstart")


def test_an_empty_configuration_is_valid_without_a_validator() -> None:
    """``Config.from_mapping({})`` skips the schema (building a validator costs a command
    some 45 ms): the schema itself accepts ``{}``, and anything else is still checked."""
    from engine.io import schemas
    from engine.io.config import Config

    assert list(schemas.problems({}, "config")) == []
    assert Config.from_mapping({}).default_k == Config.from_mapping(None).default_k
    with pytest.raises(ConfigError):
        Config.from_mapping({"metrics": {"retrieval": {"default_k": "five"}}})
