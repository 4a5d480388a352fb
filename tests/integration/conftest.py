"""Fixtures shared by the integration tests of several stages."""

from __future__ import annotations

import pytest

from support.registry_fixtures import RegistryServer


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A real OCI registry on loopback (TLS from a CA made here, htpasswd auth), one per module."""
    server = RegistryServer(tmp_path_factory.mktemp("registry")).start()
    yield server
    server.stop()
