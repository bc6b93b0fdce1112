"""The quickstart's story, as `make demo` tells it: the reranker reorders the same
candidate pool as BM25, so every retrieval miss stays and selection misses are fixed.
Expected values are read off the data files in each test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import engine
from engine.cli import main

QUICKSTART = Path(__file__).resolve().parent.parent / "examples" / "quickstart"
SET_BASED = ["ra-nwg-at-k", "proc-at-k", "pct-proc-at-k", "harm-at-k", "diagnosis-at-k"]


def _outputs(system: str) -> dict[str, Any]:
    return json.loads((QUICKSTART / "outputs" / f"{system}.json").read_text())


def _ids(output: dict[str, Any]) -> list[str]:
    return [item["id"] if isinstance(item, dict) else item for item in output["retrieved"]]


@pytest.fixture(scope="module")
def scored() -> dict[str, engine.Results]:
    """Both systems on the declared metrics (classic and set-based) at K = 5."""
    dataset = engine.Engine(config=QUICKSTART / "slotwise.yaml").dataset("quickstart")
    evaluation = dataset.with_metrics(SET_BASED)
    return {
        system: evaluation.evaluate(QUICKSTART / "outputs" / f"{system}.json")
        for system in ("bm25", "hybrid-rerank")
    }


def test_declared_metrics_include_the_set_based_family():
    """`slotwise run quickstart` shows RA-nWG, PROC, %PROC, Harm and the diagnosis."""
    text = (QUICKSTART / "slotwise.yaml").read_text()
    assert all(f"- {alias}\n" in text for alias in SET_BASED)


def test_same_pool_same_proc(scored):
    """Both systems report the same top-30 pool, so PROC (pool over oracle) is equal per
    sample while %PROC and RA-nWG differ."""
    bm25, hybrid = _outputs("bm25"), _outputs("hybrid-rerank")
    assert all(bm25[q]["pool"] == hybrid[q]["pool"] for q in bm25)
    proc = [scored[s].values("proc-at-k") for s in ("bm25", "hybrid-rerank")]
    assert proc[0].tolist() == pytest.approx(proc[1].tolist(), nan_ok=True)
    assert (
        scored["bm25"].summary()["ra-nwg-at-k"]["mean"]
        < (scored["hybrid-rerank"].summary()["ra-nwg-at-k"]["mean"])
    )


def test_q05_is_a_selection_miss_that_the_reranker_fixes(scored):
    """q-05's only graded passage (doc-005, grade 5) is in BM25's pool but not its top 5:
    RA-nWG 0, PROC 1, %PROC 0, a selection problem; the reranker puts it in the top 5."""
    bm25, hybrid = _outputs("bm25")["q-05"], _outputs("hybrid-rerank")["q-05"]
    assert "doc-005" in bm25["pool"] and "doc-005" not in _ids(bm25)[:5]
    assert "doc-005" in _ids(hybrid)[:5]
    row = scored["bm25"].sample_ids.index("q-05")
    sample = scored["bm25"].per_sample()[row]
    assert (sample["scores"]["ra-nwg-at-k"], sample["scores"]["proc-at-k"]) == (0.0, 1.0)
    assert sample["scores"]["pct-proc-at-k"] == 0.0
    assert sample["details"]["diagnosis-at-k"]["class"] == "selection"
    fixed = scored["hybrid-rerank"].per_sample()[row]
    assert fixed["scores"]["ra-nwg-at-k"] == 1.0


def test_q07_is_a_retrieval_miss_for_both(scored):
    """q-07's only graded passage (doc-012) never reaches the pool: PROC 0 and a
    retrieval problem for both systems."""
    for system, results in scored.items():
        assert "doc-012" not in _outputs(system)["q-07"]["pool"]
        sample = results.per_sample()[results.sample_ids.index("q-07")]
        assert sample["scores"]["proc-at-k"] == 0.0
        assert sample["details"]["diagnosis-at-k"]["class"] == "retrieval"


def test_demo_run_prints_the_diagnosis(capsys, monkeypatch):
    """The first command of `make demo` prints the set-based rows and the diagnosis."""
    monkeypatch.chdir(QUICKSTART)
    assert main(["run", "quickstart", "--outputs", "outputs/bm25.json"]) == 0
    out = capsys.readouterr().out
    assert "ra-nwg-at-k" in out and "pct-proc-at-k" in out
    assert "counts: fine=" in out and "selection=" in out


def test_readme_run_excerpts_are_printed(capsys, monkeypatch):
    """Every line of the README's excerpts of `slotwise run quickstart` (the header with
    its errors column, the rows, the diagnosis counts) is a line the command prints."""
    readme = (QUICKSTART.parent.parent / "README.md").read_text(encoding="utf-8")
    block = readme.split("```console\n", 1)[1].split("```", 1)[0]
    commands = [part.splitlines() for part in block.split("$ ")[1:]]
    excerpts = [(c[0].split("#")[0].split(), c[1:]) for c in commands if "run quickstart" in c[0]]
    assert len(excerpts) == 2 and all(lines for _, lines in excerpts)
    monkeypatch.chdir(QUICKSTART)
    for command, lines in excerpts:
        assert command[:3] == ["slotwise", "run", "quickstart"]
        assert main(command[1:]) == 0
        printed = capsys.readouterr().out.splitlines()
        for line in lines:
            assert line in printed, line
