"""The signed disc the export tests attack: made once for the package (push, sign, export through
the real tasks, to a loopback registry of its own), and fixtures that put its images in or out."""

from __future__ import annotations

import pytest

from support.registry_fixtures import RegistryServer
from support.signed_discs import ARCHES, Disc, image_id, make_disc, unique_name
from support.tuf_discs import LATER


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


@pytest.fixture(scope="module")
def releases(engine, disc_registry, tmp_path_factory):
    """Releases N and N+1 of a TUF workspace, both signed by key A under one trust repository (N by
    `invoke sign`, N+1 by `invoke push --key`, the online keys from the environment)."""
    name = unique_name()
    first = make_disc(tmp_path_factory.mktemp("n"), disc_registry, name, trust=True)
    second = make_disc(tmp_path_factory.mktemp("n1"), disc_registry, name, LATER, keys=first.work / "keys",
                       trust_from=first.work, sign_at_push=True)
    yield first, second
    first.remove_images()
    second.remove_images()
