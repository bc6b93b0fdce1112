"""The HTML report of ``make demo`` at 800, 1280 and 1920 px in headless Chromium: nothing
clipped (no element that scrolls sideways, no table column, chart or point past the page's
right edge), no text over other text in a chart, the comparison's "moved most" on one line,
and the Metric@K charts' K on a numeric axis (each K's label placed in proportion to its
value). Measured in the page with JavaScript (scrollWidth against clientWidth, bounding
boxes), and a screenshot taken at each width."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_report import COMPARED, QUICKSTART, SYSTEMS, _browser

from engine.cli import main

pytestmark = pytest.mark.slow

WIDTHS = (800, 1280, 1920)

#: Elements that scroll or clip sideways and hold more than they show; the page itself wider
#: than the window; anything drawn past the window's right edge.
CLIPPED = """
const width = document.documentElement.clientWidth, found = [];
if (document.documentElement.scrollWidth > width) found.push('the page: ' + document.documentElement.scrollWidth + ' px');
for (const e of document.querySelectorAll('body *')) {
  const style = getComputedStyle(e);
  if (style.overflowX !== 'visible' && e.scrollWidth > e.clientWidth + 1)
    found.push(e.tagName + '.' + e.className + ' in #' + (e.closest('section') || {}).id + ': ' + e.scrollWidth + ' > ' + e.clientWidth);
  if (e.closest('.tall') && !e.matches('table, table *')) continue;
  const box = e.getBoundingClientRect();
  if (box.width > 0 && box.right > width + 0.5 && !e.closest('tr.explain-row'))
    found.push(e.tagName + '.' + (e.getAttribute('class') || '') + ' ends at ' + box.right);
}
return found;
"""

#: Pairs of text elements of one chart whose boxes overlap (by more than half a pixel).
OVERLAPS = """
const found = [];
for (const svg of document.querySelectorAll('svg')) {
  const boxes = [...svg.querySelectorAll('text')].map(t => [t.textContent, t.getBoundingClientRect()]);
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const [a, p] = boxes[i], [b, q] = boxes[j];
    const x = Math.min(p.right, q.right) - Math.max(p.left, q.left);
    const y = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
    if (x > 0.5 && y > 0.5) found.push((svg.getAttribute('aria-label') || svg.className.baseVal) + ': ' + a + ' / ' + b);
  }
}
return found;
"""

#: The lines each "moved most" cell's text takes (distinct line tops of its text).
MOVER_LINES = """
return [...document.querySelectorAll('td.movers')].map(cell => {
  const range = document.createRange(); range.selectNodeContents(cell);
  return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
});
"""

#: Per Metric@K chart, its x-axis labels: [K, the label's centre x].
K_LABELS = """
return [...document.querySelectorAll('svg.curve')].map(svg => {
  const texts = [...svg.querySelectorAll('text.tick')].filter(t => t.getAttribute('text-anchor') === 'middle');
  return texts.map(t => { const b = t.getBoundingClientRect(); return [Number(t.textContent), b.left + b.width / 2]; });
});
"""


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """`make demo`'s results files: both systems at K = 1, 3, 5, 10."""
    out = tmp_path_factory.mktemp("widths")
    paths = []
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(QUICKSTART)
        for name in SYSTEMS:
            paths.append(str(out / f"{name}.json"))
            argv = ["run", "quickstart", "--outputs", f"outputs/{name}.json", "--k", "1,3,5,10"]
            assert main([*argv, "--format", "json", "--output", paths[-1], "--keep-outputs"]) == 0
    return paths


@pytest.fixture(scope="module")
def report(scored: list[str]) -> Path:
    """`make demo`'s report: the demo's --metrics, by stratum (4 groups)."""
    page = Path(scored[0]).with_name("report.html")
    assert main(["report", *scored, "--metrics", ",".join(COMPARED), "--output", str(page)]) == 0
    return page


@pytest.fixture(scope="module")
def report_by_topic(scored: list[str]) -> Path:
    """The same results by the quickstart's metadata.topic: 10 groups."""
    page = Path(scored[0]).with_name("by-topic.html")
    assert main(["report", *scored, "--by", "topic", "--output", str(page)]) == 0
    return page


@pytest.fixture(scope="module")
def browser() -> Any:
    driver = _browser()
    yield driver
    driver.quit()


@pytest.mark.parametrize("width", WIDTHS)
def test_nothing_clipped_nothing_overlapping(
    width: int, report: Path, browser: Any, tmp_path: Path
) -> None:
    browser.set_window_size(width, 1000)
    browser.get(report.as_uri())
    assert browser.execute_script("return document.documentElement.clientWidth") <= width
    assert browser.execute_script(CLIPPED) == []
    assert browser.execute_script(OVERLAPS) == []
    lines = browser.execute_script(MOVER_LINES)
    assert lines and set(lines) == {1}  # the demo's comparison has movers, each on one line
    browser.set_window_size(width, browser.execute_script("return document.body.scrollHeight") + 80)
    shot = tmp_path / f"report-{width}.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 50_000


@pytest.mark.parametrize("width", WIDTHS)
def test_ten_groups_fit(width: int, report_by_topic: Path, browser: Any) -> None:
    """Ten groups do not make the By-topic section wider than the window: they are laid
    out four to a table (a table of ten columns was 1,131 px in a 753 px window)."""
    browser.set_window_size(width, 1000)
    browser.get(report_by_topic.as_uri())
    assert browser.execute_script(CLIPPED) == []
    heads = browser.execute_script(
        "return [...document.querySelectorAll('#strata table')].map(t => t.tHead.rows[0].cells.length)"
    )
    assert heads == [2 + 4, 2 + 4, 2 + 2]  # metric, system, then 4 + 4 + 2 topics


def test_k_on_a_numeric_axis(report: Path, browser: Any) -> None:
    """K = 1, 3, 5, 10 at x in proportion to K: (x(K) - x(1)) / (x(10) - x(1)) equals
    (K - 1) / 9 to within a pixel (evenly spaced, 3 would sit at a third, not 2/9)."""
    browser.set_window_size(800, 1000)
    browser.get(report.as_uri())
    charts = browser.execute_script(K_LABELS)
    assert len(charts) >= 3
    for labels in charts:
        assert [k for k, _ in labels] == [1, 3, 5, 10]
        at = dict(labels)
        span = at[10] - at[1]
        for k, x in labels:
            assert abs((x - at[1]) - (k - 1) / 9 * span) < 1.0, (k, labels)
