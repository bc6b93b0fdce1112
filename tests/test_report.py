"""The HTML report: self-contained, and working in headless Chromium (charts render,
the per-sample table sorts and filters, no console errors)."""

from __future__ import annotations

import fnmatch
import json
import random
import re
import shutil
import subprocess
import time
import tomllib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import engine
from engine.analysis.explain import Explanation, explain, labels_at
from engine.analysis.report import COLORS, build_report
from engine.cli import main
from engine.evaluation.results import Diagnostics, MetricRecord, Results

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart"
ASSETS = ROOT / "engine" / "analysis" / "report_assets"
#: The labels `make demo` compares (the Makefile's COMPARED), in its order.
COMPARED = [
    "retrieval-recall-at-k@5",
    "retrieval-ndcg-at-k@10",
    "ra-nwg-at-k@5",
    "proc-at-k@5",
    "pct-proc-at-k@5",
    "harm-at-k@5",
]
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


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What `make demo` does, through the CLI: both systems scored at K = 1, 3, 5, 10 into
    JSON (outputs kept), `compare --metrics COMPARED --format json` on them, the report
    with the same --metrics; and each system scored as `slotwise run quickstart` alone
    prints it (--format json), the console's numbers."""
    out = tmp_path_factory.mktemp("demo")
    found: dict[str, Any] = {"paths": [], "run": {}}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(QUICKSTART)
        for name in SYSTEMS:  # "plain": the console's run at K = 5, the report's K
            path = out / f"{name}.json"
            outputs = f"outputs/{name}.json"
            assert (
                main(
                    [
                        *("run", "quickstart", "--outputs", outputs, "--k", "1,3,5,10"),
                        *("--format", "json", "--output", str(path), "--keep-outputs"),
                    ]
                )
                == 0
            )
            found["paths"].append(str(path))
            plain = out / f"{name}-plain.json"
            assert (
                main(
                    [
                        *("run", "quickstart", "--outputs", outputs, "--format", "json"),
                        *("--k", "5", "--output", str(plain)),
                    ]
                )
                == 0
            )
            found["run"][name] = json.loads(plain.read_text())
        compared = out / "compare.json"
        metrics = ",".join(COMPARED)
        assert (
            main(
                [
                    *("compare", *found["paths"], "--metrics", metrics),
                    *("--format", "json", "--output", str(compared)),
                ]
            )
            == 0
        )
        found["compare"] = json.loads(compared.read_text())
        report = out / "report.html"
        assert main(["report", *found["paths"], "--metrics", metrics, "--output", str(report)]) == 0
    found["report"] = report
    found["page"] = report.read_text(encoding="utf-8")
    return found


class _Cells(HTMLParser):
    """The text of each cell, row by row, of the tables of one class in a page."""

    def __init__(self, css: str) -> None:
        super().__init__()
        self.css, self.depth, self.rows = css, 0, []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.depth += 1 if self.depth or (dict(attrs).get("class") or "") == self.css else 0
        elif self.depth and tag == "tr":
            self.rows.append([])
        elif self.depth and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self.depth:
            self.depth -= 1
        elif self.depth and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def _table(page: str, css: str) -> list[list[str]]:
    parser = _Cells(css)
    parser.feed(page)
    return parser.rows


def _data(page: str) -> dict[str, Any]:
    """The JSON the report embeds for its script."""
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page)
    assert found is not None
    return json.loads(found.group(1))  # type: ignore[no-any-return]


def _setbased(seed: int, errors: dict[str, str] | None = None) -> Results:
    """Results carrying proc-at-k and pct-proc-at-k labels (built directly); ``errors``:
    samples whose system call failed, by id."""
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
        diagnostics=Diagnostics(errors=errors or {}),
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
        k, retrieved, pool, has_output, slots, missed, diagnosis, error, hops = hybrid
        assert (k, retrieved, pool, has_output, error, hops) == (5, 10, 30, 1, None, [])
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


@pytest.mark.slow
class TestAgreesWithCli:
    """The report and the CLI agree on every number and verdict (issue 23, item 9): the
    quickstart demo's files, as `make demo` writes them, reported and compared."""

    def test_comparison_is_compares(self, demo):
        """Every cell of the Comparison table is `slotwise compare --format json` on the same
        files and --metrics, reformatted here; recall@5 is ▲ at p (Holm) 0.0048 in both."""

        def p(value: float | None) -> str:
            return "NA" if value is None else "<0.0001" if value < 1e-4 else f"{value:.4f}"

        expected = [
            [
                c["metric"],
                f"{c['mean_a']:.4f}",
                f"{c['mean_b']:.4f}",
                f"{c['difference']:+.4f} [{c['ci'][0]:+.4f}, {c['ci'][1]:+.4f}]",
                "NA" if c["dz"] is None else f"{c['dz']:+.2f}",
                p(c["p"]),
                p(c["p_holm"]),
                {"better": "▲", "worse": "▼"}.get(c["verdict"], ""),
            ]
            for c in demo["compare"]["comparisons"]
        ]
        head, *rows = _table(demo["page"], "comparison")
        body = [row for row in rows if not row[0].startswith("moved most: ")]
        assert len(rows) - len(body) == 5  # each metric whose samples moved: its movers' row
        assert head[:8] == [
            *("metric", "mean bm25", "mean hybrid-rerank", "Δ [95% CI]"),
            *("d_z", "p", "p (Holm)", ""),
        ]
        assert [row[:8] for row in body] == expected
        assert [row[0] for row in body] == COMPARED
        assert body[0][6:8] == ["0.0048", "▲"]

    def test_family_is_stated(self, demo, systems):
        """The note names the Holm family: its size, its metrics and the compare options
        that test the same one; without --metrics, every shared label."""
        family = re.search(r'<p class="note family">(.*?)</p>', demo["page"])
        assert family is not None
        text = family.group(1)
        assert text.startswith("Holm family: 6 test(s), the 6 metric(s) " + ", ".join(COMPARED))
        assert f"<code>--metrics {','.join(COMPARED)}</code>" in text
        page = build_report(systems, names=list(SYSTEMS))
        family = re.search(r'<p class="note family">(.*?)</p>', page)
        assert family is not None
        assert family.group(1).startswith(f"Holm family: {len(systems[0].labels)} test(s)")
        assert "no <code>--metrics</code> (every metric the files share)" in family.group(1)

    def test_summary_is_runs(self, demo):
        """Each Summary cell of a metric that `slotwise run quickstart --k 5` prints for
        that system (the same metric and parameters) is the run's mean, CI and n."""
        head, errors, *body = _table(demo["page"], "summary")
        assert head[1:3] == list(SYSTEMS)
        assert errors == ["errors (failed samples)", "0 of 46 (0.0%)", "0 of 46 (0.0%)", ""]
        cells = {row[0]: row[1:3] for row in body}
        with open(demo["paths"][0], encoding="utf-8") as file:
            reported = json.load(file)["metrics"]

        def same(record: dict[str, Any]) -> str | None:
            key = (record["alias"], record["params"])
            return next((m["label"] for m in reported if (m["alias"], m["params"]) == key), None)

        for index, name in enumerate(SYSTEMS):
            labels = {m["label"]: same(m) for m in demo["run"][name]["metrics"]}
            assert sum(v is not None for v in labels.values()) == 13  # every one
            for label, entry in demo["run"][name]["summary"].items():
                if labels[label] is None:
                    continue
                shown = cells[labels[label]][index].replace("]n=", "] n=")  # n: its own span
                lo, hi = entry["ci"]
                assert shown == f"{entry['mean']:.4f} [{lo:.4f}, {hi:.4f}] n={entry['n']}"

    def test_diagnosis_at_the_configured_k(self, demo):
        """PROC vs %PROC is drawn at K = 5 for every query, as `slotwise run --k 5`
        diagnoses (bm25 fine=33 retrieval=4 selection=7, hybrid-rerank 39/4/1: at K = 5
        q-22's evidence is selected, which its own k = 3 misses), its captions name it, and
        its quadrants count what the CLI counts."""
        page = demo["page"]
        captions = re.findall(r"<figcaption>([^<]* vs [^<]*)</figcaption>", page)
        assert captions == [f"{name}: proc-at-k@5 vs pct-proc-at-k@5" for name in SYSTEMS]
        charts = re.findall(r'<svg class="chart scatter".*?</svg>', page)
        readme = {"bm25": (33, 4, 7), "hybrid-rerank": (39, 4, 1)}
        for name, chart in zip(SYSTEMS, charts, strict=True):
            counts = demo["run"][name]["reports"]["diagnosis-at-k@5"]["counts"]
            assert (counts["fine"], counts["retrieval"], counts["selection"]) == readme[name]
            quadrants = re.findall(r'class="quadrant"[^>]*>([^<]*)<', chart)
            assert quadrants == [
                "retrieval",
                str(counts["retrieval"]),
                f"selection {counts['selection']}",
                f"fine {counts['fine']}",
            ]
        assert "the configured K (K = 5" in page

    def test_main_metric_first(self, demo, systems, declared):
        """The per-sample table opens on the main metric: the first compared label; without
        --metrics, the first metric the results were scored with, at the configured K."""
        assert _data(demo["page"])["main"] == COMPARED[0]
        assert f'<option value="{COMPARED[0]}" selected>' in demo["page"]
        assert _data(build_report(systems))["main"] == "retrieval-ndcg-at-k@5"
        assert _data(build_report(declared[0]))["main"] == "retrieval-hit-at-k"


class TestErrorsAndAssets:
    def test_errors_per_system(self):
        """The Summary shows each system's failed samples (diagnostics.errors): count and
        rate of the samples scored."""
        failed = {f"s-{i}": "TimeoutError: retriever" for i in range(3)}
        page = build_report([_setbased(0, failed), _setbased(1)], names=["flaky", "steady"])
        _, errors, *_ = _table(page, "summary")
        assert errors[:3] == ["errors (failed samples)", "3 of 40 (7.5%)", "0 of 40 (0.0%)"]
        assert 'class="num errors some">3 of 40' in page

    def test_axis_per_scale(self):
        """Metrics in [0, 1] share the column's axis; DCG@10 (means 1.73 and 2.13 on the
        quickstart) gets an axis of its own, 0 to 3, and so does harm@5 (means 0.02 and
        0.03, CIs up to 0.05: flat at 0 on the shared axis), 0 to 0.06, each labelled
        under its row."""
        dataset = engine.Engine(config=QUICKSTART / "slotwise.yaml").dataset("quickstart")
        evaluation = dataset.with_metrics(
            ["retrieval-dcg-at-k@10", "harm-at-k", "retrieval-recall-at-k"]
        )
        results = [evaluation.evaluate(QUICKSTART / "outputs" / f"{n}.json") for n in SYSTEMS]
        page = build_report(results, names=SYSTEMS)
        charts = re.findall(r'<svg class="cibar( own)?".*?</svg>', page, flags=re.S)
        assert charts == [" own", " own", ""]
        own = re.findall(r'<svg class="cibar own".*?</svg>', page)
        ticks = [re.findall(r'class="tick"[^>]*>([^<]*)<', chart) for chart in own]
        assert ticks == [["0", "1", "2", "3"], ["0", "0.02", "0.04", "0.06"]]
        assert re.findall(r'<th class="chart">95% CI, axis 0 to 1', page)

    def test_assets_are_package_data(self):
        """report.js and report.css are package data of engine.analysis.report_assets, a
        package of its own in the setuptools configuration (so a wheel ships them and its
        build warns of nothing), and the page inlines them as they are."""
        config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
        assert "engine.analysis.report_assets" in config["packages"]
        globs = config["package-data"]["engine.analysis.report_assets"]
        assets = sorted(p.name for p in ASSETS.iterdir())
        assert assets == ["report.css", "report.js"]
        for name in assets:
            assert any(fnmatch.fnmatch(name, g) for g in globs), name
        page = build_report([_setbased(0)])
        css, js = ((ASSETS / name).read_text(encoding="utf-8") for name in assets)
        assert "</style" not in css.lower() and "</script" not in js.lower()
        assert f"<style>{css}</style>" in page and f"<script>{js}</script>" in page

    def test_javascript_parses(self):
        """report.js is JavaScript that node parses (node --check)."""
        node = shutil.which("node") or shutil.which("nodejs")
        if node is None:
            pytest.skip(
                "node is not installed, so report.js is not parsed (apt-get install nodejs)"
            )
        done = subprocess.run(
            [node, "--check", str(ASSETS / "report.js")], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr


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


@pytest.mark.slow
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

    def test_hostile_ids_stay_data(self, browser, tmp_path):
        """Ids that would end or reopen the data's script tag (``<!--<script>``,
        ``</script>``) and an ampersand: the page runs (no console error, the table
        filled) and shows each id as written. Before: ``<!--<script>`` left the embedded
        data unclosed and none of the interactive parts ran."""
        from selenium.webdriver.common.by import By

        ids = ["<!--<script>", "</script><b>x", "a&amp;b", "q4"]
        samples = [{"id": i, "expected_output": [f"d{n}"]} for n, i in enumerate(ids)]
        evaluation = (
            engine.Engine(config={}).dataset(samples=samples).with_metrics(["retrieval-mrr"])
        )
        results = [
            evaluation.evaluate({i: [f"d{n}", "x"][:: 1 if s else -1] for n, i in enumerate(ids)})
            for s in (True, False)
        ]
        page = tmp_path / "report.html"
        page.write_text(build_report(results, names=["a", "b"]), encoding="utf-8")
        browser.get(page.as_uri())
        assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
        table = browser.find_element(By.ID, "sample-table")
        shown = {
            row.find_elements(By.TAG_NAME, "td")[0].text
            for row in table.find_elements(By.CSS_SELECTOR, "tbody tr")
        }
        assert shown == set(ids)

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

    def test_demo_report_at_1280(self, demo, browser, tmp_path):
        """The demo report in a 1280 px window (issues 25 and 50): every stylesheet rule
        parses; the Summary draws each system in its legend colour on one axis for the
        metrics in [0, 1], except harm (all its values below 0.2), which gets an axis of
        its own under its row so that its interval is not flat at 0; every By-stratum
        column is on screen; the per-sample table opens on the main metric; a sample's
        view opens whole."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import Select

        browser.set_window_size(1280, 1000)
        browser.get(demo["report"].as_uri())
        assert browser.get_log("browser") == []
        css = (ASSETS / "report.css").read_text(encoding="utf-8")
        rules = browser.execute_script(  # a @media block's rules each, and the block
            "function count(rules) { let n = 0; for (const r of rules) n += 1 + "
            "(r.cssRules ? count(r.cssRules) : 0); return n; }"
            "return count(document.styleSheets[0].cssRules)"
        )
        assert rules == css.count("}")

        legend = browser.execute_script(
            "return Array.from(document.querySelectorAll('#summary .legend .key i'))"
            ".map(function (e) { return getComputedStyle(e).backgroundColor; })"
        )
        assert len(legend) == 2 and len(set(legend)) == 2
        charts = browser.execute_script(
            """return Array.from(document.querySelectorAll('#summary tbody tr')).slice(1)
            .map(function (tr) {
              var svg = tr.querySelector('svg.cibar');
              return [tr.querySelector('th').textContent, svg.classList.contains('own'),
                Array.from(svg.querySelectorAll('text.tick')).map(function (t) {
                  var r = t.getBoundingClientRect();
                  return [t.textContent, r.left + r.width / 2];
                }),
                Array.from(svg.querySelectorAll('g.system')).map(function (g) {
                  var dot = g.querySelector('circle').getBoundingClientRect();
                  var lines = Array.from(g.querySelectorAll('line'));
                  var bar = lines[0].getBoundingClientRect();
                  return [Number(g.getAttribute('data-system')),
                    getComputedStyle(g.querySelector('circle')).fill,
                    lines.map(function (l) { return getComputedStyle(l).stroke; }),
                    dot.left + dot.width / 2, bar.width];
                })];
            })"""
        )
        ticks = browser.execute_script(
            "return Array.from(document.querySelectorAll('#summary th.chart svg text'))"
            ".map(function (t) { var r = t.getBoundingClientRect();"
            " return [t.textContent, r.left + r.width / 2]; })"
        )
        assert [t[0] for t in ticks] == ["0", "0.25", "0.5", "0.75", "1"]
        with open(demo["paths"][0], encoding="utf-8") as file:
            first = json.load(file)["summary"]
        with open(demo["paths"][1], encoding="utf-8") as file:
            summaries = [first, json.load(file)["summary"]]
        widths = {}
        assert len(charts) == len(first)
        for label, own, own_ticks, systems in charts:
            values = [v for s in summaries for v in [s[label]["mean"], *s[label]["ci"]]]
            # the demo's metrics all lie in [0, 1]; harm's below 0.2 (at K = 1: all 0)
            assert own == (0 < max(values) <= 0.2), label
            axis = own_ticks if own else ticks
            (low, x0), (high, x1) = (
                (float(axis[0][0]), axis[0][1]),
                (float(axis[-1][0]), axis[-1][1]),
            )
            assert low <= min(values) and max(values) <= high
            assert [s[0] for s in systems] == [0, 1]
            for index, fill, strokes, centre, width in systems:
                assert fill == legend[index] and set(strokes) == {legend[index]}
                mean = summaries[index][label]["mean"]
                assert centre == pytest.approx(
                    x0 + (mean - low) / (high - low) * (x1 - x0), abs=1.0
                )
                widths[label, index] = width / (x1 - x0)
        harm = next(chart for chart in charts if chart[0] == "harm-at-k@5")
        assert [t[0] for t in harm[2]] == ["0", "0.02", "0.04", "0.06"]
        assert widths["harm-at-k@5", 0] > 0.5  # [0.0053, 0.0417]: a 25th of the shared axis

        strata = browser.execute_script(
            """var box = document.querySelector('#strata .scroll');
            var cells = Array.from(box.querySelectorAll('thead th, tbody tr:first-child td'));
            return [box.scrollWidth, box.clientWidth, window.innerWidth,
              Math.max.apply(null, cells.map(function (c) { return c.getBoundingClientRect().right; })),
              box.querySelectorAll('tbody th').length];"""
        )
        scroll_width, client_width, window_width, right, metrics = strata
        assert scroll_width <= client_width and right <= window_width
        assert metrics == len(labels_at(engine.read_results(demo["paths"][0]).metrics, 5))

        assert (
            Select(browser.find_element(By.ID, "metric")).first_selected_option.text
            == (COMPARED[0])
        )
        row = browser.find_element(By.CSS_SELECTOR, '#sample-table tr[data-index="20"]')
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", row)
        row.click()  # centred: at the box's top the sticky header would take the click
        box, panel, view = browser.execute_script(
            """var panel = document.querySelector('tr.explain-row');
            var box = panel.closest('.tall').getBoundingClientRect();
            var p = panel.getBoundingClientRect();
            return [[box.top, box.bottom], [p.top, p.bottom, p.height], window.innerHeight];"""
        )
        assert panel[2] > 560  # the old 560 px box cut it off
        assert box[0] - 0.5 <= panel[0] and panel[1] <= box[1] + 0.5
        if panel[2] + 80 <= view:  # the window holds the view: all of it on screen
            assert panel[0] >= 0 and panel[1] <= view
        assert (
            "q-21: How much does the Plus plan cost per year?"
            in browser.find_element(By.CSS_SELECTOR, "tr.explain-row").text
        )
        assert browser.get_log("browser") == []
        browser.save_screenshot(str(tmp_path / "demo-explain.png"))

    def test_demo_curves_at_1280(self, demo, browser, tmp_path):
        """The demo's Metric@K charts in a 1280 px window (issue 50): each axis fits the
        values it draws (means and CIs at K = 1, 3, 5, 10) and is stated beside the title,
        so harm (about 0.02) fills its chart and its systems' points stand apart instead of
        lying flat on 0 to 1; where both systems have the same mean, a note says at which
        K, and on PROC@K (one pool, the same means everywhere) both lines show in their
        colours on the screenshot."""
        from PIL import Image
        from selenium.webdriver.common.by import By

        browser.set_window_size(1280, 1000)
        browser.get(demo["report"].as_uri())
        figures = browser.execute_script(
            """function middle(e) { var r = e.getBoundingClientRect(); return (r.top + r.bottom) / 2; }
            return Array.from(document.querySelectorAll('#curves figure')).map(function (f) {
              var svg = f.querySelector('svg.curve');
              var drawn = Array.from(svg.querySelectorAll('polygon.band, circle.mean'))
                .map(function (e) { return e.getBoundingClientRect(); });
              return [f.querySelector('figcaption').firstChild.textContent.trim(),
                f.querySelector('figcaption .scale').textContent,
                Array.from(svg.querySelectorAll('text.tick[text-anchor="end"]'))
                  .map(function (t) { return [Number(t.textContent), middle(t)]; }),
                Math.min.apply(null, drawn.map(function (r) { return r.top; })),
                Math.max.apply(null, drawn.map(function (r) { return r.bottom; })),
                Array.from(svg.querySelectorAll('g.system')).map(function (g) {
                  return Array.from(g.querySelectorAll('circle.mean')).map(middle);
                }),
                Array.from(f.querySelectorAll('p.overlap')).map(function (p) { return p.textContent; })];
            });"""
        )
        summaries = []
        for path in demo["paths"]:
            with open(path, encoding="utf-8") as file:
                summaries.append(json.load(file)["summary"])
        ks = (1, 3, 5, 10)
        names = [figure[0] for figure in figures]
        assert "harm-at-k@K" in names and "proc-at-k@K" in names
        for name, scale, ticks, top, bottom, points, overlaps in figures:
            metric = name.removesuffix("@K")
            entries = [[s[f"{metric}@{k}"] for k in ks] for s in summaries]
            values = [v for system in entries for e in system for v in [e["mean"], *e["ci"]]]
            (low, y_low), (high, y_high) = ticks[0], ticks[-1]
            assert scale == f"axis {low:g} to {high:g}"
            assert low <= min(values) and max(values) <= high, name
            assert high - low <= 2 * (max(values) - min(values)), name  # fitted, not 0 to 1
            assert y_high - 5 <= top and bottom <= y_low + 5, name  # drawn inside the axis
            assert bottom - top >= (y_low - y_high) / 2, name  # over half of it
            same = [
                k
                for k, a, b in zip(ks, *entries, strict=True)
                if f"{a['mean']:.4f}" == f"{b['mean']:.4f}"
            ]
            where = "every K" if same == list(ks) else "K = " + ", ".join(map(str, same))
            note = f"hybrid-rerank and bm25 have the same mean at {where}: their lines coincide"
            assert overlaps == ([note] if same else []), name
            pixels = [
                [y_low - (v["mean"] - low) / (high - low) * (y_low - y_high) for v in system]
                for system in entries
            ]
            assert points == [pytest.approx(p, abs=1.0) for p in pixels], name
        harm = figures[names.index("harm-at-k@K")]
        assert harm[1] == "axis 0 to 0.06"
        assert abs(harm[5][0][2] - harm[5][1][2]) > 10  # K = 5: 0.0217 and 0.0261

        figure = browser.find_elements(By.CSS_SELECTOR, "#curves svg.curve")[
            names.index("proc-at-k@K")
        ]
        browser.execute_script("arguments[0].scrollIntoView()", figure)
        shot = tmp_path / "proc-at-k.png"
        figure.screenshot(str(shot))
        with Image.open(shot) as image:
            rgb = np.asarray(image.convert("RGB"), dtype=np.int32)
        for color in COLORS[:2]:
            target = np.array([int(color[i : i + 2], 16) for i in (1, 3, 5)])
            near = (np.abs(rgb - target).sum(axis=2) < 60).sum()
            assert near > 50, f"{color}: {near} pixels"  # hidden under the other: 0
        browser.find_element(By.ID, "curves").screenshot(str(tmp_path / "curves.png"))
        assert browser.get_log("browser") == []

    def test_sample_table_at_1280(self, demo, browser, tmp_path):
        """In a 1280 px window the per-sample table fills its box and keeps its width and
        columns when a row opens (issue 50); every passage text of the opened view is the
        outputs file's whole text, wrapped inside the box, none of it cut or hidden."""
        from selenium.webdriver.common.by import By

        browser.set_window_size(1280, 1000)
        browser.get(demo["report"].as_uri())
        measure = """var box = document.querySelector('#samples .tall');
            var table = document.getElementById('sample-table');
            return [box.clientWidth, box.scrollWidth, table.getBoundingClientRect().width,
              Array.from(table.tHead.querySelectorAll('th')).map(function (th) {
                var r = th.getBoundingClientRect(); return [r.left, r.width]; })];"""
        closed = browser.execute_script(measure)
        client, scrolled, width, columns = closed
        assert width == pytest.approx(client, abs=1.0) and scrolled <= client
        row = browser.find_element(By.CSS_SELECTOR, '#sample-table tr[data-index="20"]')
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", row)
        row.click()  # centred: at the box's top the sticky header would take the click
        opened = browser.execute_script(measure)
        assert opened[:3] == [client, scrolled, pytest.approx(width, abs=0.5)]
        assert opened[3] == [[pytest.approx(v, abs=0.5) for v in c] for c in columns]
        texts = browser.execute_script(
            """var box = document.querySelector('#samples .tall').getBoundingClientRect();
            return Array.from(document.querySelectorAll('tr.explain-row div.system')).map(
              function (system) {
                return Array.from(system.querySelectorAll('table.slots tbody tr')).map(function (tr) {
                  var cell = tr.lastElementChild, r = cell.getBoundingClientRect();
                  return [cell.textContent, cell.scrollWidth <= cell.clientWidth,
                    cell.scrollHeight <= cell.clientHeight, r.left >= box.left && r.right <= box.right];
                });
              });"""
        )
        for name, shown in zip(SYSTEMS, texts, strict=True):
            output = json.loads((QUICKSTART / "outputs" / f"{name}.json").read_text())["q-21"]
            whole = [item["text"] for item in output["retrieved"][:5]]
            assert [t[0] for t in shown] == whole
            assert max(map(len, whole)) > 100  # longer than the 80-character snippets
            assert all(all(t[1:]) for t in shown), shown
        browser.find_element(By.ID, "samples").screenshot(str(tmp_path / "samples.png"))
        assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")] == []

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
