"""Summary + charts -> index.html: one self-contained page (pure).

Jinja2 with autoescape on: every record value (gate reasons, paths, allowlist reasons, refs) is
untrusted text and reaches the page escaped. The only markup not written by the template is the
charts' SVG, which matplotlib writes with its text escaped. The page has no script, and loads no
font, style or image: the CSS is inline, the charts are inline SVG.
"""

from __future__ import annotations

import re
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from rapidship.report.charts import Chart
from rapidship.report.model import COLUMNS, LABELS, MARKS, SEVERITIES, ReleaseRun, Summary
from rapidship.report.verdict import verdict

TEMPLATE, TIMELINE = "page.html.j2", "timeline.html.j2"
TIMELINE_MARKS = ("<!-- release timeline -->\n", "<!-- end release timeline -->")  # around it in the page
_TEMPLATES = Path(__file__).parent


def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(_TEMPLATES)), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters |= {"gb": _gb, "mb": _mb, "short": _short, "count": _count, "breakable": breakable}
    return env


LONG_TOKEN = 16  # characters: a digest, a path or a ref; no word of a cell is this long


def breakable(text: str) -> Markup:
    """The text escaped, each long token (LONG_TOKEN characters or more, no space) in a span that may
    break after a '/', ':' or '@' (a path, a ref), else anywhere (a digest): words wrap only at spaces
    and hyphens."""
    def token(part: str) -> Markup:
        pieces = re.split(r"(?<=[/:@])", part)
        return Markup('<span class="tok">{}</span>').format(Markup("<wbr>").join(pieces))

    return Markup("").join(token(part) if len(part) >= LONG_TOKEN else part for part in re.split(r"(\S+)", str(text)))


def _gb(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e9:.3f} GB"


def _mb(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e6:,.1f} MB"


def _short(digest: str | None, n: int = 19) -> str:
    return (digest or "")[:n] or "-"


def _count(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def render(summary: Summary, charts: dict[str, Chart]) -> str:
    svgs = {name: Markup(chart.svg) for name, chart in charts.items()}  # noqa: S704 - matplotlib's output, text escaped
    template = environment().get_template(TEMPLATE)
    return template.render(s=summary, v=verdict(summary), charts=charts, svgs=svgs, columns=COLUMNS, labels=LABELS,
                           marks=MARKS, severities=SEVERITIES, releases=summary.releases)


def timeline(releases: list[ReleaseRun]) -> str:
    """The page's release timeline alone (between its TIMELINE_MARKS), as render() writes it."""
    return environment().get_template(TIMELINE).render(releases=releases)
