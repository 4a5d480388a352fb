"""Every repository path the docs name exists: a moved file leaves no stale pointer behind."""

from __future__ import annotations

import re

import pytest

from support.commands import ROOT

PATH = re.compile(r"`((?:src|tests|bench|docs|templates|harbor|policy|envs|locks|scripts|ci|monitoring)/"
                  r"[A-Za-z0-9_./-]*)`")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_a_doc_names_exists(doc):
    named = {m.group(1).rstrip(".,:") for m in PATH.finditer(doc.read_text())}
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert missing == [], f"{doc.name} names paths that do not exist: {missing}"
