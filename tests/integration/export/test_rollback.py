"""Rollback: an older disc of the same images, signed with the same key, never moves a name back.

Two releases of the same two images (tests/support/signed_discs.py), the older built 2026-11-01 and
the newer 2026-12-01, pushed, signed with one key and exported through the real tasks. Through the
real engine and the real loopback registry: after the newer one is in place, the older disc is
refused by `invoke import` and install.sh (engine, registry) with one sentence naming the name, both
images and both releases, and the engine's and the registry's names are exactly as before; with
--allow-downgrade it loads, says so loudly and records it. A newer disc replaces an older one as
before, and a first install has nothing to compare with.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from rapidship.export.load import scratch_registry
from support.signed_discs import ARCHES, error_of, from_args, image_id, install, make_disc, ok, run, unique_name

pytestmark = pytest.mark.docker
OLD, NEW = "2026-11-01T00:00:00+00:00", "2026-12-01T00:00:00+00:00"


POLICY = """release:
  min_created: 2026-11-15T00:00:00Z   # what the site runs: nothing built before this
"""


@pytest.fixture(scope="module")
def releases(engine, disc_registry, tmp_path_factory):
    from rapidship.gates.policy import parse_policy, resolve

    work, name = tmp_path_factory.mktemp("releases"), unique_name()
    (work / "policy.yaml").write_text(POLICY)
    rules = resolve(parse_policy(POLICY, "policy.yaml"), "policy.yaml", "cpu-debian12").rules.model_dump(mode="json")
    old = make_disc(work / "old", disc_registry, name, created=OLD, policy=rules)
    new = make_disc(work / "new", disc_registry, name, created=NEW, keys=old.work / "keys", policy=rules)
    yield old, new
    old.remove_images()
    new.remove_images()


@pytest.fixture
def clean(releases):
    for disc in releases:
        disc.remove_images()
    return releases


def names(disc) -> dict[str, str | None]:
    return {disc.refs[a]: image_id(disc.refs[a]) for a in ARCHES}


def test_the_older_disc_is_refused_by_both_importers_once_the_newer_is_in_place(clean, tmp_path):
    old, new = clean
    first = ok(run(new.env, "import", *from_args(new.isos), "--key", str(new.pub)))
    assert first.stdout == "" and all(new.ids[a] in first.stderr for a in ARCHES)  # JSON only with --json
    before = names(new)
    assert before == {new.refs[a]: new.ids[a] for a in ARCHES}
    proc = run(old.env, "import", *from_args(old.isos), "--key", str(old.pub))
    message = error_of(proc)
    assert proc.returncode == 1 and "an older release would replace a newer one" in message
    amd64 = new.refs["amd64"]
    assert (f"{amd64} now points at {new.ids['amd64'][:19]}, release {NEW} (0d0d0d0d0d0d); the incoming "
            f"{old.ids['amd64'][:19]} is the older release {OLD} (0d0d0d0d0d0d) (a rollback)") in message
    assert "--allow-downgrade" in message and "nothing was loaded" in message
    assert names(new) == before and image_id(old.ids["amd64"]) is None
    proc = install(old, old.dirs, "--key", str(old.pub))
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and "an older release would replace a newer one" in last, proc.stderr
    assert f"{amd64} now points at {new.ids['amd64']}, release {NEW}" in last and "--allow-downgrade" in last
    assert "loading into docker" not in proc.stderr
    assert names(new) == before and image_id(old.ids["amd64"]) is None


def test_allow_downgrade_loads_the_older_release_loudly_and_records_it(clean):
    old, new = clean
    ok(run(new.env, "import", *from_args(new.isos), "--key", str(new.pub)))
    proc = ok(run(old.env, "import", *from_args(old.isos), "--key", str(old.pub), "--allow-downgrade", "--json"))
    assert "WARNING: --allow-downgrade" in proc.stderr
    loaded = {x["ref"]: x for x in json.loads(proc.stdout)["loaded"]}
    for arch in ARCHES:
        assert loaded[old.refs[arch]]["downgraded_from"] == f"{new.ids[arch]} ({NEW} (0d0d0d0d0d0d))"
    assert names(old) == {old.refs[a]: old.ids[a] for a in ARCHES}
    ok(run(new.env, "import", *from_args(new.isos), "--key", str(new.pub)))  # and forward again, no flag needed
    proc = install(old, old.dirs, "--key", str(old.pub), "--allow-downgrade")
    assert proc.returncode == 0, proc.stderr
    assert "install.sh: WARNING: --allow-downgrade" in proc.stderr
    assert f"loaded {old.refs['amd64']} {old.ids['amd64']} (DOWNGRADE from {new.ids['amd64']} {NEW})" in proc.stdout
    assert names(old) == {old.refs[a]: old.ids[a] for a in ARCHES}


def test_a_newer_disc_replaces_an_older_and_a_first_install_compares_nothing(clean):
    old, new = clean
    proc = install(old, old.dirs, "--key", str(old.pub))  # first install: nothing to compare with
    assert proc.returncode == 0 and "DOWNGRADE" not in proc.stdout, proc.stderr
    proc = install(new, new.dirs, "--key", str(new.pub))
    assert proc.returncode == 0 and "WARNING" not in proc.stderr, proc.stderr
    assert names(new) == {new.refs[a]: new.ids[a] for a in ARCHES}
    ok(run(new.env, "import", *from_args(new.isos), "--key", str(new.pub)))  # the same release again


def registry_ids(registry: str, disc) -> dict[str, str]:
    """Tag -> the config digest the registry serves under it now."""
    out = {}
    for arch in ARCHES:
        dest = f"{registry}/{disc.refs[arch]}"
        raw = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false", f"docker://{dest}"],
                             capture_output=True, check=True).stdout
        out[disc.refs[arch]] = json.loads(raw)["config"]["digest"]
    return out


def test_a_site_registry_never_moves_back_either(clean, tmp_path):
    old, new = clean
    with scratch_registry(tmp_path) as registry:
        ok(run(new.env, "import", *from_args(new.isos), "--key", str(new.pub), "--registry", registry, "--insecure",
               "--work", str(tmp_path)))
        before = registry_ids(registry, new)
        assert before == {new.refs[a]: new.ids[a] for a in ARCHES}
        proc = run(old.env, "import", *from_args(old.isos), "--key", str(old.pub), "--registry", registry,
                   "--insecure", "--work", str(tmp_path))
        assert proc.returncode == 1 and "(a rollback)" in error_of(proc)
        proc = install(old, old.dirs, "--key", str(old.pub), "--registry", registry, "--insecure")
        assert proc.returncode == 1 and "an older release would replace a newer one" in proc.stderr, proc.stderr
        assert registry_ids(registry, new) == before


def test_verify_policy_refuses_a_release_older_than_the_site_runs(releases):
    """A signature never expires; the policy's release.min_created says what is too old to run."""
    old, new = releases
    policy = str(old.work.parent / "policy.yaml")
    proc = run(new.env, "verify", "--variant", "cpu-debian12", "--build-dir", str(new.build), "--key", str(new.pub),
               "--policy", policy)
    assert proc.returncode == 0, proc.stderr
    proc = run(old.env, "verify", "--variant", "cpu-debian12", "--build-dir", str(old.build), "--key", str(old.pub),
               "--policy", policy)
    message = error_of(proc)
    assert proc.returncode == 1 and f"release {OLD} (0d0d0d0d0d0d) is older than the policy's release.min_created" \
        in message
    assert json.loads(proc.stdout)["passed"] is False
    proc = run(old.env, "verify", "--variant", "cpu-debian12", "--build-dir", str(old.build), "--key", str(old.pub))
    assert proc.returncode == 0, proc.stderr  # without the policy it is as signed as ever


def test_promote_never_moves_the_release_tag_back_either(releases, disc_registry):
    old, new = releases
    target = f"{disc_registry.host}/release-{old.work.name}"

    def promote(disc, *flags):
        return run(disc.env, "promote", "--variant", "cpu-debian12", "--to", target, "--key", str(disc.pub),
                   "--build-dir", str(disc.build), *flags)

    ok(promote(new))
    proc = promote(old)
    message = error_of(proc)
    assert proc.returncode == 1 and "an older release would replace a newer one" in message
    assert f"release {NEW} (0d0d0d0d0d0d); the incoming" in message and "nothing was copied" in message
    assert not (old.build / "cpu-debian12" / "promote.json").exists()
    proc = ok(promote(old, "--allow-downgrade"))
    assert "WARNING: --allow-downgrade" in proc.stderr
    record = json.loads((old.build / "cpu-debian12" / "promote.json").read_text())
    assert sorted(record["downgraded_from"]) == sorted(f"{new.ids[a]} ({NEW} (0d0d0d0d0d0d))" for a in ARCHES)
    ok(promote(new))  # forward again, no flag
