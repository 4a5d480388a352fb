"""The page as a reader sees it, in Debian's Chromium at 1400 px and at a phone's 390 px: no word of
the verdict matrix or the release timeline is cut across two lines ("amd6/4", "signatur/e"), the
matrix reads whole at 1400 px, and on the phone the page never scrolls sideways (a wide table scrolls
inside it). Made from the report's sample records, so no engine is needed; the screenshots land in
build/report-screenshot/ beside the real run's.

Chromium and Playwright are part of the test machine (scripts/setup): without them the test skips
here, and fails in CI.
"""

from __future__ import annotations

import os
import shutil

import pytest

from rapidship.config.matrix import load_matrix
from rapidship.records import ReleaseRecord, ReleaseStage
from rapidship.release.plan import STAGES
from rapidship.report.write import report
from support.commands import ROOT
from unit.report.samples import ARCH, OTHER_ID, TODAY, VARIANT, Records, built, decision, gates

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = ROOT / "build" / "report-screenshot"
WIDTHS = (1400, 390)

# Each word (a run without space, up to and with a hyphen: a line may end after one) of the matrix
# and the timeline, outside the long tokens that may break (.tok: digests, paths): its line boxes.
CUT_WORDS = """() => {
  const cut = [];
  for (const root of document.querySelectorAll('table.matrix, table.timeline')) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.parentElement.closest('.tok')) continue;
      for (const m of node.data.matchAll(/[^\\s-]+-?/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (tops.size > 1) cut.push(m[0]);
      }
    }
  }
  return cut;
}"""


def chromium_or_skip() -> None:
    try:
        import playwright.sync_api  # noqa: F401
        missing = "" if os.access(CHROMIUM, os.X_OK) else f"no Chromium at {CHROMIUM}"
    except ImportError:
        missing = "no playwright"
    if missing and os.environ.get("CI"):
        pytest.fail(f"{missing}: scripts/setup installs Debian's chromium and playwright")
    if missing:
        pytest.skip(f"{missing} here (scripts/setup installs them)")


@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    """A page with every kind of cell text: a gate's long reason, a STALE cell with two digests,
    a signature, the released name, and a release timeline with stages that ran and were skipped."""
    root = tmp_path_factory.mktemp("layout")
    variants = list(load_matrix(ROOT / "variants.yaml").variants.values())
    records = Records(root / "build", variants).full(
        build=built().model_copy(update={"ref": built().ref + "-run42"}),
        gates=gates(failing={"suid": "/usr/lib/openssh/ssh-keysign has the setuid bit: setuid/setgid files are refused"}),
        decision=decision().model_copy(update={"image_id": OTHER_ID}))  # STALE: both digests in the cell
    stages = [ReleaseStage(name=s, verdict="pass" if s in ("smoke", "export") else "skipped", seconds=12.0 if s == "export"
                           else 0.02, started_at="2026-12-01T10:00:00+00:00", record=f"build/{VARIANT}/{s}.json",
                           why="current: image sha256:aaaaaaaaaaaa") for s in STAGES]
    records.put(records.ws.release(VARIANT), ReleaseRecord(variant=VARIANT, arches=[ARCH], seconds=14.5, passed=True,
                                                           started_at="2026-12-01T10:00:00+00:00", stages=stages))
    written = report(records.ws, variants, records.exports, root / "report", today=TODAY, commit="c0ffee",
                     scope=([VARIANT], [ARCH]))
    return written.index


@pytest.mark.parametrize("width", WIDTHS)
def test_no_word_is_cut_and_the_page_fits_the_window(page_file, width):
    chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--proxy-server=http://127.0.0.1:9"])
        try:
            page = browser.new_page(viewport={"width": width, "height": 1000})
            page.goto(page_file.resolve().as_uri(), wait_until="load")
            cut = page.evaluate(CUT_WORDS)
            seen = page.evaluate("document.documentElement.clientWidth")
            wide = page.evaluate("document.documentElement.scrollWidth")
            right = page.eval_on_selector("table.matrix", "t => t.getBoundingClientRect().right")
            text = page.inner_text("table.matrix")
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / f"layout-{width}.png"), full_page=True)
        finally:
            browser.close()
    assert cut == [], f"words cut across two lines at {width} px: {cut}"
    assert wide <= seen, f"the page scrolls sideways at {width} px ({wide} > {seen})"
    if width >= 1400:
        assert right <= seen, (right, seen)  # the whole matrix, its last check too, inside the window
    assert "127.0.0.1:5000/staging/dask:t-amd64" in text and "-run42" not in text
