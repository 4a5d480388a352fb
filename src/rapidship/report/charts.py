"""The report's charts, drawn with matplotlib: SVG for the page, PNG copies beside it.

matplotlib's object API only (a `Figure` per chart, no pyplot state), Agg and SVG backends, its
own DejaVu Sans font drawn as paths: a chart looks the same on a machine without that font, with
no network. Every series also has a hatch pattern, so the charts read printed in black and white.
SVG ids are salted per chart (several SVGs share one page) and the date metadata is left out, so
the same records draw the same bytes.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

from rapidship.report.model import SEVERITIES, Summary

# Okabe-Ito (colour-blind safe), each paired with a hatch for black and white.
BLUE, ORANGE, GREEN, RED, PURPLE, GREY, SKY, YELLOW = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7",
                                                       "#999999", "#56B4E9", "#F0E442")
# Line hatches only: dotted ones are drawn dot by dot and make an SVG ten times larger.
SEVERITY_STYLE = {"CRITICAL": (RED, "xx"), "HIGH": (ORANGE, "//"), "MEDIUM": (YELLOW, "\\\\"),
                  "LOW": (SKY, "--"), "UNKNOWN": (GREY, "++")}
TIER_STYLE = {"device": (GREEN, "xx"), "host": (BLUE, "//"), "disk": (ORANGE, "\\\\")}
WIDTH_IN = 9.0


@dataclass(frozen=True)
class Chart:
    name: str        # file stem of the PNG: sizes -> sizes.png
    title: str
    alt: str         # what the chart shows, in words (the page prints it under the chart)
    svg: str         # inline <svg> element, no XML prolog
    png: bytes


def _figure(rows: int):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, 1.5 + 0.42 * max(rows, 1)), layout="constrained")
    return fig, fig.add_subplot()


def _legend(fig, columns: int) -> None:
    """Below the plot, never over a bar."""
    fig.legend(loc="outside lower center", ncols=columns, fontsize=8, frameon=False)


def _render(fig, name: str) -> tuple[str, bytes]:
    import matplotlib

    with matplotlib.rc_context({"svg.hashsalt": f"rapidship-{name}", "svg.fonttype": "path"}):
        svg_buf, png_buf = io.StringIO(), io.BytesIO()
        fig.savefig(svg_buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
        fig.savefig(png_buf, format="png", dpi=110, metadata={"Software": None})
    return inline_svg(svg_buf.getvalue(), name), png_buf.getvalue()


def inline_svg(text: str, name: str) -> str:
    """matplotlib's SVG document -> an element for an HTML page: no XML prolog, doctype, RDF
    metadata or comments, width from the page's CSS (the viewBox keeps the aspect), an accessible name."""
    text = re.sub(r"<\?xml[^>]*\?>\s*", "", text)
    text = re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    text = re.sub(r"\s*<!--.*?-->", "", text, flags=re.S)  # matplotlib repeats each label in a comment
    text = re.sub(r'<svg ([^>]*?)width="[^"]*" height="[^"]*"', rf'<svg class="chart" role="img" aria-label="{name}" \1',
                  text, count=1)
    # ids are per document; several charts share one page: each chart's ids (glyphs like
    # DejaVuSans-48 repeat in every chart) get its name in front, and so do the references to them
    ids = set(re.findall(r'\bid="([^"]+)"', text))
    text = re.sub(r'(\bid="|href="#|url\(#)([^")]+)', lambda m: m.group(1) + (f"{name}-{m.group(2)}" if m.group(2) in ids
                                                                         else m.group(2)), text)
    return text.strip()


def _gb(n: int) -> float:
    return n / 1e9


def _style_axis(ax, xlabel: str) -> None:
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.invert_yaxis()  # first row on top, like the tables


def size_chart(summary: Summary) -> Chart | None:
    rows = [s for s in summary.sizes if s.image_bytes is not None]
    if not rows:
        return None
    fig, ax = _figure(len(rows) * 1.6)
    y = range(len(rows))
    ax.barh([i - 0.2 for i in y], [_gb(r.image_bytes) for r in rows], height=0.38, color=BLUE, edgecolor="black",
            linewidth=0.5, label="uncompressed (image size)")
    ax.barh([i + 0.2 for i in y], [_gb(r.zstd_bytes or 0) for r in rows], height=0.38, color=SKY, hatch="//",
            edgecolor="black", linewidth=0.5, label="docker save | zstd -3 (disc)")
    budgets = sorted({r.budget_bytes for r in rows})
    for budget in budgets:
        ax.axvline(_gb(budget), color=RED, linestyle="--", linewidth=1.4)
        ax.annotate(f"budget {_gb(budget):.1f} GB", (_gb(budget), 1.0), xycoords=("data", "axes fraction"),
                    xytext=(-4, 2), textcoords="offset points", ha="right", va="bottom", color=RED, fontsize=8)
    for i, r in enumerate(rows):
        ax.annotate(f"{_gb(r.image_bytes):.2f}", (_gb(r.image_bytes), i - 0.2), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=7)
        ax.annotate(f"{_gb(r.zstd_bytes or 0):.2f}", (_gb(r.zstd_bytes or 0), i + 0.2), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=7)
    ax.set_yticks(list(y), [r.name for r in rows])
    ax.set_xlim(0, max(_gb(max(budgets)), max(_gb(r.image_bytes) for r in rows)) * 1.08)
    _style_axis(ax, "GB (10^9 bytes)")
    _legend(fig, 2)
    svg, png = _render(fig, "sizes")
    over = [r.name for r in rows if r.cell.status != "pass"]
    alt = (f"Image size of {len(rows)} image(s) against the budget; "
           + (f"over the budget: {', '.join(over)}" if over else "all within the budget"))
    return Chart("sizes", "Size against the budget", alt, svg, png)


def saved_chart(summary: Summary) -> Chart | None:
    """Per image: what is in it, and what the trims and the device-code pruning took out."""
    rows = [b for b in summary.bytes if b.state.state == "ok"]
    if not rows:
        return None
    fig, ax = _figure(len(rows))
    y = list(range(len(rows)))
    kept = [_gb(b.files_bytes) for b in rows]
    trims = [_gb(b.trims_saved) for b in rows]
    pruned = [_gb(b.prune_saved) for b in rows]
    ax.barh(y, kept, color=BLUE, edgecolor="black", linewidth=0.5, label="in the image (files)")
    ax.barh(y, trims, left=kept, color=ORANGE, hatch="\\\\", edgecolor="black", linewidth=0.5, label="saved by trims")
    ax.barh(y, pruned, left=[k + t for k, t in zip(kept, trims)], color=GREEN, hatch="xx", edgecolor="black",
            linewidth=0.5, label="saved by pruning device code")
    ax.set_yticks(y, [b.name for b in rows])
    _style_axis(ax, "GB (10^9 bytes)")
    _legend(fig, 3)
    svg, png = _render(fig, "saved")
    alt = "; ".join(f"{b.name}: {_gb(b.files_bytes):.2f} GB of files, {_gb(b.trims_saved):.2f} GB trimmed, "
                    f"{_gb(b.prune_saved):.2f} GB of device code pruned" for b in rows)
    return Chart("saved", "Bytes in each image, and bytes saved", alt, svg, png)


def paths_chart(b) -> Chart | None:
    if not b.largest_dirs:
        return None
    fig, ax = _figure(len(b.largest_dirs) * 0.7)
    y = list(range(len(b.largest_dirs)))
    ax.barh(y, [p.bytes / 1e6 for p in b.largest_dirs], color=BLUE, edgecolor="black", linewidth=0.5)
    ax.set_yticks(y, [_cut(p.path) for p in b.largest_dirs], fontsize=8)
    _style_axis(ax, "MB (10^6 bytes)")
    name = f"paths-{b.variant}-{b.arch}"
    svg, png = _render(fig, name)
    return Chart(name, f"Largest directories of {b.name}",
                 f"The {len(b.largest_dirs)} largest directories of {b.name}", svg, png)


def scan_chart(summary: Summary) -> Chart | None:
    rows = [s for s in summary.scans if s.counts]
    if not rows:
        return None
    fig, ax = _figure(len(rows))
    y = list(range(len(rows)))
    left = [0] * len(rows)
    for sev in SEVERITIES:
        values = [r.found(sev) for r in rows]
        colour, hatch = SEVERITY_STYLE[sev]
        ax.barh(y, values, left=left, color=colour, hatch=hatch, edgecolor="black", linewidth=0.5, label=sev)
        left = [a + b for a, b in zip(left, values)]
    for i, r in enumerate(rows):
        ax.annotate(f"{r.outcome('fail')} failing, {r.outcome('allowlisted')} allowlisted", (left[i], i), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=7)
    ax.set_yticks(y, [r.name for r in rows])
    ax.set_xlim(0, max(max(left) * 1.6, 1))
    _style_axis(ax, "findings")
    ax.xaxis.get_major_locator().set_params(integer=True)
    _legend(fig, len(SEVERITIES))
    svg, png = _render(fig, "scan")
    alt = "; ".join(f"{r.name}: " + ", ".join(f"{r.found(s)} {s}" for s in SEVERITIES) for r in rows)
    return Chart("scan", "Scan findings by severity", alt, svg, png)


def smoke_chart(summary: Summary) -> Chart | None:
    bars = [(f"{r.name}: {s.name}", s) for r in summary.smoke for s in r.stages]
    if not bars:
        return None
    fig, ax = _figure(len(bars))
    y = list(range(len(bars)))
    left = [0.0] * len(bars)
    for tier, attr in (("device", "device_bytes"), ("host", "host_bytes"), ("disk", "disk_bytes")):
        values = [_gb(getattr(s, attr)) for _, s in bars]
        colour, hatch = TIER_STYLE[tier]
        ax.barh(y, values, left=left, color=colour, hatch=hatch, edgecolor="black", linewidth=0.5,
                label={"host": "host memory"}.get(tier, tier))
        left = [a + b for a, b in zip(left, values)]
    ax.set_yticks(y, [_cut(name, 48) for name, _ in bars], fontsize=8)
    _style_axis(ax, "GB held in each tier while the data was persisted")
    _legend(fig, 3)
    svg, png = _render(fig, "smoke")
    alt = "; ".join(f"{name}: device {_gb(s.device_bytes):.2f} GB, host {_gb(s.host_bytes):.2f} GB, disk "
                    f"{_gb(s.disk_bytes):.2f} GB" for name, s in bars)
    return Chart("smoke", "Spill smoke: where the data was held", alt, svg, png)


def _cut(text: str, n: int = 60) -> str:
    return text if len(text) <= n else "\u2026" + text[-(n - 1):]


def charts(summary: Summary) -> dict[str, Chart]:
    """Every chart of the page, by name (a chart with nothing to draw is left out)."""
    drawn = [size_chart(summary), saved_chart(summary), scan_chart(summary), smoke_chart(summary),
             *(paths_chart(b) for b in summary.bytes if b.state.state == "ok")]
    return {c.name: c for c in drawn if c is not None}
