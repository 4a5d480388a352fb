"""Fixtures of the report's unit tests: the real matrix, and a workspace to put hand-made records in."""

from __future__ import annotations

import pytest

from rapidship.config.matrix import load_matrix
from support.commands import ROOT
from unit.report.samples import Records


@pytest.fixture(scope="session")
def variants():
    return list(load_matrix(ROOT / "variants.yaml").variants.values())


@pytest.fixture
def records(tmp_path, variants) -> Records:
    return Records(tmp_path / "build", variants)
