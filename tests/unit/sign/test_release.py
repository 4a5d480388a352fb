"""The release rule, stated once in sign/release.py and once in install.sh's sh: both order the same
strings the same way, and a name never moves to an older release unless told."""

from __future__ import annotations

import re
import subprocess

import pytest

from rapidship.export.write import INSTALL_BODY
from rapidship.sign import release as r

SPELLINGS = ["2026-12-02T14:26:00+00:00", "2026-12-02T14:26:00Z", "2026-12-02T14:26:00+01:00", "2026-12-02 14:26:00",
             "2026-12-02T14:26:00.5Z", "2026-12-02", "", "now", "2026-12-02T14:26:00+00:00x", "9999-99-99T99:99:99Z",
             "2026-12-02T14:26Z", " 2026-12-02T14:26:00Z"]


@pytest.mark.parametrize("created", SPELLINGS)
def test_install_sh_and_python_give_every_spelling_the_same_key(created):
    body = INSTALL_BODY.read_text()
    function = re.search(r"^release_key\(\) \{\n.*?^\}\n", body, re.S | re.M).group(0)
    sh = subprocess.run(["sh", "-c", function + 'release_key "$1"', "sh", created], capture_output=True, text=True)
    assert sh.returncode == 0
    assert (int(sh.stdout) if sh.stdout else None) == r.key_of(created)


def test_only_an_older_release_is_refused():
    new, old = r.Release("2026-12-02T00:00:00+00:00", "b" * 40), r.Release("2026-11-01T00:00:00Z", "a" * 40)
    a, b = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    assert r.refusal("x:1", new, b, old, a) == (f"x:1 now points at {b[:19]}, release 2026-12-02T00:00:00+00:00 "
                                                f"(bbbbbbbbbbbb); the incoming {a[:19]} is the older release "
                                                "2026-11-01T00:00:00Z (aaaaaaaaaaaa) (a rollback)")
    assert r.refusal("x:1", old, a, new, b) == ""          # newer replaces older
    assert "cannot be shown not to be older" in r.refusal("x:1", new, b, new, a)  # a rebuild, no order known
    assert r.refusal("x:1", None, "", old, a) == ""        # a first install has nothing to compare
    assert r.refusal("x:1", None, b, old, a) == ""         # the name points at an image that states none
    assert r.refusal("x:1", new, b, new, b) == ""          # the same image again
    assert "states no release" in r.refusal("x:1", new, b, None, a)


def test_labels_and_payloads_state_releases_only_in_the_one_spelling():
    assert r.of_labels({r.CREATED_LABEL: "2026-12-02T00:00:00Z", r.REVISION_LABEL: "abc"}) == \
        r.Release("2026-12-02T00:00:00Z", "abc")
    assert r.of_labels({r.CREATED_LABEL: "yesterday"}) is None and r.of_labels(None) is None
    assert r.of_config({"config": {"Labels": {r.CREATED_LABEL: "2026-12-02T00:00:00Z"}}}).key == 20261202000000
    assert r.of_payload({"optional": {"io.rapidship.release": {"created": "x", "revision": 3}}}) == r.Release("x", "")
    assert r.of_payload({"optional": None}) is None


def test_builds_of_one_commit_are_ordered_by_their_signed_serials_only():
    first, patched = (r.Release("2026-12-02T00:00:00+00:00", "b" * 40, serial) for serial in (1000, 2000))
    a, b = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    assert r.refusal("x:1", first, a, patched, b) == ""    # the later signature moves the name forward
    assert r.refusal("x:1", patched, b, first, a) == (f"x:1 now points at {b[:19]}, release 2026-12-02T00:00:00+00:00 "
                                                      f"(bbbbbbbbbbbb) signed as serial 2000; the incoming {a[:19]} "
                                                      "is a build of the same commit signed earlier, as serial 1000 "
                                                      "(a rollback)")
    assert "signed earlier" in r.refusal("x:1", patched, b, patched, a)  # an equal serial, other content
    unknown = r.Release(patched.created, patched.revision)
    assert "the site has no record of the current one's signed serial" in r.refusal("x:1", unknown, b, patched, a)
    assert "the incoming one states no signed serial" in r.refusal("x:1", first, a, unknown, b)
    older_commit = r.Release("2026-11-01T00:00:00Z", "a" * 40, 9999)
    assert "(a rollback)" in r.refusal("x:1", first, a, older_commit, b)  # a later serial never outranks the commit


def test_on_a_tuf_site_the_trusted_targets_version_is_the_order():
    from dataclasses import replace

    new, old = r.Release("2026-12-02T00:00:00+00:00", "b" * 40, 2000), r.Release("2026-11-01T00:00:00Z", "a" * 40, 1)
    a, b = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    assert "(a rollback)" in r.refusal("x:1", new, b, old, a)  # by the key alone: an older commit
    assert r.refusal("x:1", new, b, replace(old, tuf_version=4), a) == ""  # TUF resolved it in the trusted release
    assert "tuf_version" not in replace(old, tuf_version=4).payload()  # never written into a signature


def test_install_sh_reads_the_ledger_lines_python_writes():
    body = INSTALL_BODY.read_text()
    function = re.search(r"^ledger_serial\(\) \{.*?^\}\n", body, re.S | re.M).group(0)
    a, b = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    lines = (r.ledger_line(a, r.Release("2026-12-02T00:00:00Z", "", 1700000000123)) + "damaged line\n"
             + r.ledger_line(a, r.Release("2026-12-02T00:00:00Z", "", 1700000000001)) + r.ledger_line(b, r.Release("x")))
    assert r.read_ledger(lines) == {a: 1700000000123, b: 0}
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as site:
        (Path(site) / r.LEDGER).write_text(lines)
        for image in (a, b, "sha256:" + "c" * 64):
            sh = subprocess.run(["sh", "-c", f"SITE='{site}'\n" + function + 'ledger_serial "$1"', "sh", image],
                                capture_output=True, text=True)
            assert int(sh.stdout) == r.read_ledger(lines).get(image, 0)
    assert r.of_payload({"optional": {"io.rapidship.release": {"created": "x", "serial": 5}}}).serial == 5
    assert r.of_payload({"optional": {"io.rapidship.release": {"created": "x", "serial": True}}}).serial == 0
