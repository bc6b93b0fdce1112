"""The HTML report: self-contained, and working in headless Chromium (charts render,
the per-sample table sorts and filters, no console errors)."""

from __future__ import annotations

import json
import random
import re
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import engine
from engine.analysis.report import build_report
from engine.cli import main
from engine.evaluation.explain import Explanation, explain
from engine.evaluation.results import Diagnostics, MetricRecord, Results

QUICKSTART = Path(__file__).resolve().parent.parent / "examples" / "quickstart"
METRICS = ["retrieval-ndcg-at-k", "retrieval-recall-at-k", "retrieval-map"]
SYSTEMS = ("bm25", "hybrid-rerank")
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def systems() -> list[engine.Results]:
    """bm25 and hybrid-rerank on the quickstart, three metrics at K = 1, 3, 5, 10."""
    eng = engine.Engine(config=QUICKSTART / "slotwise.yaml")
    evaluation = eng.dataset("quickstart").with_metrics(METRICS).at_k([1, 3, 5, 10])
    return [
        evaluation.evaluate(QUICKSTART / "outputs" / name)
        for name in ("bm25.json", "hybrid-rerank.json")
    ]


@pytest.fixture(scope="module")
def declared() -> tuple[list[engine.Results], list[Explanation]]:
    """bm25 and hybrid-rerank on the quickstart's declared metrics (classic, set-based and
    the diagnosis at K = 5), with every sample explained."""
    dataset = engine.Engine(config=QUICKSTART / "slotwise.yaml").dataset("quickstart")
    outputs = [QUICKSTART / "outputs" / f"{name}.json" for name in SYSTEMS]
    results = [dataset.evaluate(path) for path in outputs]
    return results, explain(results, names=SYSTEMS, dataset=dataset, outputs=outputs)


def _data(page: str) -> dict[str, Any]:
    """The JSON the report embeds for its script."""
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page)
    assert found is not None
    return json.loads(found.group(1))  # type: ignore[no-any-return]


def _setbased(seed: int) -> Results:
    """Results carrying proc-at-k and pct-proc-at-k labels (built directly)."""
    rng = np.random.default_rng(seed)
    ids = [f"s-{i}" for i in range(40)]
    proc = rng.random(40)
    pct = rng.random(40)
    pct[:3] = np.nan
    records = [
        MetricRecord(label, alias, {"k": 5}, True, "slotwise", "0.1.0")
        for label, alias in (("proc-at-k@5", "proc-at-k"), ("pct-proc-at-k@5", "pct-proc-at-k"))
    ]
    scores = {"proc-at-k@5": proc, "pct-proc-at-k@5": pct}
    return Results(
        dataset_name="synthetic",
        dataset_hash="sha256:" + "0" * 64,
        ids=pa.array(ids),
        metrics=records,
        scores=scores,
        aggregates={k: float(np.nanmean(v)) for k, v in scores.items()},
        counts={k: (int((~np.isnan(v)).sum()), int(np.isnan(v).sum())) for k, v in scores.items()},
        diagnostics=Diagnostics(),
        provenance={"slotwise": "0.1.0", "python": "3.11", "created": "now"},
    )


class TestBuild:
    def test_self_contained(self, systems):
        """No external URL is fetched: no src/href to http(s), no CDN, inline style/script."""
        page = build_report(systems, names=["bm25", "hybrid"])
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
        assert "<style>" in page and "<script>" in page
        for section in (
            'id="summary"',
            'id="comparison"',
            'id="curves"',
            'id="strata"',
            'id="samples"',
        ):
            assert section in page
        assert 'id="diagnosis"' not in page  # no PROC labels here

    def test_single_results_has_no_comparison(self, systems):
        """One results file: no comparison section."""
        page = build_report(systems[:1])
        assert 'id="comparison"' not in page and 'id="summary"' in page

    def test_diagnosis_when_proc_labels_present(self):
        """proc-at-k and pct-proc-at-k labels give the PROC vs %PROC scatter with quadrants."""
        page = build_report([_setbased(0), _setbased(1)], names=["dense", "hybrid"])
        assert 'id="diagnosis"' in page and page.count('class="chart scatter"') == 2
        assert "selection" in page and "retrieval" in page

    def test_data_is_escaped(self, systems):
        """Names are HTML-escaped and the embedded JSON cannot close its script tag."""
        page = build_report(systems, names=["<b>x</b>", "</script>"])
        assert "<b>x</b>" not in page
        assert page.count("</script>") == 2

    def test_explanations_embedded_once(self, declared):
        """Explanations go into the embedded JSON (documents once each), not into per-row
        HTML; the problem filters are offered."""
        results, explanations = declared
        page = build_report(results, names=SYSTEMS, explanations=explanations)
        assert 'class="explain-row"' not in page
        for option in ("retrieval problem", "selection problem", "regressed"):
            assert f">{option}</option>" in page
        data = _data(page)
        ex = data["explain"]
        assert len(ex["docs"]) == len(set(ex["docs"])) == len(ex["texts"])
        index = data["ids"].index("q-21")
        hybrid = ex["views"][1][index]
        k, retrieved, pool, has_output, slots, missed, diagnosis = hybrid
        assert (k, retrieved, pool, has_output) == (5, 10, 30, 1)
        assert [ex["docs"][slot[0]] for slot in slots] == [
            s.id for s in explanations[index].systems[1].slots
        ]
        assert slots[0] == [ex["docs"].index("doc-040"), 4, 3, 5]  # pool rank, rel, grade
        assert slots[4] == [ex["docs"].index("doc-071"), 6]  # unlabeled: no trailing nulls
        assert missed == [[ex["docs"].index("doc-050"), 5, 1, 3]]
        assert diagnosis == ["diagnosis-at-k", 1, 1.1, 1.1, "fine"]
        assert data["verdicts"][0][data["ids"].index("q-05")] == "selection"

    def test_without_explanations_says_how_to_get_them(self, systems):
        page = build_report(systems, names=list(SYSTEMS))
        assert _data(page)["explain"] is None and "slotwise report --outputs F" in page
        assert "regressed" in page and "selection problem" not in page  # no diagnosis here

    def test_cli_explains_with_outputs(self, declared, tmp_path, capsys, monkeypatch):
        """`slotwise report A B --outputs A' --outputs B'` (dataset found by name in the
        quickstart's slotwise.yaml); --dataset without outputs: exit 2 saying what to pass."""
        paths = []
        for name, results in zip(SYSTEMS, declared[0], strict=True):
            paths.append(str(tmp_path / f"{name}.json"))
            results.to_json(paths[-1])
        monkeypatch.chdir(QUICKSTART)
        out = tmp_path / "report.html"
        outputs = [f"--outputs=outputs/{name}.json" for name in SYSTEMS]
        assert main(["report", *paths, *outputs, "--output", str(out)]) == 0
        assert _data(out.read_text())["explain"]["questions"][0].startswith("How many days")
        code = main(["report", *paths, "--dataset", "quickstart", "--output", str(out)])
        assert code == 2 and "bm25 kept no outputs" in capsys.readouterr().err

    def test_cli_writes_report(self, systems, tmp_path, capsys):
        """`slotwise report A.json B.json --output report.html`; other datasets: exit 2."""
        paths = []
        for name, results in zip(("bm25", "hybrid"), systems, strict=True):
            paths.append(tmp_path / f"{name}.json")
            results.to_json(paths[-1])
        out = tmp_path / "report.html"
        assert main(["report", *map(str, paths), "--output", str(out), "--by", "topic"]) == 0
        assert "By topic" in out.read_text()
        other = _setbased(0)
        other.to_json(tmp_path / "other.json")
        code = main(["report", str(paths[0]), str(tmp_path / "other.json"), "--output", str(out)])
        assert code == 2 and "different dataset" in capsys.readouterr().err


def _browser():
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.skip(
            "chromium and chromium-driver are not installed "
            "(apt-get install chromium chromium-driver)"
        )
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,1000",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@pytest.fixture(scope="module")
def browser():
    driver = _browser()
    yield driver
    driver.quit()


class TestInChromium:
    def test_report_works_end_to_end(self, systems, browser, tmp_path):
        """Loads without console errors, charts have size, sorting and filtering work."""
        from selenium.webdriver.common.by import By

        page = tmp_path / "report.html"
        page.write_text(
            build_report(systems, names=["bm25", "hybrid-rerank"]),
            encoding="utf-8",
        )
        browser.get(page.as_uri())
        errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert errors == []

        charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
        assert len(charts) >= 4  # three curves and the forest plot
        for chart in charts:
            assert chart.size["width"] > 0 and chart.size["height"] > 0
        assert browser.find_elements(By.CSS_SELECTOR, "svg.curve polyline")

        table = browser.find_element(By.ID, "sample-table")
        rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
        assert len(rows) == 46

        def column(index: int) -> list[str]:
            return [
                row.find_elements(By.TAG_NAME, "td")[index].text
                for row in table.find_elements(By.CSS_SELECTOR, "tbody tr")
            ]

        headers = table.find_elements(By.CSS_SELECTOR, "thead th")
        assert [h.text.rstrip(" ▲▼") for h in headers] == [
            "id",
            "stratum",
            "bm25",
            "hybrid-rerank",
            "Δ",
        ]
        headers[2].click()  # sort by bm25, ascending
        values = [float(v) for v in column(2)]
        assert values == sorted(values)
        table.find_elements(By.CSS_SELECTOR, "thead th")[2].click()  # descending
        values = [float(v) for v in column(2)]
        assert values == sorted(values, reverse=True)

        box = browser.find_element(By.ID, "filter")
        box.send_keys("multi-hop")
        strata = column(1)
        assert len(strata) == 10 and set(strata) == {"multi-hop"}
        assert "10 of 46" in browser.find_element(By.ID, "count").text
        box.clear()
        box.send_keys("q-0")
        assert set(column(0)) == {f"q-0{i}" for i in range(1, 10)}

        assert browser.get_log("browser") == []
        browser.set_window_size(
            1400, browser.execute_script("return document.body.scrollHeight") + 80
        )
        shot = tmp_path / "report.png"
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000

    def test_click_a_row_to_explain(self, declared, browser, tmp_path):
        """Clicking q-21's row opens both systems side by side (the document that moved in
        marked), clicking again closes it; the problem filters count what the data says; no
        console errors and nothing loaded from the network."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import Select

        results, explanations = declared
        page = tmp_path / "explain.html"
        page.write_text(
            build_report(results, names=SYSTEMS, explanations=explanations), encoding="utf-8"
        )
        browser.get(page.as_uri())
        table = browser.find_element(By.ID, "sample-table")
        browser.find_element(By.ID, "filter").send_keys("q-21")
        table.find_element(By.CSS_SELECTOR, "tbody tr.explainable").click()
        view = table.find_element(By.CSS_SELECTOR, "tr.explain-row")
        text = view.text
        assert text.startswith("q-21: How much does the Plus plan cost per year?")
        assert len(view.find_elements(By.CSS_SELECTOR, "div.system")) == 2
        assert len(view.find_elements(By.CSS_SELECTOR, "table.slots tbody tr")) == 10
        moved = view.find_elements(By.CSS_SELECTOR, "tr.moved-in")
        assert [row.find_elements(By.TAG_NAME, "td")[1].text for row in moved] == ["doc-071"]
        assert "missed: doc-050 (rel 1, grade 3) at pool rank 5" in text
        assert "vs bm25: moved in doc-071; moved out doc-050" in text
        assert "diagnosis-at-k: fine (G_obs 1, G_pool 1.1, G_oracle 1.1)" in text
        assert "retrieval-recall-at-k 1.0000 0.5000 -0.5000" in text
        view.screenshot(str(tmp_path / "explain.png"))
        table.find_element(By.CSS_SELECTOR, "tbody tr.explainable").click()
        assert table.find_elements(By.CSS_SELECTOR, "tr.explain-row") == []

        browser.find_element(By.ID, "filter").clear()
        problem = Select(browser.find_element(By.ID, "problem"))
        for verdict in ("retrieval", "selection"):
            problem.select_by_value(verdict)
            expected = {
                i
                for r in results
                for i, d in zip(r.sample_ids, r.details["diagnosis-at-k"], strict=True)
                if d and d["class"] == verdict
            }
            shown = table.find_elements(By.CSS_SELECTOR, "tbody tr td:first-child")
            assert {cell.text for cell in shown} == expected
        Select(browser.find_element(By.ID, "metric")).select_by_value("retrieval-recall-at-k")
        problem.select_by_value("regressed")
        shown = table.find_elements(By.CSS_SELECTOR, "tbody tr td:first-child")
        assert sorted(cell.text for cell in shown) == ["q-01", "q-21"]

        assert browser.get_log("browser") == []
        loaded = browser.execute_script(
            "return performance.getEntriesByType('resource').map(function (e) { return e.name; })"
        )
        assert not [url for url in loaded if url.startswith(("http:", "https:"))]

    def test_diagnosis_scatter_renders(self, browser, tmp_path):
        """The PROC vs %PROC scatter draws one point per sample with a PROC value."""
        from selenium.webdriver.common.by import By

        page = tmp_path / "diagnosis.html"
        page.write_text(build_report([_setbased(3)]), encoding="utf-8")
        browser.get(page.as_uri())
        assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
        scatter = browser.find_element(By.CSS_SELECTOR, "svg.scatter")
        assert scatter.size["width"] > 0
        assert len(scatter.find_elements(By.CSS_SELECTOR, "circle.point")) == 40
        browser.save_screenshot(str(tmp_path / "diagnosis.png"))


def _synthetic(n: int, seed: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """n graded questions over a 50,000-passage corpus, and two systems that rank 10 of the
    same 30-candidate pool in different orders (each passage with its text)."""
    rng = random.Random(seed)
    words = ["refund", "return", "warranty", "plan", "price", "device", "battery", "sensor"]
    texts = [" ".join(rng.choices(words, k=16)) for _ in range(500)]
    samples, systems = [], ({}, {})
    for i in range(n):
        pool = [f"d-{d:05d}" for d in rng.sample(range(50_000), 30)]
        grades = {d: rng.randint(1, 5) for d in pool[:8]}
        samples.append(
            {
                "id": f"q-{i:05d}",
                "input": {"question": " ".join(rng.choices(words, k=10)) + "?"},
                "expected_output": {
                    "relevance": {d: g - 2 for d, g in grades.items()},
                    "grades": grades,
                },
                "metadata": {"stratum": rng.choice(["factoid", "policy", "multi-hop"])},
            }
        )
        for outputs in systems:
            ranked = rng.sample(pool, 10)
            retrieved = [{"id": d, "text": texts[int(d[2:]) % len(texts)]} for d in ranked]
            outputs[f"q-{i:05d}"] = {"pool": pool, "retrieved": retrieved}
    return samples, list(systems)


@pytest.mark.slow
def test_ten_thousand_samples(browser, tmp_path):
    """At 10,000 samples and two systems the report, with every sample explained, stays a
    file of reasonable size that paints fast; clicking a row still opens its view."""
    from selenium.webdriver.common.by import By

    samples, outputs = _synthetic(10_000)
    eng = engine.Engine(config={})
    dataset = eng.dataset(samples=samples, name="synthetic")
    classic = ["retrieval-recall-at-k", "retrieval-mrr", "retrieval-ndcg-at-k@10"]
    evaluation = dataset.with_metrics(
        [*classic, "ra-nwg-at-k", "proc-at-k", "pct-proc-at-k", "harm-at-k", "diagnosis-at-k"]
    )
    results = [evaluation.evaluate(o) for o in outputs]
    started = time.perf_counter()
    explanations = explain(results, names=["a", "b"], dataset=dataset, outputs=outputs)
    page = tmp_path / "report.html"
    page.write_text(build_report(results, names=["a", "b"], explanations=explanations))
    built = time.perf_counter() - started
    size = page.stat().st_size
    browser.get(page.as_uri())
    paint = browser.execute_script(
        "return performance.getEntriesByName('first-contentful-paint')[0].startTime"
    )
    ready = browser.execute_script(
        "return performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"
    )
    rows = browser.find_elements(By.CSS_SELECTOR, "#sample-table tbody tr")
    rows[0].click()
    assert browser.find_elements(By.CSS_SELECTOR, "tr.explain-row div.system")
    assert browser.get_log("browser") == []
    print(
        f"10,000 samples: built in {built:.1f} s, {size / 1e6:.1f} MB, first contentful "
        f"paint {paint:.0f} ms, ready (DOMContentLoaded) {ready:.0f} ms, {len(rows)} rows drawn"
    )
    assert size < 16e6 and paint < 2000 and ready < 8000 and len(rows) == 1000
