"""The signed disc the export tests attack: made once for the package (push, sign, export through
the real tasks, to a loopback registry of its own), and fixtures that put its images in or out."""

from __future__ import annotations

import pytest

from support.registry_fixtures import RegistryServer
from support.signed_discs import ARCHES, Disc, image_id, make_disc, unique_name


@pytest.fixture(scope="package")
def disc_registry(tmp_path_factory):
    server = RegistryServer(tmp_path_factory.mktemp("disc-registry")).start()
    yield server
    server.stop()


@pytest.fixture(scope="package")
def signed(engine, disc_registry, tmp_path_factory) -> Disc:
    disc = make_disc(tmp_path_factory.mktemp("signed"), disc_registry, unique_name())
    yield disc
    disc.remove_images()


@pytest.fixture
def present(signed):
    """Both images in the engine under their refs (a test before may have removed them)."""
    import subprocess

    if any(image_id(signed.refs[a]) != signed.ids[a] for a in ARCHES):
        subprocess.run(["docker", "load", "-i", str(signed.saved)], check=True, capture_output=True)
    return signed


@pytest.fixture
def absent(signed):
    """Neither image (nor any image a test made) in the engine, so a load or its absence shows."""
    signed.remove_images()
    assert signed.nothing_loaded()
    return signed
