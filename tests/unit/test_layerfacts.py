"""Layer facts laid bottom to top as the image spec's changesets say (pure: no engine)."""

from __future__ import annotations

import tarfile


from rapidship import layerfacts
from rapidship.layerfacts import LayerFacts, flatten, view

ROOTS = ("/opt/rapids/",)


def m(path: str, kind: str = "f", mode: int = 0o644, sha: str = "", link: str = "", uid: int = 0) -> tuple:
    return (path, kind, mode, 3 if kind == "f" else 0, uid, 0, False, link, sha)


def layer(n: int, *members: tuple) -> LayerFacts:
    return LayerFacts(diff_id=f"sha256:{n:064x}", roots=list(ROOTS), members=list(members))


def test_a_whiteout_removes_a_lower_path_and_all_it_held():
    tree = flatten([layer(1, m("/opt", "d"), m("/opt/rapids", "d"), m("/opt/rapids/lib", "d"),
                          m("/opt/rapids/lib/a.so", sha="aa"), m("/opt/rapids/libx", "d"), m("/usr/bin/su", mode=0o4755)),
                    layer(2, m("/opt/rapids/.wh.lib", "f"), m("/usr/bin/.wh.su", "f"))])
    assert sorted(tree) == ["/opt", "/opt/rapids", "/opt/rapids/libx"]  # a sibling with the same prefix stays


def test_an_opaque_folder_hides_what_lies_below_it_but_keeps_its_own_layer():
    tree = flatten([layer(1, m("/etc", "d"), m("/etc/app", "d"), m("/etc/app/old.conf")),
                    layer(2, m("/etc/app", "d"), m("/etc/app/.wh..wh..opq"), m("/etc/app/new.conf"))])
    assert sorted(tree) == ["/etc", "/etc/app", "/etc/app/new.conf"]


def test_a_whiteout_does_not_act_on_its_own_layer():
    tree = flatten([layer(1, m("/a", "d")), layer(2, m("/a/.wh.b"), m("/a/b"))])
    assert "/a/b" in tree


def test_a_file_replacing_a_folder_takes_its_children():
    tree = flatten([layer(1, m("/x", "d"), m("/x/y")), layer(2, m("/x", "l", link="/elsewhere"))])
    assert sorted(tree) == ["/x"] and tree["/x"][1] == "l"


def test_an_upper_layer_wins_and_a_setuid_bit_added_there_shows():
    files, digests, links = view(flatten([
        layer(1, m("/opt/rapids/bin/python", sha="old"), m("/opt/rapids/bin/py", "l", link="python")),
        layer(2, m("/opt/rapids/bin/python", mode=0o4755, sha="new"), m("/opt/rapids/bin/hard", "h", link="x"))]), ROOTS)
    python = next(f for f in files if f.path == "/opt/rapids/bin/python")
    assert python.mode == 0o4755 and python.is_file and digests["/opt/rapids/bin/python"] == "new"
    assert links == {"/opt/rapids/bin/py": "python"}
    hard = next(f for f in files if f.path == "/opt/rapids/bin/hard")
    assert not hard.is_file and "/opt/rapids/bin/hard" not in digests  # as docker export lists a hard link


def test_members_from_tar_headers():
    info = tarfile.TarInfo("./opt/rapids/bin/tool/")
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    assert layerfacts.member(info)[:3] == ("/opt/rapids/bin/tool", "d", 0o755)
    link = tarfile.TarInfo("usr/bin/sh")
    link.type, link.linkname = tarfile.SYMTYPE, "dash"
    assert layerfacts.member(link)[1::6] == ("l", "dash")
    capped = tarfile.TarInfo("usr/bin/ping")
    capped.pax_headers = {"SCHILY.xattr.security.capability": "x"}
    assert layerfacts.member(capped)[6] is True


def test_facts_are_used_only_for_the_layer_they_name(tmp_path):
    one, two = layer(1, m("/a")), layer(2, m("/b"))
    layerfacts.keep(tmp_path, one)
    assert [f.diff_id for f in layerfacts.read(tmp_path, [one.diff_id], ROOTS)] == [one.diff_id]
    missing = layerfacts.read(tmp_path, [one.diff_id, two.diff_id], ROOTS)
    assert isinstance(missing, str) and "layer 1" in missing and "has no facts" in missing
    # an attacker's copy: the facts of layer 1 put under layer 2's name are not layer 2's
    layerfacts.facts_path(tmp_path, two.diff_id).write_bytes(layerfacts.facts_path(tmp_path, one.diff_id).read_bytes())
    swapped = layerfacts.read(tmp_path, [one.diff_id, two.diff_id], ROOTS)
    assert isinstance(swapped, str) and f"holds the facts of {one.diff_id[:19]}" in swapped
    # facts that hashed other roots cannot give the content manifest
    assert "hashed" in layerfacts.read(tmp_path, [one.diff_id], ("/opt/rapids/", "/opt/rapidship/"))


def test_a_corrupt_facts_file_is_a_reason_to_read_whole_not_an_error(tmp_path):
    one = layer(1, m("/a"))
    layerfacts.facts_path(tmp_path, one.diff_id).parent.mkdir(parents=True)
    layerfacts.facts_path(tmp_path, one.diff_id).write_text("{not json")
    said = layerfacts.read(tmp_path, [one.diff_id], ROOTS)
    assert isinstance(said, str) and "layer facts" in said
