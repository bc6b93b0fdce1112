"""The HTML report: self-contained, and working in headless Chromium (charts render,
the per-sample table sorts and filters, no console errors)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import engine
from engine.analysis.report import build_report
from engine.cli import main
from engine.evaluation.results import Diagnostics, MetricRecord, Results

QUICKSTART = Path(__file__).resolve().parent.parent / "examples" / "quickstart"
METRICS = ["retrieval-ndcg-at-k", "retrieval-recall-at-k", "retrieval-map"]
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
