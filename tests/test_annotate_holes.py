"""Hole filling (``slotwise annotate --runs ... --holes``): pooling, the pairs sent to the
judge, label sources, cost estimates, and the cache, against the local chat-completions
stand-in (engine.annotate.stand_in) and the tests' tiny transformers model."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from engine.annotate.holes import pool
from engine.cli import main
from engine.io.columns import OUTPUT_COLUMNS, Columns, list_array, offsets_of, table_of
from engine.io.sources import dataset_columns, read_dataset, read_outputs

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_annotate_http import PASSAGES, QUESTIONS  # noqa: E402

# q1 and q2 carry human labels; q3 has none. The person calls q1's d2 (Lyon) relevant,
# which the stand-in judge (relevant: the passage contains an answer) would not.
LABELS = {"q1": {"d1": 1, "d2": 1}, "q2": {"d4": 0}, "q3": None}
RUN_A = {"q1": ["d1", "d2", "d4"], "q2": ["d3", "d4", "d6"], "q3": ["d5", "d6", "d2"]}
RUN_B = {"q1": ["d4", "d1", "d2"], "q2": ["d4", "d6", "d3"], "q3": ["d2", "d5", "d6"]}


def _write(tmp_path: Path) -> dict[str, Path]:
    samples = []
    for sid, (question, answers) in QUESTIONS.items():
        expected: dict[str, object] = {"answers": answers}
        if LABELS[sid] is not None:
            expected["relevance"] = LABELS[sid]
        samples.append({"id": sid, "input": {"question": question}, "expected_output": expected})
    files = {"dataset": tmp_path / "data.json", "a": tmp_path / "a.json", "b": tmp_path / "b.json"}
    files["dataset"].write_text(json.dumps({"samples": samples}))
    for key, run in (("a", RUN_A), ("b", RUN_B)):
        outputs = {
            sid: {"retrieved": [{"id": d, "text": PASSAGES[d]} for d in docs]}
            for sid, docs in run.items()
        }
        files[key].write_text(json.dumps(outputs))
    files["labelled"] = tmp_path / "filled.json"
    return files


def _pairs(depth: int) -> set[tuple[str, str]]:
    """The pooled pairs by hand: the union of both runs' top ``depth``."""
    return {(q, d) for run in (RUN_A, RUN_B) for q, docs in run.items() for d in docs[:depth]}


class TestPool:
    def test_pairs_labelled_and_texts(self, tmp_path: Path) -> None:
        files = _write(tmp_path)
        _, columns = read_dataset(files["dataset"])
        runs = [read_outputs(files["a"]), read_outputs(files["b"])]
        pooled = pool(columns, runs, depth=2)
        ids = columns.ids.to_pylist()
        found = list(zip([ids[r] for r in pooled.rows], pooled.docs.to_pylist(), strict=True))
        assert set(found) == _pairs(2) and len(found) == len(_pairs(2))
        labelled = {pair for pair, flag in zip(found, pooled.labelled, strict=True) if flag}
        assert labelled == {(q, d) for q, docs in LABELS.items() for d in docs or ()} & _pairs(2)
        texts = pooled.texts(pooled.holes)
        holes = [pair for pair, flag in zip(found, pooled.holes, strict=True) if flag]
        assert texts == [PASSAGES[d] for _, d in holes]

    def test_missing_texts_and_unknown_samples(self) -> None:
        """A pair's text comes from any run that has it; a run row for a sample not in
        the dataset is counted and left out."""
        columns = dataset_columns([{"id": "q1", "expected_output": ["x"]}])
        bare = read_outputs({"q1": ["x", "y"], "q9": ["z"]})
        texts = read_outputs({"q1": {"retrieved": [{"id": "y", "text": "Y"}, "w"]}})
        pooled = pool(columns, [bare, texts], depth=5)
        by_doc = dict(zip(pooled.docs.to_pylist(), pooled.has_text.tolist(), strict=True))
        assert by_doc == {"x": False, "y": True, "w": False}
        assert pooled.unknown == 1
        assert pooled.texts(np.array([d == "y" for d in pooled.docs.to_pylist()])) == ["Y"]

    @pytest.mark.slow
    def test_pooling_100k_queries(self) -> None:
        """100,000 queries x 3 runs x 20 retrieved passages with texts, depth 10: every
        pair once, the labelled ones marked. The runs are built as columns directly."""
        queries, retrieved, vocabulary = 100_000, 20, 500
        rng = np.random.default_rng(0)
        labels = [
            {"id": f"q{i}", "expected_output": {f"d{j}": 1 for j in rng.integers(0, 500, 5)}}
            for i in range(0, queries, 2)
        ]
        columns = dataset_columns(labels + [{"id": f"q{i}"} for i in range(1, queries, 2)])
        docs = pa.array([f"d{j}" for j in range(vocabulary)])
        offsets = offsets_of(np.full(queries, retrieved))
        ids = pa.array([f"q{i}" for i in range(queries)])
        texts = list_array(offsets, pa.array(np.full(queries * retrieved, "t")))
        runs = [
            Columns(
                table_of(
                    {
                        "id": ids,
                        "retrieved": list_array(
                            offsets,
                            pa.array(rng.integers(0, vocabulary, offsets[-1]).astype(np.int32)),
                        ),
                        "texts": texts,
                    },
                    {k: OUTPUT_COLUMNS[k] for k in ("id", "retrieved", "texts")},
                    queries,
                ),
                docs,
            )
            for _ in range(3)
        ]
        pooled = pool(columns, runs, depth=10)  # its time: benchmarks/pooling.py
        assert 2_000_000 < len(pooled) <= 3_000_000
        assert int(pooled.labelled.sum()) > 0 and pooled.has_text.all()


def _judge(sid: str, doc: str) -> int:
    """The stand-in judge's verdict: the passage contains one of the answers."""
    return int(any(a.lower() in PASSAGES[doc].lower() for a in QUESTIONS[sid][1]))


def _annotate(files: dict[str, Path], url: str, *extra: str) -> int:
    return main(
        ["annotate", str(files["dataset"]), "--task", "relevance", "--runs", str(files["a"]),
         str(files["b"]), "--depth", "2", "--output", str(files["labelled"]), "--annotator",
         "openai-compatible", "--base-url", url, "--model", "judge", *extra]
    )  # fmt: skip


SOURCE = "openai-compatible:judge:udcg-fig5-v1"


class TestFillHoles:
    def test_only_holes_are_judged_and_sources_written(
        self, server_factory: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        server = server_factory("--mode", "logprobs")  # type: ignore[operator]
        files = _write(tmp_path)
        pooled = _pairs(2)
        human = {(q, d) for q, docs in LABELS.items() for d in docs or ()}
        holes = pooled - human
        assert _annotate(files, server.url, "--holes", "--price", "1.0", "2.0") == 0
        err = capsys.readouterr().err
        assert (
            f"holes: {len(pooled)} pooled pairs, {len(pooled & human)} already labelled, "
            f"0 without a text (skipped); {len(holes)} to judge: 0 from the cache, "
            f"{len(holes)} to compute in {len(holes)} model calls; estimated cost at most $" in err
        )
        assert server.stats()["requests"] == len(holes)
        written = {s["id"]: s for s in json.loads(files["labelled"].read_text())["samples"]}
        for sid, sample in written.items():
            relevance = sample["expected_output"]["relevance"]
            sources = sample["metadata"]["label_sources"]
            assert set(relevance) == set(sources)
            for doc, label in relevance.items():
                if (sid, doc) in human:
                    assert (label, sources[doc]) == (LABELS[sid][doc], "human")
                else:
                    assert (sid, doc) in holes
                    assert (label, sources[doc]) == (_judge(sid, doc), SOURCE)
        assert {(q, d) for q, s in written.items() for d in s["expected_output"]["relevance"]} == (
            human | holes
        )
        # a re-run asks nothing: the judgements come from the cache
        assert _annotate(files, server.url, "--holes") == 0
        assert (
            f"{len(holes)} from the cache, 0 to compute in 0 model calls" in capsys.readouterr().err
        )
        assert server.stats()["requests"] == len(holes)

    def test_filled_dataset_is_filled_again_for_free(
        self, server_factory: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Filling the filled dataset finds no hole; its LLM labels keep their source."""
        server = server_factory("--mode", "logprobs")  # type: ignore[operator]
        files = _write(tmp_path)
        assert _annotate(files, server.url, "--holes") == 0
        first = json.loads(files["labelled"].read_text())
        files["dataset"].write_text(files["labelled"].read_text())
        requests = server.stats()["requests"]
        assert _annotate(files, server.url, "--holes") == 0
        assert "; 0 to judge" in capsys.readouterr().err
        assert server.stats()["requests"] == requests
        assert json.loads(files["labelled"].read_text())["samples"] == first["samples"]

    def test_every_pooled_pair_without_holes(
        self, server_factory: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Without --holes every pooled pair is judged (PPI's predictions): the person's
        label of q1/d2 is replaced by the judge's, with the judge as its source; what it
        prints speaks of the pool, not of holes."""
        server = server_factory("--mode", "logprobs")  # type: ignore[operator]
        files = _write(tmp_path)
        assert _annotate(files, server.url) == 0
        assert server.stats()["requests"] == len(_pairs(2))
        said = capsys.readouterr().err.splitlines()
        assert [line.split(":")[0] for line in said if line.startswith(("holes", "pool"))] == [
            "pool",
            "pool",
        ]
        assert f"pool: {len(_pairs(2))} labels written, source {SOURCE}" in said
        written = {s["id"]: s for s in json.loads(files["labelled"].read_text())["samples"]}
        assert written["q1"]["expected_output"]["relevance"]["d2"] == 0
        assert written["q1"]["metadata"]["label_sources"]["d2"] == SOURCE

    def test_dry_run_calls_nothing(
        self, server_factory: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        server = server_factory("--mode", "logprobs")  # type: ignore[operator]
        files = _write(tmp_path)
        assert _annotate(files, server.url, "--holes", "--dry-run") == 0
        assert "to judge" in capsys.readouterr().err
        assert server.stats()["requests"] == 0
        assert not files["labelled"].exists()

    @pytest.mark.parametrize(
        ("extra", "message"),
        [
            (["--task", "utility"], "--task relevance alone"),
            (["--task", "relevance", "--outputs", "x.json"], "leave out --outputs"),
        ],
    )
    def test_usage_errors(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
    ) -> None:
        files = _write(tmp_path)
        command = ["annotate", str(files["dataset"]), "--runs", str(files["a"]), "--output",
                   str(files["labelled"]), "--annotator", "openai-compatible", "--base-url",
                   "http://127.0.0.1:9/v1", "--model", "judge", *extra]  # fmt: skip
        assert main(command) == 2
        assert message in capsys.readouterr().err


class TestLabelSources:
    def test_results_count_top_k_slots_by_source(
        self, server_factory: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Filled at depth 1 from both runs, the holes judged are q1/d4, q2/d3, q3/d5 and
        q3/d2. Run A's top 3 then hold, by hand: q1 d1 (human) d2 (human) d4 (LLM); q2 d3
        (LLM) d4 (human) d6 (unjudged); q3 d5 (LLM) d6 (unjudged) d2 (LLM): 3 human, 4
        LLM, 2 unjudged; judged@3 3/9 with the human labels, 7/9 with all."""
        import engine

        server = server_factory("--mode", "logprobs")  # type: ignore[operator]
        files = _write(tmp_path)
        assert _annotate(files, server.url, "--holes", "--depth", "1") == 0
        eng = engine.Engine(config={"metrics": {"retrieval": {"default_k": 3}}})
        results = (
            eng.dataset(str(files["labelled"]))
            .with_metrics(["retrieval-judged-at-k", "retrieval-mrr"])
            .evaluate(str(files["a"]))
        )
        # no metric names a k: the configured default
        report = results.reports["label sources@3"]
        assert report["sources"] == {"human": 3, SOURCE: 4, "unjudged": 2}
        assert report["slots"] == 9 and report["k"] == 3
        assert report["judged@k (human labels)"] == pytest.approx(3 / 9)
        assert report["judged@k (all labels)"] == pytest.approx(7 / 9)
        assert results.summary()["retrieval-judged-at-k"]["mean"] == pytest.approx(7 / 9)
        # the table and the results document show it
        assert main(["run", str(files["labelled"]), "--outputs", str(files["a"]), "--metrics",
                     "retrieval-judged-at-k@3"]) == 0  # fmt: skip
        out = capsys.readouterr().out
        assert "label sources@3:" in out and "judged@k (human labels)" in out
        assert (
            main(["run", str(files["labelled"]), "--outputs", str(files["a"]), "--metrics",
                  "retrieval-judged-at-k@3", "--format", "json"]) == 0
        )  # fmt: skip
        document = json.loads(capsys.readouterr().out)
        assert document["reports"]["label sources@3"]["sources"]["unjudged"] == 2
        # and the HTML report, in a section of its own
        from engine.analysis.report import build_report

        page = build_report([results], names=["a"])
        section = page[page.index('<section id="label-sources">') :]
        section = section[: section.index("</section>")]
        assert f"human 3, {SOURCE} 4, unjudged 2" in section
        assert ">0.3333<" in section and ">0.7778<" in section
        # one report per cutoff the metrics name
        results = (
            eng.dataset(str(files["labelled"]))
            .with_metrics(["retrieval-judged-at-k@1", "retrieval-judged-at-k@2"])
            .evaluate(str(files["a"]))
        )
        assert results.reports["label sources@1"]["sources"] == {"human": 1, SOURCE: 2}
        assert results.reports["label sources@2"]["slots"] == 6

    def test_no_sources_no_report(self, tmp_path: Path) -> None:
        import engine

        files = _write(tmp_path)
        document = json.loads(files["dataset"].read_text())
        document["samples"][2]["expected_output"]["relevance"] = {"d5": 1}
        files["dataset"].write_text(json.dumps(document))
        results = (
            engine.Engine(config={})
            .dataset(str(files["dataset"]))
            .with_metrics(["retrieval-judged-at-k"])
            .evaluate(str(files["a"]))
        )
        assert not any(key.startswith("label sources") for key in results.reports)


class TestExplainSources:
    def test_each_slot_shows_its_label_source(
        self, server_factory: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """After filling at depth 1, run A's q2 slots: d3 (LLM), d4 (human), d6 (none)."""
        server = server_factory("--mode", "logprobs")  # type: ignore[operator]
        files = _write(tmp_path)
        assert _annotate(files, server.url, "--holes", "--depth", "1") == 0
        results = tmp_path / "a-results.json"
        assert main(["run", str(files["labelled"]), "--outputs", str(files["a"]), "--metrics",
                     "retrieval-judged-at-k@3", "--format", "json", "--keep-outputs",
                     "--output", str(results)]) == 0  # fmt: skip
        capsys.readouterr()
        assert main(["explain", str(results), "--sample", "q2", "--dataset",
                     str(files["labelled"]), "--k", "3"]) == 0  # fmt: skip
        lines = capsys.readouterr().out.splitlines()
        header = next(line for line in lines if "rank" in line and "source" in line)
        assert header.split()[:4] == ["rank", "id", "rel", "source"]
        rows = {
            line.split()[1]: line.split()
            for line in lines
            if line.split()[:1] in (["1"], ["2"], ["3"])
        }
        assert rows["d3"][2:4] == [str(_judge("q2", "d3")), SOURCE]
        assert rows["d4"][2:4] == ["0", "human"]
        assert rows["d6"][2:4] == ["-", "-"]
        assert not any("label_sources=" in line for line in lines)
        assert main(["explain", str(results), "--sample", "q2", "--dataset",
                     str(files["labelled"]), "--k", "3", "--format", "json"]) == 0  # fmt: skip
        (explained,) = json.loads(capsys.readouterr().out)
        slots = {s["id"]: s["source"] for s in explained["systems"][0]["slots"]}
        assert slots == {"d3": SOURCE, "d4": "human", "d6": None}


class TestAgreement:
    def test_kappa_and_ranking_tau(
        self, server_factory: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--agreement judges every pooled pair of q1 and q2 (the samples with human
        labels). Pairs labelled by both: q1/d1 (both relevant), q1/d2 (human only), q2/d4
        (neither): kappa = sklearn's on (1, 1, 0) vs (1, 0, 0) = 0.4. P@2 per run by hand
        (the judge: q1 d1 1, d2 0, d4 0; q2 d3 1, d4 0, d6 0): A human (1 + 0)/2, LLM
        (0.5 + 0.5)/2; B human (0.5 + 0)/2, LLM (0.5 + 0)/2; C human (1 + 0)/2, LLM
        (0.5 + 0)/2; tau = scipy's kendalltau of the two."""
        from scipy.stats import kendalltau
        from sklearn.metrics import cohen_kappa_score

        server = server_factory("--mode", "logprobs")  # type: ignore[operator]
        files = _write(tmp_path)
        files["c"] = tmp_path / "c.json"
        run_c = {"q1": ["d2", "d1"], "q2": ["d6", "d4"], "q3": ["d5", "d6"]}
        files["c"].write_text(
            json.dumps(
                {s: {"retrieved": [{"id": d, "text": PASSAGES[d]} for d in docs]}
                 for s, docs in run_c.items()}
            )
        )  # fmt: skip
        code = main(
            ["annotate", str(files["dataset"]), "--task", "relevance", "--runs", str(files["a"]),
             str(files["b"]), str(files["c"]), "--depth", "2", "--agreement", "--metrics",
             "retrieval-precision-at-k@2", "--output", str(files["labelled"]), "--annotator",
             "openai-compatible", "--base-url", server.url, "--model", "judge"]
        )  # fmt: skip
        assert code == 0
        out = capsys.readouterr().out
        # only q1's and q2's pooled pairs went to the judge
        assert server.stats()["requests"] == len({p for p in _pairs(2) if p[0] != "q3"})
        kappa = cohen_kappa_score([1, 1, 0], [1, 0, 0])
        assert f"Cohen's kappa  {kappa:.4f}" in out
        assert "1 both relevant, 0 LLM only, 1 human only, 1 neither" in out
        tau = kendalltau([0.5, 0.25, 0.5], [0.5, 0.25, 0.25]).statistic
        assert f"retrieval-precision-at-k@2: Kendall's tau {tau:.4f}" in out
        assert f"{files['c']}  human 0.5000  LLM 0.2500" in out

    def test_agreement_with_holes_is_a_usage_error(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        files = _write(tmp_path)
        command = ["annotate", str(files["dataset"]), "--task", "relevance", "--runs",
                   str(files["a"]), "--holes", "--agreement", "--output", str(files["labelled"]),
                   "--annotator", "openai-compatible", "--base-url", "http://127.0.0.1:9/v1",
                   "--model", "judge"]  # fmt: skip
        assert main(command) == 2
        assert "leave out --holes" in capsys.readouterr().err


def _command(files: dict[str, Path], *extra: str) -> list[str]:
    return [sys.executable, "-m", "engine.cli", "annotate", str(files["dataset"]), "--task",
            "relevance", "--runs", str(files["a"]), str(files["b"]), "--depth", "2", "--holes",
            "--output", str(files["labelled"]), *extra]  # fmt: skip


class TestKillAndResume:
    @pytest.mark.slow
    def test_sigkill_then_resume(self, server_factory: object, tmp_path: Path) -> None:
        """SIGKILL while the 6 holes are judged (0.4 s a call, one at a time): the rerun's
        plan counts the cached judgements, asks only for the rest, and the labels are the
        judge's; a third run asks nothing."""
        server = server_factory("--mode", "logprobs", "--delay", "0.4")  # type: ignore[operator]
        files = _write(tmp_path)
        holes = _pairs(2) - {(q, d) for q, docs in LABELS.items() for d in docs or ()}
        cache = files["labelled"].with_suffix(".cache.sqlite")
        command = _command(files, "--annotator", "openai-compatible", "--base-url", server.url,
                           "--model", "judge", "--concurrency", "1")  # fmt: skip
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        done, deadline = 0, time.monotonic() + 30
        while time.monotonic() < deadline and done < 2:
            if cache.exists():
                try:
                    with sqlite3.connect(cache) as connection:
                        (done,) = connection.execute("SELECT COUNT(*) FROM annotations").fetchone()
                except sqlite3.OperationalError:
                    done = 0
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        assert 2 <= done < len(holes) and not files["labelled"].exists()
        with sqlite3.connect(cache) as connection:
            (kept,) = connection.execute("SELECT COUNT(*) FROM annotations").fetchone()
        before = server.stats()["requests"]
        rerun = subprocess.run(command, stderr=subprocess.PIPE, text=True, check=False)
        assert rerun.returncode == 0, rerun.stderr
        rest = len(holes) - kept
        assert f"{kept} from the cache, {rest} to compute in {rest} model calls" in rerun.stderr
        assert server.stats()["requests"] - before == rest
        written = {s["id"]: s for s in json.loads(files["labelled"].read_text())["samples"]}
        for sid, doc in holes:
            assert written[sid]["expected_output"]["relevance"][doc] == _judge(sid, doc)
        third = subprocess.run(command, stderr=subprocess.PIPE, text=True, check=False)
        assert "0 to compute in 0 model calls" in third.stderr
        assert server.stats()["requests"] - before == rest


class TestTransformers:
    @pytest.mark.slow
    def test_tiny_local_model_fills_the_holes(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The transformers annotator on the tests' tiny random Llama: the 6 holes go to
        the model in one batch; a random model's answers are no grade, so each is listed
        as unreadable, left unlabelled (the person's labels untouched) and listed in
        metadata.unjudged; nothing unreadable is cached, so a re-run asks for all 6 again."""
        pytest.importorskip("torch")
        pytest.importorskip("transformers")
        from tiny_lm import make_tiny_lm

        model = make_tiny_lm(tmp_path / "tiny", max_positions=2048)
        files = _write(tmp_path)
        holes = _pairs(2) - {(q, d) for q, docs in LABELS.items() for d in docs or ()}
        arguments = ["annotate", str(files["dataset"]), "--task", "relevance", "--runs",
                     str(files["a"]), str(files["b"]), "--depth", "2", "--holes", "--output",
                     str(files["labelled"]), "--annotator", "transformers", "--model",
                     str(model), "--device", "cpu", "--judge-max-tokens", "8",
                     "--max-unlabelled", "1"]  # fmt: skip
        assert main(arguments) == 0
        err = capsys.readouterr().err
        assert (
            f"{len(holes)} to judge: 0 from the cache, {len(holes)} to compute in 1 model calls"
            in err
        )
        assert f"{len(holes)} judge answer(s) could not be read" in err
        written = {s["id"]: s for s in json.loads(files["labelled"].read_text())["samples"]}
        for sid, sample in written.items():
            assert sample["expected_output"].get("relevance") == LABELS[sid]
        unjudged = {
            (sid, doc)
            for sid, sample in written.items()
            for doc in sample.get("metadata", {}).get("unjudged", {})
        }
        assert unjudged == holes
        assert main(arguments) == 0
        assert (
            f"{len(holes)} to judge: 0 from the cache, {len(holes)} to compute in 1 model calls"
            in capsys.readouterr().err
        )


class TestPython:
    def test_pool_and_fill_from_python(self, server_factory: object, tmp_path: Path) -> None:
        """The same as the command, from Python: pool, then fill_holes with an annotator,
        a cache and a runner; the plan is announced before the judge is called."""
        from engine.annotate import Cache, Runner, fill_holes
        from engine.annotate.http_annotator import OpenAICompatibleAnnotator
        from engine.io.records import samples_of

        server = server_factory("--mode", "logprobs")  # type: ignore[operator]
        files = _write(tmp_path)
        _, columns = read_dataset(files["dataset"])
        raws = json.loads(files["dataset"].read_text())["samples"]
        pooled = pool(columns, [read_outputs(files["a"]), read_outputs(files["b"])], depth=2)
        heard: list[tuple[str, object]] = []
        annotator = OpenAICompatibleAnnotator("judge", base_url=server.url)
        with Runner(Cache(tmp_path / "cache.sqlite")) as runner:
            labelled, filling = fill_holes(
                raws, samples_of(columns), pooled, annotator, runner,
                announce=lambda line: heard.append((line, server.stats()["requests"])),
            )  # fmt: skip
        holes = _pairs(2) - {(q, d) for q, docs in LABELS.items() for d in docs or ()}
        assert heard == [(filling.plan_line(256), 0)] and filling.judged == len(holes)
        for sid, doc in holes:
            sample = next(s for s in labelled if s["id"] == sid)
            assert sample["expected_output"]["relevance"][doc] == _judge(sid, doc)
            assert sample["metadata"]["label_sources"][doc] == SOURCE


class TestPPIPredictions:
    def test_filled_dataset_as_predictions_is_noted(
        self, server_factory: object, tmp_path: Path
    ) -> None:
        """A --holes dataset mixes human and judge labels: used as PPI's predictions, the
        report says how many of its labels are human ones; after --runs without --holes
        every label here is the judge's (all the human ones were pooled): no note."""
        import engine

        server = server_factory("--mode", "logprobs")  # type: ignore[operator]
        files = _write(tmp_path)
        assert _annotate(files, server.url, "--holes") == 0
        eng = engine.Engine(config={})
        gold = eng.dataset(str(files["dataset"])).with_metrics(["retrieval-precision-at-k@2"])
        report = gold.ppi(str(files["a"]), eng.dataset(str(files["labelled"])))
        human = sum(len(labels or {}) for labels in LABELS.values())
        assert report.notes and report.notes[0].startswith(f"{human} relevance label(s)")
        assert _annotate(files, server.url) == 0  # every pooled pair, no human label left
        report = gold.ppi(str(files["a"]), eng.dataset(str(files["labelled"])))
        assert report.notes == ()
