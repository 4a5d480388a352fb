"""Every repository path the docs name exists: a moved file leaves no stale pointer behind."""

from __future__ import annotations

import re

import pytest

from support.commands import ROOT

PATH = re.compile(r"`((?:src|tests|bench|docs|templates|harbor|policy|envs|locks|scripts|ci|monitoring)/"
                  r"[A-Za-z0-9_./-]*)`")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs/measurements").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_doc_names_exists(doc):
    named = {m.group(1).rstrip(".,:") for m in PATH.finditer(doc.read_text())}
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert missing == [], f"{doc.name} names paths that do not exist: {missing}"


LINK = re.compile(r"\]\(([^)\s#:]+)(?:#[^)]*)?\)")            # a relative markdown link: [text](path)
PAGE = re.compile(r"(?<![\w/.-])((?:docs/)[A-Za-z0-9_./-]*\.(?:md|json|png))")  # a page named in prose


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_and_page_a_doc_names_exists(doc):
    """A page that moved (docs/measurements/ holds the measured runs) leaves no link or mention of
    its old place: relative links from the page's folder, `docs/...` mentions from the root."""
    text = doc.read_text()
    links = {m.group(1) for m in LINK.finditer(text)}
    missing = sorted(p for p in links if not (doc.parent / p).exists())
    # the changelog says where a figure stood when it was superseded: old places are its subject
    named = {m.group(1).rstrip(".,:") for m in PAGE.finditer(text)} if doc.name != "CHANGELOG.md" else set()
    missing += sorted(p for p in named if not (ROOT / p).exists())
    assert missing == [], f"{doc.relative_to(ROOT)} links or names what does not exist: {missing}"
