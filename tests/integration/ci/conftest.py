"""Fixtures of the CI job tests."""

from __future__ import annotations

import pytest

from support.plain_registry import serve_registry


@pytest.fixture
def loopback_registry(tmp_path):
    host, proc = serve_registry(tmp_path)
    yield host
    proc.terminate()
    proc.wait(timeout=10)
