"""The release report: every record of every variant x arch -> one self-contained page.

`collect` (the edge) reads the records through the workspace, keeping each one's state (read,
missing, corrupt) instead of stopping at the first bad one; `summary` (pure) turns them into a
typed `Summary`; `charts` draws its charts with matplotlib (SVG for the page, PNG copies);
`page` renders the HTML with Jinja2 (autoescaped: record values are untrusted text); `write`
puts index.html, the PNGs and report.json into the output folder. See docs/report.md.
"""
