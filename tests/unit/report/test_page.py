"""The page and its charts: self-contained (nothing from any URL, no script), record text escaped,
statuses readable without colour, the allowlist's near expiries highlighted."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from unit.report.samples import allow, decision, gates, size_report, smoke

from rapidship.report.charts import charts, inline_svg
from rapidship.report.page import render
from rapidship.report.write import write

HOSTILE = '<script>alert(1)</script><img src=x onerror="fetch(\'https://evil.example/\')">'
SVG_NAMESPACES = {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(html: str) -> Tags:
    tags = Tags()
    tags.feed(html)
    return tags


def page(summary, with_charts: bool = False) -> str:
    return render(summary, charts(summary) if with_charts else {})


def test_the_page_loads_nothing_and_runs_nothing(records):
    html = page(records.full().summary(), with_charts=True)
    tags = parse(html)
    names = {t for t, _ in tags.tags}
    assert "script" not in names and "link" not in names and "iframe" not in names and "img" not in names
    assert {"svg", "style", "table"} <= names
    for tag, attrs in tags.tags:
        for key in ("src", "href", "xlink:href", "action", "poster", "data"):
            value = attrs.get(key)
            if value is None:
                continue
            assert value.startswith("#"), (tag, key, value)  # only links inside the page
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
    urls = set(re.findall(r"[a-z][a-z0-9+.-]*://[^\s\"'<>)]*", html))
    assert urls <= SVG_NAMESPACES, urls - SVG_NAMESPACES  # XML namespace names, never fetched
    assert "@import" not in html and "@font-face" not in html
    assert not re.findall(r"url\((?!#)", html)  # clip paths point inside the SVG: url(#p1a2b)


def test_record_text_is_escaped_everywhere(records):
    """Record values are untrusted: a gate reason, a path, an allowlist reason, a smoke problem."""
    records.full(gates=gates(failing={"secrets": HOSTILE}), size=size_report(largest="/opt/" + HOSTILE),
                 decision=decision(allowlist=[allow("CVE-2099-1001", 5, reason="accepted " + HOSTILE)]))
    records.put(records.ws.smoke_dir() / "cpu-debian12-amd64-cpu-uid5.json", smoke("FAIL", [HOSTILE], uid=5))
    html = page(records.summary(), with_charts=True)
    assert "<script" not in html and "onerror=" not in html.replace("onerror=&#34;", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "evil.example" not in re.sub(r"&[#a-z0-9]+;", "", "".join(
        t for tag, attrs in parse(html).tags for t in attrs.values() if t and tag != "td"))
    tags = parse(html)
    assert not [t for t, _ in tags.tags if t in ("script", "img")]
    assert any(HOSTILE in t for t in tags.text)  # shown, as text


def test_a_failing_gate_reads_fail_in_text_and_every_status_has_a_word(records):
    summary = records.full(gates=gates(failing={"suid": "/usr/bin/planted has the setuid bit"})).summary()
    html = page(summary)
    row = re.search(r'<tr id="row-cpu-debian12-amd64".*?</tr>', html, re.S).group(0)
    cells = re.findall(r'<td class="st (\w+)"[^>]*>.*?<b>([A-Z ]+)</b>', row, re.S)
    assert ("fail", "FAIL") in cells and ("pass", "PASS") in cells and ("site", "SITE ONLY") in cells
    assert "/usr/bin/planted has the setuid bit" in row
    assert "not released: suid FAIL (cpu-debian12 amd64)" in html
    for r in summary.rows:  # every variant x arch of the release has its row
        assert f'id="row-{r.variant}-{r.arch}"' in html


def test_expiring_allowlist_entries_are_highlighted(records):
    summary = records.full(decision=decision(allowlist=[allow("CVE-2099-1001", 10), allow("CVE-2099-1009", 90),
                                                        allow("CVE-2099-1008", -1)])).summary()
    html = page(summary)
    rows = {m.group(2): m.group(1) for m in re.finditer(r'<tr class="(\w+)"><td><code>(CVE-[\d-]+)</code>', html)}
    assert rows == {"CVE-2099-1001": "expiring", "CVE-2099-1009": "ok", "CVE-2099-1008": "expired"}
    assert "EXPIRES IN 10 DAY(S)" in html and "EXPIRED" in html and "planted by the tests" in html
    assert re.search(r"tr\.expiring td \{[^}]*background", html)


def test_a_corrupt_record_is_named_at_the_top(records):
    records.full()
    records.ws.decision("cpu-debian12", "amd64").write_text("not json")
    html = page(records.summary())
    top = html[:html.index('id="matrix"')]
    assert "Records that could not be read" in top and "cpu-debian12/scan-amd64/decision.json" in top
    assert "corrupt scan decision: not JSON" in top


def test_charts_are_matplotlib_svg_inline_with_png_copies(records, tmp_path):
    summary = records.full(size=size_report(largest="/opt/" + HOSTILE)).summary()
    drawn = charts(summary)
    assert set(drawn) == {"sizes", "saved", "scan", "smoke", "paths-cpu-debian12-amd64"}
    for chart in drawn.values():
        assert chart.svg.startswith("<svg ") and "<?xml" not in chart.svg and "<metadata" not in chart.svg
        assert 'viewBox="' in chart.svg and "<script" not in chart.svg
        assert chart.png.startswith(b"\x89PNG\r\n\x1a\n")
    # labels are drawn as glyph outlines, and the comments naming them are left out: no record text in the SVG
    assert "script" not in drawn["paths-cpu-debian12-amd64"].svg and "evil" not in drawn["paths-cpu-debian12-amd64"].svg
    # the same records draw the same bytes: ids are salted per chart, no date
    again = charts(summary)
    assert all(again[n].svg == drawn[n].svg for n in drawn)
    ids = re.findall(r'\bid="([^"]+)"', render(summary, drawn))
    assert len(ids) == len(set(ids))  # several SVGs on one page: no id twice
    index, js, pngs = write(summary, tmp_path / "out")
    assert sorted(p.name for p in pngs) == sorted(f"{n}.png" for n in drawn)
    assert index.read_text().count("<svg ") == len(drawn)


def test_inline_svg_strips_the_document_parts():
    doc = ('<?xml version="1.0"?>\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "x">\n<svg xmlns="http://www.w3.org/2000/svg" '
           'width="648pt" height="100pt" viewBox="0 0 648 100" version="1.1">\n<metadata><rdf:RDF/></metadata>\n<g/></svg>')
    assert inline_svg(doc, "sizes") == ('<svg class="chart" role="img" aria-label="sizes" xmlns="http://www.w3.org/2000/svg" '
                                        ' viewBox="0 0 648 100" version="1.1">\n<g/></svg>')
    glyphs = '<svg width="1" height="1"><path id="DejaVuSans-48" d="M 0 0"/><use xlink:href="#DejaVuSans-48"/>' \
             '<g clip-path="url(#p1)"/><a href="#elsewhere"/></svg>'
    assert inline_svg(glyphs, "scan") == ('<svg class="chart" role="img" aria-label="scan" ><path id="scan-DejaVuSans-48" '
                                          'd="M 0 0"/><use xlink:href="#scan-DejaVuSans-48"/><g clip-path="url(#p1)"/>'
                                          '<a href="#elsewhere"/></svg>')


def test_the_page_names_the_scope_once_and_what_only_a_site_runs(records):
    html = page(records.full().summary())
    scope = re.search(r'<div class="scope" id="scope">.*?</div>', html, re.S).group(0)
    assert "from the push records" in scope and "cpu-debian12 arm64" in scope and "cuda12-ubuntu22" in scope
    assert html.count("cuda12-ubuntu22") == 1  # listed once, not as a row of NOT RUN cells
    assert "<b>\u2713 released</b>" in html  # Harbor's scan is the site's: named with its command, never passed
    assert "only a site or its Harbor can run: Harbor&#39;s scan" in html and "invoke harbor.scan --variant" in html
    assert re.search(r'<td class="st site"[^>]*>.*?<b>SITE ONLY</b>', html, re.S)


def test_the_overall_verdict_is_never_cut_at_1400_px(records):
    """The layout rule: the overall column comes right after the image, before the ten checks, and
    the matrix lays out fixed to the page's width (cells wrap; nothing pushes it wider)."""
    html = page(records.full().summary())
    head = re.search(r'<table class="matrix">.*?<thead><tr>(.*?)</tr>', html, re.S).group(1)
    assert re.findall(r"<th[^>]*>([^<]+)</th>", head)[:4] == ["variant", "arch", "image", "overall"]
    assert re.search(r"table\.matrix \{[^}]*table-layout: fixed", html)


def css_rules(html: str) -> list[tuple[str, dict[str, str]]]:
    """The page's CSS as (selector, {property: value}), comments and @media wrappers left out."""
    css = re.sub(r"/\*.*?\*/", "", re.search(r"<style>(.*?)</style>", html, re.S).group(1), flags=re.S)
    css = re.sub(r"@media[^{]*\{", "", css)
    return [(sel.strip(), {k.strip(): v.strip() for k, _, v in (d.partition(":") for d in body.split(";")) if v.strip()})
            for sel, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css)]


def test_words_in_the_matrix_wrap_only_between_words(records):
    """"amd6/4", "signatur/e": a cell breaks at spaces and hyphens, never inside a word. Only a long
    token (a digest, a path: 16 characters or more) may break anywhere, and a narrow screen scrolls
    the matrix sideways instead of squeezing its words."""
    html = page(records.full(gates=gates(image_id="sha256:" + "b" * 64)).summary())  # STALE: both digests in the cell
    rules = css_rules(html)
    for sel, decl in rules:
        assert decl.get("word-break", "normal") == "normal", (sel, decl)  # break-all / break-word cut words
        if decl.get("overflow-wrap") == "anywhere":
            assert sel in (".tok", "code, .mono"), sel  # long tokens only
    matrix = dict(rules)["table.matrix td, table.matrix th"]
    assert (matrix["overflow-wrap"], matrix["word-break"], matrix["hyphens"]) == ("normal", "normal", "manual")
    assert "overflow-wrap" not in dict(rules)["table.matrix .st .word"]
    assert dict(rules)[".scroll"]["overflow-x"] == "auto" and "min-width" in dict(rules)["table.matrix"]
    assert re.search(r'<div class="scroll">\s*<table class="matrix">', html)
    body = re.search(r'<table class="matrix">.*?</table>', html, re.S).group(0)
    tokens = [t.replace("<wbr>", "") for t in re.findall(r'<span class="tok">(.*?)</span>', body)]  # may break after / : @
    assert tokens and all(len(t) >= 16 and " " not in t for t in tokens)
    assert "sha256:bbbbbbbbbbbb," in tokens and "sha256:aaaaaaaaaaaa" in tokens
    text = re.sub(r"<[^>]+>", " ", body)
    checks = [t for t in tokens if t.startswith("sha256:")]  # the image cell's ref breaks after / : @ only
    for word in ("amd64", "signature", "allowlisted", "attestations"):  # whole words, none in a breakable token
        assert word in text.split() and not any(word in t for t in checks)
    ref = re.search(r'<td class="ref".*?</td>', body, re.S).group(0)
    assert "/<wbr>" in ref and ":<wbr>" in ref


def test_the_scan_section_lists_every_finding_by_id_and_the_sbom(records):
    low = [{"outcome": "below-threshold", "reason": "below", "id": "DS026", "severity": "LOW", "target": "Dockerfile",
            "title": "No HEALTHCHECK defined", "kind": "misconfiguration"}]
    records.full(decision=decision(verdicts=low).model_copy(update={"outputs": {"sbom": "x/sbom.cdx.json"}}))
    (records.ws.scan_dir("cpu-debian12", "amd64") / "sbom.cdx.json").write_text("{}")
    html = page(records.summary())
    found = re.search(r'<table class="findings".*?</table>', html, re.S).group(0)
    assert "<code>DS026</code>" in found and "LOW" in found and "No HEALTHCHECK defined" in found
    assert "cpu-debian12/scan-amd64/sbom.cdx.json</code>" in html


def test_the_env_layer_plan_and_the_delta_cost_table_are_on_the_page(records):
    """The size record as `invoke size-report --delta-cost` wrote it for cpu-debian12 (the committed
    measurement): each planned layer with why, each distribution's carried and own bytes."""
    import json
    from dataclasses import replace

    from support.commands import ROOT

    measured = json.loads((ROOT / "docs/measurements/layers-cpu-2026-12-05/planned.json").read_text())
    size = replace(size_report(), layers=measured["plan"], delta_cost=measured["delta_cost"])
    html = page(records.full(size=size).summary())
    text = " ".join(" ".join(parse(html).text).split())
    assert f"the env's layers: {len(measured['plan']['layers'])} of a budget of 80, planned from the lock" in text
    assert "compiled/numpy alone: 17.1 MB wheel" in text
    worst = measured["delta_cost"]["worst"]
    assert f"{worst['distribution']} {worst['carried_bytes']:,} B {worst['own_bytes']:,} B {worst['ratio']:.2f}x ok" in text
    assert "0 of 23 miss it" in text
    bare = page(records.full().summary())  # a record without them says how to get them
    assert "--delta-cost" in bare and "No layer plan in this image" in bare


def test_the_page_says_what_a_year_of_patches_re_feeds_as_the_size_report_does(records):
    """The per-year figure of `invoke size-report --delta-cost` (the CPU image's record) in the same words."""
    import json
    from dataclasses import replace

    from support.commands import ROOT

    from rapidship.imagebuild.delta_cost import per_year_words

    measured = json.loads((ROOT / "docs/measurements/layers-cpu-2026-12-05/planned.json").read_text())
    year = json.loads((ROOT / "docs/measurements/layer-order-2026-12-07/cpu-image-per-year.json").read_text())["per_year"]
    size = replace(size_report(), layers=measured["plan"], delta_cost=measured["delta_cost"] | {"per_year": year})
    text = " ".join(" ".join(parse(page(records.full(size=size).summary())).text).split())
    said = per_year_words(year)
    assert f"The layer order: {said}." in text and f"({year['ratio']:.3f}x)" in said
    without = " ".join(" ".join(parse(page(records.full(size=replace(size, delta_cost=measured["delta_cost"])).summary())).text).split())
    assert "re-fed on import in a year" not in without  # a table measured without the plan's rates says nothing of it
