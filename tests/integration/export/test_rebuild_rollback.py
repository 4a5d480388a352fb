"""A rebuild of the same commit never rolls a site back: the order within one commit is the serial
the signature states, and the site records the serial of what it loaded.

Two builds of one commit (the same `created` and revision, other content: the base refreshed for a
security fix), pushed, signed with one key (the first, then the patched one) and exported through
the real tasks. After the patched disc is in place, the first disc is refused by `invoke import`
(engine and registry) and install.sh with one sentence naming both serials; the names are exactly
as before. The patched disc replaces the first without a flag (its serial is higher), and a name
whose current image the site holds no serial for is not guessed: refused unless --allow-downgrade.
"""

from __future__ import annotations

import pytest

from rapidship.export.load import scratch_registry
from support.signed_discs import ARCHES, error_of, from_args, image_id, install, make_disc, ok, run, unique_name
from tests.integration.export.test_rollback import names, registry_ids

pytestmark = pytest.mark.docker
CREATED = "2026-12-01T00:00:00+00:00"


@pytest.fixture(scope="module")
def rebuilds(engine, disc_registry, tmp_path_factory):
    work, name = tmp_path_factory.mktemp("rebuilds"), unique_name()
    first = make_disc(work / "first", disc_registry, name, created=CREATED)
    patched = make_disc(work / "patched", disc_registry, name, created=CREATED, keys=first.work / "keys")
    yield first, patched
    first.remove_images()
    patched.remove_images()


@pytest.fixture
def site(rebuilds, tmp_path):
    for disc in rebuilds:
        disc.remove_images()
    return tmp_path / "site"


def serial_of(disc, arch: str) -> int:
    import json

    payload = json.loads((disc.dirs[0] / "signatures" / f"sha256-{disc.sign['arches'][arch]['digest'][7:]}"
                          / "payload.json").read_text())
    return payload["optional"]["io.rapidship.release"]["serial"]


def test_the_first_build_of_a_commit_never_replaces_its_patched_rebuild(rebuilds, site):
    first, patched = rebuilds
    assert first.ids != patched.ids  # one commit, one `created`, other content
    env = {"RAPIDSHIP_SITE_DIR": str(site)}
    ok(run(patched.env | env, "import", *from_args(patched.isos), "--key", str(patched.pub)))
    before = names(patched)
    assert before == {patched.refs[a]: patched.ids[a] for a in ARCHES}
    proc = run(first.env | env, "import", *from_args(first.isos), "--key", str(first.pub))
    assert proc.returncode == 1, f"the first build replaced its patched rebuild: {names(patched)}"
    message = error_of(proc)
    assert "an older release would replace a newer one" in message and "nothing was loaded" in message, message
    amd64 = patched.refs["amd64"]
    assert (f"{amd64} now points at {patched.ids['amd64'][:19]}, release {CREATED} (0d0d0d0d0d0d) signed as serial "
            f"{serial_of(patched, 'amd64')}; the incoming {first.ids['amd64'][:19]} is a build of the same commit signed "
            f"earlier, as serial {serial_of(first, 'amd64')} (a rollback)") in message
    assert names(patched) == before and image_id(first.ids["amd64"]) is None
    proc = install(first, first.dirs, "--key", str(first.pub), site=site)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and "an older release would replace a newer one" in last, proc.stderr
    assert (f"{amd64} now points at {patched.ids['amd64']}, release {CREATED} (signed serial "
            f"{serial_of(patched, 'amd64')}); the incoming {first.ids['amd64']} is another build of the same commit "
            f"(signed serial {serial_of(first, 'amd64')})") in last
    assert names(patched) == before and image_id(first.ids["amd64"]) is None


def test_the_patched_rebuild_replaces_the_first_and_an_unrecorded_one_is_not_guessed(rebuilds, site, tmp_path):
    first, patched = rebuilds
    proc = install(first, first.dirs, "--key", str(first.pub), site=site)
    assert proc.returncode == 0, proc.stderr
    assert f"{first.ids['amd64']} {CREATED} {serial_of(first, 'amd64')}" in (site / "releases").read_text()
    ok(run(patched.env | {"RAPIDSHIP_SITE_DIR": str(site)}, "import", *from_args(patched.isos), "--key",
           str(patched.pub)))  # higher serial: no flag
    assert names(patched) == {patched.refs[a]: patched.ids[a] for a in ARCHES}
    elsewhere = {"RAPIDSHIP_SITE_DIR": str(tmp_path / "another-site")}  # no record of the patched one's serial
    proc = run(first.env | elsewhere, "import", *from_args(first.isos), "--key", str(first.pub))
    assert proc.returncode == 1 and "is another build of the same commit and the site has no record of the current " \
        "one's signed serial, so it cannot be shown not to be older" in error_of(proc)
    proc = install(first, first.dirs, "--key", str(first.pub), site=tmp_path / "another-site")
    assert proc.returncode == 1 and "(no signed serial recorded in" in proc.stderr, proc.stderr
    proc = ok(run(first.env | elsewhere, "import", *from_args(first.isos), "--key", str(first.pub),
                  "--allow-downgrade"))
    assert "WARNING: --allow-downgrade" in proc.stderr
    assert names(first) == {first.refs[a]: first.ids[a] for a in ARCHES}


def test_a_site_registry_never_takes_the_first_build_back_either(rebuilds, site, tmp_path):
    first, patched = rebuilds
    env = {"RAPIDSHIP_SITE_DIR": str(site)}
    with scratch_registry(tmp_path) as registry:
        flags = ("--registry", registry, "--insecure", "--work", str(tmp_path))
        ok(run(patched.env | env, "import", *from_args(patched.isos), "--key", str(patched.pub), *flags))
        before = registry_ids(registry, patched)
        proc = run(first.env | env, "import", *from_args(first.isos), "--key", str(first.pub), *flags)
        assert proc.returncode == 1 and "signed earlier, as serial" in error_of(proc)
        proc = install(first, first.dirs, "--key", str(first.pub), "--registry", registry, "--insecure", site=site)
        assert proc.returncode == 1 and "another build of the same commit" in proc.stderr, proc.stderr
        assert registry_ids(registry, patched) == before
